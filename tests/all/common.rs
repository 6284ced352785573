//! Shared fixtures: runtimes, loading, the example group.

use std::collections::BTreeMap;

use assignor_runtime::{ComponentAssignor, Limits, Runtime, TaskAssignorError};
use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use assignor_tests::guests;

/// The JSON contract's example group (two subtopologies, one stateless, one standby).
pub fn example() -> (GroupSpec, Topology) {
    assignor_runtime::json::parse_input(include_str!("../../runtime/demo/group.json"))
        .expect("the example group parses")
}

pub fn runtime(limits: Limits) -> Runtime {
    Runtime::new(limits).expect("engine configuration is valid")
}

pub fn try_load(
    runtime: &Runtime,
    path: &str,
    config: &[(&str, &str)],
) -> Result<ComponentAssignor, TaskAssignorError> {
    let config: BTreeMap<String, String> = config
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    runtime.load_file(path, &config)
}

pub fn load(runtime: &Runtime, path: &str, config: &[(&str, &str)]) -> ComponentAssignor {
    try_load(runtime, path, config).unwrap_or_else(|e| panic!("loading {path}: {e}"))
}

/// A good assignor on the same runtime still produces a valid assignment: the host survived.
pub fn next_call_succeeds(runtime: &Runtime) {
    let good = load(runtime, guests::BALANCED, &[]);
    let (group, topology) = example();
    let (assignment, usage) = good
        .assign(&group, &topology)
        .expect("a good assignor works right after a hostile one");
    assert_eq!(assignment.members.len(), group.members.len());
    assert!(usage.fuel.is_some_and(|f| f > 0));
}

/// A component as a harness run: the real sandbox, its output not yet validated so that the
/// harness's own `valid` check sees what the guest returned.
pub fn sandboxed(
    component: &ComponentAssignor,
) -> impl Fn(&GroupSpec, &Topology) -> Result<GroupAssignment, String> + '_ {
    move |group, topology| {
        component
            .assign_unvalidated(group, topology)
            .map(|(a, _)| a)
            .map_err(|e| e.to_string())
    }
}
