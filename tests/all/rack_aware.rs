//! The `rack-aware` assignor, one source run two ways: the sample component in the sandbox
//! (production limits) returns exactly the native built-in's output on random groups with
//! racks, passes the SDK harness's checks there, falls back to sticky without racks, and
//! rejects bad configuration at load.

use std::collections::BTreeMap;

use assignor_coordinator::Assignor;
use assignor_sandbox::{ErrorKind, Limits};
use assignor_sdk::harness::strategy::{self, GroupBounds};
use assignor_sdk::harness::{Report, checks};
use assignor_sdk::{GroupSpec, Topology};
use assignor_tests::bench_input::with_racks;
use assignor_tests::guests;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::common::{load, runtime, sandboxed, try_load};

/// Kafka-test sized harness groups (stale and conflicting current assignments, tags in some)
/// given one to four racks by [`with_racks`].
fn racked_groups() -> impl Strategy<Value = (GroupSpec, Topology)> {
    let bounds = GroupBounds {
        members: (1, 30),
        processes: (1, 10),
        partitions: (1, 24),
        ..GroupBounds::default()
    };
    (strategy::groups(bounds), 1u32..=4, any::<u64>()).prop_map(
        |((mut group, mut topology), racks, seed)| {
            with_racks(&mut group, &mut topology, racks, seed);
            (group, topology)
        },
    )
}

/// For each strategy (and non-default costs), on random groups with racks the sandboxed
/// component returns the native built-in's assignment, and that assignment is valid, balanced
/// in actives, places standbys in full with tag diversity, and is a fixed point in the
/// sandbox.
#[test]
fn sandboxed_equals_native_and_passes_the_checks() {
    let rt = runtime(Limits::default());
    let configs: [&[(&str, &str)]; 3] = [
        &[],
        &[("rack.aware.assignment.strategy", "balance_subtopology")],
        &[
            ("rack.aware.assignment.traffic_cost", "3"),
            ("rack.aware.assignment.non_overlap_cost", "5"),
        ],
    ];
    for config in configs {
        let component = load(&rt, guests::RACK_AWARE, config);
        let map: BTreeMap<String, String> = config
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let native = Assignor::builtin("rack-aware", &map).expect("built-in");
        let run = sandboxed(&component);
        let mut runner = TestRunner::new(Config {
            cases: 32,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&racked_groups(), |(group, topology)| {
                let (a, usage) = component.assign(&group, &topology).expect("sandboxed");
                let (b, _) = native.assign(&group, &topology).expect("native");
                prop_assert_eq!(&a, &b, "{:?}: sandboxed and native outputs differ", config);
                prop_assert!(usage.fuel.is_some());
                let report = Report::default()
                    .with(checks::valid(&group, &topology, &a))
                    .with(checks::active_balance(&group, &a, 1))
                    .with(checks::standby_placement(&group, &topology, &a))
                    .with(checks::tag_diversity(&group, &topology, &a))
                    .with(checks::fixed_point(&run, &group, &topology, &a));
                prop_assert!(report.passed(), "{:?}:\n{}", config, report);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{config:?}: {e}"));
    }
}

/// Without rack information (the harness's groups have none) the component returns exactly
/// the `sticky` built-in's assignment with tag load slack `none`, the sticky pass rack-aware
/// runs (full tag diversity; some of the groups have tags).
#[test]
fn without_racks_the_component_is_sticky() {
    let rt = runtime(Limits::default());
    let component = load(&rt, guests::RACK_AWARE, &[]);
    let config = BTreeMap::from([(
        "group.streams.sticky.tag.load.slack".to_owned(),
        "none".to_owned(),
    )]);
    let sticky = Assignor::builtin("sticky", &config).expect("built-in");
    for case in assignor_sdk::harness::suite::random(GroupBounds::default(), 11, 16) {
        let (a, _) = component
            .assign(&case.group, &case.topology)
            .expect("sandboxed");
        let (b, _) = sticky.assign(&case.group, &case.topology).expect("native");
        assert_eq!(a, b, "{}", case.name);
    }
}

/// A bad `rack.aware.assignment.*` value fails the component's load, the message naming the
/// key, the value and what is accepted.
#[test]
fn bad_configuration_fails_at_load() {
    let rt = runtime(Limits::default());
    let cases = [
        (
            "rack.aware.assignment.strategy",
            "MIN",
            "expected one of none, min_traffic, balance_subtopology",
        ),
        (
            "rack.aware.assignment.traffic_cost",
            "-1",
            "expected an integer from 0 to 1000000",
        ),
        (
            "rack.aware.assignment.non_overlap_cost",
            "2000000",
            "expected an integer from 0 to 1000000",
        ),
    ];
    for (key, value, accepted) in cases {
        let e = try_load(&rt, guests::RACK_AWARE, &[(key, value)]).expect_err(key);
        assert_eq!(e.kind, ErrorKind::Load, "{e}");
        let message = e.to_string();
        assert!(
            message.contains(&format!("invalid value \"{value}\" for {key}: {accepted}")),
            "{message}"
        );
    }
}
