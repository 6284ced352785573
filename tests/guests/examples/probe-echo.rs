//! Test guest for benchmarks of the sandbox boundary: it returns the input's current
//! assignment unchanged and does nothing else, so a call costs only the crossing (lowering
//! the input, lifting the output) and instance setup.

use assignor_sdk::{
    AssignError, GroupAssignment, GroupSpec, MemberAssignment, TaskAssignor, Topology,
};

/// Echoes the current assignment.
#[derive(Debug, Default)]
pub struct ProbeEcho;

impl TaskAssignor for ProbeEcho {
    fn name(&self) -> &str {
        "probe-echo"
    }

    fn assign(&self, group: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        Ok(GroupAssignment {
            members: group
                .members
                .iter()
                .map(|m| MemberAssignment {
                    active_tasks: m.active_tasks.clone(),
                    standby_tasks: m.standby_tasks.clone(),
                })
                .collect(),
        })
    }
}

assignor_sdk::export!(ProbeEcho);
