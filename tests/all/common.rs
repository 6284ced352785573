//! Shared fixtures: runtimes, loading, the example group, the `assignor` binary, and running
//! a test in a child process of its own to measure the host's peak memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use assignor_sandbox::{ComponentAssignor, Limits, Runtime, TaskAssignorError};
use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use assignor_tests::{guests, watch};
use serde_json::Value;

/// The JSON contract's example group (two subtopologies, one stateless, one standby).
pub fn example() -> (GroupSpec, Topology) {
    assignor_coordinator::json::parse_input(include_str!("../../runtime/demo/group.json"))
        .expect("the example group parses")
}

pub fn runtime(limits: Limits) -> Runtime {
    Runtime::new(limits).expect("engine configuration is valid")
}

pub fn try_load(
    runtime: &Runtime,
    path: &str,
    config: &[(&str, &str)],
) -> Result<ComponentAssignor, TaskAssignorError> {
    let config: BTreeMap<String, String> = config
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    runtime.load_file(path, &config)
}

pub fn load(runtime: &Runtime, path: &str, config: &[(&str, &str)]) -> ComponentAssignor {
    try_load(runtime, path, config).unwrap_or_else(|e| panic!("loading {path}: {e}"))
}

/// A good assignor on the same runtime still produces a valid assignment: the host survived.
pub fn next_call_succeeds(runtime: &Runtime) {
    let good = load(runtime, guests::BALANCED, &[]);
    let (group, topology) = example();
    let (assignment, usage) = good
        .assign(&group, &topology)
        .expect("a good assignor works right after a hostile one");
    assert_eq!(assignment.members.len(), group.members.len());
    assert!(usage.fuel.is_some_and(|f| f > 0));
}

/// A component as a harness run: the real sandbox, its output not yet validated so that the
/// harness's own `valid` check sees what the guest returned.
pub fn sandboxed(
    component: &ComponentAssignor,
) -> impl Fn(&GroupSpec, &Topology) -> Result<GroupAssignment, String> + '_ {
    move |group, topology| {
        component
            .assign_unvalidated(group, topology)
            .map(|(a, _)| a)
            .map_err(|e| e.to_string())
    }
}

/// Peak resident memory a host process may reach while it handles one hostile guest or input
/// (issue 14: "host peak RSS under 300 MB"), whether the process is the `assignor` command or
/// a test's own child: about ten times what either needs for the example group.
pub const MAX_HOST_RSS_BYTES: u64 = 300_000_000;

/// How long a child process may run before it is killed: far past every bound the tests
/// assert, so it only ends a child that hangs (and the test then fails on that).
pub const KILL_AFTER: Duration = Duration::from_secs(30);

/// Set in a child started by [`isolated`] to the name of the one test it is to run.
const ISOLATED_TEST: &str = "ASSIGNOR_TESTS_ISOLATED";

/// What the child of [`isolated`] prints last: its own peak RSS, which it can read after
/// the watcher's last sample.
const PEAK_LINE: &str = "isolated test peak RSS bytes: ";

/// Runs `body`, the calling test's code, in a fresh child process of this test binary that
/// runs that one test, and asserts that it passed with a peak RSS under
/// [`MAX_HOST_RSS_BYTES`].
///
/// A child process because the tests of one binary share their process: its memory is every
/// running test's, and a host that aborts (as an allocation of a hostile size does) would
/// take every other test down with it.
pub fn isolated(body: impl FnOnce()) {
    // libtest runs each test on a thread named after it.
    let test = std::thread::current()
        .name()
        .expect("libtest names a test's thread")
        .to_owned();
    if let Some(wanted) = std::env::var_os(ISOLATED_TEST) {
        // Anything else here would start a child of its own, and so on without end.
        assert_eq!(
            wanted,
            test.as_str(),
            "the isolated child runs only its test"
        );
        body();
        println!("{PEAK_LINE}{}", watch::own_peak_rss_bytes());
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe);
    child
        .args([&test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ISOLATED_TEST, &test);
    let run = watch::run(&mut child, b"", KILL_AFTER);
    assert_eq!(
        run.code(),
        Some(0),
        "the isolated run of {test} failed: {run}"
    );
    // A filter matching nothing passes too: make sure the test ran.
    assert!(
        run.stdout.contains("1 passed"),
        "the isolated child ran no test: {run}"
    );
    let reported = run
        .stdout
        .lines()
        // libtest may have begun the line ("test name ... ") before the body printed.
        .find_map(|l| l.split_once(PEAK_LINE).map(|(_, n)| n))
        .and_then(|n| n.parse::<u64>().ok())
        .expect("the isolated child reports its peak RSS");
    let peak = run.peak_rss_bytes.max(reported);
    // Shown with the test's output (`--nocapture`), for the figures.
    eprintln!(
        "{test}: isolated run took {:?}, peak RSS {} MB",
        run.elapsed,
        peak / 1_000_000
    );
    assert!(
        peak < MAX_HOST_RSS_BYTES,
        "{test}: peak RSS {} MB, over {} MB",
        peak / 1_000_000,
        MAX_HOST_RSS_BYTES / 1_000_000
    );
}

/// The `assignor` binary: integration tests only get their own package's binaries, and this
/// one belongs to `assignor-cli`, so a nested `cargo test --workspace --no-run` in this
/// run's profile and target directory names it. Under the README's `cargo test --workspace`
/// that build is exactly the outer one, already done: nothing compiles, and nothing the outer
/// build made is replaced. Cargo holds no build lock while tests run.
pub fn assignor_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        // <target>/<profile dir>/deps/all-<hash>
        let profile_dir = exe.parent().and_then(Path::parent).expect("a profile dir");
        let target_dir = profile_dir.parent().expect("a target dir");
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev",
            Some(other) => other,
            None => panic!("unexpected test binary location {}", exe.display()),
        };
        let output = Command::new(env!("CARGO"))
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .args(["test", "--workspace", "--no-run"])
            .args([
                "--message-format=json",
                "--profile",
                profile,
                "--target-dir",
            ])
            .arg(target_dir)
            .output()
            .expect("cargo runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "building the assignor binary failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            // The binary itself, not its unit-test harness (also named `assignor`).
            .find(|m| {
                m["reason"] == "compiler-artifact"
                    && m["target"]["name"] == "assignor"
                    && m["profile"]["test"] == false
            })
            .and_then(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo reports the assignor executable")
    })
}
