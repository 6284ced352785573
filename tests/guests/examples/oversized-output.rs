//! Test guest that returns an assignment far larger than any real group's: two million active
//! tasks on the first member. The runtime must refuse output over its byte limit (as
//! `invalid-output`) instead of copying it all into the host.

use assignor_sdk::{
    AssignError, GroupAssignment, GroupSpec, MemberAssignment, TaskAssignor, TaskId, Topology,
};

/// The number of active tasks put on the first member.
const TASKS: u32 = 2_000_000;

/// Returns a huge assignment.
#[derive(Debug, Default)]
pub struct OversizedOutput;

impl TaskAssignor for OversizedOutput {
    fn name(&self) -> &str {
        "oversized-output"
    }

    fn assign(&self, group: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        let mut out = GroupAssignment::empty_for(group);
        if out.members.is_empty() {
            out.members.push(MemberAssignment::default());
        }
        // `collect` builds the set in bulk from sorted input, which costs far less fuel than
        // inserting one task at a time: the guest must reach its `return`, not run out of fuel.
        out.members[0].active_tasks = (0..TASKS).map(|p| TaskId::new(0, p)).collect();
        Ok(out)
    }
}

assignor_sdk::export!(OversizedOutput);
