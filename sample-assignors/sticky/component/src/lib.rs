//! The `sticky` sample assignor ([`sticky_assignor::StickyAssignor`]) as a component of the assignor world.

assignor_sdk::export!(sticky_assignor::StickyAssignor);
