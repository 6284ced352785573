//! The SDK harness's checks on random groups given racks: the promises hold on every input
//! and at every step of membership churn. (The sandboxed component, against the same checks
//! and compared with these native runs, is tested in the workspace's `tests/all/rack_aware.rs`,
//! which can build the component.)

mod common;

use assignor_sdk::TaskAssignor;
use assignor_sdk::capture::Capture;
use assignor_sdk::harness::strategy::{self, GroupBounds};
use assignor_sdk::harness::{self, Event, Report, checks};
use assignor_sdk::{GroupSpec, Topology};
use common::Rng;
use proptest::prelude::*;
use rack_aware_assignor::{Decision, RackAwareAssignor, Strategy as RackStrategy};

/// The rack of a process: `r<k>` for `k` the sum of its id's bytes mod `racks`, so that
/// members joining later on a known process land in its rack, and the harness's processes
/// `p000`, `p001`, … go to consecutive racks.
fn rack_of(process: &str, racks: u32) -> String {
    let sum: u32 = process.bytes().map(u32::from).sum();
    format!("r{}", sum % racks)
}

/// The harness's `zone` tag of a process `p<k>`: `z<k mod 3>`, as its groups give members.
fn zone_of(process: &str) -> String {
    let k: u32 = process
        .trim_start_matches('p')
        .parse()
        .expect("harness process ids");
    format!("z{}", k % 3)
}

/// `group` and `topology` (from the harness's strategy, which has no racks) with `racks`
/// racks: every member in its process's rack, every subtopology reading one or two source
/// topics whose partitions have replicas in a random non-empty set of racks (each rack with
/// probability 40%, `r0` with 60%, so layouts are skewed, some partitions replicated
/// everywhere).
fn with_racks(
    (mut group, mut topology): (GroupSpec, Topology),
    racks: u32,
    seed: u64,
) -> (GroupSpec, Topology) {
    let mut rng = Rng(seed);
    for m in &mut group.members {
        m.rack_id = Some(rack_of(&m.process_id, racks));
    }
    topology.racks = (0..racks).map(|r| format!("r{r}")).collect();
    for s in &mut topology.subtopologies {
        let topics = 1 + rng.below(2);
        s.source_topics = (0..topics)
            .map(|k| assignor_sdk::SourceTopic {
                name: format!("{}-{k}", s.id),
                partition_racks: (0..s.max_num_input_partitions)
                    .map(|_| {
                        let mut r: Vec<u32> = (0..racks)
                            .filter(|&r| rng.chance(if r == 0 { 60 } else { 40 }))
                            .collect();
                        if r.is_empty() {
                            r.push(rng.below(racks as usize) as u32);
                        }
                        r
                    })
                    .collect(),
            })
            .collect();
    }
    (group, topology)
}

/// Random harness groups (stale and conflicting current assignments, tags in some) given one
/// to four racks, and a strategy.
fn racked_groups() -> impl Strategy<Value = (GroupSpec, Topology, RackAwareAssignor)> {
    let bounds = GroupBounds {
        members: (1, 30),
        partitions: (1, 24),
        ..GroupBounds::default()
    };
    (
        strategy::groups(bounds),
        1u32..=4,
        any::<u64>(),
        prop_oneof![
            Just(RackStrategy::MinTraffic),
            Just(RackStrategy::BalanceSubtopology)
        ],
    )
        .prop_map(|(g, racks, seed, strategy)| {
            let (group, topology) = with_racks(g, racks, seed);
            let assignor = RackAwareAssignor {
                strategy,
                ..RackAwareAssignor::default()
            };
            (group, topology, assignor)
        })
}

/// What `rack-aware` promises on every input: valid, actives within one per member, standbys
/// in full on other processes, as many tag values per task as sticky's placement reaches
/// (swaps only exchange members with identical tags), and the same output when assigned
/// again. Not minimum movement (moving actives next to their data is the point), and active
/// plus standby balance only where sticky promises it (see `common::run`).
fn promised(assignor: &RackAwareAssignor, group: &GroupSpec, topology: &Topology) -> Report {
    let run = harness::native(assignor);
    let a = run(group, topology).expect("rack-aware never fails on a valid group");
    Report::default()
        .with(checks::valid(group, topology, &a))
        .with(checks::active_balance(group, &a, 1))
        .with(checks::standby_placement(group, topology, &a))
        .with(checks::tag_diversity(group, topology, &a))
        .with(checks::fixed_point(&run, group, topology, &a))
}

/// A group on which standby swaps and sticky's re-levelling used to alternate without end:
/// stopped at the round limit, the output was no fixed point (3 of 18 members changed when
/// it came back). Found by `promises_hold_on_random_racked_groups`, saved as a capture.
#[test]
fn standby_rounds_that_would_cycle_end_on_a_fixed_point() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/captures/standby-rounds-without-end.capture"
    );
    let capture = Capture::read(path).expect("the capture is readable");
    let mut assignor = RackAwareAssignor::default();
    assignor
        .configure(&capture.config)
        .expect("the captured configuration is valid");
    let report = promised(&assignor, &capture.group, &capture.topology);
    assert!(report.passed(), "{report}");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// On random groups with racks every promise holds, and the optimisation applies.
    #[test]
    fn promises_hold_on_random_racked_groups((group, topology, assignor) in racked_groups()) {
        let report = promised(&assignor, &group, &topology);
        prop_assert!(report.passed(), "{report}");
        let out = assignor.assign_with_outcome(&group, &topology).expect("assigns");
        prop_assert_eq!(out.decision, Decision::Optimised);
    }

    /// Under random joins and leaves (each joining member in its process's rack and zone),
    /// every output fed back, every promise holds at every step.
    #[test]
    fn promises_hold_under_churn(
        (group, topology, assignor) in racked_groups(),
        events in strategy::churn(10),
    ) {
        let racks = topology.racks.len() as u32;
        let tagged = !group.configs.rack_aware_assignment_tags.is_empty();
        let events = events.into_iter().map(|e| match e {
            Event::Join(mut m) => {
                m.rack_id = Some(rack_of(&m.process_id, racks));
                if tagged {
                    m.client_tags.insert("zone".into(), zone_of(&m.process_id));
                }
                Event::Join(m)
            }
            leave => leave,
        });
        let run = harness::native(&assignor);
        let outcome = harness::converge(&run, &group, &topology, events, |g, t, _| {
            promised(&assignor, g, t)
        });
        prop_assert!(outcome.is_ok(), "{:?}", outcome.err());
    }
}
