//! The `assignor` command honours the DESIGN §5 contract: JSON in and out, `--json`, exit
//! codes, a usage report on stderr, and input errors that point at the field.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use assignor_coordinator::json::AssignmentDoc;

const SAMPLE: &str = env!("BALANCED_ASSIGNOR_COMPONENT_WASM");
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../demo/group.json");

fn assignor(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assignor"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the assignor binary runs");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    pipe.write_all(stdin.unwrap_or_default().as_bytes())
        .expect("writing stdin");
    drop(pipe);
    child.wait_with_output().expect("the assignor binary exits")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

/// Every member of the example appears and each of its 6 tasks is active exactly once.
fn assert_complete(doc: &AssignmentDoc) {
    assert_eq!(
        doc.members.keys().collect::<Vec<_>>(),
        ["member-a1", "member-b1", "member-c1"]
    );
    let mut actives: Vec<(String, u32)> = doc
        .members
        .values()
        .flat_map(|m| {
            m.active_tasks
                .iter()
                .flat_map(|(s, ps)| ps.iter().map(move |p| (s.clone(), *p)))
        })
        .collect();
    actives.sort();
    let expected: Vec<(String, u32)> = [("0", 0), ("0", 1), ("0", 2), ("0", 3), ("1", 0), ("1", 1)]
        .iter()
        .map(|(s, p)| (s.to_string(), *p))
        .collect();
    assert_eq!(actives, expected);
}

/// A component file assigns the example group: the output JSON on stdout, the usage report
/// with limits on stderr, exit 0.
#[test]
fn component_assigns_the_example() {
    let out = assignor(&["assign", "--assignor", SAMPLE, "--input", EXAMPLE], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: AssignmentDoc = serde_json::from_slice(&out.stdout).expect("output JSON");
    assert_complete(&doc);
    let report = text(&out.stderr);
    for row in ["fuel", "memory", "wall time", "input", "output"] {
        assert!(report.contains(row), "usage report lacks {row}: {report}");
    }
    assert!(
        report.contains(" / 1000000000"),
        "fuel limit beside the figure: {report}"
    );
}

/// `--json` prints one object with the assignment and the usage, the built-in gives the same
/// assignment as the component, and `-` reads the input from stdin.
#[test]
fn json_mode_builtin_and_stdin() {
    let input = std::fs::read_to_string(EXAMPLE).expect("example");
    let out = assignor(
        &["assign", "--assignor", SAMPLE, "--input", "-", "--json"],
        Some(&input),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(v["usage"]["fuel"].as_u64().is_some_and(|f| f > 0), "{v}");
    assert!(v["usage"]["peakMemoryBytes"].as_u64().is_some(), "{v}");
    assert_eq!(v["usage"]["limits"]["fuel"], 1_000_000_000u64);
    let doc: AssignmentDoc = serde_json::from_value(v["assignment"].clone()).expect("doc");
    assert_complete(&doc);

    let native = assignor(
        &["assign", "--assignor", "balanced", "--input", EXAMPLE],
        None,
    );
    assert!(native.status.success(), "{}", text(&native.stderr));
    let native: AssignmentDoc = serde_json::from_slice(&native.stdout).expect("output JSON");
    assert_eq!(native, doc, "one algorithm, two ways to run");
}

/// A failed assignment exits 1 and, with `--json`, prints the error object.
#[test]
fn failure_prints_the_error_object() {
    let out = assignor(
        &[
            "assign",
            "--assignor",
            SAMPLE,
            "--input",
            EXAMPLE,
            "--json",
            "--fuel",
            "1000",
            "--no-capture",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("error object");
    assert_eq!(v["error"]["kind"], "out-of-fuel");
    assert_eq!(v["error"]["assignor"], "balanced");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("fuel"))
    );
}

/// A file that is not a component fails the assignment with kind `load`.
#[test]
fn bad_component_file_is_a_load_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.wasm");
    std::fs::write(&path, b"not wasm").expect("write");
    let path = path.to_str().expect("utf-8 path");
    let out = assignor(
        &[
            "assign",
            "--assignor",
            path,
            "--input",
            EXAMPLE,
            "--json",
            "--no-capture",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("error object");
    assert_eq!(v["error"]["kind"], "load");
}

/// The compiled component is cached between runs: the first run writes one entry, the next
/// loads it (marking it used) instead of compiling; a damaged entry is compiled over;
/// `--no-cache` and a directory others may write to leave nothing behind.
#[test]
fn compiled_components_are_cached_between_runs() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache");
    let cache_arg = cache.to_str().expect("utf-8 path");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "assign",
            "--assignor",
            SAMPLE,
            "--input",
            EXAMPLE,
            "--no-capture",
        ];
        args.extend_from_slice(extra);
        let out = assignor(&args, None);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        out
    };
    let entries = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    run(&["--cache-dir", cache_arg]);
    let first = entries(&cache);
    assert_eq!(first.len(), 1, "{first:?}");
    let entry = &first[0];
    assert!(entry.extension().is_some_and(|e| e == "cwasm"), "{entry:?}");
    let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let set_mtime = |t| {
        std::fs::File::options()
            .write(true)
            .open(entry)
            .and_then(|f| f.set_modified(t))
            .expect("set mtime")
    };
    set_mtime(old);
    run(&["--cache-dir", cache_arg]);
    let modified = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .expect("mtime")
    };
    assert!(
        modified(entry) > old,
        "the second run loaded the entry, marking it used"
    );
    assert_eq!(entries(&cache), first, "and compiled nothing new");

    std::fs::write(entry, b"not a compiled component").expect("damage it");
    run(&["--cache-dir", cache_arg]);
    assert!(
        std::fs::metadata(entry).expect("rewritten").len() > 1000,
        "compiled over"
    );

    let none = dir.path().join("none");
    run(&["--cache-dir", none.to_str().expect("utf-8"), "--no-cache"]);
    assert!(entries(&none).is_empty(), "--no-cache writes nothing");

    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = run(&["--cache-dir", open.to_str().expect("utf-8")]);
    assert!(
        entries(&open).is_empty(),
        "a directory others may write to is not used"
    );
    assert!(
        text(&out.stderr).contains("others may write to it"),
        "{}",
        text(&out.stderr)
    );
}

/// A broker config naming a component that does not load exits 2 with the entry, the
/// assignor and the cause, each said once (not once per error layer).
#[test]
fn load_errors_say_their_cause_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("server.properties");
    let missing = dir.path().join("missing.wasm");
    std::fs::write(
        &config,
        format!("group.streams.assignors={}\n", missing.display()),
    )
    .expect("write");
    let out = assignor(
        &["registry", "--config", config.to_str().expect("utf-8 path")],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("cannot read the component file"), "{err}");
    assert_eq!(
        err.matches("cannot read the component file").count(),
        1,
        "{err}"
    );
    assert_eq!(err.matches("failed (load)").count(), 1, "{err}");
}

/// Bad input exits 2 with the path of the offending field.
#[test]
fn input_errors_point_at_the_field() {
    let cases = [
        (
            r#"{"topology":{"subtopologies":[]},"members":[{"memberId":"m","processId":"p","bogus":1}]}"#,
            "members[0].bogus",
        ),
        (
            r#"{"topology":{"subtopologies":[{"id":"0","maxNumInputPartitions":2,"isStateful":true}]},"members":[{"memberId":"m","processId":"p","activeTasks":{"0":[5]}}]}"#,
            r#"members[0].activeTasks["0"]: partition 5 out of range"#,
        ),
        (
            r#"{"topology":{"subtopologies":[{"id":"0","maxNumInputPartitions":"two","isStateful":true}]},"members":[]}"#,
            "topology.subtopologies[0].maxNumInputPartitions",
        ),
    ];
    for (input, needle) in cases {
        let out = assignor(
            &["assign", "--assignor", "balanced", "--input", "-"],
            Some(input),
        );
        assert_eq!(out.status.code(), Some(2), "{input}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(needle), "{stderr} should name {needle}");
    }
}

/// An unknown built-in name exits 2 listing the built-ins.
#[test]
fn unknown_builtin_lists_the_builtins() {
    let out = assignor(&["assign", "--assignor", "nope", "--input", EXAMPLE], None);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("built-ins: sticky, balanced, rack-aware"),
        "{stderr}"
    );
}

/// The demo runs the embedded sample on the embedded example group.
#[test]
fn demo_runs_the_embedded_sample() {
    let out = assignor(&["demo"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("through the sandbox"), "{stdout}");
    assert!(stdout.contains("fuel"), "{stdout}");
}

/// Output piped into a reader that has gone (`assignor demo | head -0`) ends the command by
/// `SIGPIPE`, quietly, as Unix tools end, rather than with a panic in `println!`.
#[test]
fn closed_stdout_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt as _;

    let mut child = Command::new(env!("CARGO_BIN_EXE_assignor"))
        .arg("demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the assignor binary runs");
    // Closed long before the command has loaded its component and prints.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("the assignor binary exits");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{stderr}");
}

/// `registry` lists a broker config's assignors, default first, reading the file then the
/// `--override`s as a broker would.
#[test]
fn registry_lists_the_configured_assignors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("server.properties");
    std::fs::write(&config, "group.streams.assignors=balanced\n").expect("write");
    let config = config.to_str().expect("utf-8");
    let out = assignor(&["registry", "--config", config], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "balanced\tbuilt-in  (default)\n");

    let both = "group.streams.assignors=sticky,balanced";
    let out = assignor(&["registry", "--config", config, "--override", both], None);
    assert_eq!(
        text(&out.stdout),
        "sticky\tbuilt-in  (default)\nbalanced\tbuilt-in\n"
    );
}

/// A bad entry stops `registry` with exit 2 naming the entry, as it would stop startup: a
/// duplicate, and a component whose name is a built-in's.
#[test]
fn registry_fails_fast() {
    let out = assignor(
        &[
            "registry",
            "--override",
            "group.streams.assignors=sticky,sticky",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        "error: group.streams.assignors entry `sticky` is listed twice; remove the duplicate"
    );
    let list = format!("group.streams.assignors=sticky,{SAMPLE}");
    let out = assignor(&["registry", "--override", &list], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("its name `balanced` collides with the built-in assignor"),
        "{}",
        text(&out.stderr)
    );
}

/// The built-in `sticky` assignor answers the example group through the CLI.
#[test]
fn sticky_builtin_assigns() {
    let out = assignor(
        &["assign", "--assignor", "sticky", "--input", EXAMPLE],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: AssignmentDoc = serde_json::from_slice(&out.stdout).expect("output JSON");
    assert_complete(&doc);
}

/// Runs the sample on the example with 20000 fuel (it runs out) and captures into `dir`:
/// the run's stderr and the one capture file written.
fn capture_out_of_fuel(dir: &Path) -> (String, PathBuf) {
    let out = assignor(
        &[
            "assign",
            "--assignor",
            SAMPLE,
            "--input",
            EXAMPLE,
            "--fuel",
            "20000",
            "--capture-dir",
            dir.to_str().expect("utf-8 path"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let files: Vec<_> = std::fs::read_dir(dir)
        .expect("capture dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    (text(&out.stderr), files[0].clone())
}

/// A failed `assign` writes a capture and says how to replay it; `replay` reruns it to the same
/// error and fuel (exit 0, `reproduced`), needs the component for a component's capture, and
/// refuses a file that is not a capture.
#[test]
fn failed_call_is_captured_and_replays() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (stderr, file) = capture_out_of_fuel(&dir.path().join("captures"));
    assert!(stderr.contains("assignor replay"), "{stderr}");
    let file = file.to_str().expect("utf-8 path");

    let out = assignor(&["replay", file], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--assignor FILE.wasm"));

    let out = assignor(&["replay", file, "--assignor", SAMPLE, "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["replayed"]["error"]["kind"], "out-of-fuel");
    assert_eq!(v["captured"]["failure"]["fuel"], 20000);
    assert_eq!(v["replayed"]["error"]["fuel"], 20000);

    let out = assignor(&["replay", file, "--assignor", SAMPLE], None);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("reproduced"), "{stdout}");

    let out = assignor(&["replay", EXAMPLE], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("not a capture file"));
}

/// A successful call writes no capture; a capture replayed with another assignor (here the
/// built-in, which succeeds) is reported as differing, exit 1.
#[test]
fn replay_reports_a_difference() {
    let dir = tempfile::tempdir().expect("temp dir");
    let captures = dir.path().to_str().expect("utf-8 path");
    let args = ["assign", "--assignor", "sticky", "--input", EXAMPLE];
    let out = assignor(&[&args[..], &["--capture-dir", captures]].concat(), None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_dir(captures).expect("dir").count(), 0);

    let (_, file) = capture_out_of_fuel(dir.path());
    let file = file.to_str().expect("utf-8 path");
    let out = assignor(&["replay", file, "--assignor", "balanced"], None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("DIFFERS"), "{stdout}");
}

/// `check` passes the embedded sample (exit 0, JSON verdict) and fails a file that is not a
/// component (exit 1, load error).
#[test]
fn check_passes_the_sample_and_fails_garbage() {
    let out = assignor(
        &["check", SAMPLE, "--cases", "4", "--json", "--no-capture"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["assignor"]["name"], "balanced");

    let out = assignor(&["check", SAMPLE, "--cases", "1", "--no-capture"], None);
    let report = text(&out.stdout);
    for line in ["1000-members-16384-tasks", "deterministic", "verdict: PASS"] {
        assert!(report.contains(line), "{report}");
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.wasm");
    std::fs::write(&path, b"not wasm").expect("write");
    let out = assignor(&["check", path.to_str().expect("utf-8"), "--json"], None);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["verdict"], "fail");
    assert_eq!(v["loadError"]["kind"], "load");

    let out = assignor(&["check", SAMPLE, "--require", "no-such-rule"], None);
    assert_eq!(out.status.code(), Some(2));
}
