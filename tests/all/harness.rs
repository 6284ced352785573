//! The SDK harness against real components: the samples pass their checks in the sandbox
//! exactly as natively, and every deliberately broken guest is caught with a report naming
//! the rule it breaks.

use std::collections::BTreeMap;

use assignor_sandbox::Limits;
use assignor_sdk::harness::{self, Report, Run, checks, strategy};
use assignor_sdk::{GroupAssignment, GroupSpec, TaskAssignor, Topology};
use assignor_tests::guests;
use proptest::test_runner::{Config, TestRunner};

use crate::common::{example, load, runtime, sandboxed};

/// `sticky`'s promises that hold on every input: valid, actives within one, standbys in
/// full on other processes, a fixed point, and minimum movement. Its active+standby balance
/// depends on process sizes and tags (its crate doc says when it is out of reach; its own
/// tests check it where it is promised). It balances stateful and stateless actives
/// separately, which can force moves the harness's single-count minimum does not count, so
/// minimum movement is checked where the two coincide: topologies of one kind.
fn sticky_checks(run: &Run<'_>, g: &GroupSpec, t: &Topology, a: &GroupAssignment) -> Report {
    let report = Report::default()
        .with(checks::valid(g, t, a))
        .with(checks::active_balance(g, a, 1))
        .with(checks::fixed_point(run, g, t, a))
        .with(checks::standby_placement(g, t, a));
    let one_kind = t
        .subtopologies
        .windows(2)
        .all(|w| w[0].is_stateful == w[1].is_stateful);
    if one_kind {
        report.with(checks::minimum_movement(g, t, a))
    } else {
        report
    }
}

/// `balanced`'s promises: valid, actives within one, standbys in full, a fixed point.
fn balanced_checks(run: &Run<'_>, g: &GroupSpec, t: &Topology, a: &GroupAssignment) -> Report {
    Report::default()
        .with(checks::valid(g, t, a))
        .with(checks::active_balance(g, a, 1))
        .with(checks::standby_placement(g, t, a))
        .with(checks::fixed_point(run, g, t, a))
}

type Promises = fn(&Run<'_>, &GroupSpec, &Topology, &GroupAssignment) -> Report;

/// Each sample, sandboxed, passes its promised checks on random groups, and its output equals
/// the native run's.
#[test]
fn samples_pass_in_the_sandbox_as_natively() {
    let rt = runtime(Limits::default());
    let samples: [(&str, &str, Promises); 2] = [
        (guests::STICKY, "sticky", sticky_checks),
        (guests::BALANCED, "balanced", balanced_checks),
    ];
    for (path, name, promises) in samples {
        let component = load(&rt, path, &[]);
        let native_assignor: Box<dyn TaskAssignor> =
            assignor_coordinator::builtin(name).expect("a built-in");
        let native = harness::native(native_assignor.as_ref());
        let sandbox = sandboxed(&component);
        let bounds = strategy::GroupBounds {
            members: (1, 20),
            ..Default::default()
        };
        let mut runner = TestRunner::new(Config {
            cases: 24,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy::groups(bounds), |(group, topology)| {
                let a = sandbox(&group, &topology).expect("the sample assigns");
                let report = promises(&sandbox, &group, &topology, &a);
                assert!(report.passed(), "{name} in the sandbox:\n{report}");
                let b = native(&group, &topology).expect("the sample assigns natively");
                assert_eq!(a, b, "{name}: sandboxed and native outputs differ");
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// Every invalid-output mode is caught by the harness with the broken rule named: either the
/// `valid` check fails on the returned assignment, or the run fails at the boundary (where
/// the runtime cannot even hold the output) with the rule in the message.
#[test]
fn broken_guests_are_caught_naming_the_rule() {
    let rt = runtime(Limits::default());
    let (group, topology) = example();
    let modes = [
        ("duplicate-active", "duplicate active task"),
        ("unknown-member", "unknown member"),
        ("partition-out-of-range", "partition out of range"),
        ("unknown-subtopology", "unknown subtopology"),
        ("active-and-standby", "task both active and standby"),
        ("standby-stateless", "standby for a stateless subtopology"),
        ("missing-task", "missing task"),
    ];
    for (mode, rule) in modes {
        let component = load(&rt, guests::INVALID_OUTPUT, &[("invalid", mode)]);
        let run = sandboxed(&component);
        let why = match run(&group, &topology) {
            Ok(a) => {
                let report = checks::all(&run, &group, &topology, &a);
                let failed = report.check("valid").expect("ran");
                assert!(!failed.passed(), "{mode}: not caught:\n{report}");
                failed.to_string()
            }
            Err(e) => e,
        };
        assert!(
            why.contains(rule),
            "{mode}: the report should name `{rule}`: {why}"
        );
    }
}

/// The quality checks have teeth on a valid but careless assignment: everything on one
/// member is reported as unbalanced, as moving more than needed, and as misplacing standbys.
#[test]
fn quality_checks_name_what_is_wrong() {
    let (group, topology) = example();
    let mut lazy = GroupAssignment::empty_for(&group);
    lazy.members[0].active_tasks = topology.tasks().collect();
    let unchanged = move |_: &GroupSpec, _: &Topology| Ok(lazy.clone());
    let a = unchanged(&group, &topology).expect("ok");
    let report = checks::all(&unchanged, &group, &topology, &a);
    let failed: BTreeMap<&str, String> =
        report.failures().map(|c| (c.rule, c.to_string())).collect();
    assert!(
        report.check("valid").is_some_and(|c| c.passed()),
        "{report}"
    );
    assert!(
        failed["active-balance"].contains("has 6 active tasks")
            && failed.contains_key("minimum-movement")
            && failed["standby-placement"].contains("standby(s), expected 1"),
        "{report}"
    );
}

/// Every built-in, run natively in the service's process, takes the largest standby count a
/// group's config can set (u32::MAX) and places one standby per other process, allocating
/// nothing by the count: `balanced` once sized a vector by it, and natively that aborted the
/// process (a 32 GiB allocation), where the sandbox only trapped.
#[test]
fn builtins_take_the_largest_standby_count() {
    let (mut group, topology) = example();
    group.configs.num_standby_replicas = u32::MAX;
    for &name in assignor_coordinator::BUILTIN_NAMES {
        let mut assignor = assignor_coordinator::builtin(name).expect("a built-in");
        assignor
            .configure(&BTreeMap::new())
            .expect("the built-ins configure without keys");
        let assignment = assignor.assign(&group, &topology).expect("an assignment");
        let report = Report::default()
            .with(checks::valid(&group, &topology, &assignment))
            .with(checks::standby_placement(&group, &topology, &assignment));
        let failures: Vec<_> = report.failures().collect();
        assert!(failures.is_empty(), "{name}: {failures:?}");
    }
}
