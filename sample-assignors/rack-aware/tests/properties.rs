//! Properties over random rack-aware groups: validity, balance, never worse than sticky,
//! per-subtopology skew, fixed point.

mod common;

use assignor_sdk::{GroupSpec, Topology};
use common::*;
use proptest::prelude::*;
use rack_aware_assignor::{Decision, Strategy as RackStrategy};

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

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
