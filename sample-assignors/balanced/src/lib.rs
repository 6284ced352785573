//! A balanced task assignor, written with `assignor-sdk` as an example to copy.
//!
//! - **Actives** are dealt round-robin over the members, visiting processes in turn, so every
//!   member gets `⌊T/M⌋` or `⌈T/M⌉` active tasks and a process gets tasks in proportion to its
//!   number of members (Kafka's notion of process capacity).
//! - **Standbys**: each task of a stateful subtopology gets up to `numStandbyReplicas` standbys,
//!   each on the least-loaded member of a process that holds no copy of the task yet. With too
//!   few processes it places fewer, as Kafka does.
//!
//! It ignores the current assignment: it is balanced, not sticky. This crate is the library
//! (the runtime's built-in `balanced`, and native tests); `component/` is the component, one
//! `export!` over it: `cargo build --release --target wasm32-wasip2 -p
//! balanced-assignor-component`.

#![deny(missing_docs)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Spreads actives evenly over members and standbys over other processes.
#[derive(Debug, Default)]
pub struct BalancedAssignor;

impl TaskAssignor for BalancedAssignor {
    fn name(&self) -> &str {
        "balanced"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        let mut assignment = GroupAssignment::empty_for(group);
        if group.members.is_empty() {
            return Ok(assignment);
        }
        let order = interleaved_members(group);
        // A member's position in `order` stands for it; `process[pos]` is its process number.
        let mut process_of = vec![0usize; order.len()];
        let processes: BTreeMap<&str, usize> = group
            .members
            .iter()
            .map(|m| m.process_id.as_str())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .zip(0..)
            .collect();
        for (pos, &member) in order.iter().enumerate() {
            process_of[pos] = processes[group.members[member].process_id.as_str()];
        }

        let mut load = vec![0u32; order.len()];
        let tasks: Vec<_> = topology.tasks().collect();
        let mut active_pos = Vec::with_capacity(tasks.len());
        for (i, &task) in tasks.iter().enumerate() {
            let pos = i % order.len();
            assignment.members[order[pos]].active_tasks.insert(task);
            load[pos] += 1;
            active_pos.push(pos);
        }

        let replicas = group.configs.num_standby_replicas as usize;
        if replicas == 0 {
            return Ok(assignment);
        }
        // Least-loaded first; ties go to the earlier member in the interleaved order.
        let mut heap: BinaryHeap<Reverse<(u32, usize)>> = (0..order.len())
            .map(|pos| Reverse((load[pos], pos)))
            .collect();
        // A task's copies are on distinct processes, so at most one per member: the count
        // asked for (up to u32::MAX from a broker) does not size anything.
        let mut holding = Vec::with_capacity(replicas.min(order.len()) + 1);
        let mut skipped = Vec::new();
        for (&task, &active) in tasks.iter().zip(&active_pos) {
            if !topology.subtopology(task).is_some_and(|s| s.is_stateful) {
                continue;
            }
            holding.clear();
            holding.push(process_of[active]);
            while holding.len() <= replicas {
                let Some(Reverse((l, pos))) = heap.pop() else {
                    break; // every remaining member's process already holds the task
                };
                if holding.contains(&process_of[pos]) {
                    skipped.push(Reverse((l, pos)));
                    continue;
                }
                assignment.members[order[pos]].standby_tasks.insert(task);
                holding.push(process_of[pos]);
                heap.push(Reverse((l + 1, pos)));
            }
            heap.extend(skipped.drain(..));
        }
        Ok(assignment)
    }
}

/// Member indices ordered so that consecutive positions are on different processes: the first
/// member of every process, then the second of every process, and so on (members sorted by id
/// within a process, processes by id, so the result does not depend on input order).
fn interleaved_members(group: &GroupSpec) -> Vec<usize> {
    let mut by_process: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, m) in group.members.iter().enumerate() {
        by_process.entry(&m.process_id).or_default().push(i);
    }
    for members in by_process.values_mut() {
        members.sort_by_key(|&i| &group.members[i].member_id);
    }
    let rounds = by_process.values().map(Vec::len).max().unwrap_or(0);
    (0..rounds)
        .flat_map(|r| by_process.values().filter_map(move |ms| ms.get(r).copied()))
        .collect()
}
