//! Test guest whose `assign` copies 16 MiB inside its memory forever, one bulk `memory.copy`
//! at a time: a single wasm instruction that takes milliseconds. Fuel must still track its
//! time (wasmtime charges bulk memory a unit per byte), so the call runs out of fuel fast, and
//! without a fuel limit the deadline, checked at the yields fuel makes, stops it on time.

use std::hint::black_box;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Copies half of a 32 MiB buffer onto the other half, forever, in `assign`.
#[derive(Debug, Default)]
pub struct CopyFlood;

/// Bytes per copy.
const HALF: usize = 16 << 20;

impl TaskAssignor for CopyFlood {
    fn name(&self) -> &str {
        "copy-flood"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        let mut buffer = vec![0u8; 2 * HALF];
        loop {
            let (from, to) = buffer.split_at_mut(HALF);
            // `black_box` keeps the optimiser from proving the copies pointless.
            to.copy_from_slice(black_box(from));
            black_box(&mut buffer);
        }
    }
}

assignor_sdk::export!(CopyFlood);
