//! The balanced sample's promises, checked natively through the `TaskAssignor` trait.

use std::collections::{BTreeMap, BTreeSet};

use assignor_sdk::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, Subtopology, TaskAssignor, TaskId,
    TaskSet, Topology,
};
use balanced_assignor::BalancedAssignor;

/// `processes[i]` members on process i; `subtopologies` as (partitions, stateful).
fn scenario(
    processes: &[usize],
    subtopologies: &[(u32, bool)],
    standbys: u32,
) -> (GroupSpec, Topology) {
    let members = processes
        .iter()
        .enumerate()
        .flat_map(|(p, &n)| {
            (0..n).map(move |i| Member {
                member_id: format!("m{p}-{i}"),
                process_id: format!("p{p}"),
                ..Member::default()
            })
        })
        .collect();
    let subtopologies = subtopologies
        .iter()
        .enumerate()
        .map(|(i, &(n, is_stateful))| Subtopology {
            id: i.to_string(),
            max_num_input_partitions: n,
            is_stateful,
            source_topics: Vec::new(),
        })
        .collect();
    (
        GroupSpec {
            members,
            configs: AssignmentConfigs {
                num_standby_replicas: standbys,
                rack_aware_assignment_tags: Vec::new(),
            },
        },
        Topology {
            subtopologies,
            racks: Vec::new(),
        },
    )
}

fn assign(group: &GroupSpec, topology: &Topology) -> GroupAssignment {
    BalancedAssignor
        .assign(group, topology)
        .expect("balanced never fails")
}

/// How many members hold `task` as a standby.
fn standbys(a: &GroupAssignment, task: TaskId) -> usize {
    a.members
        .iter()
        .filter(|m| m.standby_tasks.contains(&task))
        .count()
}

/// Actives: every task exactly once, per-member counts within one of each other.
#[test]
fn actives_are_complete_and_balanced() {
    let (group, topology) = scenario(&[3, 1, 2], &[(7, true), (5, false)], 0);
    let a = assign(&group, &topology);
    let mut seen = BTreeSet::new();
    for m in &a.members {
        for &t in &m.active_tasks {
            assert!(seen.insert(t), "{t} twice");
        }
    }
    assert_eq!(seen, topology.tasks().collect());
    let counts: Vec<usize> = a.members.iter().map(|m| m.active_tasks.len()).collect();
    assert!(
        counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
        "{counts:?}"
    );
}

/// A process's share of actives follows its member count (Kafka's process capacity).
#[test]
fn process_capacity_follows_member_count() {
    let (group, topology) = scenario(&[2, 1], &[(30, true)], 0);
    let a = assign(&group, &topology);
    let mut per_process: BTreeMap<&str, usize> = BTreeMap::new();
    for (m, assigned) in group.members.iter().zip(&a.members) {
        *per_process.entry(&m.process_id).or_default() += assigned.active_tasks.len();
    }
    assert_eq!(per_process["p0"], 20);
    assert_eq!(per_process["p1"], 10);
}

/// Standbys: stateful tasks only, never on a process already holding the task, as many as
/// asked when there are enough processes.
#[test]
fn standbys_go_to_other_processes() {
    let (group, topology) = scenario(&[2, 2, 2], &[(6, true), (4, false)], 2);
    let a = assign(&group, &topology);
    for task in topology.tasks() {
        let stateful = topology.subtopology(task).unwrap().is_stateful;
        let mut processes = BTreeSet::new();
        let mut copies = 0;
        for (m, assigned) in group.members.iter().zip(&a.members) {
            if assigned.active_tasks.contains(&task) || assigned.standby_tasks.contains(&task) {
                copies += 1;
                assert!(
                    processes.insert(&m.process_id),
                    "{task} twice on {}",
                    m.process_id
                );
            }
        }
        assert_eq!(copies, if stateful { 3 } else { 1 }, "{task}");
    }
    let totals: Vec<usize> = a
        .members
        .iter()
        .map(|m| m.active_tasks.len() + m.standby_tasks.len())
        .collect();
    assert!(
        totals.iter().max().unwrap() - totals.iter().min().unwrap() <= 1,
        "{totals:?}"
    );
}

/// With fewer processes than copies wanted, it places as many standbys as processes allow.
#[test]
fn too_few_processes_place_fewer_standbys() {
    let (group, topology) = scenario(&[3, 1], &[(4, true)], 3);
    let a = assign(&group, &topology);
    for task in topology.tasks() {
        assert_eq!(
            standbys(&a, task),
            1,
            "{task}: one other process, one standby"
        );
    }
}

/// The largest standby count a broker can send places one copy per other process and
/// allocates nothing by it (it once sized a vector by it: a capacity overflow in the sandbox).
#[test]
fn the_largest_standby_count_is_bounded_by_the_processes() {
    let (group, topology) = scenario(&[2, 1, 1], &[(4, true)], u32::MAX);
    let a = assign(&group, &topology);
    for task in topology.tasks() {
        assert_eq!(
            standbys(&a, task),
            2,
            "{task}: two other processes, two standbys"
        );
    }
}

/// No members: nothing to assign to, an empty assignment rather than an error.
#[test]
fn empty_group_gets_empty_assignment() {
    let (group, topology) = scenario(&[], &[(4, true)], 1);
    assert!(assign(&group, &topology).members.is_empty());
}

/// The result does not depend on the order members are listed in.
#[test]
fn member_order_does_not_matter() {
    let (group, topology) = scenario(&[2, 3], &[(9, true)], 1);
    let a = assign(&group, &topology);
    let mut reversed = group.clone();
    reversed.members.reverse();
    let b = assign(&reversed, &topology);
    let by_id = |g: &GroupSpec, a: &GroupAssignment| -> BTreeMap<String, (TaskSet, TaskSet)> {
        g.members
            .iter()
            .zip(&a.members)
            .map(|(m, x)| {
                (
                    m.member_id.clone(),
                    (x.active_tasks.clone(), x.standby_tasks.clone()),
                )
            })
            .collect()
    };
    assert_eq!(by_id(&group, &a), by_id(&reversed, &b));
}
