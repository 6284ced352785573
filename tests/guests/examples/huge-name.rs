//! Test guest whose `name()` returns a 40 MiB string: the runtime reads the name at load and
//! must refuse it by its length where it enters the host, before copying, escaping or echoing
//! it into a message.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Bytes of the name: 40 MiB.
const NAME_BYTES: usize = 40 << 20;

/// An otherwise harmless assignor with a 40 MiB name.
#[derive(Debug)]
pub struct HugeName {
    name: String,
}

impl Default for HugeName {
    fn default() -> Self {
        Self {
            name: "n".repeat(NAME_BYTES),
        }
    }
}

impl TaskAssignor for HugeName {
    fn name(&self) -> &str {
        &self.name
    }

    fn assign(&self, group: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        Ok(GroupAssignment::empty_for(group))
    }
}

assignor_sdk::export!(HugeName);
