//! Test guest whose `assign` panics, so the runtime must report the trap (with the panic
//! message from the guest's stderr) and stay usable.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Panics in `assign`.
#[derive(Debug, Default)]
pub struct Panics;

impl TaskAssignor for Panics {
    fn name(&self) -> &str {
        "panics"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        panic!("assignor exploded on purpose")
    }
}

assignor_sdk::export!(Panics);
