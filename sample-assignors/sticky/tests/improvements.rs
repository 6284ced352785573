//! Where the sticky assignor goes beyond Kafka's: balance, movement, fixed point, spread,
//! stateful/stateless balance and rack-aware standbys, including Kafka's measured weak spots.

mod common;

use std::collections::BTreeSet;

use assignor_sdk::{GroupAssignment, GroupSpec};
use common::*;

/// Kafka's weak spot: 6 members on 3 processes, 2 subtopologies × 3 partitions, 1 standby,
/// cold — every member gets one active and one standby, and the result is a fixed point.
#[test]
fn six_members_three_processes_cold_is_balanced_and_a_fixed_point() {
    let topology = topology(&[(3, true), (3, true)]);
    let group = group(members_on(&[2, 2, 2]), 1);
    let a = assign(&group, &topology);
    assert_eq!(actives(&a), [1; 6]);
    assert_eq!(totals(&a), [2; 6]);
    assert_fixed_point(&group, &topology, &a);
}

/// Kafka's weak spot: scaling out from 100 to 110 members moves exactly the minimum (each old
/// member's excess over its new share), keeps each subtopology's skew within one (Kafka left
/// seven at 1000→1100), and settles at once.
#[test]
fn scale_out_100_to_110_moves_the_minimum() {
    let topology = topology(&[(256, true); 8]);
    let before = group(members_on(&[2; 50]), 1);
    let settled = with_current(&before, &assign(&before, &topology));
    let mut after = settled.clone();
    after.members.extend(members_on(
        &[0; 50].into_iter().chain([2; 5]).collect::<Vec<_>>(),
    ));
    let a = assign(&after, &topology);
    // 2048 tasks: 100 members held 20 or 21 (48 of them 21); 110 members take 18 or 19 (68 of
    // them 19). The 48 with 21 keep 19, 20 of those with 20 keep 19, the other 32 keep 18.
    assert_eq!(min_moves(&after, &topology), 48 * 2 + 20 + 32 * 2);
    assert_eq!(moved(&after, &a), 48 * 2 + 20 + 32 * 2);
    assert!(spread(&actives(&a)) <= 1);
    let skews = subtopology_skews(&a, &topology);
    assert!(skews.iter().all(|&s| s <= 1), "{skews:?}");
    assert_fixed_point(&after, &topology, &a);
}

/// A member leaving moves only its own tasks; the survivors keep everything they had.
#[test]
fn member_leaving_moves_only_its_tasks() {
    let topology = topology(&[(12, true), (6, false)]);
    let before = group(members_on(&[1, 1, 1, 1]), 1);
    let mut settled = with_current(&before, &assign(&before, &topology));
    let gone = settled.members.remove(3);
    let a = assign(&settled, &topology);
    assert_eq!(moved(&settled, &a), gone.active_tasks.len());
    for (m, out) in settled.members.iter().zip(&a.members) {
        assert!(m.active_tasks.iter().all(|t| out.active_tasks.contains(t)));
    }
}

/// Active counts and actives plus standbys each differ by at most one between members.
#[test]
fn actives_and_totals_within_one() {
    let topology = topology(&[(7, true), (5, false), (3, true)]);
    let group = group(members_on(&[2, 2, 2, 2]), 2);
    let a = assign(&group, &topology);
    assert!(spread(&actives(&a)) <= 1, "{:?}", actives(&a));
    assert!(spread(&totals(&a)) <= 1, "{:?}", totals(&a));
}

/// Twelve members on four processes, four stateful tasks with two standbys each, cold: the
/// twelve copies land one per member (a fill by load alone left one member two and another
/// none), and the result is a fixed point.
#[test]
fn totals_within_one_wherever_the_processes_allow_it() {
    let topology = topology(&[(4, true)]);
    let group = group(members_on(&[3, 3, 3, 3]), 2);
    let a = assign(&group, &topology);
    assert!(totals_can_be_within_one(&group, &topology, &a));
    assert_eq!(totals(&a), [1; 12]);
    assert_fixed_point(&group, &topology, &a);
}

/// Where no placement can put actives plus standbys within one, the exact condition says so:
/// three processes and two standbys put a copy of every task on every process, so the lone
/// member of the third process carries all seven tasks while two members share each of the
/// other processes' seven (within one of each other).
#[test]
fn totals_apart_only_where_no_placement_allows_within_one() {
    let topology = topology(&[(7, true)]);
    let group = group(members_on(&[2, 2, 1]), 2);
    let a = assign(&group, &topology);
    assert!(!totals_can_be_within_one(&group, &topology, &a));
    let totals = totals(&a);
    assert_eq!(totals[4], 7);
    for pair in [&totals[0..2], &totals[2..4]] {
        assert_eq!(pair.iter().sum::<usize>(), 7);
        assert!(spread(pair) <= 1, "{totals:?}");
    }
    assert_fixed_point(&group, &topology, &a);
}

/// When the per-member standby targets ask more of a process than its actives leave it (here
/// the member that held everything keeps its process's share), the members of that process
/// even out among themselves: totals stay within one and the result is a fixed point.
#[test]
fn totals_level_out_within_a_process() {
    let topology = topology(&[(3, false), (10, true), (3, false)]);
    let everything: Vec<_> = topology.tasks().collect();
    let mut members = vec![holding("a", "p0", &everything, &[])];
    members.extend([member("b", "p0"), member("c", "p1"), member("d", "p1")]);
    let group = group(members, 1);
    let a = assign(&group, &topology);
    assert!(spread(&actives(&a)) <= 1, "{:?}", actives(&a));
    assert!(spread(&totals(&a)) <= 1, "{:?}", totals(&a));
    assert_fixed_point(&group, &topology, &a);
}

/// Stateful and stateless actives are balanced separately, each within one, and the totals too.
#[test]
fn stateful_and_stateless_balanced_separately() {
    // Current: one member holds every stateful task, the other every stateless one.
    let topology = topology(&[(4, true), (4, false)]);
    let group = group(
        vec![
            holding("a", "p1", &[t(0, 0), t(0, 1), t(0, 2), t(0, 3)], &[]),
            holding("b", "p2", &[t(1, 0), t(1, 1), t(1, 2), t(1, 3)], &[]),
        ],
        0,
    );
    let a = assign(&group, &topology);
    assert_eq!(actives_of(&a, &topology, true), [2, 2]);
    assert_eq!(actives_of(&a, &topology, false), [2, 2]);
    // Odd counts of both kinds: the extras go to different members.
    let topology = common::topology(&[(3, true), (3, false)]);
    let a = assign(&common::group(members_on(&[1, 1]), 0), &topology);
    assert_eq!(actives(&a), [3, 3]);
}

/// A cold start deals every subtopology evenly (skew at most one per subtopology).
#[test]
fn cold_start_spreads_every_subtopology() {
    let topology = topology(&[(10, true), (7, true), (3, false), (13, false)]);
    let a = assign(&group(members_on(&[2, 1, 3]), 1), &topology);
    assert!(subtopology_skews(&a, &topology).iter().all(|&s| s <= 1));
}

/// Group of `zones × per_zone` single-member processes tagged with `zone` (and `rack`, one
/// per process), with `standbys` replicas and the given rack-aware tags.
fn zoned(zones: usize, per_zone: usize, standbys: u32, tags: &[&str]) -> GroupSpec {
    let mut members = members_on(&vec![1; zones * per_zone]);
    for (i, m) in members.iter_mut().enumerate() {
        m.client_tags
            .insert("zone".into(), format!("z{}", i % zones));
        m.client_tags.insert("rack".into(), format!("r{i}"));
    }
    let mut group = group(members, standbys);
    group.configs.rack_aware_assignment_tags = tags.iter().map(|t| t.to_string()).collect();
    group
}

/// Per task, the distinct values of `tag` among the members holding it.
fn coverage(group: &GroupSpec, a: &GroupAssignment, tag: &str) -> Vec<usize> {
    let topology_tasks: BTreeSet<_> = a
        .members
        .iter()
        .flat_map(|m| m.active_tasks.iter().copied())
        .collect();
    topology_tasks
        .iter()
        .map(|task| {
            group
                .members
                .iter()
                .zip(&a.members)
                .filter(|(_, out)| {
                    out.active_tasks.contains(task) || out.standby_tasks.contains(task)
                })
                .map(|(m, _)| m.client_tags[tag].as_str())
                .collect::<BTreeSet<_>>()
                .len()
        })
        .collect()
}

/// With a zone tag, a task's active and two standbys sit in three different zones.
#[test]
fn rack_aware_standbys_cover_every_zone() {
    let topology = topology(&[(12, true), (4, false)]);
    let group = zoned(3, 2, 2, &["zone"]);
    let a = assign(&group, &topology);
    let stateful = &coverage(&group, &a, "zone")[..12];
    assert!(stateful.iter().all(|&c| c == 3), "{stateful:?}");
    assert_fixed_point(&group, &topology, &a);
    // Without the tag, placement is free to put replicas in one zone.
    let untagged = zoned(3, 2, 2, &[]);
    assign(&untagged, &topology);
}

/// With more replicas than zones, every zone is covered and the rest still get standbys.
#[test]
fn rack_aware_falls_back_when_zones_run_out() {
    let topology = topology(&[(8, true)]);
    let group = zoned(2, 3, 2, &["zone", "rack"]);
    let a = assign(&group, &topology);
    assert!(coverage(&group, &a, "zone").iter().all(|&c| c == 2));
    assert!(coverage(&group, &a, "rack").iter().all(|&c| c == 3));
    assert_fixed_point(&group, &topology, &a);
}

/// Conflicting and stale current tasks are resolved: one owner per task, unknown tasks dropped.
#[test]
fn conflicting_and_stale_current_tasks_are_ignored() {
    let topology = topology(&[(2, true)]);
    let group = group(
        vec![
            holding("a", "p1", &[t(0, 0), t(0, 1), t(0, 7), t(5, 0)], &[t(3, 3)]),
            holding("b", "p2", &[t(0, 1)], &[t(0, 9)]),
        ],
        1,
    );
    let a = assign(&group, &topology);
    assert_eq!(actives(&a), [1, 1]);
    assert_fixed_point(&group, &topology, &a);
}
