//! Assignors compiled into the runtime and called natively, through the same
//! [`TaskAssignor`] trait guests implement; each is also a sample component built from the
//! same source.

use assignor_sdk::TaskAssignor;
use balanced_assignor::BalancedAssignor;
use rack_aware_assignor::RackAwareAssignor;
use sticky_assignor::StickyAssignor;

/// Names of the built-in assignors. `sticky` is Kafka's default; `rack-aware` reads Kafka's
/// `rack.aware.assignment.*` keys from the configuration it is given.
pub const BUILTIN_NAMES: &[&str] = &["sticky", "balanced", "rack-aware"];

/// A fresh, unconfigured instance of the built-in assignor called `name`, if there is one.
pub fn builtin(name: &str) -> Option<Box<dyn TaskAssignor>> {
    match name {
        "sticky" => Some(Box::<StickyAssignor>::default()),
        "balanced" => Some(Box::new(BalancedAssignor)),
        "rack-aware" => Some(Box::<RackAwareAssignor>::default()),
        _ => None,
    }
}
