//! Assignors compiled into the runtime and called natively, through the same
//! [`TaskAssignor`] trait guests implement; each is also a sample component built from the
//! same source.

use assignor_sdk::TaskAssignor;
use balanced_assignor::BalancedAssignor;
use sticky_assignor::StickyAssignor;

/// Names of the built-in assignors. `sticky` is Kafka's default.
pub const BUILTIN_NAMES: &[&str] = &["sticky", "balanced"];

/// A fresh, unconfigured instance of the built-in assignor called `name`, if there is one.
pub fn builtin(name: &str) -> Option<Box<dyn TaskAssignor>> {
    match name {
        "sticky" => Some(Box::<StickyAssignor>::default()),
        "balanced" => Some(Box::new(BalancedAssignor)),
        _ => None,
    }
}
