//! Properties over random rack-aware groups: validity, balance, never worse than sticky,
//! strictly better where an exchange pays, unchanged where racks make no difference,
//! per-subtopology skew, fixed point.

mod common;

use assignor_sdk::{GroupAssignment, GroupSpec, TaskAssignor, TaskId, Topology};
use common::*;
use proptest::prelude::*;
use rack_aware_assignor::{Decision, RackAwareAssignor, STICKY_PASS, Strategy as RackStrategy};

/// The shape of a random group.
#[derive(Debug, Clone)]
struct Shape {
    members: usize,
    processes: usize,
    racks: usize,
    subtopologies: Vec<(u32, bool)>,
    standbys: u32,
    tags: usize,
    strategy: RackStrategy,
    seed: u64,
}

fn shapes() -> impl Strategy<Value = Shape> {
    (
        1usize..=30,
        1usize..=10,
        1usize..=4,
        prop::collection::vec((0u32..=16, any::<bool>()), 1..=4),
        0u32..=2,
        0usize..=2,
        prop_oneof![
            Just(RackStrategy::MinTraffic),
            Just(RackStrategy::BalanceSubtopology)
        ],
        any::<u64>(),
    )
        .prop_map(
            |(members, processes, racks, subtopologies, standbys, tags, strategy, seed)| Shape {
                members,
                processes: processes.min(members),
                racks,
                subtopologies,
                standbys,
                tags,
                strategy,
                seed,
            },
        )
}

/// A group of `shape`: one or two source topics per subtopology (the second sometimes with
/// fewer partitions), each partition replicated in one to all racks; processes on random
/// racks (a member's rack is its process's); a random current assignment.
fn random_group(shape: &Shape) -> (GroupSpec, Topology) {
    let mut rng = Rng(shape.seed);
    let racks = shape.racks;
    let topics = 1 + rng.below(2);
    let mut topology = topology(&shape.subtopologies, topics, racks, |_, _, _| {
        let mut r: Vec<u32> = (0..racks as u32).filter(|_| rng.chance(35)).collect();
        if r.is_empty() {
            r.push(rng.below(racks) as u32);
        }
        r
    });
    for s in &mut topology.subtopologies {
        if s.source_topics.len() > 1 && rng.chance(50) {
            let keep = rng.below(s.max_num_input_partitions as usize + 1);
            s.source_topics[1].partition_racks.truncate(keep);
        }
    }
    let process_rack: Vec<usize> = (0..shape.processes).map(|_| rng.below(racks)).collect();
    let mut members = members(shape.members, 1, |_| String::new());
    for (i, m) in members.iter_mut().enumerate() {
        let p = if i < shape.processes {
            i
        } else {
            rng.below(shape.processes)
        };
        m.process_id = format!("p{p:02}");
        m.rack_id = Some(format!("r{}", process_rack[p]));
        for k in 0..shape.tags {
            m.client_tags
                .insert(format!("tag{k}"), format!("v{}", p % (k + 2)));
        }
    }
    let n = members.len();
    for task in topology.tasks() {
        if rng.chance(70) {
            members[rng.below(n)].active_tasks.insert(task);
        }
        if topology.subtopology(task).unwrap().is_stateful && rng.chance(40) {
            members[rng.below(n)].standby_tasks.insert(task);
        }
    }
    let mut group = group(members, shape.standbys);
    group.configs.rack_aware_assignment_tags = (0..shape.tags).map(|k| format!("tag{k}")).collect();
    (group, topology)
}

/// Input partitions of `task` with no replica in `rack`.
fn misses(topology: &Topology, task: TaskId, rack: &str) -> usize {
    topology.subtopologies[task.subtopology as usize]
        .source_topics
        .iter()
        .filter_map(|t| t.partition_racks.get(task.partition as usize))
        .filter(|replicas| !replicas.iter().any(|&r| topology.racks[r as usize] == rack))
        .count()
}

/// Whether exchanging two actives of the same kind between members in different racks would
/// cut the cross-rack partitions of `a`: then an optimum must read fewer across racks than
/// `a` (the saving is at least one traffic cost, 10, against two non-overlap costs, 2).
fn exchange_pays(group: &GroupSpec, topology: &Topology, a: &GroupAssignment) -> bool {
    let placed: Vec<(TaskId, &str)> = group
        .members
        .iter()
        .zip(&a.members)
        .flat_map(|(m, out)| {
            let rack = m.rack_id.as_deref().unwrap_or_default();
            out.active_tasks.iter().map(move |&t| (t, rack))
        })
        .collect();
    let stateful = |t: TaskId| topology.subtopologies[t.subtopology as usize].is_stateful;
    placed.iter().any(|&(s, x)| {
        placed.iter().any(|&(t, y)| {
            x != y
                && stateful(s) == stateful(t)
                && misses(topology, s, y) + misses(topology, t, x)
                    < misses(topology, s, x) + misses(topology, t, y)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// With `min_traffic`, wherever exchanging two of sticky's actives across racks would cut
    /// cross-rack partitions, the result strictly cuts them; it never adds any.
    #[test]
    fn strictly_better_where_an_exchange_pays(shape in shapes()) {
        let (group, topology) = random_group(&shape);
        let sticky = STICKY_PASS.assign(&group, &topology).expect("sticky");
        let out = run(&RackAwareAssignor::default(), &group, &topology);
        let (before, after) = out.active_cross_rack;
        if exchange_pays(&group, &topology, &sticky) {
            prop_assert!(after < before, "{} -> {}", before, after);
        } else {
            prop_assert!(after <= before, "{} -> {}", before, after);
        }
    }

    /// When every partition has a replica in every member's rack, `min_traffic` returns
    /// sticky's assignment to the task, whatever the current assignment.
    #[test]
    fn full_replication_is_sticky(shape in shapes()) {
        let (group, mut topology) = random_group(&shape);
        let all: Vec<u32> = (0..topology.racks.len() as u32).collect();
        for s in &mut topology.subtopologies {
            for t in &mut s.source_topics {
                t.partition_racks.iter_mut().for_each(|r| r.clone_from(&all));
            }
        }
        let out = run(&RackAwareAssignor::default(), &group, &topology);
        prop_assert_eq!(&out.decision, &Decision::Optimised);
        prop_assert_eq!(out.active_cross_rack, (0, 0));
        prop_assert_eq!(out.assignment, STICKY_PASS.assign(&group, &topology).expect("sticky"));
    }

    /// Any random group gets a valid assignment with sticky's per-member counts (balance
    /// within one), no more cross-rack active partitions than sticky, and with
    /// `balance_subtopology` every subtopology's skew at most one.
    #[test]
    fn valid_balanced_and_no_worse(shape in shapes()) {
        let (group, topology) = random_group(&shape);
        let out = run(&assignor(shape.strategy), &group, &topology);
        prop_assert_eq!(&out.decision, &Decision::Optimised);
        prop_assert!(spread(&actives(&out.assignment)) <= 1);
        if shape.strategy == RackStrategy::MinTraffic {
            prop_assert!(out.active_cross_rack.1 <= out.active_cross_rack.0);
        } else {
            let skews = subtopology_skews(&out.assignment, &topology);
            prop_assert!(skews.iter().all(|&s| s <= 1), "{:?}", skews);
        }
    }

    /// Assigning again with the output as the current assignment changes nothing.
    #[test]
    fn fixed_point(shape in shapes()) {
        let (group, topology) = random_group(&shape);
        let a = assignor(shape.strategy);
        let out = run(&a, &group, &topology);
        let again = run(&a, &with_current(&group, &out.assignment), &topology);
        prop_assert_eq!(again.assignment, out.assignment);
    }
}
