//! Test guest whose output depends on `HashMap` iteration order, which std seeds from WASI
//! randomness: it assigns tasks round-robin over the members in the order a `HashMap` keyed by
//! member id yields them. It exists to show that the runtime's deterministic WASI random makes
//! the output identical from run to run.

use std::collections::HashMap;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Assigns round-robin in `HashMap` order.
#[derive(Debug, Default)]
pub struct HashmapUser;

impl TaskAssignor for HashmapUser {
    fn name(&self) -> &str {
        "hashmap-user"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        let by_id: HashMap<&str, usize> = group
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| (m.member_id.as_str(), i))
            .collect();
        // Deliberately unsorted: the order is the hasher's, i.e. the random seed's.
        let order: Vec<usize> = by_id.values().copied().collect();

        let mut out = GroupAssignment::empty_for(group);
        if order.is_empty() {
            return Ok(out);
        }
        for (i, task) in topology.tasks().enumerate() {
            out.members[order[i % order.len()]]
                .active_tasks
                .insert(task);
        }
        Ok(out)
    }
}

assignor_sdk::export!(HashmapUser);
