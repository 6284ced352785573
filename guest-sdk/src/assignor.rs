//! The [`TaskAssignor`] trait every assignor implements, host built-in or guest component.

use std::collections::BTreeMap;
use std::fmt;

use crate::model::{GroupAssignment, GroupSpec, Topology};

/// A server-side task assignor for streams groups (KIP-1357's `TaskAssignor`, with Kafka's
/// `Configurable` folded in as a default method).
///
/// The same trait serves built-in assignors, which the runtime calls natively, and guest
/// assignors, which [`export!`](crate::export) turns into a component.
pub trait TaskAssignor: Send + Sync {
    /// The unique short name selecting this assignor in `group.streams.assignors` and
    /// `streams.assignor.name`.
    fn name(&self) -> &str;

    /// Receives the broker configuration before any assignment. Reject values you cannot use
    /// with a message naming the key, the value and what would be accepted.
    ///
    /// In a component this runs at load (an error fails the load) and again before every
    /// assignment, in the fresh instance each call gets, so keep it cheap and deterministic.
    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        let _ = config;
        Ok(())
    }

    /// Computes the group's new target assignment: every task of `topology` active on exactly
    /// one member, and standbys for stateful tasks on members that do not hold them.
    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError>;
}

/// Kafka's `TaskAssignorException`: the assignor cannot compute an assignment for this input.
///
/// The coordinator keeps the group's previous target assignment and reports the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignError {
    message: String,
}

impl AssignError {
    /// An error with a message saying what is wrong with the input.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for AssignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AssignError {}
