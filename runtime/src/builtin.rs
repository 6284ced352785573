//! Assignors compiled into the runtime and called natively, through the same
//! [`TaskAssignor`] trait guests implement.

use assignor_sdk::TaskAssignor;
use balanced_assignor::BalancedAssignor;

/// Names of the built-in assignors.
pub const BUILTIN_NAMES: &[&str] = &["balanced"];

/// A fresh, unconfigured instance of the built-in assignor called `name`, if there is one.
pub fn builtin(name: &str) -> Option<Box<dyn TaskAssignor>> {
    match name {
        "balanced" => Some(Box::new(BalancedAssignor)),
        _ => None,
    }
}
