//! Boundary probe without the SDK: returns the input's current active and standby lists as its
//! output, straight from the generated bindings. A call then costs only the crossing (host
//! conversions, canonical-ABI copies in and out) plus the fixed per-call work; `probe-echo`
//! measures the same through the SDK's domain model.

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code, missing_docs, unused_qualifications)]
mod component {
    wit_bindgen::generate!({
        path: "../../wit/v0.1.0",
        world: "assignor",
    });

    use exports::kafka::streams_assignor::task_assignor::{
        AssignError, GroupAssignment, GroupSpec, Guest, Topology,
    };

    struct Probe;

    impl Guest for Probe {
        fn name() -> String {
            "probe-raw".into()
        }

        fn configure(_config: Vec<(String, String)>) -> Result<(), String> {
            Ok(())
        }

        fn assign(group: GroupSpec, topology: Topology) -> Result<GroupAssignment, AssignError> {
            let GroupSpec {
                active_tasks,
                standby_tasks,
                ..
            } = group;
            // The instance is discarded after the call: skip freeing the input.
            std::mem::forget(topology);
            Ok(GroupAssignment {
                active_tasks,
                standby_tasks,
            })
        }
    }

    export!(Probe);
}
