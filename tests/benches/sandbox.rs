//! Benchmarks of the sandbox: what a sandboxed assignment costs next to the same algorithm
//! run natively, what crossing the WIT boundary costs, and what loading a component costs.
//!
//! Run with `cargo bench -p assignor-tests --bench sandbox` (add `-- <filter>`, e.g.
//! `-- boundary`, to run some groups only). The group inputs come from
//! `shared/bench/gen.py` (override its path with `ASSIGNOR_BENCH_GEN`), at three sizes:
//! members/processes/stateful subtopologies/partitions (10,5,4,32), (100,50,8,256) and
//! (1000,500,16,1024), i.e. 128, 2048 and 16384 tasks, one standby replica, seed 7. The size
//! in an id is the member count.
//!
//! - `call/balanced/{10,100,1000}`: the whole sandboxed call, `ComponentAssignor::assign`
//!   of the balanced sample component on the cold input (no previous assignment), default
//!   limits: fresh store and instance, `configure`, input conversion and copy, the
//!   algorithm in wasm, output copy and conversion, validation.
//! - `native/balanced/{..}`: the same algorithm compiled natively (the `balanced` built-in),
//!   `TaskAssignor::assign` alone.
//! - `native-validated/balanced/{..}`: `Assignor::BuiltIn(..).assign`: the native algorithm
//!   plus output validation. `call − native-validated` is what the sandbox adds.
//! - `boundary/{raw,sdk}/{..}`: probe guests that return their input's current assignment and
//!   do no work, on the input with a previous assignment (one active and one standby per
//!   task), through `assign_unvalidated` (no validation): input in, output out, plus the
//!   fixed per-call cost. `raw` (`probe-raw`) echoes the WIT lists from the generated
//!   bindings: the crossing alone, with the host's conversions. `sdk` (`probe-echo`) goes
//!   through the SDK's domain model, as every SDK assignor does.
//! - `boundary-fixed/{raw,sdk}`: the same probes on a one-member, one-task group: the fixed
//!   per-call cost (fresh store and instance, `configure`, `assign`). The boundary alone is
//!   `boundary/P/N − boundary-fixed/P`.
//! - `fresh-instance`: store creation and instantiation of the balanced component only.
//! - `load/memory-cache`: `Runtime::load` of a component the runtime has already compiled
//!   (hash, checks, `instantiate_pre`, the `name()` and `configure()` calls).
//! - `load/disk-cache`: `Runtime::load` on a fresh runtime whose cache directory already
//!   holds the compiled artifact (deserialize from disk and the rest; creating the runtime is
//!   excluded).
//! - `load/compile`: `Runtime::load` on a fresh runtime without a cache (Cranelift compile
//!   and the rest; creating the runtime is excluded).
//!
//! The `call`, `native*` and `boundary*` times include dropping the returned assignment (one
//! `TaskSet` pair per member), as a caller would. Before the groups run, the fuel, peak
//! memory and canonical-ABI input/output bytes of one call of the balanced component and of
//! the probe are printed to stderr for every size.

use std::collections::BTreeMap;
use std::time::Duration;

use assignor_coordinator::Assignor;
use assignor_sandbox::{ComponentAssignor, Limits, Runtime, Usage};
use assignor_sdk::{GroupSpec, Topology};
use assignor_tests::bench_input::{Mode, SIZES, generate};
use assignor_tests::guests;

/// Standby replicas of every generated group.
const STANDBY_REPLICAS: u32 = 1;
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

/// One member, one stateful subtopology of one partition, nothing previously assigned.
const TINY_GROUP: &str = r#"{
  "topology": {"subtopologies": [{"id": "0", "maxNumInputPartitions": 1, "isStateful": true}]},
  "configs": {"numStandbyReplicas": 1, "rackAwareAssignmentTags": []},
  "members": [{"memberId": "member-00000", "processId": "process-00000"}]
}"#;

/// Both inputs of one size.
struct Inputs {
    members: u32,
    tasks: u32,
    cold: (GroupSpec, Topology),
    previous: (GroupSpec, Topology),
}

fn load(runtime: &Runtime, path: &str) -> ComponentAssignor {
    runtime
        .load_file(path, &BTreeMap::new())
        .unwrap_or_else(|e| panic!("loading {path}: {e}"))
}

fn describe(usage: &Usage) -> String {
    let show = |v: Option<usize>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    format!(
        "fuel {:>11}, peak memory {:>10} B, input {:>8} B, output {:>8} B, one call {:?}",
        usage.fuel.map_or_else(|| "-".to_owned(), |v| v.to_string()),
        show(usage.peak_memory_bytes),
        show(usage.input_bytes),
        show(usage.output_bytes),
        usage.wall_time,
    )
}

fn sandbox(c: &mut Criterion) {
    let runtime = Runtime::new(Limits::default()).expect("engine configuration is valid");
    let balanced = load(&runtime, guests::BALANCED);
    let probe = load(&runtime, guests::PROBE_ECHO);
    let raw = load(&runtime, guests::PROBE_RAW);
    let probes = [("sdk", &probe), ("raw", &raw)];
    let native = assignor_coordinator::builtin("balanced").expect("`balanced` is a built-in");
    let native_validated =
        Assignor::builtin("balanced", &Default::default()).expect("`balanced` is a built-in");

    let inputs: Vec<Inputs> = SIZES
        .iter()
        .map(|&size| Inputs {
            members: size.0,
            tasks: size.2 * size.3,
            cold: generate(size, STANDBY_REPLICAS, Mode::Cold),
            previous: generate(size, STANDBY_REPLICAS, Mode::Previous),
        })
        .collect();

    // Figures for one call of each component, outside any timing; the calls also check that
    // every benchmarked call succeeds.
    eprintln!("per-call usage (default limits; balanced on the cold input, probe on --previous):");
    for input in &inputs {
        let (group, topology) = &input.cold;
        let (_, usage) = balanced
            .assign(group, topology)
            .unwrap_or_else(|e| panic!("balanced, {} members: {e}", input.members));
        eprintln!(
            "  {:>4} members {:>5} tasks  balanced    {}",
            input.members,
            input.tasks,
            describe(&usage)
        );
        native_validated
            .assign(group, topology)
            .unwrap_or_else(|e| panic!("native balanced, {} members: {e}", input.members));
        let (group, topology) = &input.previous;
        let (_, usage) = probe
            .assign_unvalidated(group, topology)
            .unwrap_or_else(|e| panic!("probe, {} members: {e}", input.members));
        eprintln!(
            "  {:>4} members {:>5} tasks  probe-echo  {}",
            input.members,
            input.tasks,
            describe(&usage)
        );
    }
    let tiny = assignor_coordinator::json::parse_input(TINY_GROUP).expect("the tiny group parses");
    let (_, usage) = probe
        .assign_unvalidated(&tiny.0, &tiny.1)
        .unwrap_or_else(|e| panic!("probe, tiny group: {e}"));
    eprintln!("     tiny group        probe-echo  {}", describe(&usage));

    let mut group = c.benchmark_group("call");
    for input in &inputs {
        let (g, t) = &input.cold;
        group.bench_with_input(BenchmarkId::new("balanced", input.members), &(), |b, ()| {
            b.iter(|| balanced.assign(g, t).expect("balanced assigns"));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("native");
    for input in &inputs {
        let (g, t) = &input.cold;
        group.bench_with_input(BenchmarkId::new("balanced", input.members), &(), |b, ()| {
            b.iter(|| native.assign(g, t).expect("native balanced assigns"));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("native-validated");
    for input in &inputs {
        let (g, t) = &input.cold;
        group.bench_with_input(BenchmarkId::new("balanced", input.members), &(), |b, ()| {
            b.iter(|| {
                native_validated
                    .assign(g, t)
                    .expect("native balanced assigns")
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("boundary");
    for (name, probe) in probes {
        for input in &inputs {
            let (g, t) = &input.previous;
            group.bench_with_input(BenchmarkId::new(name, input.members), &(), |b, ()| {
                b.iter(|| probe.assign_unvalidated(g, t).expect("probe echoes"));
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("boundary-fixed");
    for (name, probe) in probes {
        group.bench_function(name, |b| {
            b.iter(|| {
                probe
                    .assign_unvalidated(&tiny.0, &tiny.1)
                    .expect("probe echoes")
            });
        });
    }
    group.finish();

    c.bench_function("fresh-instance", |b| {
        b.iter(|| balanced.fresh_instance().expect("balanced instantiates"));
    });

    let bytes = std::fs::read(guests::BALANCED)
        .unwrap_or_else(|e| panic!("reading {}: {e}", guests::BALANCED));
    let config = BTreeMap::new();
    let mut group = c.benchmark_group("load");
    group.bench_function("memory-cache", |b| {
        // `runtime` compiled the balanced component when `balanced` was loaded above.
        b.iter(|| {
            runtime
                .load(&bytes, "balanced.wasm", &config)
                .expect("balanced loads")
        });
    });
    let cache_dir = tempfile::tempdir().expect("creating a temporary cache directory");
    Runtime::with_cache_dir(Limits::default(), cache_dir.path())
        .expect("engine configuration is valid")
        .load(&bytes, "balanced.wasm", &config)
        .expect("balanced loads");
    group.bench_function("disk-cache", |b| {
        b.iter_batched(
            || {
                Runtime::with_cache_dir(Limits::default(), cache_dir.path())
                    .expect("engine configuration is valid")
            },
            |fresh| {
                fresh
                    .load(&bytes, "balanced.wasm", &config)
                    .expect("balanced loads")
            },
            BatchSize::PerIteration,
        );
    });
    group.sample_size(10);
    group.bench_function("compile", |b| {
        b.iter_batched(
            || Runtime::new(Limits::default()).expect("engine configuration is valid"),
            |fresh| {
                fresh
                    .load(&bytes, "balanced.wasm", &config)
                    .expect("balanced loads")
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = sandbox
}
criterion_main!(benches);
