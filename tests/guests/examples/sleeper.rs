//! Test guest whose `assign` sleeps forever with `std::thread::sleep`, which on
//! `wasm32-wasip2` subscribes to a monotonic-clock duration and blocks in `wasi:io/poll`: a
//! guest that spends its call inside a host function rather than in wasm, where fuel does not
//! reach it (no fuel is consumed, so no yield comes). The runtime must still end the call at
//! its deadline, as `timeout`.

use std::time::Duration;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Sleeps in `assign`, an hour at a time, forever.
#[derive(Debug, Default)]
pub struct Sleeper;

impl TaskAssignor for Sleeper {
    fn name(&self) -> &str {
        "sleeper"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        // A loop, not one long sleep: should a host cut a sleep short (or run its clock
        // fast), the guest goes back to sleep, so only the deadline can end the call.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

assignor_sdk::export!(Sleeper);
