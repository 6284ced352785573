//! Assignors in Python and JavaScript (issue 18): `sample-assignors/balanced-python` and
//! `balanced-js`, built into components by the SDKs' build scripts (`guest-sdk/python/build`,
//! `guest-sdk/js/build`, which install componentize-py and componentize-js when missing), pass
//! their native tests, return exactly what the Rust `balanced` sample returns, pass the
//! `assignor check` suite inside the default memory and time limits, and run through
//! `assignor assign` and the service's upload and coordinator. Two test guests, one per
//! language (`tests/guests/python/failing`, `tests/guests/js/failing.js`), show that an
//! exception the assignor did not foresee reaches the host as the assignor's own error.
//!
//! The components embed an interpreter, so their code is over the default code limits, and
//! the JavaScript one needs more than the default fuel at 1000 members: the tests load them
//! with [`limits`], the per-language guidance of `guest-sdk/README.md`, and check that the
//! default code limits refuse them with a reason naming the limit.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use assignor_cli::check::{self, CheckOptions};
use assignor_coordinator::Assignor;
use assignor_sandbox::{
    ComponentAssignor, DEFAULT_FUEL, DEFAULT_MAX_FUNCTION_BYTES, ErrorKind, Limits, Runtime,
};
use assignor_sdk::harness::suite;
use assignor_tests::{guests, watch};
use serde_json::{Value, json};

use crate::common::{assignor_binary, load, runtime, try_load};
use crate::service::{GROUP_DOC, Server, TOKEN_A, sha256_hex};

/// A sample assignor in a language other than Rust.
struct Sample {
    /// The assignor's `name()`.
    name: &'static str,
    /// The sample's directory, relative to the workspace.
    dir: &'static str,
    /// The build script, relative to the workspace, and its first argument.
    build: [&'static str; 2],
    /// The assignor's own source file, relative to the workspace: with `sdk`, what calls for a
    /// rebuild when it changes.
    source: &'static str,
    /// The SDK's files and directories the build uses, relative to the workspace.
    sdk: &'static [&'static str],
    /// The native test command, run in `dir`.
    native_test: &'static [&'static str],
    /// Largest function body and all code of the component, over the defaults: what
    /// [`limits`] raises, as `guest-sdk/README.md` tells operators to.
    max_function_bytes: usize,
    max_code_bytes: usize,
    /// Fuel per call, where the default does not fit a 1000-member group.
    fuel: u64,
}

const PYTHON: Sample = Sample {
    name: "balanced-python",
    dir: "sample-assignors/balanced-python",
    build: ["guest-sdk/python/build", "sample-assignors/balanced-python"],
    source: "sample-assignors/balanced-python/app.py",
    sdk: &[
        "guest-sdk/python/assignor_sdk",
        "guest-sdk/python/build",
        "guest-sdk/python/requirements-build.txt",
        "wit",
    ],
    native_test: &["python3", "-m", "unittest", "--quiet"],
    max_function_bytes: 512 << 10,
    max_code_bytes: 8 << 20,
    // 631M at 1000 members and 16384 tasks.
    fuel: DEFAULT_FUEL,
};

const JS: Sample = Sample {
    name: "balanced-js",
    dir: "sample-assignors/balanced-js",
    build: ["guest-sdk/js/build", "sample-assignors/balanced-js/app.js"],
    source: "sample-assignors/balanced-js/app.js",
    sdk: &[
        "guest-sdk/js/src",
        "guest-sdk/js/build",
        "guest-sdk/js/componentize.mjs",
        "guest-sdk/js/package-lock.json",
        "wit",
    ],
    native_test: &["node", "--test"],
    max_function_bytes: DEFAULT_MAX_FUNCTION_BYTES,
    max_code_bytes: 12 << 20,
    // 1.87G at 1000 members and 16384 tasks: StarlingMonkey interprets (no JIT in wasm).
    fuel: 4_000_000_000,
};

const SAMPLES: [&Sample; 2] = [&PYTHON, &JS];

/// A test guest in Python that fails with an unforeseen exception
/// (`tests/guests/python/failing`): built and loaded like the samples, with their limits.
const FAILING_PYTHON: Sample = Sample {
    name: "failing-python",
    dir: "tests/guests/python/failing",
    build: ["guest-sdk/python/build", "tests/guests/python/failing"],
    source: "tests/guests/python/failing/app.py",
    native_test: &[],
    ..PYTHON
};

/// The same in JavaScript (`tests/guests/js/failing.js`).
const FAILING_JS: Sample = Sample {
    name: "failing-js",
    dir: "tests/guests/js",
    build: ["guest-sdk/js/build", "tests/guests/js/failing.js"],
    source: "tests/guests/js/failing.js",
    native_test: &[],
    ..JS
};

/// Every component this module builds: the samples, then the test guests.
const BUILDS: [&Sample; 4] = [&PYTHON, &JS, &FAILING_PYTHON, &FAILING_JS];

/// How long compiling one of these components may take: 20–55 s measured on a loaded 2-core
/// machine, against a default of 10 s.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(120);

/// Concurrent calls the samples' runtimes allow: as many as this module's tests can make at
/// once on one sample (the four that call it), and few, as a service tenant's runtime is. The
/// instance pool budgets `MAX_CORE_INSTANCES` per call; when it budgeted 8, four slots held
/// 32 core instances, fewer than the Python component's 38, and every call was refused as
/// `capacity`.
const CONCURRENT_CALLS: u32 = 4;

/// The default limits with the code limits, compile time and fuel set for `sample`, and
/// [`CONCURRENT_CALLS`]: memory, call time and output stay at their production defaults.
fn limits(sample: &Sample) -> Limits {
    Limits::default()
        .max_function_bytes(sample.max_function_bytes)
        .max_code_bytes(sample.max_code_bytes)
        .compile_timeout(COMPILE_TIMEOUT)
        .fuel(Some(sample.fuel))
        .max_concurrent_calls(CONCURRENT_CALLS)
}

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `<target>/polyglot`: the test binary is `<target>/<profile>/deps/all-<hash>`.
fn out_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .nth(3)
        .expect("a target dir")
        .join("polyglot")
}

/// The newest modification time under `path`.
fn newest(path: &Path) -> SystemTime {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if !meta.is_dir() {
        return meta.modified().expect("mtime");
    }
    std::fs::read_dir(path)
        .expect("a readable directory")
        .map(|e| newest(&e.expect("a directory entry").path()))
        .fold(meta.modified().expect("mtime"), SystemTime::max)
}

/// The sample's component, built once per test run, and again only when an input changed
/// since the last build (a build takes about a minute).
fn component(sample: &Sample) -> &'static str {
    static BUILT: [OnceLock<String>; BUILDS.len()] = [const { OnceLock::new() }; BUILDS.len()];
    let slot = BUILDS
        .iter()
        .position(|s| s.name == sample.name)
        .expect("a listed build");
    BUILT[slot].get_or_init(|| {
        let out = out_dir().join(format!("{}.wasm", sample.name));
        let built = std::fs::metadata(&out).and_then(|m| m.modified()).ok();
        let changed = std::iter::once(&sample.source)
            .chain(sample.sdk)
            .map(|i| newest(&workspace().join(i)));
        if built.is_none_or(|at| changed.into_iter().any(|c| c > at)) {
            let status = Command::new(workspace().join(sample.build[0]))
                .arg(workspace().join(sample.build[1]))
                .arg(&out)
                .status()
                .expect("the build script runs");
            assert!(status.success(), "{} failed: {status}", sample.build[0]);
        }
        out.to_str().expect("a UTF-8 path").to_owned()
    })
}

/// `<target>/polyglot/cache`, private to this user (`assignor` uses no other): the compiled
/// components, which [`loaded`] writes and `assignor assign` reads, so each is compiled once
/// per test run (and not again while it is unchanged).
fn cache_dir() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = out_dir().join("cache");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// The most [`cache_dir`] keeps: a few versions of both components.
const CACHE_MAX_BYTES: u64 = 1 << 30;

/// One runtime with `sample`'s [`limits`] and its loaded component, shared by the tests
/// (a load compiles 6–9 MiB of code: 20–45 s here, unless [`cache_dir`] has it).
fn loaded(sample: &Sample) -> &'static (Runtime, Arc<ComponentAssignor>) {
    static LOADED: [OnceLock<(Runtime, Arc<ComponentAssignor>)>; BUILDS.len()] =
        [const { OnceLock::new() }; BUILDS.len()];
    let slot = BUILDS
        .iter()
        .position(|s| s.name == sample.name)
        .expect("a listed build");
    LOADED[slot].get_or_init(|| {
        let rt = Runtime::builder(limits(sample))
            .cache_dir(cache_dir())
            .cache_max_bytes(CACHE_MAX_BYTES)
            .build()
            .expect("engine configuration is valid");
        let component = Arc::new(load(&rt, component(sample), &[]));
        (rt, component)
    })
}

/// The Python sample's own unittest suite passes natively, on the SDK's JSON reader.
#[test]
fn python_native_tests_pass() {
    native_tests_pass(&PYTHON);
}

/// The JavaScript sample's own `node --test` suite passes natively, on the SDK's JSON reader.
#[test]
fn js_native_tests_pass() {
    native_tests_pass(&JS);
}

fn native_tests_pass(sample: &Sample) {
    let [program, args @ ..] = sample.native_test else {
        unreachable!("a command has a program")
    };
    let output = Command::new(program)
        .args(args)
        .current_dir(workspace().join(sample.dir))
        .env("PYTHONPATH", workspace().join("guest-sdk/python"))
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    assert!(
        output.status.success(),
        "{}'s native tests failed:\n{}{}",
        sample.name,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An unforeseen Python exception reaches the host as the assignor's own error, with its
/// type, the frames it was raised through and what the call printed: a `guest-error` from
/// `assign`, a refused load from `configure`. (The SDK's traceback read source files, which
/// traps in a component without WASI, so every such exception was a bare `trap`.)
#[test]
fn python_exceptions_are_the_assignors_errors() {
    exceptions_are_the_assignors_errors(
        &FAILING_PYTHON,
        &["KeyError: 'missing'", "app.py\", line ", "in assign"],
        "RuntimeError: configure failed on purpose",
    );
}

/// An unforeseen JavaScript exception reaches the host the same way, with its stack.
#[test]
fn js_exceptions_are_the_assignors_errors() {
    exceptions_are_the_assignors_errors(
        &FAILING_JS,
        &["TypeError", "assign@tests/guests/js/failing.js:"],
        "Error: configure failed on purpose",
    );
}

fn exceptions_are_the_assignors_errors(guest: &Sample, in_assign: &[&str], in_configure: &str) {
    let (rt, failing) = loaded(guest);
    let (group, topology) = crate::common::example();
    let error = failing
        .assign(&group, &topology)
        .expect_err("the guest fails");
    assert_eq!(error.kind, ErrorKind::GuestError, "{error}");
    let printed = format!("assigning {} members", group.members.len());
    for part in in_assign.iter().chain([&printed.as_str()]) {
        assert!(error.message.contains(part), "{part:?} in {error}");
    }

    let error = try_load(rt, component(guest), &[("failing.in", "configure")])
        .expect_err("configure fails");
    assert_eq!(error.kind, ErrorKind::Load, "{error}");
    assert!(
        error
            .message
            .contains("configure rejected the configuration")
            && error.message.contains(in_configure),
        "{error}"
    );
}

/// The default code limits refuse both components at load, naming the limit to raise, before
/// compiling anything.
#[test]
fn default_code_limits_refuse_them_with_the_limit_named() {
    let rt = runtime(Limits::default());
    for (sample, limit) in [(&PYTHON, "max.function.bytes"), (&JS, "max.code.bytes")] {
        let error = try_load(&rt, component(sample), &[]).expect_err("over the code limits");
        assert_eq!(error.kind, ErrorKind::Load, "{error}");
        assert!(error.to_string().contains(limit), "{error}");
    }
}

/// In the sandbox, the Python sample returns exactly what the Rust `balanced` sample returns on
/// every standard case of `assignor check` (up to 1000 members and 16384 tasks) and on random
/// groups.
#[test]
fn python_matches_the_rust_sample() {
    matches_the_rust_sample(&PYTHON);
}

/// In the sandbox, the JavaScript sample returns exactly what the Rust `balanced` sample
/// returns on every standard case and on random groups.
#[test]
fn js_matches_the_rust_sample() {
    matches_the_rust_sample(&JS);
}

fn matches_the_rust_sample(sample: &Sample) {
    let (rt, component) = loaded(sample);
    let rust = load(rt, guests::BALANCED, &[]);
    let mut cases = suite::standard();
    cases.extend(suite::random(Default::default(), 7, 16));
    for case in cases {
        let (expected, _) = rust
            .assign(&case.group, &case.topology)
            .unwrap_or_else(|e| panic!("{}: the Rust sample fails: {e}", case.name));
        let (got, usage) = component
            .assign(&case.group, &case.topology)
            .unwrap_or_else(|e| panic!("{}: {} fails: {e}", case.name, sample.name));
        assert!(
            got == expected,
            "{}: {} differs from Rust",
            case.name,
            sample.name
        );
        assert!(usage.fuel.is_some_and(|f| f > 0), "{}", case.name);
    }
}

/// `assignor check` (the suite behind the command) passes the Python sample inside the default
/// fuel, memory and time limits, its largest case under 80 % of the fuel.
#[test]
fn python_passes_assignor_check() {
    passes_assignor_check(&PYTHON);
}

/// `assignor check` passes the JavaScript sample inside the default memory and time limits
/// and its fuel guidance, its largest case under 80 % of that fuel.
#[test]
fn js_passes_assignor_check() {
    passes_assignor_check(&JS);
}

fn passes_assignor_check(sample: &Sample) {
    let (rt, component) = loaded(sample);
    let limits = rt.limits().clone();
    let assignor = Assignor::Component(Arc::clone(component));
    let report = check::run(
        &assignor,
        sample.name,
        &limits,
        CheckOptions {
            cases: 16,
            ..CheckOptions::default()
        },
    );
    assert!(
        report.passed(),
        "{}:\n{}",
        sample.name,
        report.render(false)
    );
    let largest = report.cases.iter().max_by_key(|c| c.tasks).expect("cases");
    let fuel = largest.usage.and_then(|u| u.fuel).expect("sandboxed");
    assert!(fuel < sample.fuel / 10 * 8, "{}: {fuel}", sample.name);
}

/// `assignor assign --json`, with the per-language limits as flags, prints for each sample the
/// assignment the built-in `balanced` prints for the example group.
#[test]
fn assignor_assign_runs_them() {
    // Loaded (so compiled into the cache the commands read) first: a load runs in this
    // process, the commands' compiles in children, and the artifacts are the same.
    for sample in SAMPLES {
        loaded(sample);
    }
    let expected = assign_cli(&["--assignor", "balanced"]);
    // Concurrently: a command whose component is not in the cache (another engine, say)
    // spends most of its time compiling on one core.
    std::thread::scope(|scope| {
        for sample in SAMPLES {
            let expected = &expected;
            scope.spawn(move || assign_sample(sample, expected));
        }
    });
}

/// [`assign_cli`] on `sample` with its limits as flags gives the `expected` assignment.
fn assign_sample(sample: &Sample, expected: &Value) {
    let got = assign_cli(&[
        "--assignor",
        component(sample),
        "--max-function-bytes",
        &sample.max_function_bytes.to_string(),
        "--max-code-bytes",
        &sample.max_code_bytes.to_string(),
        "--fuel",
        &sample.fuel.to_string(),
        "--compile-timeout-ms",
        &COMPILE_TIMEOUT.as_millis().to_string(),
        "--cache-dir",
        cache_dir().to_str().expect("a UTF-8 path"),
    ]);
    assert_eq!(got["assignment"], expected["assignment"], "{}", sample.name);
    assert!(
        got["usage"]["fuel"].as_u64().is_some_and(|f| f > 0),
        "{got}"
    );
}

/// Runs `assignor assign --json --no-capture ARGS` on the example group; its stdout object.
fn assign_cli(args: &[&str]) -> Value {
    let mut command = Command::new(assignor_binary());
    command
        .args(["assign", "--json", "--no-capture", "--input", "-"])
        .args(args);
    // Compiling a Python or JavaScript component takes most of this.
    let run = watch::run(&mut command, GROUP_DOC.as_bytes(), Duration::from_secs(300));
    assert_eq!(run.code(), Some(0), "{run}");
    serde_json::from_str(&run.stdout).expect("one JSON object")
}

/// Through the service: a tenant with the default component cap cannot upload them; a
/// tenant given the per-language limits uploads both, selects one per group, and the
/// coordinator's target is the Rust sample's.
#[test]
fn service_uploads_them_and_the_coordinator_runs_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = vec![
        "group.streams.assignors=balanced".to_owned(),
        // Runtime-wide: the code limits bound every tenant's compilation.
        format!(
            "group.streams.assignor.max.function.bytes={}",
            PYTHON.max_function_bytes
        ),
        format!(
            "group.streams.assignor.max.code.bytes={}",
            JS.max_code_bytes
        ),
        format!("service.data.dir={}", dir.path().display()),
        "service.tenants=a,small".to_owned(),
        format!("service.tenant.a.token.sha256={}", sha256_hex(TOKEN_A)),
        // Per tenant: who may upload an interpreter, and how long it may take to compile.
        "service.tenant.a.max.component.bytes=25165824".to_owned(),
        format!(
            "service.tenant.a.compile.timeout.ms={}",
            COMPILE_TIMEOUT.as_millis()
        ),
        format!("service.tenant.a.fuel={}", JS.fuel),
        // The instance pool budgets 8 core instances per call slot, and a tenant's runtime has
        // a slot per concurrent assignment plus one: the Python component instantiates 38 core
        // modules (CPython, its libraries, the WASI stubs), so it needs 5 slots, 4 assignments.
        "service.tenant.a.max.concurrent.assignments=4".to_owned(),
        format!("service.tenant.small.token.sha256={}", sha256_hex("small")),
    ];
    let config =
        assignor_service::config::ServiceConfig::load(None, &keys).expect("valid service config");
    let server = Server::start(&config);

    // The service answers 413 on the declared length and closes the connection, so the client
    // may see a broken pipe instead, as it is still sending the body.
    let small = server.client("small");
    let path = format!("/v1/assignors/{}", PYTHON.name);
    let bytes = std::fs::read(component(&PYTHON)).expect("built");
    if let Some((status, body)) = small.try_put(&path, &bytes) {
        assert_eq!(status, 413, "the default 8 MiB tenant cap: {body}");
    }
    assert_eq!(small.assignor_names(), ["balanced"], "nothing was stored");

    let a = server.client(TOKEN_A);
    assert_eq!(a.put("/v1/groups/rust", GROUP_DOC.as_bytes()).0, 200);
    let (status, rust) = a.post("/v1/groups/rust/assign");
    assert_eq!(status, 200, "{rust}");
    for sample in SAMPLES {
        let (status, report) = a.upload(sample.name, component(sample));
        assert_eq!(status, 201, "{}: {report}", sample.name);
        let group = format!("/v1/groups/{}", sample.name);
        assert_eq!(a.put(&group, GROUP_DOC.as_bytes()).0, 200);
        let selected = json!({"streams.assignor.name": sample.name});
        let (status, body) = a.set_config(sample.name, selected, &[]);
        assert_eq!(status, 200, "{body}");
        let (status, target) = a.post(&format!("{group}/assign"));
        assert_eq!(status, 200, "{target}");
        assert_eq!(target["assignor"], sample.name);
        assert_eq!(target["assignment"], rust["assignment"], "{}", sample.name);
    }
    let names = a.assignor_names();
    assert!(
        SAMPLES.iter().all(|s| names.iter().any(|n| n == s.name)),
        "{names:?}"
    );
}

/// Measures, beside the Rust `balanced` sample: component size, load (compile) time, the
/// fixed cost of a call on the example group, and calls at 100 and 1000 members (the
/// project's standard `gen.py` inputs, one standby, cold); prints a Markdown table. Run it
/// alone, in release: `cargo test --release -p assignor-tests --test all -- polyglot::measure
/// --ignored --nocapture`.
#[test]
#[ignore = "a measurement, minutes long: run it on demand"]
fn measure() {
    use assignor_tests::bench_input::{self, Mode};
    use std::time::Instant;

    let median = |mut times: Vec<Duration>| {
        times.sort();
        times[times.len() / 2]
    };
    let inputs = [
        ("example", crate::common::example(), 21),
        (
            "100 members",
            bench_input::generate(bench_input::SIZES[1], 1, Mode::Cold),
            7,
        ),
        (
            "1000 members",
            bench_input::generate(bench_input::SIZES[2], 1, Mode::Cold),
            3,
        ),
    ];
    println!("| assignor | size | load | example | 100 members | 1000 members |");
    println!("|---|---|---|---|---|---|");
    let rust_limits = Limits::default();
    let rows = [
        ("rust balanced", guests::BALANCED, rust_limits),
        (PYTHON.name, component(&PYTHON), limits(&PYTHON)),
        (JS.name, component(&JS), limits(&JS)),
    ];
    for (name, path, limits) in rows {
        let size = std::fs::metadata(path).expect("built").len();
        let rt = runtime(limits);
        let start = Instant::now();
        let assignor = load(&rt, path, &[]);
        let load_time = start.elapsed();
        let mut cells = Vec::new();
        for (_, (group, topology), runs) in &inputs {
            let mut times = Vec::new();
            let mut fuel = 0;
            for _ in 0..*runs {
                let start = Instant::now();
                let (_, usage) = assignor.assign(group, topology).expect("assigns");
                times.push(start.elapsed());
                fuel = usage.fuel.expect("fuel is on");
            }
            cells.push(format!(
                "{:.2} ms, {:.1}M fuel",
                median(times).as_secs_f64() * 1e3,
                fuel as f64 / 1e6
            ));
        }
        println!(
            "| {name} | {:.2} MiB | {:.2} s | {} |",
            size as f64 / f64::from(1 << 20),
            load_time.as_secs_f64(),
            cells.join(" | ")
        );
    }
}
