//! Test guest that returns a valid assignment but for one standby: the first stateful task's
//! standby sits on another member of the same process as its active. Members of one process
//! share its state directory, so that standby protects nothing against the process's loss;
//! the runtime must reject the output as `invalid-output`, naming the rule.
//!
//! The group needs a process with two members and a stateful subtopology; without them the
//! guest returns an `assign-error` saying so.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Places one standby on its active's process.
#[derive(Debug, Default)]
pub struct SameProcessStandby;

impl TaskAssignor for SameProcessStandby {
    fn name(&self) -> &str {
        "same-process-standby"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        let members = &group.members;
        let (first, sibling) = (0..members.len())
            .flat_map(|i| (i + 1..members.len()).map(move |j| (i, j)))
            .find(|&(i, j)| members[i].process_id == members[j].process_id)
            .ok_or_else(|| AssignError::new("the group has no process with two members"))?;
        let stateful = topology
            .tasks()
            .find(|t| topology.subtopology(*t).is_some_and(|s| s.is_stateful))
            .ok_or_else(|| AssignError::new("the topology has no stateful task"))?;

        // Every task active exactly once, round-robin, except that `stateful` goes to
        // `first`; its one standby then goes to `first`'s sibling in the same process.
        let mut out = GroupAssignment::empty_for(group);
        out.members[first].active_tasks.insert(stateful);
        let others = topology.tasks().filter(|&t| t != stateful);
        for (i, task) in others.enumerate() {
            out.members[i % members.len()].active_tasks.insert(task);
        }
        out.members[sibling].standby_tasks.insert(stateful);
        Ok(out)
    }
}

assignor_sdk::export!(SameProcessStandby);
