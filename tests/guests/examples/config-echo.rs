//! Test guest whose `configure` refuses every configuration, quoting it whole (`key=value`
//! pairs, sorted by key): what a component is handed, made visible, so tests can show what
//! never reaches one (the Kafka plugin's service token).

use std::collections::BTreeMap;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Refuses to be configured, echoing what it got.
#[derive(Debug, Default)]
pub struct ConfigEcho;

impl TaskAssignor for ConfigEcho {
    fn name(&self) -> &str {
        "config-echo"
    }

    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        let pairs: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Err(format!("received: {}", pairs.join("; ")))
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        Err(AssignError::new("never configured"))
    }
}

assignor_sdk::export!(ConfigEcho);
