//! Test guest whose `assign` never returns: it spins forever, so the runtime must stop it by
//! running out of fuel (a deadline) instead of hanging the coordinator.

use std::hint::black_box;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Loops forever in `assign`.
#[derive(Debug, Default)]
pub struct EndlessLoop;

impl TaskAssignor for EndlessLoop {
    fn name(&self) -> &str {
        "endless-loop"
    }

    fn assign(&self, _: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        let mut counter = 0u64;
        // `black_box` keeps the optimiser from proving the loop side-effect free.
        loop {
            counter = black_box(counter.wrapping_add(1));
        }
    }
}

assignor_sdk::export!(EndlessLoop);
