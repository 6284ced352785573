//! Benchmarks of the `sticky` assignor (issue 3): the native built-in and the sandboxed
//! sample component on the project's standard groups.
//!
//! Run with `cargo bench -p assignor-tests --bench sticky` (add `-- <filter>`, e.g.
//! `-- sandboxed/1000`). Inputs come from `shared/bench/gen.py` at the standard sizes (10,
//! 100 and 1000 members; 128, 2048 and 16384 tasks), seed 7, with 0 and 1 standby replicas,
//! in each mode: `cold` (nothing assigned), `previous` (a balanced previous assignment) and
//! `churn` (members left and joined since). Ids read `{native,sandboxed}/<mode>-r<standbys>/
//! <members>`.
//!
//! - `native`: `Assignor::BuiltIn(sticky).assign` — the algorithm plus output validation.
//! - `sandboxed`: `ComponentAssignor::assign` of the sample component under default limits —
//!   the whole call: fresh instance, input in, algorithm in wasm, output out, validation.
//!
//! Before timing, each input's fuel, peak memory and one-call wall time in the sandbox are
//! printed to stderr. `--features bench-mimalloc` runs it under the `assignor` binary's
//! allocator.
//!
//! The large size (issue 19: 10,000 members on 5,000 processes, 32 subtopologies of 5,000
//! partitions, 160,000 tasks; `gen.py 10000 5000 32 5000 R 7`) has groups of its own,
//! `{native,sandboxed}-large/<mode>-r<standbys>/10000`, of 10 samples each: a call takes
//! 10–40 ms and each input a few seconds to generate, so an input is generated (and its
//! one-call figures printed) only when a benchmark that uses it runs. Run them with
//! `cargo bench -p assignor-tests --bench sticky -- large/` (about three minutes); the
//! filters of the standard sizes (`sandboxed/`, `native/`) leave them out.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use assignor_coordinator::Assignor;
use assignor_sandbox::{ComponentAssignor, Limits, Runtime, Usage};
use assignor_sdk::{GroupSpec, Topology};
use assignor_tests::bench_input::{LARGE, Mode, SIZES, generate};
use assignor_tests::guests;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// With `--features bench-mimalloc`, the allocator of the `assignor` binary, whose `assign`,
/// `check` and `serve` run these calls; without, the system's, as every figure before issue
/// 19's eleventh pass was measured (the host's side of a sandboxed call allocates per member
/// and per string, so the allocator shows in both kinds of rows).
#[cfg(feature = "bench-mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A group and its topology: one benchmark input.
type Input = (GroupSpec, Topology);

/// One input's figures from a call in the sandbox.
fn report(members: u32, standbys: u32, mode: Mode, usage: &Usage) {
    eprintln!(
        "{members:>5} members r{standbys} {:<8}  fuel {:>13}  peak memory {:>10} B  one call {:?}",
        mode.name(),
        usage.fuel.unwrap_or_default(),
        usage.peak_memory_bytes.unwrap_or_default(),
        usage.wall_time
    );
}

/// `size`'s input with `standbys` replicas in `mode`, after one sandboxed call whose figures
/// are printed.
fn input(
    component: &ComponentAssignor,
    size: (u32, u32, u32, u32),
    standbys: u32,
    mode: Mode,
) -> Input {
    let input = generate(size, standbys, mode);
    let (_, usage) = component
        .assign(&input.0, &input.1)
        .unwrap_or_else(|e| panic!("sticky, {size:?} r{standbys} {mode:?}: {e}"));
    report(size.0, standbys, mode, &usage);
    input
}

fn sticky(c: &mut Criterion) {
    let runtime = Runtime::new(Limits::default()).expect("engine configuration is valid");
    let component = runtime
        .load_file(guests::STICKY, &BTreeMap::new())
        .unwrap_or_else(|e| panic!("loading {}: {e}", guests::STICKY));
    let native = Assignor::builtin("sticky", &BTreeMap::new()).expect("`sticky` is a built-in");

    let mut inputs = Vec::new();
    for &size in SIZES {
        for standbys in [0, 1] {
            for mode in Mode::ALL {
                let input = input(&component, size, standbys, mode);
                inputs.push((format!("{}-r{standbys}", mode.name()), size.0, input));
            }
        }
    }

    for (name, run) in [("native", None), ("sandboxed", Some(&component))] {
        let mut group = c.benchmark_group(name);
        for (id, members, (g, t)) in &inputs {
            group.bench_with_input(BenchmarkId::new(id, members), &(), |b, ()| match run {
                Some(component) => b.iter(|| component.assign(g, t).expect("sticky assigns")),
                None => b.iter(|| native.assign(g, t).expect("sticky assigns")),
            });
        }
        group.finish();
    }

    // Generated on first use: criterion calls a benchmark's routine only when its id passes
    // the filter.
    let large: Vec<(u32, Mode, OnceLock<Input>)> = [0, 1]
        .into_iter()
        .flat_map(|standbys| Mode::ALL.map(|mode| (standbys, mode, OnceLock::new())))
        .collect();
    for (name, run) in [
        ("native-large", None),
        ("sandboxed-large", Some(&component)),
    ] {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5));
        for (standbys, mode, cell) in &large {
            let id = BenchmarkId::new(format!("{}-r{standbys}", mode.name()), LARGE.0);
            group.bench_function(id, |b| {
                let (g, t) = cell.get_or_init(|| input(&component, LARGE, *standbys, *mode));
                match run {
                    Some(component) => b.iter(|| component.assign(g, t).expect("sticky assigns")),
                    None => b.iter(|| native.assign(g, t).expect("sticky assigns")),
                }
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = sticky
}
criterion_main!(benches);
