//! `assignor check` (the library behind it): the sample assignors pass, each hostile guest
//! fails naming the rule it breaks and the error kind, and the JSON report carries what the
//! README documents.

use std::sync::Arc;

use assignor_cli::check::{self, CheckOptions, CheckReport};
use assignor_coordinator::Assignor;
use assignor_sandbox::{ErrorKind, Limits};
use assignor_sdk::capture::Capture;
use assignor_sdk::harness::{self, checks};
use assignor_tests::guests;

use crate::common::{load, runtime, try_load};

fn check_component(
    path: &str,
    config: &[(&str, &str)],
    limits: Limits,
    cases: usize,
) -> CheckReport {
    let rt = runtime(limits.clone());
    let assignor = Assignor::Component(Arc::new(load(&rt, path, config)));
    let options = CheckOptions {
        cases,
        ..CheckOptions::default()
    };
    check::run(&assignor, path, &limits, options)
}

/// The three sample components pass under the default (production) limits, with usage
/// reported for every case and the 1000-member case well inside the fuel limit.
#[test]
fn samples_pass() {
    for path in [guests::BALANCED, guests::STICKY, guests::RACK_AWARE] {
        let report = check_component(path, &[], Limits::default(), 16);
        assert!(report.passed(), "{path}:\n{}", report.render(false));
        assert!(report.cases.iter().all(|c| c.usage.is_some()));
        let largest = report.cases.iter().max_by_key(|c| c.tasks).expect("cases");
        let fuel = largest.usage.and_then(|u| u.fuel).expect("sandboxed");
        assert!(fuel < Limits::default().get_fuel().expect("limited") / 2);
    }
}

/// A hostile guest: component, its configuration, the rule it breaks, the error kind.
type Hostile = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
    ErrorKind,
);

/// Each hostile guest fails the verdict on the rule it breaks (`runs` with its error kind,
/// or `valid`), and the text report says FAIL with the reason.
#[test]
fn hostile_guests_fail_with_the_right_reason() {
    // Tight limits keep the endless loop and the allocator quick to stop.
    let limits = Limits::default()
        .fuel(Some(200_000_000))
        .memory_bytes(64 << 20);
    let cases: [Hostile; 6] = [
        (guests::ENDLESS_LOOP, &[], "runs", ErrorKind::OutOfFuel),
        (guests::UNBOUNDED_ALLOC, &[], "runs", ErrorKind::MemoryLimit),
        (
            guests::DEEP_RECURSION,
            &[],
            "runs",
            ErrorKind::StackOverflow,
        ),
        (guests::PANICS, &[], "runs", ErrorKind::Trap),
        (guests::GUEST_ERROR, &[], "runs", ErrorKind::GuestError),
        (
            guests::INVALID_OUTPUT,
            &[("invalid", "missing-task")],
            "valid",
            ErrorKind::InvalidOutput,
        ),
    ];
    for (path, config, rule, kind) in cases {
        let report = check_component(path, config, limits.clone(), 2);
        assert!(!report.passed(), "{path} passed:\n{}", report.render(false));
        assert_eq!(
            report.failed_rules().first().copied(),
            Some(rule),
            "{path}:\n{}",
            report.render(false)
        );
        let first_error = report.cases.iter().find_map(|c| c.error.as_ref());
        assert_eq!(first_error.map(|e| e.kind), Some(kind), "{path}");
        let text = report.render(false);
        assert!(text.contains("verdict: FAIL"), "{text}");
        assert!(text.contains(&format!("FAIL {rule}")), "{text}");
    }
}

/// Components refused at load never reach the suite: the load error names why.
#[test]
fn unloadable_components_are_refused() {
    let rt = runtime(Limits::default());
    for (path, why) in [
        (guests::FORBIDDEN_IMPORT, "import"),
        (guests::NOT_AN_ASSIGNOR, "not an assignor"),
    ] {
        let e = try_load(&rt, path, &[]).expect_err("refused");
        assert_eq!(e.kind, ErrorKind::Load);
        assert!(e.message.contains(why), "{path}: {e}");
    }
}

/// Failed calls are captured when a directory is given, one file per failing case.
#[test]
fn failed_calls_are_captured() {
    let dir = tempfile::tempdir().expect("temp dir");
    let limits = Limits::default().fuel(Some(50_000_000));
    let rt = runtime(limits.clone());
    let assignor = Assignor::Component(Arc::new(load(&rt, guests::PANICS, &[])));
    let options = CheckOptions {
        cases: 1,
        capture_dir: Some(dir.path().to_owned()),
        ..CheckOptions::default()
    };
    let report = check::run(&assignor, "panics", &limits, options);
    let captured: Vec<_> = report
        .cases
        .iter()
        .filter_map(|c| c.capture.as_ref())
        .collect();
    assert_eq!(captured.len(), report.cases.len());
    assert!(
        captured
            .iter()
            .all(|p| p.starts_with(dir.path()) && p.is_file())
    );
}

/// The JSON report has the documented fields: assignor, limits, cases with usage and checks,
/// rules with `required`, and the verdict.
#[test]
fn json_report_is_as_documented() {
    let report = check_component(guests::STICKY, &[], Limits::default(), 2);
    let doc = report.to_json();
    assert_eq!(doc["assignor"]["name"], "sticky");
    assert_eq!(doc["assignor"]["sha256"].as_str().map(str::len), Some(64));
    assert_eq!(doc["limits"]["fuel"], 1_000_000_000u64);
    assert_eq!(doc["verdict"], "pass");
    let cases = doc["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), report.cases.len());
    assert!(cases[0]["usage"]["fuel"].as_u64().is_some_and(|f| f > 0));
    assert_eq!(cases[0]["checks"][0]["rule"], "runs");
    let rules = doc["rules"].as_array().expect("rules");
    let required: Vec<&str> = rules
        .iter()
        .filter(|r| r["required"] == true)
        .filter_map(|r| r["rule"].as_str())
        .collect();
    assert_eq!(required, check::REQUIRED);
    assert!(doc["nearLimit"].as_array().is_some());
}

/// `--require` promotes an advisory rule: a rule that fails somewhere turns the verdict.
#[test]
fn required_rules_decide_the_verdict() {
    let limits = Limits::default();
    let rt = runtime(limits.clone());
    let assignor = Assignor::Component(Arc::new(load(&rt, guests::BALANCED, &[])));
    let advisory = check::run(&assignor, "balanced", &limits, CheckOptions::default());
    let failing = advisory
        .failed_rules()
        .into_iter()
        .find(|r| check::ADVISORY.contains(r))
        .expect("balanced makes no promise about some advisory rule");
    assert!(advisory.passed());
    let options = CheckOptions {
        require: vec![failing],
        ..CheckOptions::default()
    };
    let strict = check::run(&assignor, "balanced", &limits, options);
    assert!(
        !strict.passed(),
        "requiring {failing} must fail the verdict"
    );
}

/// `caught-up-placement` tells an assignor that follows its state from one that ignores it:
/// the sticky component holds it on every case, within the lag its configuration gives too,
/// while `balanced` (which ignores offsets, as Kafka's does) breaks it on some case.
#[test]
fn caught_up_placement_tells_sticky_from_balanced() {
    let limits = Limits::default();
    let rt = runtime(limits.clone());
    let require = |lag| CheckOptions {
        require: vec!["caught-up-placement"],
        acceptable_recovery_lag: lag,
        ..CheckOptions::default()
    };
    let sticky = Assignor::Component(Arc::new(load(&rt, guests::STICKY, &[])));
    let report = check::run(&sticky, "sticky", &limits, require(10_000));
    assert!(report.passed(), "{}", report.render(false));
    let lag = "300";
    let config = [("group.streams.acceptable.recovery.lag", lag)];
    let sticky = Assignor::Component(Arc::new(load(&rt, guests::STICKY, &config)));
    let report = check::run(&sticky, "sticky", &limits, require(300));
    assert!(report.passed(), "{}", report.render(false));
    assert_eq!(report.to_json()["acceptableRecoveryLag"], 300);
    let balanced = Assignor::Component(Arc::new(load(&rt, guests::BALANCED, &[])));
    let report = check::run(&balanced, "balanced", &limits, require(10_000));
    assert!(
        report.failed_rules().contains(&"caught-up-placement") && !report.passed(),
        "{}",
        report.render(false)
    );
}

/// A capture written by a failed call loads as a test case: the group and topology of the
/// sandboxed failure run natively through the harness.
#[test]
fn a_capture_is_a_test_case() {
    let dir = tempfile::tempdir().expect("temp dir");
    let limits = Limits::default().fuel(Some(30_000));
    let rt = runtime(limits.clone());
    let assignor = Assignor::Component(Arc::new(load(&rt, guests::BALANCED, &[])));
    let options = CheckOptions {
        cases: 0,
        capture_dir: Some(dir.path().to_owned()),
        ..CheckOptions::default()
    };
    let report = check::run(&assignor, "balanced", &limits, options);
    let largest = report.cases.last().expect("cases");
    assert_eq!(
        largest.error.as_ref().map(|e| e.kind),
        Some(ErrorKind::OutOfFuel)
    );
    let capture = Capture::read(largest.capture.as_ref().expect("captured")).expect("reads");
    assert_eq!(capture.group.members.len(), 1000);

    let native = assignor_coordinator::builtin("balanced").expect("built-in");
    let run = harness::native(native.as_ref());
    let assignment = run(&capture.group, &capture.topology).expect("assigns natively");
    checks::valid(&capture.group, &capture.topology, &assignment)
        .outcome
        .expect("valid");
}
