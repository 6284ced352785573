//! Test guest whose `assign` returns an `assign-error` with a 100 MiB message, straight
//! through the raw WIT bindings (the SDK would copy the message once more, doubling the
//! guest's memory). The runtime must keep only its message limit of it, cut where the string
//! enters the host, with a note of how much was dropped: a guest's error must not cost the
//! host (its messages, captures, stored records) its size.

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

    /// Bytes of the message: 100 MiB.
    const MESSAGE_BYTES: usize = 100 << 20;

    struct HugeError;

    impl Guest for HugeError {
        fn name() -> String {
            "huge-error".into()
        }

        fn configure(_config: Vec<(String, String)>) -> Result<(), String> {
            Ok(())
        }

        fn assign(_group: GroupSpec, _topology: Topology) -> Result<GroupAssignment, AssignError> {
            Err(AssignError {
                message: "e".repeat(MESSAGE_BYTES),
            })
        }
    }

    export!(HugeError);
}
