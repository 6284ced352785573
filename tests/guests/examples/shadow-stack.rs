//! Test guest whose `assign` recurses with a 64 KiB array in every frame. Rust on wasm keeps
//! such locals on its *shadow* stack in linear memory (1 MiB by default), not on the wasm
//! stack, so this overflows the guest's own stack long before the engine's: the stack
//! pointer runs below address 0 and the next store traps as an out-of-bounds access. The
//! runtime must still report it as `stack-overflow`, what the author needs to hear.

use std::hint::black_box;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Bytes of the array each frame keeps in linear memory.
const FRAME_BYTES: usize = 64 << 10;

/// Recurses with large frames until the shadow stack overflows in `assign`.
#[derive(Debug, Default)]
pub struct ShadowStack;

/// A pointer to [`level`], handed down the recursion so that every call is indirect: the
/// optimiser cannot see that `level` calls itself, so it can neither turn the recursion into
/// a loop nor merge the frames (see `deep-recursion`).
#[derive(Clone, Copy)]
struct Next(fn(u64, Next) -> u64);

fn level(depth: u64, next: Next) -> u64 {
    let mut frame = [0u8; FRAME_BYTES];
    // The array's address escapes, so it must live in linear memory, written in full.
    black_box(&mut frame);
    if depth == u64::MAX {
        return 0;
    }
    // Read after the call returns, so the frame stays live across it.
    let below = (next.0)(depth + 1, next);
    below.wrapping_add(u64::from(frame[depth as usize % FRAME_BYTES]))
}

impl TaskAssignor for ShadowStack {
    fn name(&self) -> &str {
        "shadow-stack"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        black_box(level(0, black_box(Next(level))));
        Err(AssignError::new("unreachable: the recursion has no end"))
    }
}

assignor_sdk::export!(ShadowStack);
