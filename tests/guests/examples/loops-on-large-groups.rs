//! Test guest that behaves on small groups and spins forever on larger ones: it passes an
//! upload's trial assignment (three members) and only misbehaves once a real group reaches
//! it, which is how a hostile tenant gets an endless loop past the upload checks.

use std::hint::black_box;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Groups of up to this many members get a valid round-robin assignment.
const LARGEST_GOOD_GROUP: usize = 3;

/// Round-robin on small groups, an endless loop on larger ones.
#[derive(Debug, Default)]
pub struct LoopsOnLargeGroups;

impl TaskAssignor for LoopsOnLargeGroups {
    fn name(&self) -> &str {
        "loops-on-large-groups"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        if group.members.len() > LARGEST_GOOD_GROUP {
            let mut counter = 0u64;
            // `black_box` keeps the optimiser from proving the loop side-effect free.
            loop {
                counter = black_box(counter.wrapping_add(1));
            }
        }
        let mut out = GroupAssignment::empty_for(group);
        if group.members.is_empty() {
            return Ok(out);
        }
        for (i, task) in topology.tasks().enumerate() {
            out.members[i % group.members.len()]
                .active_tasks
                .insert(task);
        }
        Ok(out)
    }
}

assignor_sdk::export!(LoopsOnLargeGroups);
