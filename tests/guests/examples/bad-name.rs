//! Test guest whose `name()` is not a usable assignor name (it contains whitespace): the
//! runtime must refuse it at load, since names are selected in configs.

use assignor_sdk::{GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// An otherwise harmless assignor with an unusable name.
#[derive(Debug, Default)]
pub struct BadName;

impl TaskAssignor for BadName {
    fn name(&self) -> &str {
        "my assignor"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        _: &Topology,
    ) -> Result<GroupAssignment, assignor_sdk::AssignError> {
        Ok(GroupAssignment::empty_for(group))
    }
}

assignor_sdk::export!(BadName);
