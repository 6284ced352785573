//! Test guest whose `assign` subscribes to a monotonic-clock instant far in the future and
//! polls it, straight through the WASI bindings (no std sleep in between): the call blocks in
//! `wasi:io/poll`, a host function, where fuel does not reach it (no fuel is consumed, so no
//! yield comes). The runtime must still end the call at its deadline, as `timeout`.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Polls for an instant that never comes in `assign`.
#[derive(Debug, Default)]
pub struct PollForever;

/// Blocks in `poll` on the last instant the monotonic clock can name.
#[cfg(target_arch = "wasm32")]
fn poll_forever() -> ! {
    use wasip2::clocks::monotonic_clock;
    use wasip2::io::poll;

    let never = monotonic_clock::subscribe_instant(u64::MAX);
    // Polled again whenever the host answers: only the deadline may end the call.
    loop {
        poll::poll(&[&never]);
    }
}

impl TaskAssignor for PollForever {
    fn name(&self) -> &str {
        "poll-forever"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        #[cfg(target_arch = "wasm32")]
        poll_forever();
        #[cfg(not(target_arch = "wasm32"))]
        Err(AssignError::new("poll-forever polls only as a component"))
    }
}

assignor_sdk::export!(PollForever);
