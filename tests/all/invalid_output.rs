//! Every rule of output validation rejects a guest that breaks it, with a message naming the
//! rule.

use assignor_sandbox::{ErrorKind, Limits};
use assignor_tests::guests;

use crate::common::{example, load, runtime, try_load};

/// Loads the invalid-output guest in `mode` and returns the error message of its assignment.
fn invalid(mode: &str) -> String {
    let runtime = runtime(Limits::default());
    let assignor = load(&runtime, guests::INVALID_OUTPUT, &[("invalid", mode)]);
    let (group, topology) = example();
    let error = assignor
        .assign(&group, &topology)
        .expect_err("invalid output must be rejected");
    assert_eq!(error.kind, ErrorKind::InvalidOutput, "{error}");
    assert_eq!(error.assignor, "invalid-output");
    error.message
}

/// The same task active on two members.
#[test]
fn duplicate_active_task() {
    let m = invalid("duplicate-active");
    assert!(m.starts_with("duplicate active task"), "{m}");
}

/// An entry for a member the group does not have.
#[test]
fn unknown_member() {
    let m = invalid("unknown-member");
    assert!(m.contains("unknown member"), "{m}");
}

/// A partition at or beyond the subtopology's partition count.
#[test]
fn partition_out_of_range() {
    let m = invalid("partition-out-of-range");
    assert!(m.starts_with("partition out of range"), "{m}");
}

/// A subtopology index the topology does not have.
#[test]
fn unknown_subtopology() {
    let m = invalid("unknown-subtopology");
    assert!(m.starts_with("unknown subtopology"), "{m}");
}

/// One member holding a task both as active and as standby.
#[test]
fn active_and_standby_on_one_member() {
    let m = invalid("active-and-standby");
    assert!(m.starts_with("task both active and standby"), "{m}");
}

/// A standby for a task of a stateless subtopology.
#[test]
fn standby_for_stateless_subtopology() {
    let m = invalid("standby-stateless");
    assert!(m.starts_with("standby for a stateless subtopology"), "{m}");
}

/// A task left unassigned.
#[test]
fn missing_task() {
    let m = invalid("missing-task");
    assert!(m.starts_with("missing task"), "{m}");
}

/// A configuration the guest rejects fails the load with the guest's reason.
#[test]
fn failing_configure_fails_the_load() {
    let runtime = runtime(Limits::default());
    let error = try_load(&runtime, guests::INVALID_OUTPUT, &[("invalid", "nonsense")])
        .expect_err("configure rejects the value");
    assert_eq!(error.kind, ErrorKind::Load);
    assert!(error.message.contains("configure rejected"), "{error}");
    assert!(
        error.message.contains("duplicate-active"),
        "lists accepted values: {error}"
    );
}
