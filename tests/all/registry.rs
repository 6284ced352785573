//! The registry built from `group.streams.assignors`: fail-fast on every bad entry, each error
//! naming the entry and the reason (KIP-1357 "Assignor loading and startup validation").

use std::path::Path;

use assignor_coordinator::config::BrokerConfig;
use assignor_coordinator::{KAFKA_STICKY_CLASS, Registry, RegistryError};
use assignor_sandbox::Limits;
use assignor_tests::guests;

use crate::common::runtime;

fn build(entries: &[&str], extra: &[&str]) -> Result<Registry, RegistryError> {
    let mut overrides = vec![format!("group.streams.assignors={}", entries.join(","))];
    overrides.extend(extra.iter().map(|s| s.to_string()));
    let config = BrokerConfig::load(None, &overrides).expect("valid config");
    Registry::build(&runtime(Limits::default()), &config)
}

fn error(entries: &[&str]) -> String {
    build(entries, &[]).expect_err("startup fails").to_string()
}

/// With `group.streams.assignors` unset the registry is Kafka's default, `[sticky]`.
#[test]
fn default_is_sticky() {
    let config = BrokerConfig::load(None, &[]).expect("valid");
    let registry = Registry::build(&runtime(Limits::default()), &config).expect("builds");
    assert_eq!(registry.names().collect::<Vec<_>>(), ["sticky"]);
    assert_eq!(registry.default_assignor().name(), "sticky");
}

/// Built-ins and components register under their `name()`, in order; the first is the
/// default, and Kafka's class name of the sticky assignor is accepted for `sticky`.
#[test]
fn entries_register_in_order() {
    let registry = build(&[guests::PROBE_ECHO, KAFKA_STICKY_CLASS, "balanced"], &[]).expect("ok");
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        ["probe-echo", "sticky", "balanced"]
    );
    assert_eq!(registry.default_assignor().name(), "probe-echo");
    assert!(registry.get("sticky").is_some() && registry.get("nope").is_none());
}

/// A component file that cannot be read stops startup, naming the entry and the OS error.
#[test]
fn unreadable_file() {
    let e = error(&["sticky", "/nonexistent/gone.wasm"]);
    assert!(
        e.starts_with("group.streams.assignors entry `/nonexistent/gone.wasm`: ")
            && e.contains("cannot read the component file"),
        "{e}"
    );
}

/// A file that is not a component stops startup with a `load` error.
#[test]
fn not_a_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("garbage.wasm");
    std::fs::write(&path, b"definitely not wasm").expect("write");
    let e = error(&[path.to_str().expect("utf-8")]);
    assert!(e.contains("(load)") && e.contains("garbage.wasm"), "{e}");
}

/// A component of another world stops startup, saying what it lacks.
#[test]
fn wrong_world() {
    let e = error(&[guests::NOT_AN_ASSIGNOR]);
    assert!(
        e.contains("(load)") && e.contains("kafka:streams-assignor/task-assignor@0.1.0"),
        "{e}"
    );
}

/// The same entry twice stops startup, built-in or file alike.
#[test]
fn duplicate_entry() {
    assert_eq!(
        error(&["sticky", "balanced", "sticky"]),
        "group.streams.assignors entry `sticky` is listed twice; remove the duplicate"
    );
    let e = error(&[guests::PROBE_ECHO, guests::PROBE_ECHO]);
    assert!(e.ends_with("is listed twice; remove the duplicate"), "{e}");
}

/// A component whose `name()` is a built-in's stops startup, even when that built-in is
/// not listed.
#[test]
fn name_collides_with_builtin() {
    let e = error(&["balanced", guests::STICKY]);
    assert!(
        e.ends_with("its name `sticky` collides with the built-in assignor `sticky`; every assignor needs a distinct name"),
        "{e}"
    );
}

/// Two components reporting the same `name()` stop startup, naming the earlier entry.
#[test]
fn name_collides_between_components() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("other.wasm");
    std::fs::copy(guests::PROBE_ECHO, &copy).expect("copy");
    let copy = copy.to_str().expect("utf-8");
    let e = error(&[guests::PROBE_ECHO, copy]);
    assert_eq!(
        e,
        format!(
            "group.streams.assignors entry `{copy}`: its name `probe-echo` collides with entry \
             `{}`; every assignor needs a distinct name",
            guests::PROBE_ECHO
        )
    );
}

/// A failing `configure` stops startup with the assignor's own message; the same component
/// loads once the broker config has what it needs (it receives the broker's properties).
#[test]
fn failing_configure() {
    let e = error(&[guests::INVALID_OUTPUT]);
    assert!(
        e.contains("configure rejected") || e.contains("missing configuration key `invalid`"),
        "{e}"
    );
    build(&[guests::INVALID_OUTPUT], &["invalid=duplicate-active"]).expect("configured");
}

/// An entry that is neither a built-in nor a `.wasm` file lists the built-ins.
#[test]
fn unknown_entry() {
    assert_eq!(
        error(&["com.example.MyAssignor"]),
        "group.streams.assignors entry `com.example.MyAssignor`: not a built-in assignor \
         (sticky, balanced, rack-aware) and not a component file (a path ending in .wasm)"
    );
}

/// Relative component paths resolve against the config file's directory.
#[test]
fn relative_paths_follow_the_config_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(guests::PROBE_ECHO, dir.path().join("probe.wasm")).expect("copy");
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "group.streams.assignors=probe.wasm\n").expect("write");
    let config = BrokerConfig::load(Some(Path::new(&file)), &[]).expect("valid");
    let registry = Registry::build(&runtime(Limits::default()), &config).expect("builds");
    assert_eq!(registry.default_assignor().name(), "probe-echo");
}
