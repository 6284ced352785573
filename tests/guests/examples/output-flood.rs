//! Test guest that returns, straight through the raw WIT bindings (the SDK would sort and
//! validate it), 200,000 active-task entries alternating between member 0 and member 1:
//! every entry starts a new run of its member, the shape that makes a host which merges a
//! member's runs one by one quadratic. The tasks are partitions 0..200,000 of subtopology 0,
//! far past any test group's range, so the output is invalid; the runtime must say so in a
//! time linear in the output, outside the guest's fuel.

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
    use kafka::streams_assignor::types::MemberTasks;

    /// Entries returned.
    const ENTRIES: u32 = 200_000;

    struct OutputFlood;

    impl Guest for OutputFlood {
        fn name() -> String {
            "output-flood".into()
        }

        fn configure(_config: Vec<(String, String)>) -> Result<(), String> {
            Ok(())
        }

        fn assign(_group: GroupSpec, _topology: Topology) -> Result<GroupAssignment, AssignError> {
            let empty = || MemberTasks {
                members: Vec::new(),
                subtopologies: Vec::new(),
                partitions: Vec::new(),
            };
            Ok(GroupAssignment {
                active_tasks: MemberTasks {
                    members: (0..ENTRIES).map(|i| i % 2).collect(),
                    subtopologies: vec![0; ENTRIES as usize],
                    partitions: (0..ENTRIES).collect(),
                },
                standby_tasks: empty(),
            })
        }
    }

    export!(OutputFlood);
}
