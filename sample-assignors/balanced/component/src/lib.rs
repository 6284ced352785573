//! The `balanced` sample assignor ([`balanced_assignor::BalancedAssignor`]) as a component of the assignor world.

assignor_sdk::export!(balanced_assignor::BalancedAssignor);
