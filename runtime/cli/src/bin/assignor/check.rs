//! `assignor check`: the arguments and the printing; the suite itself is
//! [`assignor_cli::check`].

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use assignor_cli::check::{self, CheckOptions};
use assignor_protocol::CallError;
use clap::Args;

use crate::{CaptureArgs, LimitArgs, parse_key_value, resolve_assignor};

#[derive(Args)]
pub struct CheckArgs {
    /// The assignor: a component file (`.wasm`) or a built-in's name.
    assignor: String,
    /// Configuration passed to the assignor's `configure`, as KEY=VALUE (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    config: Vec<(String, String)>,
    /// Random groups (1-50 members, 0-2 standbys, random current assignments) besides the
    /// standard cases.
    #[arg(long, default_value_t = CheckOptions::default().cases)]
    cases: usize,
    /// Seed of the random groups: the same seed gives the same groups.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Make an advisory rule decide the verdict too (repeatable): active-balance,
    /// total-balance, minimum-movement, fixed-point, standby-placement, tag-diversity,
    /// caught-up-placement (within the `group.streams.acceptable.recovery.lag` given with
    /// `--config`, else 10000).
    #[arg(long = "require", value_name = "RULE", value_parser = check::parse_rule)]
    require: Vec<&'static str>,
    /// Print one JSON object (documented in the README) instead of the report.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    capture: CaptureArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Exit 0 when the verdict is pass, 1 when it is fail (the assignor does not load, or a
/// deciding rule failed), 2 on bad arguments.
pub fn check(args: CheckArgs, cache: &crate::CacheArgs) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    let runtime = crate::runtime(limits.clone(), cache)?;
    let config: BTreeMap<String, String> = args.config.iter().cloned().collect();
    let acceptable_recovery_lag =
        check::acceptable_recovery_lag(&config).map_err(anyhow::Error::msg)?;
    let mut out = std::io::stdout().lock();
    let assignor = match resolve_assignor(&runtime, &args.assignor, &config) {
        Ok(a) => a,
        Err(e) => {
            if args.json {
                let doc = serde_json::json!({
                    "assignor": { "source": args.assignor },
                    "loadError": CallError::from(&e),
                    "verdict": "fail",
                });
                writeln!(out, "{doc}")?;
            } else {
                writeln!(out, "assignor check: {}\nFAIL  load: {e}", args.assignor)?;
                writeln!(out, "verdict: FAIL (the assignor does not load)")?;
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let options = CheckOptions {
        cases: args.cases,
        seed: args.seed,
        require: args.require,
        capture_dir: args.capture.dir(),
        acceptable_recovery_lag,
    };
    let report = check::run(&assignor, &args.assignor, &limits, options);
    if args.json {
        writeln!(out, "{}", report.to_json())?;
    } else {
        write!(out, "{}", report.render(std::io::stdout().is_terminal()))?;
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
