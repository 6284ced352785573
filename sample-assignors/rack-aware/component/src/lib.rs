//! The `rack-aware` sample assignor ([`rack_aware_assignor::RackAwareAssignor`]) as a component of the assignor world.

assignor_sdk::export!(rack_aware_assignor::RackAwareAssignor);
