//! Runs the native `sticky` assignor on one of the standard benchmark groups (1000 members,
//! 16,384 tasks; `shared/bench/gen.py 1000 500 16 1024 R 7`; with `STICKY_MEMBERS=10` or
//! `100` in the environment, the standard group of that size), for instruction counts under
//! callgrind and for checking that a change leaves outputs as they were.
//!
//! `cargo run --release -p assignor-tests --example sticky_calls -- MODE R [CALLS] [OUT]`
//! (MODE: `cold`, `previous` or `churn`; R: standby replicas) calls the built-in the way the
//! `native/` benchmark does (`Assignor::assign`: input limits, the algorithm, output
//! validation) CALLS times (default 1) and, given OUT, writes the last output there, one
//! member per line. Under callgrind, count the algorithm alone with
//! `--toggle-collect='*StickyAssignor*as*TaskAssignor*assign*'`, the whole call with
//! `--toggle-collect='assignor_coordinator::assignor::Assignor::assign'` (a wildcard pattern
//! such as `*Assignor*assign*` also toggles on the calls inside, which turns collection off
//! again and leaves little more than validation counted; the input generation runs in a
//! child process).

use std::fmt::Write as _;
use std::process::ExitCode;

use std::collections::BTreeMap;

use assignor_coordinator::Assignor;
use assignor_tests::bench_input::{Mode, SIZES, generate};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sticky_calls cold|previous|churn STANDBYS [CALLS] [OUT]";
    let Some(mode) = args
        .first()
        .and_then(|a| Mode::ALL.into_iter().find(|m| m.name() == a))
    else {
        eprintln!("{usage}");
        return ExitCode::FAILURE;
    };
    let (Some(Ok(standbys)), Ok(calls)) = (
        args.get(1).map(|a| a.parse::<u32>()),
        args.get(2).map_or(Ok(1), |a| a.parse::<u32>()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::FAILURE;
    };
    let members = std::env::var("STICKY_MEMBERS").map_or(Ok(1000), |m| m.parse::<u32>());
    let Some(&size) = members.ok().and_then(|m| SIZES.iter().find(|s| s.0 == m)) else {
        eprintln!("STICKY_MEMBERS: one of the standard sizes, 10, 100 or 1000");
        return ExitCode::FAILURE;
    };
    let (group, topology) = generate(size, standbys, mode);
    let sticky = Assignor::builtin("sticky", &BTreeMap::new()).expect("`sticky` is a built-in");
    let mut last = None;
    for _ in 0..calls {
        last = Some(sticky.assign(&group, &topology).expect("sticky assigns").0);
    }
    if let (Some(out), Some(assignment)) = (args.get(3), last) {
        let mut text = String::new();
        for (m, a) in group.members.iter().zip(&assignment.members) {
            let tasks = |set: &assignor_sdk::TaskSet| {
                set.iter()
                    .map(|t| format!("{}_{}", t.subtopology, t.partition))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let _ = writeln!(
                text,
                "{} active [{}] standby [{}]",
                m.member_id,
                tasks(&a.active_tasks),
                tasks(&a.standby_tasks)
            );
        }
        if let Err(e) = std::fs::write(out, text) {
            eprintln!("cannot write {out}: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
