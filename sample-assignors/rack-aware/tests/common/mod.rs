//! Building rack-aware groups and checking the assignor's promises on them.

#![allow(dead_code)] // each test binary uses its own share of the helpers

use std::collections::{BTreeMap, BTreeSet};

pub use assignor_sdk::harness::counts::*;
use assignor_sdk::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, SourceTopic, Subtopology, TaskAssignor,
    TaskId, TaskSet, Topology,
};
use rack_aware_assignor::{Outcome, RackAwareAssignor, STICKY_PASS, Strategy};

/// A small deterministic generator (splitmix64), so one seed spells out a whole group.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Subtopologies `(partitions, stateful)` named "0", "1", …, each reading topics
/// `t<i>-<k>` whose partition `p` has replicas in racks `replicas(i, k, p)` (indices into
/// `racks`, named "r0", "r1", …). `topics[i]` topics per subtopology.
pub fn topology(
    subtopologies: &[(u32, bool)],
    topics: usize,
    racks: usize,
    mut replicas: impl FnMut(usize, usize, u32) -> Vec<u32>,
) -> Topology {
    Topology {
        subtopologies: subtopologies
            .iter()
            .enumerate()
            .map(|(i, &(n, is_stateful))| Subtopology {
                id: i.to_string(),
                max_num_input_partitions: n,
                is_stateful,
                source_topics: (0..topics)
                    .map(|k| SourceTopic {
                        name: format!("t{i}-{k}"),
                        partition_racks: (0..n).map(|p| replicas(i, k, p)).collect(),
                    })
                    .collect(),
            })
            .collect(),
        racks: (0..racks).map(|r| format!("r{r}")).collect(),
    }
}

/// `n` members `m00`, `m01`, … on processes of `per_process` members, racks dealt in turn
/// (`rack(i)` names the rack of member `i`).
pub fn members(n: usize, per_process: usize, rack: impl Fn(usize) -> String) -> Vec<Member> {
    (0..n)
        .map(|i| Member {
            member_id: format!("m{i:03}"),
            process_id: format!("p{:03}", i / per_process.max(1)),
            rack_id: Some(rack(i)),
            ..Member::default()
        })
        .collect()
}

/// A group of `members` with `standbys` replicas and no tags.
pub fn group(members: Vec<Member>, standbys: u32) -> GroupSpec {
    GroupSpec {
        members,
        configs: AssignmentConfigs {
            num_standby_replicas: standbys,
            rack_aware_assignment_tags: Vec::new(),
        },
    }
}

/// The assignor with `strategy` and default costs.
pub fn assignor(strategy: Strategy) -> RackAwareAssignor {
    RackAwareAssignor {
        strategy,
        ..RackAwareAssignor::default()
    }
}

/// Assigns, failing the test unless the result is valid, keeps every standby off its
/// active's process and its other standbys' processes, gives every member exactly sticky's
/// ([`STICKY_PASS`], the sticky assignor rack-aware runs)
/// stateful and stateless active counts, and places as many standbys as sticky, within
/// sticky's bound on actives plus standbys where it makes one.
pub fn run(a: &RackAwareAssignor, group: &GroupSpec, topology: &Topology) -> Outcome {
    let out = a.assign_with_outcome(group, topology).expect("assigns");
    let sticky = STICKY_PASS.assign(group, topology).expect("sticky");
    check(group, topology, &out.assignment);
    for stateful in [true, false] {
        assert_eq!(
            actives_of(&out.assignment, topology, stateful),
            actives_of(&sticky, topology, stateful),
            "per-member counts differ from sticky's (stateful={stateful})"
        );
    }
    // Standbys are placed by sticky around the new actives: as many in all, and as level.
    let total = |a: &GroupAssignment| standbys(a).iter().sum::<usize>();
    assert_eq!(total(&out.assignment), total(&sticky));
    if evenly_placeable(group) {
        assert!(
            spread(&totals(&out.assignment)) <= 2,
            "{:?}",
            totals(&out.assignment)
        );
    }
    out
}

/// Whether sticky promises actives plus standbys within two: no tags, every process the
/// same size.
pub fn evenly_placeable(group: &GroupSpec) -> bool {
    let mut sizes: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &group.members {
        *sizes.entry(&m.process_id).or_default() += 1;
    }
    group.configs.rack_aware_assignment_tags.is_empty()
        && sizes.values().min() == sizes.values().max()
}

/// Validation plus: no process holds a task twice.
pub fn check(group: &GroupSpec, topology: &Topology, a: &GroupAssignment) {
    assignor_sdk::validate(group, topology, a).unwrap_or_else(|e| panic!("invalid: {e}"));
    let mut holders: BTreeMap<TaskId, Vec<&str>> = BTreeMap::new();
    for (m, out) in group.members.iter().zip(&a.members) {
        for &task in out.active_tasks.iter().chain(&out.standby_tasks) {
            holders.entry(task).or_default().push(&m.process_id);
        }
    }
    for (task, ps) in holders {
        let distinct: BTreeSet<&&str> = ps.iter().collect();
        assert_eq!(
            distinct.len(),
            ps.len(),
            "task {task} twice on one process: {ps:?}"
        );
    }
}

/// `group` with `a` as its current assignment (warm-ups cleared).
pub fn with_current(group: &GroupSpec, a: &GroupAssignment) -> GroupSpec {
    let mut next = group.clone();
    for (m, out) in next.members.iter_mut().zip(&a.members) {
        m.active_tasks = out.active_tasks.clone();
        m.standby_tasks = out.standby_tasks.clone();
        m.warmup_tasks = TaskSet::new();
    }
    next
}
