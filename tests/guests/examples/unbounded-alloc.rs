//! Test guest whose `assign` allocates without bound: it keeps 1 MiB chunks, each filled with
//! data so the pages are really touched, until the runtime's memory limit stops it.

use std::hint::black_box;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// The size of each allocation.
const CHUNK: usize = 1 << 20;

/// Allocates and fills memory forever in `assign`.
#[derive(Debug, Default)]
pub struct UnboundedAlloc;

impl TaskAssignor for UnboundedAlloc {
    fn name(&self) -> &str {
        "unbounded-alloc"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut fill = 1u8;
        loop {
            // A non-zero fill value the compiler cannot see forces a real write of every byte.
            let chunk = vec![black_box(fill); CHUNK];
            chunks.push(black_box(chunk));
            fill = fill.wrapping_add(2);
        }
    }
}

assignor_sdk::export!(UnboundedAlloc);
