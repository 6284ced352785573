//! Test guest whose `assign` returns an `assign-error`: the well-behaved failure path, which
//! the runtime must pass on as Kafka's `TaskAssignorException` with the guest's message.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Refuses every assignment with an error.
#[derive(Debug, Default)]
pub struct GuestError;

impl TaskAssignor for GuestError {
    fn name(&self) -> &str {
        "guest-error"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        Err(AssignError::new(
            "cannot assign: the group has no stateful subtopologies I understand",
        ))
    }
}

assignor_sdk::export!(GuestError);
