//! Assignors compiled into the runtime and called natively, through the same
//! [`TaskAssignor`] trait guests implement.

use std::sync::Arc;

use assignor_sdk::TaskAssignor;
use balanced_assignor::BalancedAssignor;

/// Names of the built-in assignors.
pub const BUILTIN_NAMES: &[&str] = &["balanced"];

/// The built-in assignor called `name`, if there is one.
pub fn builtin(name: &str) -> Option<Arc<dyn TaskAssignor>> {
    match name {
        "balanced" => Some(Arc::new(BalancedAssignor)),
        _ => None,
    }
}
