//! Building scenarios and checking the sticky assignor's promises on them.

#![allow(dead_code)] // each test binary uses its own share of the helpers

use std::collections::{BTreeMap, BTreeSet};

pub use assignor_sdk::harness::counts::*;
use assignor_sdk::harness::{self, Report, checks};
use assignor_sdk::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, Subtopology, TaskAssignor, TaskId,
    Topology,
};
use sticky_assignor::StickyAssignor;

/// Task `partition` of subtopology index `subtopology`.
pub fn t(subtopology: u32, partition: u32) -> TaskId {
    TaskId::new(subtopology, partition)
}

/// A topology of `(partitions, stateful)` subtopologies named "0", "1", …
pub fn topology(subtopologies: &[(u32, bool)]) -> Topology {
    Topology {
        subtopologies: subtopologies
            .iter()
            .enumerate()
            .map(|(i, &(n, is_stateful))| Subtopology {
                id: i.to_string(),
                max_num_input_partitions: n,
                is_stateful,
                source_topics: Vec::new(),
            })
            .collect(),
        racks: Vec::new(),
    }
}

/// A member with nothing assigned.
pub fn member(id: &str, process: &str) -> Member {
    Member {
        member_id: id.into(),
        process_id: process.into(),
        ..Member::default()
    }
}

/// A member with current actives and standbys.
pub fn holding(id: &str, process: &str, active: &[TaskId], standby: &[TaskId]) -> Member {
    Member {
        active_tasks: active.iter().copied().collect(),
        standby_tasks: standby.iter().copied().collect(),
        ..member(id, process)
    }
}

/// A group of `members` with `standbys` replicas and no rack-aware tags.
pub fn group(members: Vec<Member>, standbys: u32) -> GroupSpec {
    GroupSpec {
        members,
        configs: AssignmentConfigs {
            num_standby_replicas: standbys,
            rack_aware_assignment_tags: Vec::new(),
        },
    }
}

/// `counts[p]` members on process `p`, named `m<p>-<i>` on `p<p>`.
pub fn members_on(counts: &[usize]) -> Vec<Member> {
    counts
        .iter()
        .enumerate()
        .flat_map(|(p, &n)| (0..n).map(move |i| member(&format!("m{p}-{i}"), &format!("p{p}"))))
        .collect()
}

/// Assigns, and fails the test unless the result passes the runtime's validation and the
/// standby placement rules validation does not cover.
pub fn assign(group: &GroupSpec, topology: &Topology) -> GroupAssignment {
    let a = StickyAssignor::new()
        .assign(group, topology)
        .expect("sticky never fails");
    check(group, topology, &a);
    a
}

/// The harness's `valid` and `standby-placement` checks: the runtime's validation, no
/// process holding a task twice, and every stateful task with exactly
/// `min(numStandbyReplicas, processes - 1)` standbys.
pub fn check(group: &GroupSpec, topology: &Topology, a: &GroupAssignment) {
    Report::default()
        .with(checks::valid(group, topology, a))
        .with(checks::standby_placement(group, topology, a))
        .assert_passed();
}

/// `group` with `a` as every member's current assignment (warm-ups cleared, offsets kept).
pub fn with_current(group: &GroupSpec, a: &GroupAssignment) -> GroupSpec {
    harness::with_current(group, a)
}

/// Fails unless assigning again with `a` as the current assignment gives `a`.
pub fn assert_fixed_point(group: &GroupSpec, topology: &Topology, a: &GroupAssignment) {
    let sticky = StickyAssignor::new();
    let run = harness::native(&sticky);
    let outcome = checks::fixed_point(&run, group, topology, a).outcome;
    outcome.unwrap_or_else(|why| panic!("not a fixed point: {why}"));
}

/// Active tasks whose new owner did not hold them as active before.
pub fn moved(group: &GroupSpec, a: &GroupAssignment) -> usize {
    group
        .members
        .iter()
        .zip(&a.members)
        .map(|(m, out)| {
            out.active_tasks
                .iter()
                .filter(|t| !m.active_tasks.contains(t))
                .count()
        })
        .sum()
}

/// The fewest actives any assignment can move while keeping per-member counts of stateful
/// actives, of stateless actives and of all actives each within one. Computed by dynamic
/// programming over members choosing which get the extra task of each kind; assumes no task
/// is claimed by two members.
pub fn min_moves(group: &GroupSpec, topology: &Topology) -> usize {
    let m = group.members.len();
    let count = |stateful: bool| {
        topology
            .tasks()
            .filter(|&t| topology.subtopology(t).unwrap().is_stateful == stateful)
            .count()
    };
    let n = [count(true), count(false)];
    let held: Vec<[usize; 2]> = group
        .members
        .iter()
        .map(|mem| {
            let of = |stateful: bool| {
                mem.active_tasks
                    .iter()
                    .filter(|&&t| {
                        topology.contains(t)
                            && topology.subtopology(t).unwrap().is_stateful == stateful
                    })
                    .count()
            };
            [of(true), of(false)]
        })
        .collect();
    let q = [n[0] / m, n[1] / m];
    let r = [n[0] % m, n[1] % m];
    // best[a][b][flags]: most tasks kept with `a` stateful and `b` stateless extras handed out;
    // flags bit 0: some member got both extras, bit 1: some member got neither.
    let mut best = vec![vec![[None::<usize>; 4]; r[1] + 1]; r[0] + 1];
    best[0][0][0] = Some(0);
    for h in &held {
        let mut next = vec![vec![[None::<usize>; 4]; r[1] + 1]; r[0] + 1];
        for (a, row) in best.iter().enumerate() {
            for (b, cell) in row.iter().enumerate() {
                for (flags, &kept) in cell.iter().enumerate() {
                    let Some(kept) = kept else {
                        continue;
                    };
                    for (ea, eb) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                        let (na, nb) = (a + ea, b + eb);
                        if na > r[0] || nb > r[1] {
                            continue;
                        }
                        let f =
                            flags | usize::from(ea + eb == 2) | (usize::from(ea + eb == 0) << 1);
                        if f == 3 {
                            continue;
                        }
                        let k = kept + h[0].min(q[0] + ea) + h[1].min(q[1] + eb);
                        let slot = &mut next[na][nb][f];
                        *slot = Some(slot.map_or(k, |s| s.max(k)));
                    }
                }
            }
        }
        best = next;
    }
    let kept = best[r[0]][r[1]].iter().flatten().max().expect("feasible");
    n[0] + n[1] - kept
}

/// Whether some standby placement around `a`'s actives puts every member's actives plus
/// standbys within one of every other's (no rack-aware tags). Exact: with `S` stateful tasks,
/// `R` replicas each (`min(numStandbyReplicas, processes − 1)`) and `a_p` of them active on
/// process `p`, per-process standby counts `c_p` can be placed iff they sum to `S·R` and each
/// is at most `S − a_p` (a max-flow cut argument), and a process's standbys can go to any of
/// its members. So with `N` tasks and standbys over `M` members, `L = ⌊N/M⌋`: a member with
/// `L + 1` actives is at the high level, one with fewer takes `L − actives` standbys plus
/// one if it is among the `N mod M` at the high level; each process must fit the lowest of
/// that in `S − a_p` and together they must have room for `N mod M` at the high level.
pub fn totals_can_be_within_one(
    group: &GroupSpec,
    topology: &Topology,
    a: &GroupAssignment,
) -> bool {
    let mut process: BTreeMap<&str, (usize, usize, usize, usize)> = BTreeMap::new();
    let stateful = topology
        .tasks()
        .filter(|&t| topology.subtopology(t).unwrap().is_stateful)
        .count();
    let replicas = (group.configs.num_standby_replicas as usize).min(
        group
            .members
            .iter()
            .map(|m| m.process_id.as_str())
            .collect::<BTreeSet<_>>()
            .len()
            - 1,
    );
    let m = group.members.len();
    let n = actives(a).iter().sum::<usize>() + stateful * replicas;
    let (level, high) = (n / m, n % m);
    // Per process: (stateful actives, standbys to reach the low level, members forced high,
    // members that may go high).
    for (mem, out) in group.members.iter().zip(&a.members) {
        let entry = process.entry(&mem.process_id).or_default();
        let held = out.active_tasks.len();
        entry.0 += out
            .active_tasks
            .iter()
            .filter(|&&t| topology.subtopology(t).unwrap().is_stateful)
            .count();
        match held.cmp(&(level + 1)) {
            std::cmp::Ordering::Greater => return false,
            std::cmp::Ordering::Equal => entry.2 += 1,
            std::cmp::Ordering::Less => {
                entry.1 += level - held;
                entry.3 += 1;
            }
        }
    }
    let (mut forced, mut room) = (0, 0);
    for &(active, base, high_now, may_rise) in process.values() {
        let cap = stateful - active;
        if base > cap {
            return false;
        }
        forced += high_now;
        room += high_now + may_rise.min(cap - base);
    }
    forced <= high && high <= room
}

/// Whether member `i`'s process holds state of `task` within Kafka's default lag: its members
/// share one state directory.
pub fn caught_up(group: &GroupSpec, i: usize, task: TaskId) -> bool {
    let process = &group.members[i].process_id;
    (0..group.members.len())
        .filter(|&j| group.members[j].process_id == *process)
        .any(|j| checks::lag(group, j, task).is_some_and(|l| l <= checks::ACCEPTABLE_RECOVERY_LAG))
}

/// The harness's `caught-up-placement` within Kafka's default lag, the assignor's default.
pub fn caught_up_placement(group: &GroupSpec, topology: &Topology, a: &GroupAssignment) -> Report {
    Report::default().with(checks::caught_up_placement(
        group,
        topology,
        a,
        checks::ACCEPTABLE_RECOVERY_LAG,
    ))
}
