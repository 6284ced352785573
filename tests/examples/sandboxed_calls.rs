//! Runs an assignor component on one of the standard benchmark groups (`shared/bench/gen.py`,
//! seed 7), for instruction counts under callgrind: on a shared machine wall time varies by
//! more than the few per cent a change to the boundary makes, instruction counts do not.
//!
//! `cargo run --release -p assignor-tests --example sandboxed_calls -- COMPONENT MEMBERS MODE R
//! [CALLS] [--unvalidated]` loads COMPONENT (a `.wasm` file, so that components built from
//! another commit can be compared) under default limits, but one concurrent call (an instance
//! pool valgrind can map), and calls it CALLS times (default 1) on the standard group of
//! MEMBERS members (10, 100 or 1000) in MODE (`cold`, `previous`, `churn`) with R standby
//! replicas: `ComponentAssignor::assign`, as the `sandboxed/` benchmark does, or
//! `assign_unvalidated`, as the `boundary/` benchmark does. It prints the last call's fuel
//! (`fuel N`) and peak linear memory (`peak_memory_bytes N`), both deterministic.
//!
//! Count with callgrind (this machine's `perf` has no hardware counters), on the calling
//! thread and inside the calls only, which leaves out generating the input, compiling the
//! component and the runtime's background threads (whose share grows with wall time, so
//! under valgrind it varies from run to run): `valgrind --tool=callgrind
//! --separate-threads=yes --toggle-collect='*ComponentAssignor*assign*' sandboxed_calls ...`,
//! then the main thread's total (`callgrind.out.PID-01`) over CALLS.

use std::collections::BTreeMap;
use std::process::ExitCode;

use assignor_sandbox::{Limits, Runtime};
use assignor_tests::bench_input::{Mode, SIZES, generate};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sandboxed_calls COMPONENT 10|100|1000 cold|previous|churn STANDBYS \
                 [CALLS] [--unvalidated]";
    let unvalidated = args.iter().any(|a| a == "--unvalidated");
    let args: Vec<&String> = args.iter().filter(|a| *a != "--unvalidated").collect();
    let size = args
        .get(1)
        .and_then(|a| SIZES.iter().find(|s| s.0.to_string() == **a));
    let mode = args
        .get(2)
        .and_then(|a| Mode::ALL.into_iter().find(|m| m.name() == a.as_str()));
    let standbys = args.get(3).and_then(|a| a.parse::<u32>().ok());
    let calls = args.get(4).map_or(Some(1), |a| a.parse::<u32>().ok());
    let (Some(path), Some(&size), Some(mode), Some(standbys), Some(calls)) =
        (args.first(), size, mode, standbys, calls)
    else {
        eprintln!("{usage}");
        return ExitCode::FAILURE;
    };
    let (group, topology) = generate(size, standbys, mode);
    // One call at a time: the instance pool then reserves address space for one call only,
    // which valgrind (callgrind) can map.
    let runtime = Runtime::new(Limits::default().max_concurrent_calls(1))
        .expect("engine configuration is valid");
    let component = match runtime.load_file(path, &BTreeMap::new()) {
        Ok(component) => component,
        Err(e) => {
            eprintln!("loading {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut last = None;
    for _ in 0..calls {
        let called = if unvalidated {
            component.assign_unvalidated(&group, &topology)
        } else {
            component.assign(&group, &topology)
        };
        match called {
            Ok((_, usage)) => last = Some(usage),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let last = last.unwrap_or_default();
    println!("fuel {}", last.fuel.unwrap_or_default());
    println!(
        "peak_memory_bytes {}",
        last.peak_memory_bytes.unwrap_or_default()
    );
    ExitCode::SUCCESS
}
