//! Test guest whose `assign` asks `wasi:random` for 64 MiB at a time, forever: host work the
//! guest's fuel does not see unless the host charges for it. The runtime must cap what one
//! host call may make and charge the guest for every byte, so the call fails fast instead of
//! keeping a host thread busy generating randomness.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Floods the host with requests for random bytes in `assign`.
#[derive(Debug, Default)]
pub struct RandomFlood;

/// Asks for 64 MiB of randomness per call, in an endless loop.
#[cfg(target_arch = "wasm32")]
fn flood() -> ! {
    const CHUNK: u64 = 64 << 20;
    let mut sum = 0u8;
    loop {
        let bytes = wasip2::random::random::get_random_bytes(CHUNK);
        // Touch the answer so that the calls cannot be optimised away; each chunk is freed
        // before the next, so the guest's own memory stays at one chunk.
        sum = std::hint::black_box(sum ^ bytes.last().copied().unwrap_or_default());
    }
}

impl TaskAssignor for RandomFlood {
    fn name(&self) -> &str {
        "random-flood"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        #[cfg(target_arch = "wasm32")]
        flood();
        #[cfg(not(target_arch = "wasm32"))]
        Err(AssignError::new("random-flood floods only as a component"))
    }
}

assignor_sdk::export!(RandomFlood);
