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
//! printed to stderr.

use std::collections::BTreeMap;
use std::time::Duration;

use assignor_coordinator::Assignor;
use assignor_sandbox::{Limits, Runtime};
use assignor_tests::bench_input::{Mode, SIZES, generate};
use assignor_tests::guests;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

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
                let input = generate(size, standbys, mode);
                let (_, usage) = component
                    .assign(&input.0, &input.1)
                    .unwrap_or_else(|e| panic!("sticky, {size:?} r{standbys} {mode:?}: {e}"));
                eprintln!(
                    "{:>4} members r{standbys} {:<8}  fuel {:>11}  peak memory {:>9} B  one call {:?}",
                    size.0,
                    mode.name(),
                    usage.fuel.unwrap_or_default(),
                    usage.peak_memory_bytes.unwrap_or_default(),
                    usage.wall_time
                );
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
