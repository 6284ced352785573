//! Test guest that burns a fair but legal amount of compute before returning a valid
//! round-robin assignment: it must finish within the runtime's default limits, showing that
//! they leave real work room to run.
//!
//! The configuration key `iterations` sets the work (default [`DEFAULT_ITERATIONS`]).

use std::collections::BTreeMap;
use std::hint::black_box;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// The default number of loop iterations: a few hundred million wasm instructions, well
/// below the default fuel of two billion.
pub const DEFAULT_ITERATIONS: u64 = 20_000_000;

/// Spins for a while, then assigns round-robin.
#[derive(Debug)]
pub struct SlowLegal {
    iterations: u64,
}

impl Default for SlowLegal {
    fn default() -> Self {
        Self {
            iterations: DEFAULT_ITERATIONS,
        }
    }
}

impl TaskAssignor for SlowLegal {
    fn name(&self) -> &str {
        "slow-legal"
    }

    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        if let Some(value) = config.get("iterations") {
            self.iterations = value.parse().map_err(|e| {
                format!("iterations={value:?} is not accepted ({e}): expected a u64")
            })?;
        }
        Ok(())
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        let mut acc = 0u64;
        for i in 0..self.iterations {
            acc = black_box(acc.wrapping_mul(31).wrapping_add(i));
        }
        black_box(acc);

        let mut out = GroupAssignment::empty_for(group);
        let n = out.members.len();
        if n == 0 {
            return Ok(out);
        }
        for (i, task) in topology.tasks().enumerate() {
            out.members[i % n].active_tasks.insert(task);
        }
        Ok(out)
    }
}

assignor_sdk::export!(SlowLegal);
