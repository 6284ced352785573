//! Convergence in the spirit of Kafka Streams' `TaskAssignorConvergenceTest`, driven by the
//! SDK harness: random groups, random sequences of members joining and leaving, each output
//! fed back as the current assignment.

use assignor_sdk::harness::{self, Report, checks, strategy};
use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use proptest::prelude::*;
use sticky_assignor::StickyAssignor;

/// What holds after every event: valid, actives within one per member, standbys in full on
/// other processes, and a fixed point.
fn promised(
    run: &harness::Run<'_>,
    group: &GroupSpec,
    topology: &Topology,
    a: &GroupAssignment,
) -> Report {
    Report::default()
        .with(checks::valid(group, topology, a))
        .with(checks::active_balance(group, a, 1))
        .with(checks::standby_placement(group, topology, a))
        .with(checks::fixed_point(run, group, topology, a))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// After every join or leave the assignment is valid, balanced in actives, has its
    /// standbys and is a fixed point.
    #[test]
    fn every_event_leaves_a_valid_fixed_point(
        (group, topology) in strategy::groups(strategy::GroupBounds {
            members: (1, 20),
            ..Default::default()
        }),
        events in strategy::churn(12),
    ) {
        let sticky = StickyAssignor::new();
        let run = harness::native(&sticky);
        let outcome = harness::converge(&run, &group, &topology, events, |g, t, a| {
            promised(&run, g, t, a)
        });
        prop_assert!(outcome.is_ok(), "{:?}", outcome.err());
    }
}
