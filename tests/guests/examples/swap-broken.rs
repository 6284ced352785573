//! A broken version of the `swap` test assignor: it loads (same name, valid component) but
//! assigns nothing, so only the hot swap's trial run can catch it.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Leaves every task unassigned.
#[derive(Debug, Default)]
pub struct SwapBroken;

impl TaskAssignor for SwapBroken {
    fn name(&self) -> &str {
        "swap"
    }

    fn assign(&self, group: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        Ok(GroupAssignment::empty_for(group))
    }
}

assignor_sdk::export!(SwapBroken);
