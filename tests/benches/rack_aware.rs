//! Benchmarks of the `rack-aware` assignor (issue 7): the native built-in and the sandboxed
//! sample component on the project's standard groups, given a skewed rack layout.
//!
//! Run with `cargo bench -p assignor-tests --bench rack_aware` (add `-- <filter>`, e.g.
//! `-- sandboxed/cold/1000`). Inputs come from `shared/bench/gen.py` at 100 and 1000 members
//! (2048 and 16384 tasks), seed 7, one standby replica, in each mode (`cold`, `previous`,
//! `churn`; see `bench_input`), with three racks added by [`with_racks`]: processes dealt to
//! the racks in turn, two source topics per subtopology, partition replicas in one or two
//! racks skewed towards `r0`. A fourth mode, `steady`, is the cold group with rack-aware's own
//! output as the current assignment: the rebalance where nothing changed, which the fixed point
//! answers with that same output. Ids read `{native,sandboxed}/<mode>/<members>`.
//!
//! - `native`: `Assignor::BuiltIn(rack-aware).assign` — the algorithm plus output validation.
//! - `sandboxed`: `ComponentAssignor::assign` of the sample component under default
//!   (production) limits — the whole call: fresh instance, input in, algorithm in wasm,
//!   output out, validation.
//!
//! Before timing, each input's cross-rack partitions (actives / standbys) under the `sticky`
//! assignment and under rack-aware's, and the sandboxed call's fuel, peak memory and one-call
//! wall time, are printed to stderr.

use std::collections::BTreeMap;
use std::time::Duration;

use assignor_coordinator::Assignor;
use assignor_sandbox::{Limits, Runtime};
use assignor_sdk::harness::with_current;
use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use assignor_tests::bench_input::{Mode, SEED, SIZES, generate, with_racks};
use assignor_tests::guests;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// Input partitions read across racks by the actives and by the standbys of `a`: those with
/// no replica in the holding member's rack.
fn cross_rack(group: &GroupSpec, topology: &Topology, a: &GroupAssignment) -> (usize, usize) {
    let misses = |rack: &str, task: &assignor_sdk::TaskId| {
        let s = &topology.subtopologies[task.subtopology as usize];
        s.source_topics
            .iter()
            .filter_map(|t| t.partition_racks.get(task.partition as usize))
            .filter(|replicas| !replicas.iter().any(|&r| topology.racks[r as usize] == rack))
            .count()
    };
    let mut cost = (0, 0);
    for (m, out) in group.members.iter().zip(&a.members) {
        let rack = m.rack_id.as_deref().unwrap_or_default();
        cost.0 += out
            .active_tasks
            .iter()
            .map(|t| misses(rack, t))
            .sum::<usize>();
        cost.1 += out
            .standby_tasks
            .iter()
            .map(|t| misses(rack, t))
            .sum::<usize>();
    }
    cost
}

fn rack_aware(c: &mut Criterion) {
    let runtime = Runtime::new(Limits::default()).expect("engine configuration is valid");
    let component = runtime
        .load_file(guests::RACK_AWARE, &BTreeMap::new())
        .unwrap_or_else(|e| panic!("loading {}: {e}", guests::RACK_AWARE));
    let native =
        Assignor::builtin("rack-aware", &BTreeMap::new()).expect("`rack-aware` is a built-in");
    let sticky = Assignor::builtin("sticky", &BTreeMap::new()).expect("`sticky` is a built-in");

    let mut inputs = Vec::new();
    for &size in &SIZES[1..] {
        let mut steady = None;
        for mode in Mode::ALL.map(Some).into_iter().chain([None]) {
            let (g, t) = match mode {
                Some(mode) => {
                    let (mut g, mut t) = generate(size, 1, mode);
                    with_racks(&mut g, &mut t, 3, u64::from(SEED));
                    (g, t)
                }
                None => steady.take().expect("the cold group came first"),
            };
            let name = mode.map_or("steady", Mode::name);
            let (before, _) = sticky.assign(&g, &t).expect("sticky assigns");
            let (after, usage) = component
                .assign(&g, &t)
                .unwrap_or_else(|e| panic!("rack-aware, {size:?} {name}: {e}"));
            if mode == Some(Mode::Cold) {
                steady = Some((with_current(&g, &after), t.clone()));
            }
            let (before, after) = (cross_rack(&g, &t, &before), cross_rack(&g, &t, &after));
            eprintln!(
                "{:>4} members {:<8}  cross-rack actives {:>5} -> {:>5}, standbys {:>5} -> \
                 {:>5}  fuel {:>11}  peak memory {:>9} B  one call {:?}",
                size.0,
                name,
                before.0,
                after.0,
                before.1,
                after.1,
                usage.fuel.unwrap_or_default(),
                usage.peak_memory_bytes.unwrap_or_default(),
                usage.wall_time
            );
            inputs.push((name, size.0, (g, t)));
        }
    }

    for (name, run) in [("native", None), ("sandboxed", Some(&component))] {
        let mut group = c.benchmark_group(name);
        for (id, members, (g, t)) in &inputs {
            group.bench_with_input(BenchmarkId::new(*id, members), &(), |b, ()| match run {
                Some(component) => b.iter(|| component.assign(g, t).expect("rack-aware assigns")),
                None => b.iter(|| native.assign(g, t).expect("rack-aware assigns")),
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
        .measurement_time(Duration::from_secs(3));
    targets = rack_aware
}
criterion_main!(benches);
