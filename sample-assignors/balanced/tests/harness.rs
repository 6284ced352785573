//! The balanced sample through the SDK harness: the checks it promises, on random groups and
//! under churn. (Its sandboxed runs, against the same checks and compared with these native
//! ones, are in the workspace's `tests/all/harness.rs`, which can build the component.)

use assignor_sdk::harness::{self, Scenario, checks, strategy};
use assignor_sdk::{GroupSpec, Topology};
use balanced_assignor::BalancedAssignor;
use proptest::prelude::*;

/// What `balanced` promises: valid, actives within one per member, standbys placed in full on
/// other processes, and the same output when assigned again. It is not sticky and ignores
/// tags, so minimum movement and tag diversity are not among them.
fn promised(group: &GroupSpec, topology: &Topology) -> harness::Report {
    let run = harness::native(&BalancedAssignor);
    let a = run(group, topology).expect("balanced never fails");
    harness::Report::default()
        .with(checks::valid(group, topology, &a))
        .with(checks::active_balance(group, &a, 1))
        .with(checks::standby_placement(group, topology, &a))
        .with(checks::fixed_point(&run, group, topology, &a))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// On random groups (stale and conflicting current assignments included) every promise
    /// holds.
    #[test]
    fn promises_hold_on_random_groups((group, topology) in strategy::groups(Default::default())) {
        let report = promised(&group, &topology);
        prop_assert!(report.passed(), "{report}");
    }

    /// Under random joins and leaves, each output fed back, every promise holds at every step.
    #[test]
    fn promises_hold_under_churn(
        (group, topology) in strategy::groups(Default::default()),
        events in strategy::churn(12),
    ) {
        let run = harness::native(&BalancedAssignor);
        let outcome = harness::converge(&run, &group, &topology, events, |g, t, _| promised(g, t));
        prop_assert!(outcome.is_ok(), "{:?}", outcome.err());
    }
}

/// A Kafka-style scenario: 3 processes, 2 replicas: each stateful task's copies land on all
/// three processes.
#[test]
fn three_processes_two_replicas() {
    let (group, topology) = Scenario::new()
        .stateful("s0", 3)
        .standbys(2)
        .member("a", "p1", |m| m)
        .member("b", "p2", |m| m)
        .member("c", "p3", |m| m)
        .build();
    promised(&group, &topology).assert_passed();
}
