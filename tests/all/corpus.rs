//! The hostile corpus of issue 14 as data: per row, the assignor and group a hostile tenant
//! sends and what the host must answer, run through the library ([`through_library`], used
//! by `hostile` and `host_bounds`) and through the `assignor` command ([`through_cli`], used by
//! `hostile_cli`).
//!
//! Every row is held to the same bounds, whichever way it runs: the error kind the row
//! expects, a message that names the cause and the limit (and is itself bounded), the row's
//! wall time, a host peak RSS under [`MAX_HOST_RSS_BYTES`], captures that stay small, and,
//! through the library, a good assignor working on the very next call.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use assignor_coordinator::{Assignor, json};
use assignor_sandbox::{
    DEFAULT_MAX_COMPONENT_BYTES, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT, ErrorKind, Limits,
};
use assignor_tests::{guests, watch};
use serde_json::{Value, json};

use crate::common::{
    KILL_AFTER, MAX_HOST_RSS_BYTES, assignor_binary, isolated, next_call_succeeds, runtime,
};

/// The assignor a row runs.
#[derive(Debug, Clone, Copy)]
pub enum Subject {
    /// A component built from `tests/guests/` or `sample-assignors/`.
    Guest(&'static str),
    /// A component file the row writes into a scratch directory, returning its path.
    Generated(fn(&Path) -> PathBuf),
    /// A built-in assignor, by name.
    Builtin(&'static str),
}

/// A [`Subject`] ready to run.
enum Resolved {
    /// A component file.
    File(PathBuf),
    /// A built-in's name.
    Builtin(&'static str),
}

/// Resolves `subject`, writing a generated component into `dir`.
fn resolve(subject: Subject, dir: &Path) -> Resolved {
    match subject {
        Subject::Guest(path) => Resolved::File(PathBuf::from(path)),
        Subject::Generated(write) => Resolved::File(write(dir)),
        Subject::Builtin(name) => Resolved::Builtin(name),
    }
}

/// What the host must answer.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Loading or calling the assignor fails with one of these kinds; the command exits 1
    /// with the kind in its JSON error.
    Fails(&'static [ErrorKind]),
    /// The group is over an input limit and refused before any work: by the JSON parser,
    /// and by the runtime (kind `input-limit`) when handed the group another way; the
    /// command exits 2, as for any bad input.
    Refused,
}

/// One hostile row.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// What is run.
    pub subject: Subject,
    /// The group input JSON.
    pub input: fn() -> String,
    /// The call's wall-clock deadline; `None` keeps the default.
    pub timeout: Option<Duration>,
    /// The answer.
    pub expect: Expect,
    /// Panics unless the error message (the command's stderr for a refusal) names the cause
    /// and the limit.
    pub message: fn(&str),
    /// Longest the failing step (the load, or the call) may take.
    pub within: Duration,
}

/// What starting the command and loading a small component may add to [`Row::within`]
/// (measured here: ~0.3 s; tripled for a loaded 2-core CI machine).
const CLI_STARTUP: Duration = Duration::from_secs(1);

/// Longest error message any row may produce: the guest-output tail it may carry (16 KiB by
/// default) and the explanation around it. Hostile strings must never make it longer.
const MAX_MESSAGE_BYTES: usize = 32 << 10;

/// Most the command may print for a failed row, on stdout and stderr together: its
/// message twice (the JSON error and the `error:` line) and a line or two more.
const MAX_CLI_OUTPUT_BYTES: u64 = 3 * MAX_MESSAGE_BYTES as u64;

/// Most the captures of one failed call may take on disk: the example group, the
/// assignor's identity and a bounded message.
const MAX_CAPTURE_BYTES: u64 = 256 << 10;

/// Runs `row` through the library in a child process of its own (see
/// [`isolated`]): loads the subject into a [`Runtime`](assignor_sandbox::Runtime) with the
/// row's limits, calls it on the row's group, and checks the failure, its message and time,
/// the child's peak memory, and that the runtime then serves a good assignor. A group to be
/// refused must be refused by the JSON parser, and then, parsed without the input limits, by
/// the call.
pub fn through_library(row: &Row) {
    isolated(|| {
        let mut limits = Limits::default();
        if let Some(timeout) = row.timeout {
            limits = limits.timeout(timeout);
        }
        let runtime = runtime(limits.clone());
        let text = (row.input)();
        let (group, topology) = match row.expect {
            Expect::Fails(_) => json::parse_input_with(&text, &limits).expect("the group parses"),
            Expect::Refused => {
                // The JSON entry point refuses the group...
                let start = Instant::now();
                let refusal = json::parse_input_with(&text, &limits)
                    .expect_err("the group is over an input limit")
                    .to_string();
                let elapsed = start.elapsed();
                bounded(&refusal);
                (row.message)(&refusal);
                assert!(elapsed <= row.within, "parsing took {elapsed:?}");
                // ...and the runtime refuses it too when an embedder builds it another way.
                json::parse_input_with(&text, &without_input_limits())
                    .expect("the group parses without the input limits")
            }
        };
        let scratch = tempfile::tempdir().expect("scratch dir");
        let config = BTreeMap::new();
        // Generated before the clock starts: writing the file is the test's work, not the host's.
        let subject = resolve(row.subject, scratch.path());

        let start = Instant::now();
        let loaded = match subject {
            Resolved::File(path) => runtime
                .load_file(path, &config)
                .map(|c| Assignor::Component(Arc::new(c))),
            Resolved::Builtin(name) => Assignor::builtin(name, &config),
        };
        let (error, elapsed) = match loaded {
            Err(error) => (error, start.elapsed()),
            Ok(assignor) => {
                let start = Instant::now();
                let outcome = assignor.assign(&group, &topology);
                let elapsed = start.elapsed();
                let Err(error) = outcome else {
                    panic!("a hostile row must fail, but {} assigned", assignor.name());
                };
                assert_eq!(
                    error.assignor,
                    assignor.name(),
                    "the error names the assignor"
                );
                (error, elapsed)
            }
        };
        let expected = match row.expect {
            Expect::Fails(kinds) => kinds,
            Expect::Refused => &[ErrorKind::InputLimit],
        };
        assert!(
            expected.contains(&error.kind),
            "expected one of {expected:?}, got {}: {}",
            error.kind,
            shown(&error.message)
        );
        bounded(&error.message);
        (row.message)(&error.message);
        assert!(
            elapsed <= row.within,
            "took {elapsed:?}, more than {:?}",
            row.within
        );
        next_call_succeeds(&runtime);
    });
}

/// Runs `row` through `assignor assign --json`, with captures on, and checks its exit code,
/// error, output size, wall time, peak memory and captures.
pub fn through_cli(row: &Row) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let input = scratch.path().join("group.json");
    fs::write(&input, (row.input)()).expect("writing the group");
    let assignor = match resolve(row.subject, scratch.path()) {
        Resolved::File(path) => path,
        Resolved::Builtin(name) => PathBuf::from(name),
    };
    let captures = scratch.path().join("captures");
    let mut command = Command::new(assignor_binary());
    command
        .arg("assign")
        .arg("--assignor")
        .arg(&assignor)
        .arg("--input")
        .arg(&input)
        .arg("--json")
        .arg("--capture-dir")
        .arg(&captures);
    if let Some(timeout) = row.timeout {
        command.arg(format!("--timeout-ms={}", timeout.as_millis()));
    }
    let run = watch::run(&mut command, b"", KILL_AFTER);
    // Shown with the test's output (`--nocapture`), for the figures.
    eprintln!(
        "assignor assign --assignor {}: {:?}, peak RSS {} MB",
        assignor.display(),
        run.elapsed,
        run.peak_rss_bytes / 1_000_000
    );

    let code = match row.expect {
        Expect::Fails(_) => 1,
        Expect::Refused => 2,
    };
    assert_eq!(
        run.code(),
        Some(code),
        "{:?} should exit {code}: {run}",
        row.expect
    );
    // Before reading the message: a hostile string must not have made it huge.
    assert!(
        run.stdout_bytes + run.stderr_bytes <= MAX_CLI_OUTPUT_BYTES,
        "printed {} bytes: {run}",
        run.stdout_bytes + run.stderr_bytes
    );
    match row.expect {
        Expect::Fails(kinds) => {
            let doc: Value = serde_json::from_str(run.stdout.trim())
                .unwrap_or_else(|e| panic!("stdout is one JSON error object ({e}): {run}"));
            let kind = doc["error"]["kind"].as_str().unwrap_or_default();
            assert!(
                kinds.iter().any(|k| k.as_str() == kind),
                "expected one of {kinds:?}, got {kind:?}: {run}"
            );
            (row.message)(doc["error"]["message"].as_str().unwrap_or_default());
        }
        Expect::Refused => (row.message)(&run.stderr),
    }
    let bound = row.within + CLI_STARTUP;
    assert!(
        run.elapsed <= bound,
        "took {:?}, more than {bound:?}: {run}",
        run.elapsed
    );
    assert!(
        run.peak_rss_bytes < MAX_HOST_RSS_BYTES,
        "peak RSS over {} MB: {run}",
        MAX_HOST_RSS_BYTES / 1_000_000
    );
    let captured = dir_bytes(&captures);
    assert!(
        captured <= MAX_CAPTURE_BYTES,
        "the captures take {captured} bytes"
    );
}

/// Panics if `message` is longer than [`MAX_MESSAGE_BYTES`].
fn bounded(message: &str) {
    assert!(
        message.len() <= MAX_MESSAGE_BYTES,
        "a {}-byte message: {}",
        message.len(),
        shown(message)
    );
}

/// The default limits with every input limit lifted: how an embedder that builds its groups
/// without the JSON parser (or a parser without those limits) hands the runtime any group.
fn without_input_limits() -> Limits {
    Limits::default()
        .max_input_bytes(usize::MAX)
        .max_members(usize::MAX)
        .max_subtopologies(usize::MAX)
        .max_partitions(u32::MAX)
        .max_tasks(usize::MAX)
        .max_id_bytes(usize::MAX)
}

/// Bytes of the files in `dir` (none if it does not exist).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| {
            e.expect("a directory entry")
                .metadata()
                .expect("metadata")
                .len()
        })
        .sum()
}

/// The first 2 KiB of `text`, for assertion messages: a hostile message may be hundreds of
/// megabytes.
pub fn shown(text: &str) -> String {
    const SHOWN: usize = 2 << 10;
    if text.len() <= SHOWN {
        return text.to_owned();
    }
    let mut end = SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// Whether `message` states a quantity with its unit ("64 KiB", "249 bytes", "1000000000
/// units"): how a message names the limit it hit.
fn states_a_quantity(message: &str) -> bool {
    const UNITS: [&str; 5] = ["byte", "KiB", "MiB", "GiB", "units"];
    message
        .match_indices(|c: char| c.is_ascii_digit())
        .any(|(at, _)| {
            let rest = message[at..].trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            let rest = rest.strip_prefix(['-', ' ']).unwrap_or(rest);
            UNITS.iter().any(|u| rest.starts_with(u))
        })
}

/// Panics unless `message` names `bytes`, in bytes or in whole KiB/MiB.
pub fn names_bytes(message: &str, bytes: usize) {
    let forms = [
        bytes.to_string(),
        format!("{} KiB", bytes >> 10),
        format!("{} MiB", bytes >> 20),
    ];
    let named = forms.iter().enumerate().any(|(shift, form)| {
        // A KiB or MiB form counts only when it is exact.
        bytes.is_multiple_of(1 << (10 * shift)) && message.contains(form.as_str())
    });
    assert!(
        named,
        "the message should name {bytes} bytes: {}",
        shown(message)
    );
}

/// Panics unless `message` contains every one of `needles`.
fn mentions(message: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            message.contains(needle),
            "the message should mention {needle:?}: {}",
            shown(message)
        );
    }
}

/// The example group of the JSON contract.
pub fn example_json() -> String {
    include_str!("../../runtime/demo/group.json").to_owned()
}

/// The example group with a second member, `member-a2`, in `member-a1`'s process.
fn shared_process_json() -> String {
    let mut doc: Value = serde_json::from_str(&example_json()).expect("the example is JSON");
    doc["members"]
        .as_array_mut()
        .expect("members")
        .push(json!({"memberId": "member-a2", "processId": "process-a"}));
    doc.to_string()
}

/// 100 stateful subtopologies of 4294967295 partitions each, two members: 429 billion tasks,
/// which the host used to allocate for before checking anything.
fn huge_partitions_json() -> String {
    let subtopologies: Vec<Value> = (0..100)
        .map(|i| json!({"id": format!("s{i}"), "maxNumInputPartitions": u32::MAX, "isStateful": true}))
        .collect();
    json!({
        "topology": {"subtopologies": subtopologies},
        "configs": {"numStandbyReplicas": 1},
        "members": [
            {"memberId": "m0", "processId": "p0"},
            {"memberId": "m1", "processId": "p1"},
        ],
    })
    .to_string()
}

/// The bytes of [`huge_member_id_json`]'s member id: 10 MiB.
const HUGE_ID_BYTES: usize = 10 << 20;

/// The example topology with one member whose id is 10 MiB.
fn huge_member_id_json() -> String {
    let mut doc: Value = serde_json::from_str(&example_json()).expect("the example is JSON");
    doc["members"] = json!([{"memberId": "m".repeat(HUGE_ID_BYTES), "processId": "p"}]);
    doc.to_string()
}

/// Functions in [`expensive_component`]: with [`EXPENSIVE_BODY_BYTES`] each, 24 MiB of code,
/// under the component size limit, so only a check of the code itself can refuse it.
const EXPENSIVE_FUNCTIONS: usize = 4;
/// Bytes of each function body in [`expensive_component`].
const EXPENSIVE_BODY_BYTES: usize = 6 << 20;

/// A component holding one core module of `functions` functions of straight-line code, about
/// `body_bytes` each: `x = x * p + k` over and over, which the compiler can neither fold nor
/// skip.
pub fn straight_line_component(functions: usize, body_bytes: usize) -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, Component, Function, FunctionSection, Instruction, Module, ModuleSection,
        TypeSection, ValType,
    };

    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    let mut function_section = FunctionSection::new();
    let mut code = CodeSection::new();
    for _ in 0..functions {
        function_section.function(0);
        let mut body = Function::new([(1, ValType::I32)]);
        // One step, 10 bytes: local.get 1, local.get 0, i32.mul, i32.const k, i32.add,
        // local.set 1; k (1 to 63, a one-byte LEB) varies so that neighbouring steps differ.
        let mut steps = Vec::with_capacity(body_bytes);
        for i in 0..body_bytes / 10 {
            let k = (i % 63) as u8 + 1;
            steps.extend_from_slice(&[0x20, 1, 0x20, 0, 0x6c, 0x41, k, 0x6a, 0x21, 1]);
        }
        body.raw(steps);
        body.instruction(&Instruction::LocalGet(1));
        body.instruction(&Instruction::End);
        code.function(&body);
    }
    let mut module = Module::new();
    module
        .section(&types)
        .section(&function_section)
        .section(&code);
    let mut component = Component::new();
    component.section(&ModuleSection(&module));
    component.finish()
}

/// A component holding one core module of `functions` functions (at most 64) of about
/// `body_bytes` each, every one a chain of `call_indirect`s through a table of all of them:
/// `x = table[k](x)` over and over. Each indirect call is a bounds check, a signature check
/// and a call that Cranelift lowers separately, so this is the costliest code per byte
/// found: one function of 256 KiB takes 11 s of CPU to compile, so 16 of them (the default
/// code limits) take minutes (issue 14 measured 390 s for such code on a loaded 2-core
/// machine), against ~4 s for as much straight-line code.
pub fn call_indirect_component(functions: usize, body_bytes: usize) -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, Component, ConstExpr, ElementSection, Elements, Function, FunctionSection,
        Instruction, Module, ModuleSection, RefType, TableSection, TableType, TypeSection, ValType,
    };

    assert!(functions <= 64, "table indices must fit a one-byte LEB");
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    let mut function_section = FunctionSection::new();
    let mut table = TableSection::new();
    table.table(TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: functions as u64,
        maximum: Some(functions as u64),
        shared: false,
    });
    let indices: Vec<u32> = (0..functions as u32).collect();
    let mut elements = ElementSection::new();
    elements.active(
        Some(0),
        &ConstExpr::i32_const(0),
        Elements::Functions(indices.into()),
    );
    let mut code = CodeSection::new();
    for _ in 0..functions {
        function_section.function(0);
        let mut body = Function::new([(1, ValType::I32)]);
        // One step, 9 bytes: local.get 1, i32.const k, call_indirect (type 0) (table 0),
        // local.set 1; k cycles through the table so that neighbouring calls differ.
        let mut steps = Vec::with_capacity(body_bytes);
        for i in 0..body_bytes / 9 {
            let k = (i % functions) as u8;
            steps.extend_from_slice(&[0x20, 1, 0x41, k, 0x11, 0, 0, 0x21, 1]);
        }
        body.raw(steps);
        body.instruction(&Instruction::LocalGet(1));
        body.instruction(&Instruction::End);
        code.function(&body);
    }
    let mut module = Module::new();
    module
        .section(&types)
        .section(&function_section)
        .section(&table)
        .section(&elements)
        .section(&code);
    let mut component = Component::new();
    component.section(&ModuleSection(&module));
    component.finish()
}

/// Writes a [`straight_line_component`] of [`EXPENSIVE_FUNCTIONS`] functions of
/// [`EXPENSIVE_BODY_BYTES`] each (issue 14's such component compiled for 30 s+ in 630 MB).
fn expensive_component(dir: &Path) -> PathBuf {
    let bytes = straight_line_component(EXPENSIVE_FUNCTIONS, EXPENSIVE_BODY_BYTES);
    assert!(
        bytes.len() < DEFAULT_MAX_COMPONENT_BYTES,
        "the expensive component must pass the size check"
    );
    let path = dir.join("expensive.wasm");
    fs::write(&path, bytes).expect("writing the component");
    path
}

/// Bytes of [`huge_file`]: 1 GiB.
const HUGE_FILE_BYTES: u64 = 1 << 30;

/// Writes a sparse 1 GiB file named like a component: no disk used, but a host that reads
/// it whole before checking its size pays 1 GiB of memory.
fn huge_file(dir: &Path) -> PathBuf {
    let path = dir.join("huge.wasm");
    fs::File::create(&path)
        .and_then(|f| f.set_len(HUGE_FILE_BYTES))
        .expect("creating the sparse file");
    path
}

/// `sleeper`: blocks in `wasi:clocks`/`poll` through `std::thread::sleep`; the deadline
/// must end it.
pub const SLEEPER: Row = Row {
    subject: Subject::Guest(guests::SLEEPER),
    input: example_json,
    timeout: Some(Duration::from_secs(1)),
    expect: Expect::Fails(&[ErrorKind::Timeout]),
    message: |m| mentions(m, &["deadline of 1s"]),
    within: Duration::from_secs(2),
};

/// `poll-forever`: polls a monotonic-clock instant that never comes; the deadline must end
/// it.
pub const POLL_FOREVER: Row = Row {
    subject: Subject::Guest(guests::POLL_FOREVER),
    ..SLEEPER
};

/// `random-flood`: 64 MiB of randomness per host call, forever; the per-call cap (a trap)
/// or the fuel charged per host byte must end it fast, long before the deadline.
pub const RANDOM_FLOOD: Row = Row {
    subject: Subject::Guest(guests::RANDOM_FLOOD),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::Trap, ErrorKind::OutOfFuel]),
    message: |m| {
        assert!(
            m.contains("random") || m.contains("fuel"),
            "the message should say what ran out: {}",
            shown(m)
        );
        assert!(
            states_a_quantity(m),
            "the message should name the limit: {}",
            shown(m)
        );
    },
    within: Duration::from_secs(2),
};

/// `stdout-flood`: 64 KiB writes to stdout forever; the fuel charged per byte must end it.
pub const STDOUT_FLOOD: Row = Row {
    subject: Subject::Guest(guests::STDOUT_FLOOD),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::OutOfFuel]),
    message: |m| {
        mentions(m, &["fuel"]);
        assert!(
            states_a_quantity(m),
            "the message should name the limit: {}",
            shown(m)
        );
    },
    // The kind shows that fuel, not the deadline, ended it; the host's copying makes a unit
    // of this fuel slower than one of pure compute (2.5 s here for the default fuel).
    within: DEFAULT_TIMEOUT,
};

/// `poll-flood`: `poll` on 4,000 ready pollables, forever; the fuel charged per pollable
/// must end it as out-of-fuel (not at the deadline), naming what was charged.
pub const POLL_FLOOD: Row = Row {
    subject: Subject::Guest(guests::POLL_FLOOD),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::OutOfFuel]),
    message: |m| {
        mentions(m, &["fuel", "per pollable", "wasi:io/poll.poll"]);
        assert!(
            states_a_quantity(m),
            "the message should name the limit: {}",
            shown(m)
        );
    },
    // Fuel, not the deadline, must end it: well within the default 5 s.
    within: Duration::from_secs(2),
};

/// `output-flood`: 200,000 entries alternating between two members; the host must find the
/// output invalid in time linear in it.
pub const OUTPUT_FLOOD: Row = Row {
    subject: Subject::Guest(guests::OUTPUT_FLOOD),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::InvalidOutput]),
    message: |m| mentions(m, &["out of range"]),
    within: Duration::from_secs(1),
};

/// `huge-name`: a 40 MiB `name()`; refused at load, by its length, in a short message.
pub const HUGE_NAME: Row = Row {
    subject: Subject::Guest(guests::HUGE_NAME),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::Load]),
    message: |m| {
        assert!(m.len() < 1024, "a {}-byte message: {}", m.len(), shown(m));
        mentions(m, &["name"]);
        assert!(
            states_a_quantity(m),
            "the message should name the limit: {}",
            shown(m)
        );
    },
    within: Duration::from_secs(2),
};

/// The bytes of `huge-error`'s message: 100 MiB.
pub const HUGE_ERROR_BYTES: usize = 100 << 20;

/// `huge-error`: an `Err` of 100 MiB, more than the host lifts from a guest (the output
/// limit): refused before it is copied. One within that limit is cut to the message limit
/// (`hostile::error_within_the_output_limit_is_cut_to_the_message_limit`).
pub const HUGE_ERROR: Row = Row {
    subject: Subject::Guest(guests::HUGE_ERROR),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::InvalidOutput]),
    message: |m| {
        mentions(
            m,
            &["more than 16 MiB", "max.output.bytes", "error message"],
        );
        assert!(m.len() < 1024, "a {}-byte message: {}", m.len(), shown(m));
    },
    within: Duration::from_secs(2),
};

/// Checks a guest message of `total` bytes of `e` cut to the message limit, with a note of how
/// many bytes were dropped.
pub fn cut_to_the_message_limit(m: &str, total: usize) {
    let kept = m.bytes().take_while(|&b| b == b'e').count();
    assert!(
        kept > 0 && kept <= DEFAULT_MAX_MESSAGE_BYTES,
        "{kept} bytes of the guest's message kept, limit {DEFAULT_MAX_MESSAGE_BYTES}: {}",
        shown(m)
    );
    assert!(
        m.len() <= DEFAULT_MAX_MESSAGE_BYTES + 64,
        "a {}-byte message: {}",
        m.len(),
        shown(m)
    );
    mentions(m, &[&format!("{} bytes dropped", total - kept)]);
}

/// `shadow-stack`: overflows the guest's own stack in linear memory; a stack overflow, not a
/// bare trap.
pub const SHADOW_STACK: Row = Row {
    subject: Subject::Guest(guests::SHADOW_STACK),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::StackOverflow]),
    message: |m| mentions(m, &["stack"]),
    within: Duration::from_secs(2),
};

/// `same-process-standby`: a standby on another member of its active's process; invalid,
/// naming the rule.
pub const SAME_PROCESS_STANDBY: Row = Row {
    subject: Subject::Guest(guests::SAME_PROCESS_STANDBY),
    input: shared_process_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::InvalidOutput]),
    message: |m| mentions(m, &["standby", "process"]),
    within: Duration::from_secs(2),
};

/// A component whose code is expensive to compile: refused before compiling, by the size
/// of its code.
pub const EXPENSIVE_COMPILE: Row = Row {
    subject: Subject::Generated(expensive_component),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::Load]),
    message: |m| {
        assert!(
            m.contains("function") || m.contains("code") || m.contains("compil"),
            "the message should say the code is too big to compile: {}",
            shown(m)
        );
        assert!(
            states_a_quantity(m),
            "the message should name the limit: {}",
            shown(m)
        );
    },
    within: Duration::from_secs(2),
};

/// A 1 GiB file given as a component: refused by its size before it is read.
pub const HUGE_FILE: Row = Row {
    subject: Subject::Generated(huge_file),
    input: example_json,
    timeout: None,
    expect: Expect::Fails(&[ErrorKind::Load]),
    message: |m| names_bytes(m, DEFAULT_MAX_COMPONENT_BYTES),
    within: Duration::from_secs(1),
};

/// Checks a refusal of [`huge_partitions_json`]: it names the field and the limit.
fn names_the_partition_limit(m: &str) {
    assert!(
        m.contains("maxNumInputPartitions") && m.contains("max.partitions")
            || m.contains("tasks") && m.contains("max.tasks"),
        "the refusal should name the field and max.partitions or max.tasks: {}",
        shown(m)
    );
}

/// 429 billion tasks, for the sandboxed sample: refused before anything is sized from them.
pub const HUGE_PARTITIONS: Row = Row {
    subject: Subject::Guest(guests::BALANCED),
    input: huge_partitions_json,
    timeout: None,
    expect: Expect::Refused,
    message: names_the_partition_limit,
    within: Duration::from_secs(1),
};

/// 429 billion tasks, for the built-in sticky assignor: refused as for a component.
pub const HUGE_PARTITIONS_BUILTIN: Row = Row {
    subject: Subject::Builtin("sticky"),
    ..HUGE_PARTITIONS
};

/// Checks a refusal of [`huge_member_id_json`]: short, naming the field and the limit.
fn names_the_id_limit(m: &str) {
    assert!(m.len() < 1024, "a {}-byte refusal: {}", m.len(), shown(m));
    mentions(m, &["memberId", "max.id.bytes"]);
}

/// A 10 MiB member id, for the sandboxed sample: refused in a short message.
pub const HUGE_MEMBER_ID: Row = Row {
    subject: Subject::Guest(guests::BALANCED),
    input: huge_member_id_json,
    timeout: None,
    expect: Expect::Refused,
    message: names_the_id_limit,
    within: Duration::from_secs(1),
};

/// A 10 MiB member id, for the built-in sticky assignor: refused as for a component.
pub const HUGE_MEMBER_ID_BUILTIN: Row = Row {
    subject: Subject::Builtin("sticky"),
    ..HUGE_MEMBER_ID
};
