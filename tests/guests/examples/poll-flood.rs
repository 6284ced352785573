//! Test guest whose `assign` subscribes to the monotonic clock 4,000 times with a zero
//! duration (ready at once) and passes all of them to `wasi:io/poll.poll`, forever: each call
//! makes the host look up, map and poll 4,000 pollables, work the guest's fuel does not see
//! unless the host charges for it. The runtime must charge fuel per pollable, so the call ends
//! as `out-of-fuel`, not at its deadline with a host thread kept busy until then.
//!
//! Configured with `pollables=N`, it passes N instead: past what the host lifts for one call
//! (64 KiB of arguments), the call must fail naming that cap, not the output limit.

use std::collections::BTreeMap;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Polls thousands of ready pollables in a loop in `assign`.
#[derive(Debug)]
pub struct PollFlood {
    pollables: usize,
}

/// Pollables per `poll` call unless configured: as many as fit the 64 KiB of arguments the
/// host lifts per call (wasmtime counts a handle at its host size, 12–16 bytes, not its 4
/// bytes in wasm).
const POLLABLES: usize = 4_000;

impl Default for PollFlood {
    fn default() -> Self {
        Self {
            pollables: POLLABLES,
        }
    }
}

/// Subscribes `count` times once, then polls the whole list again and again.
#[cfg(target_arch = "wasm32")]
fn flood(count: usize) -> ! {
    use wasip2::clocks::monotonic_clock;
    use wasip2::io::poll;

    let pollables: Vec<_> = (0..count)
        .map(|_| monotonic_clock::subscribe_duration(0))
        .collect();
    let list: Vec<&poll::Pollable> = pollables.iter().collect();
    let mut sum = 0u32;
    loop {
        let ready = poll::poll(&list);
        // Touch the answer so that the calls cannot be optimised away.
        sum = std::hint::black_box(sum ^ ready.last().copied().unwrap_or_default());
    }
}

impl TaskAssignor for PollFlood {
    fn name(&self) -> &str {
        "poll-flood"
    }

    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        if let Some(n) = config.get("pollables") {
            self.pollables = n.parse().map_err(|e| format!("pollables={n}: {e}"))?;
        }
        Ok(())
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        #[cfg(target_arch = "wasm32")]
        flood(self.pollables);
        #[cfg(not(target_arch = "wasm32"))]
        Err(AssignError::new("poll-flood polls only as a component"))
    }
}

assignor_sdk::export!(PollFlood);
