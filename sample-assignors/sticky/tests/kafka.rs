//! The behaviours Kafka's `StickyTaskAssignorTest` checks, as small scenarios.

mod common;

use std::collections::BTreeMap;

use assignor_sdk::{TaskId, TaskSet};
use common::*;

/// With as many tasks as members, every member gets exactly one active.
#[test]
fn one_active_per_member_when_tasks_equal_members() {
    let topology = topology(&[(3, false)]);
    let group = group(members_on(&[1, 1, 1]), 0);
    let a = assign(&group, &topology);
    assert_eq!(actives(&a), [1, 1, 1]);
}

/// Tasks follow their state when members come back under new ids on the same processes.
#[test]
fn same_process_stickiness_when_member_ids_change() {
    let topology = topology(&[(4, true)]);
    let mut restarted = member("new-a", "p1");
    restarted.task_offsets = BTreeMap::from([(t(0, 0), 100), (t(0, 1), 100)]);
    let mut other = member("new-b", "p2");
    other.task_offsets = BTreeMap::from([(t(0, 2), 100), (t(0, 3), 100)]);
    let a = assign(&group(vec![restarted, other], 0), &topology);
    assert_eq!(a.members[0].active_tasks, TaskSet::from([t(0, 0), t(0, 1)]));
    assert_eq!(a.members[1].active_tasks, TaskSet::from([t(0, 2), t(0, 3)]));

    // Kafka's own case: a member with a new id on process 1 keeps what it reports as active.
    let topology = common::topology(&[(3, false)]);
    let group = group(
        vec![
            holding("member2", "process2", &[t(0, 1)], &[]),
            holding("member3", "process1", &[t(0, 2)], &[]),
        ],
        0,
    );
    let a = assign(&group, &topology);
    assert!(a.members[0].active_tasks.contains(&t(0, 1)));
    assert!(a.members[1].active_tasks.contains(&t(0, 2)));
}

/// An orphaned task goes to the member that held it as standby.
#[test]
fn previous_standbys_promoted_to_active() {
    let topology = topology(&[(2, true)]);
    // The owner of 0_1 left; b kept a standby of it.
    let group = group(
        vec![
            holding("a", "p1", &[t(0, 0)], &[]),
            holding("b", "p2", &[], &[t(0, 1)]),
        ],
        0,
    );
    let a = assign(&group, &topology);
    assert_eq!(a.members[1].active_tasks, TaskSet::from([t(0, 1)]));
}

/// Two members holding each other's task as standby keep exactly that.
#[test]
fn crosswise_standbys_kept() {
    let topology = topology(&[(2, true)]);
    let group = group(
        vec![
            holding("a", "p1", &[t(0, 0)], &[t(0, 1)]),
            holding("b", "p2", &[t(0, 1)], &[t(0, 0)]),
        ],
        1,
    );
    let a = assign(&group, &topology);
    assert_eq!(a.members[0].standby_tasks, TaskSet::from([t(0, 1)]));
    assert_eq!(a.members[1].standby_tasks, TaskSet::from([t(0, 0)]));
    assert_fixed_point(&group, &topology, &a);
}

/// A standby never lands on the process that runs the task as active, even on another member.
#[test]
fn no_standby_on_its_actives_process() {
    let topology = topology(&[(4, true)]);
    let group = group(members_on(&[2, 2]), 1);
    let a = assign(&group, &topology);
    for (i, j) in [(0, 1), (2, 3)] {
        for task in a.members[i]
            .active_tasks
            .iter()
            .chain(&a.members[j].active_tasks)
        {
            assert!(!a.members[i].standby_tasks.contains(task));
            assert!(!a.members[j].standby_tasks.contains(task));
        }
    }
}

/// Three processes, three tasks, two replicas: each member's standbys are the other two tasks.
#[test]
fn other_two_tasks_as_standbys_with_three_processes_and_two_replicas() {
    let topology = topology(&[(3, true)]);
    let group = group(members_on(&[1, 1, 1]), 2);
    let a = assign(&group, &topology);
    let all: TaskSet = topology.tasks().collect();
    for m in &a.members {
        assert_eq!(m.active_tasks.len(), 1);
        let others: TaskSet = all
            .iter()
            .copied()
            .filter(|t| !m.active_tasks.contains(t))
            .collect();
        assert_eq!(m.standby_tasks, others);
    }
}

/// A single member gets every active and no standby.
#[test]
fn no_standbys_for_a_single_member() {
    let topology = topology(&[(4, true)]);
    let a = assign(&group(members_on(&[1]), 1), &topology);
    assert_eq!(a.members[0].active_tasks.len(), 4);
    assert!(a.members[0].standby_tasks.is_empty());
}

/// A process with two members takes twice the tasks of a process with one.
#[test]
fn process_capacity_proportional_to_member_count() {
    let topology = topology(&[(3, false)]);
    let a = assign(&group(members_on(&[1, 2]), 0), &topology);
    assert_eq!(actives(&a), [1, 1, 1]);
    let topology = common::topology(&[(12, false)]);
    let a = assign(&group(members_on(&[1, 3]), 0), &topology);
    let counts = actives(&a);
    assert_eq!((counts[0], counts[1..].iter().sum::<usize>()), (3, 9));
}

/// Adding partitions hands out the new tasks without moving existing ones.
#[test]
fn new_partitions_never_move_existing_ones() {
    let topology = topology(&[(6, false)]);
    let group = group(
        vec![
            holding("a", "p1", &[t(0, 0), t(0, 1)], &[]),
            holding("b", "p2", &[t(0, 2), t(0, 3)], &[]),
        ],
        0,
    );
    let a = assign(&group, &topology);
    assert!(
        a.members[0].active_tasks.contains(&t(0, 0))
            && a.members[0].active_tasks.contains(&t(0, 1))
    );
    assert!(
        a.members[1].active_tasks.contains(&t(0, 2))
            && a.members[1].active_tasks.contains(&t(0, 3))
    );
    assert_eq!(moved(&group, &a), 2);
}

/// On a cold start, each task goes to the member reporting the highest offset for it.
#[test]
fn cold_start_follows_reported_offsets() {
    let topology = topology(&[(2, true)]);
    let mut a_member = member("a", "p1");
    a_member.task_offsets = BTreeMap::from([(t(0, 0), 10), (t(0, 1), 500)]);
    let mut b_member = member("b", "p2");
    b_member.task_offsets = BTreeMap::from([(t(0, 0), 400), (t(0, 1), 20)]);
    let a = assign(&group(vec![a_member, b_member], 0), &topology);
    assert_eq!(a.members[0].active_tasks, TaskSet::from([t(0, 1)]));
    assert_eq!(a.members[1].active_tasks, TaskSet::from([t(0, 0)]));
}

/// 100 stateful tasks on 5 single-member processes with 2 replicas: exactly 20 actives each,
/// and (beyond Kafka) exactly 40 standbys each.
#[test]
fn hundred_tasks_over_five_processes_with_two_replicas() {
    let topology = topology(&[(100, true)]);
    let a = assign(&group(members_on(&[1, 1, 1, 1, 1]), 2), &topology);
    assert_eq!(actives(&a), [20; 5]);
    assert_eq!(totals(&a), [60; 5]);
}

/// One member holding every task of both kinds (the most any member can hold, which sizes the
/// active targets' counting sort) keeps exactly its share, and the newcomers take the rest:
/// balanced, movement minimal, a fixed point.
#[test]
fn one_member_holding_everything_hands_out_only_the_excess() {
    let topology = topology(&[(40, true), (21, false), (30, true)]);
    let all: Vec<TaskId> = topology
        .subtopologies
        .iter()
        .zip(0..)
        .flat_map(|(s, i)| (0..s.max_num_input_partitions).map(move |p| t(i, p)))
        .collect();
    let mut members = vec![holding("a", "p1", &all, &[])];
    members.extend((1..7).map(|i| member(&format!("m{i}"), &format!("p{}", i + 1))));
    let group = group(members, 1);
    let a = assign(&group, &topology);
    check(&group, &topology, &a);
    // 70 stateful and 21 stateless over 7 members: 10 and 3 each.
    assert_eq!(actives(&a), [13; 7]);
    assert_eq!(moved(&group, &a), min_moves(&group, &topology));
    assert_eq!(moved(&group, &a), 91 - 13);
    assert_fixed_point(&group, &topology, &a);
}
