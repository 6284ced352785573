//! Version 1 of the `swap` test assignor: every active task on the first member, so that a
//! test can tell it from version 2 by its output.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Assigns every task to the first member.
#[derive(Debug, Default)]
pub struct SwapV1;

impl TaskAssignor for SwapV1 {
    fn name(&self) -> &str {
        "swap"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        let mut out = GroupAssignment::empty_for(group);
        let first = out
            .members
            .first_mut()
            .ok_or_else(|| AssignError::new("no members"))?;
        first.active_tasks.extend(topology.tasks());
        Ok(out)
    }
}

assignor_sdk::export!(SwapV1);
