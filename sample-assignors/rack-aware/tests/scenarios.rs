//! Scenarios: what racks change, what they leave alone, fallbacks, and optimality against
//! brute force.

mod common;

use assignor_sdk::{GroupAssignment, GroupSpec, TaskAssignor, Topology};
use common::*;
use rack_aware_assignor::{Decision, RackAwareAssignor, STICKY_PASS, Strategy};

/// 12 members over 3 racks (4 per rack, 2 per process), two stateful and one stateless
/// subtopology of 16 partitions reading one topic each, skewed: a partition's replicas sit in
/// rack `r2` for every fourth partition, `r1` for the next, `r0` for the other half, while a
/// third of the members are in each rack.
fn skewed() -> (GroupSpec, Topology) {
    let topology = topology(&[(16, true), (16, true), (16, false)], 1, 3, |s, _, p| {
        let p = p as usize + s;
        vec![if p % 4 == 3 { 2 } else { (p % 2) as u32 }]
    });
    let group = group(members(12, 2, |i| format!("r{}", (i / 2) % 3)), 1);
    (group, topology)
}

/// Cross-rack partitions of `a`'s actives and standbys.
fn cost(group: &GroupSpec, topology: &Topology, a: &GroupAssignment) -> (u64, u64) {
    rack_aware_assignor::cross_rack_partitions(group, topology, a).expect("racks known")
}

/// When every partition has a replica in every rack, the output is sticky's, to the task.
#[test]
fn full_replication_changes_nothing() {
    let topology = topology(&[(16, true), (8, false), (5, true)], 2, 3, |_, _, _| {
        vec![0, 1, 2]
    });
    for (n, standbys) in [(7, 1), (12, 2), (3, 0)] {
        let group = group(members(n, 2, |i| format!("r{}", i % 3)), standbys);
        let out = run(&RackAwareAssignor::default(), &group, &topology);
        assert_eq!(out.decision, Decision::Optimised);
        assert_eq!(
            out.assignment,
            STICKY_PASS.assign(&group, &topology).unwrap()
        );
        assert_eq!(out.active_cross_rack, (0, 0));
    }
}

/// On a skewed layout, active (and standby) cross-rack partitions strictly drop while every
/// member keeps sticky's counts, so active balance stays within one.
#[test]
fn skewed_racks_cut_cross_rack_traffic() {
    let (group, topology) = skewed();
    let sticky = STICKY_PASS.assign(&group, &topology).unwrap();
    let out = run(&RackAwareAssignor::default(), &group, &topology);
    let (before, after) = (
        cost(&group, &topology, &sticky),
        cost(&group, &topology, &out.assignment),
    );
    assert_eq!(out.active_cross_rack, (before.0, after.0));
    assert!(after.0 < before.0, "actives {before:?} -> {after:?}");
    // Half the tasks want r0, which has a third of the room: per kind, the excess must cross.
    let excess = |stateful: bool, tasks: usize| {
        let counts = actives_of(&sticky, &topology, stateful);
        let room: usize = (0..12)
            .filter(|i| (i / 2) % 3 == 0)
            .map(|i| counts[i])
            .sum();
        tasks / 2 - room
    };
    assert_eq!(after.0 as usize, excess(true, 32) + excess(false, 16));
    assert!(after.1 <= out.standby_cross_rack.0);
    assert!(spread(&actives(&out.assignment)) <= 1);
}

/// `balance_subtopology` keeps every subtopology's per-member skew at most one and still cuts
/// traffic.
#[test]
fn balance_subtopology_keeps_skew_within_one() {
    let (group, topology) = skewed();
    for members_count in [5, 12, 13] {
        let mut group = group.clone();
        group.members = members(members_count, 1, |i| format!("r{}", i % 3));
        let out = run(&assignor(Strategy::BalanceSubtopology), &group, &topology);
        let skews = subtopology_skews(&out.assignment, &topology);
        assert!(skews.iter().all(|&s| s <= 1), "{members_count}: {skews:?}");
        assert!(
            out.active_cross_rack.1 < out.active_cross_rack.0,
            "{members_count}: {:?}",
            out.active_cross_rack
        );
    }
}

/// Missing rack information (a member without a rack, a partition without replica racks, a
/// subtopology without source topics) or strategy `none` leaves sticky's assignment alone
/// and says why.
#[test]
fn missing_rack_information_falls_back() {
    let (group, topology) = skewed();
    let sticky = STICKY_PASS.assign(&group, &topology).unwrap();
    let a = RackAwareAssignor::default();

    let mut no_rack = group.clone();
    no_rack.members[3].rack_id = None;
    let mut no_replicas = topology.clone();
    no_replicas.subtopologies[1].source_topics[0].partition_racks[5].clear();
    let mut no_topics = topology.clone();
    no_topics.subtopologies[2].source_topics.clear();
    let cases = [
        (
            &a,
            &no_rack,
            &topology,
            Decision::MemberWithoutRack("m003".into()),
        ),
        (
            &a,
            &group,
            &no_replicas,
            Decision::PartitionWithoutRacks("t1-0-5".into()),
        ),
        (
            &a,
            &group,
            &no_topics,
            Decision::TaskWithoutPartitions("2_0".into()),
        ),
        (
            &assignor(Strategy::None),
            &group,
            &topology,
            Decision::Disabled,
        ),
    ];
    for (assignor, group, topology, expected) in cases {
        let out = assignor.assign_with_outcome(group, topology).unwrap();
        assert_eq!(out.decision, expected);
        assert_eq!(out.assignment, STICKY_PASS.assign(group, topology).unwrap());
    }
    assert_ne!(
        a.assign(&group, &topology).unwrap(),
        sticky,
        "the full input is optimised"
    );
}

/// The model cost of the actives `owner` (per task in topology order, its member) under
/// `a`'s costs: traffic per cross-rack partition plus non-overlap per task off its sticky
/// owner.
fn model_cost(
    a: &RackAwareAssignor,
    group: &GroupSpec,
    topology: &Topology,
    sticky: &[usize],
    owner: &[usize],
) -> u64 {
    topology
        .tasks()
        .enumerate()
        .map(|(i, t)| {
            let rack = group.members[owner[i]].rack_id.as_deref().unwrap();
            let s = &topology.subtopologies[t.subtopology as usize];
            let missing = s
                .source_topics
                .iter()
                .filter_map(|topic| topic.partition_racks.get(t.partition as usize))
                .filter(|replicas| !replicas.iter().any(|&r| topology.racks[r as usize] == rack))
                .count() as u64;
            u64::from(a.traffic_cost) * missing
                + u64::from(a.non_overlap_cost) * u64::from(owner[i] != sticky[i])
        })
        .sum()
}

/// Per task (in topology order), the member holding it as active.
fn owners(topology: &Topology, a: &GroupAssignment) -> Vec<usize> {
    topology
        .tasks()
        .map(|t| {
            a.members
                .iter()
                .position(|m| m.active_tasks.contains(&t))
                .unwrap()
        })
        .collect()
}

/// The cheapest model cost over every way to give the tasks after `owner` members, with
/// `left[kind][m]` more tasks of that kind (1 stateful, 0 stateless) for member `m`.
fn brute(
    a: &RackAwareAssignor,
    (group, topology): (&GroupSpec, &Topology),
    sticky: &[usize],
    owner: &mut Vec<usize>,
    left: &mut [Vec<usize>; 2],
) -> u64 {
    let Some(task) = topology.tasks().nth(owner.len()) else {
        return model_cost(a, group, topology, sticky, owner);
    };
    let kind = usize::from(topology.subtopology(task).unwrap().is_stateful);
    let mut best = u64::MAX;
    for m in 0..group.members.len() {
        if left[kind][m] > 0 {
            left[kind][m] -= 1;
            owner.push(m);
            best = best.min(brute(a, (group, topology), sticky, owner, left));
            owner.pop();
            left[kind][m] += 1;
        }
    }
    best
}

/// On 300 random small groups (≤ 8 tasks, stateful and stateless mixed, ≤ 4 members, 2–3
/// racks, random replica racks, random traffic and non-overlap costs, zero included), the
/// result costs exactly the minimum over every assignment giving each member sticky's
/// stateful and stateless counts.
#[test]
fn optimal_against_brute_force() {
    let mut rng = Rng(7);
    for _ in 0..300 {
        let racks = 2 + rng.below(2);
        let mut budget = 8;
        let subs: Vec<(u32, bool)> = (0..1 + rng.below(3))
            .map(|_| {
                let n = (1 + rng.below(4)).min(budget);
                budget -= n;
                (n as u32, rng.chance(50))
            })
            .filter(|&(n, _)| n > 0)
            .collect();
        let topics = 1 + rng.below(2);
        let topology = topology(&subs, topics, racks, |_, _, _| {
            let mut r: Vec<u32> = (0..racks as u32).filter(|_| rng.chance(40)).collect();
            if r.is_empty() {
                r.push(rng.below(racks) as u32);
            }
            r
        });
        let n = 1 + rng.below(4);
        let group = {
            let mut g = group(members(n, 1, |_| String::new()), 0);
            for m in &mut g.members {
                m.rack_id = Some(format!("r{}", rng.below(racks)));
            }
            for t in topology.tasks() {
                if rng.chance(60) {
                    g.members[rng.below(n)].active_tasks.insert(t);
                }
            }
            g
        };
        let a = RackAwareAssignor {
            traffic_cost: rng.below(21) as u32,
            non_overlap_cost: rng.below(6) as u32,
            ..RackAwareAssignor::default()
        };
        let sticky = STICKY_PASS.assign(&group, &topology).unwrap();
        let out = run(&a, &group, &topology);
        let s = owners(&topology, &sticky);
        let mut left = [
            actives_of(&sticky, &topology, false),
            actives_of(&sticky, &topology, true),
        ];
        let best = brute(&a, (&group, &topology), &s, &mut Vec::new(), &mut left);
        let got = model_cost(
            &a,
            &group,
            &topology,
            &s,
            &owners(&topology, &out.assignment),
        );
        assert_eq!(got, best, "{a:?} {group:?} {topology:?}");
    }
}
