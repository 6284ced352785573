//! Per-member task counts of an assignment, and their spread: what balance assertions in an
//! assignor's own tests are written with (`assert!(spread(&totals(&a)) <= 1)`).
//!
//! Each count is a `Vec` in the order of `GroupAssignment::members`, which is the group's
//! member order.

use crate::{GroupAssignment, Topology};

/// Per member: the number of active tasks.
pub fn actives(a: &GroupAssignment) -> Vec<usize> {
    a.members.iter().map(|m| m.active_tasks.len()).collect()
}

/// Per member: the number of standby tasks.
pub fn standbys(a: &GroupAssignment) -> Vec<usize> {
    a.members.iter().map(|m| m.standby_tasks.len()).collect()
}

/// Per member: active plus standby tasks.
pub fn totals(a: &GroupAssignment) -> Vec<usize> {
    a.members
        .iter()
        .map(|m| m.active_tasks.len() + m.standby_tasks.len())
        .collect()
}

/// Per member: active tasks of stateful (`stateful = true`) or stateless subtopologies. A task
/// outside `topology` counts as neither.
pub fn actives_of(a: &GroupAssignment, topology: &Topology, stateful: bool) -> Vec<usize> {
    a.members
        .iter()
        .map(|m| {
            m.active_tasks
                .iter()
                .filter(|&&t| {
                    topology
                        .subtopology(t)
                        .is_some_and(|s| s.is_stateful == stateful)
                })
                .count()
        })
        .collect()
}

/// The largest count minus the smallest; 0 for no counts.
pub fn spread(counts: &[usize]) -> usize {
    counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0)
}

/// Per subtopology (in topology order): the spread of the number of its tasks each member
/// holds as active.
pub fn subtopology_skews(a: &GroupAssignment, topology: &Topology) -> Vec<usize> {
    (0..topology.subtopologies.len() as u32)
        .map(|s| {
            let counts: Vec<usize> = a
                .members
                .iter()
                .map(|m| m.active_tasks.iter().filter(|t| t.subtopology == s).count())
                .collect();
            spread(&counts)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Scenario;

    /// Each count follows the assignment's member order, and tasks are told apart by kind and
    /// subtopology.
    #[test]
    fn counts_per_member_and_spreads() {
        let (group, topology) = Scenario::new()
            .stateful("s0", 4)
            .stateless("s1", 2)
            .member("a", "p1", |m| m)
            .member("b", "p2", |m| m)
            .build();
        let mut a = GroupAssignment::empty_for(&group);
        let tasks: Vec<_> = topology.tasks().collect();
        for &t in &tasks[..3] {
            a.members[0].active_tasks.insert(t);
        }
        for &t in &tasks[3..] {
            a.members[1].active_tasks.insert(t);
        }
        a.members[1].standby_tasks.insert(tasks[0]);
        assert_eq!(actives(&a), [3, 3]);
        assert_eq!(standbys(&a), [0, 1]);
        assert_eq!(totals(&a), [3, 4]);
        assert_eq!(actives_of(&a, &topology, true), [3, 1]);
        assert_eq!(actives_of(&a, &topology, false), [0, 2]);
        assert_eq!(subtopology_skews(&a, &topology), [2, 2]);
        assert_eq!(spread(&totals(&a)), 1);
        assert_eq!(spread(&[]), 0);
    }
}
