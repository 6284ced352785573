//! Test guest whose `assign` writes 64 KiB to stdout in an endless loop: the guest spends
//! little fuel per write while the host copies and keeps every byte. The runtime must charge
//! those bytes to the call's fuel (and keep only a bounded tail), so the call ends as
//! `out-of-fuel` in bounded time and memory.

use std::io::Write as _;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Bytes per write.
const CHUNK: usize = 64 << 10;

/// Writes to stdout forever in `assign`.
#[derive(Debug, Default)]
pub struct StdoutFlood;

impl TaskAssignor for StdoutFlood {
    fn name(&self) -> &str {
        "stdout-flood"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        let chunk = vec![b'x'; CHUNK];
        let mut stdout = std::io::stdout().lock();
        loop {
            // Whatever the host answers, write again: a failed write must not end the flood,
            // only the host's limits may.
            let _ = stdout.write_all(&chunk);
        }
    }
}

assignor_sdk::export!(StdoutFlood);
