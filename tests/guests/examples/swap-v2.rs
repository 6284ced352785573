//! Version 2 of the `swap` test assignor: active tasks round-robin over the members, so that a
//! test can tell it from version 1 by its output.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Assigns task `i` to member `i mod n`.
#[derive(Debug, Default)]
pub struct SwapV2;

impl TaskAssignor for SwapV2 {
    fn name(&self) -> &str {
        "swap"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        if group.members.is_empty() {
            return Err(AssignError::new("no members"));
        }
        let mut out = GroupAssignment::empty_for(group);
        let n = out.members.len();
        for (i, task) in topology.tasks().enumerate() {
            out.members[i % n].active_tasks.insert(task);
        }
        Ok(out)
    }
}

assignor_sdk::export!(SwapV2);
