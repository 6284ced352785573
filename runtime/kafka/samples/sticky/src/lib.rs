//! The `sticky` sample assignor ([`sticky_assignor::StickyAssignor`]) under the name `sample-sticky`: Kafka
//! reserves `sticky` for a built-in assignor (see `WasmTaskAssignor.RESERVED_NAMES`), and the
//! plugin refuses a component named like one, so the plugin's tests and a broker run the
//! sample under this name. The algorithm and its configuration are the sample's, unchanged.

use std::collections::BTreeMap;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};
use sticky_assignor::StickyAssignor;

/// The sample, renamed.
#[derive(Debug, Default)]
pub struct Sample(StickyAssignor);

impl TaskAssignor for Sample {
    fn name(&self) -> &str {
        "sample-sticky"
    }

    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        self.0.configure(config)
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        self.0.assign(group, topology)
    }
}

assignor_sdk::export!(Sample);
