//! Test guest whose `assign` recurses without bound, so the runtime must turn the wasm stack
//! overflow into an error instead of crashing the host.
//!
//! The recursion keeps nothing in linear memory: Rust on wasm also has a *shadow* stack there
//! (for locals whose address is taken), and exhausting that first would end in an
//! out-of-bounds memory access trap, not the stack overflow this guest exists to cause.

use std::hint::black_box;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Recurses until the stack is exhausted in `assign`.
#[derive(Debug, Default)]
pub struct DeepRecursion;

/// A pointer to [`level`], handed down the recursion so that every call is indirect: the
/// optimiser cannot see that `level` calls itself, so it cannot turn the recursion into a
/// loop, and the call is not in tail position (its result is used afterwards).
#[derive(Clone, Copy)]
struct Next(fn(u64, Next) -> u64);

fn level(depth: u64, next: Next) -> u64 {
    if depth == u64::MAX {
        return 0;
    }
    (next.0)(depth + 1, next).wrapping_add(depth)
}

impl TaskAssignor for DeepRecursion {
    fn name(&self) -> &str {
        "deep-recursion"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        black_box(level(0, black_box(Next(level))));
        Err(AssignError::new("unreachable: the recursion has no end"))
    }
}

assignor_sdk::export!(DeepRecursion);
