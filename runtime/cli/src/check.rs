//! What `assignor check` runs: the SDK harness's standard suite and seeded random groups
//! against an assignor inside production limits, giving usage per case, per-rule results and
//! a verdict, as text or JSON.
//!
//! Rules `runs` (no trap, limit or guest error), `valid` (the runtime accepts the output) and
//! `deterministic` (the same input gives the same output, which the coordinator relies on)
//! decide the verdict. The quality rules of the harness (balance, movement, fixed point,
//! standby placement, tag diversity, caught-up placement) are advisory unless `--require`d:
//! assignors promise different things (Kafka's `balanced`, and the samples written like it,
//! ignore offsets, so they fail caught-up placement on groups that report them).

use std::path::PathBuf;

use assignor_sdk::harness::strategy::GroupBounds;
use assignor_sdk::harness::suite::{self, Case};
use assignor_sdk::harness::{Check, checks};
use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use serde_json::json;

use assignor_coordinator::Assignor;
use assignor_coordinator::capture;
use assignor_protocol::{CallError, CallLimits};
use assignor_sandbox::Limits;
use assignor_sandbox::Usage;
use assignor_sandbox::wire;
use assignor_sandbox::{ErrorKind, TaskAssignorError};

/// The rules that decide the verdict.
pub const REQUIRED: [&str; 3] = ["runs", "valid", "deterministic"];
/// The harness's quality rules, advisory unless required with `--require`.
pub const ADVISORY: [&str; 7] = [
    "active-balance",
    "total-balance",
    "minimum-movement",
    "fixed-point",
    "standby-placement",
    "tag-diversity",
    "caught-up-placement",
];
/// A figure at or above this share of its limit is flagged.
pub const NEAR_LIMIT: f64 = 0.8;

/// What to run besides the standard suite, and what decides the verdict.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Random groups (1-50 members, 0-2 standbys, random current assignments).
    pub cases: usize,
    /// Seed of the random groups: the same seed gives the same groups.
    pub seed: u64,
    /// Advisory rules that decide the verdict too.
    pub require: Vec<&'static str>,
    /// Where captures of failed calls are written; `None`: not written.
    pub capture_dir: Option<PathBuf>,
    /// The lag up to which a process counts as caught up on a task, for `caught-up-placement`.
    pub acceptable_recovery_lag: i64,
}

impl Default for CheckOptions {
    /// 64 random groups, seed 0, no extra rules, no captures, Kafka's default
    /// `acceptable.recovery.lag` ([`checks::ACCEPTABLE_RECOVERY_LAG`]).
    fn default() -> Self {
        Self {
            cases: 64,
            seed: 0,
            require: Vec::new(),
            capture_dir: None,
            acceptable_recovery_lag: checks::ACCEPTABLE_RECOVERY_LAG,
        }
    }
}

/// The lag `caught-up-placement` uses with the assignor's configuration `config`: its
/// `group.streams.acceptable.recovery.lag` (the key the built-in `sticky` reads), else Kafka's
/// default; an error naming the key when its value is not a count.
pub fn acceptable_recovery_lag(
    config: &std::collections::BTreeMap<String, String>,
) -> Result<i64, String> {
    let key = sticky_assignor::ACCEPTABLE_RECOVERY_LAG;
    match config.get(key) {
        None => Ok(checks::ACCEPTABLE_RECOVERY_LAG),
        Some(v) => v
            .trim()
            .parse::<u64>()
            .map(|lag| i64::try_from(lag).unwrap_or(i64::MAX))
            .map_err(|_| {
                format!("--config {key}={v:?}: not a lag (a whole number of offsets, at least 0)")
            }),
    }
}

/// The advisory rule named `rule`, or an error listing them.
pub fn parse_rule(rule: &str) -> Result<&'static str, String> {
    ADVISORY
        .into_iter()
        .find(|r| *r == rule)
        .ok_or_else(|| format!("unknown rule {rule:?}; one of: {}", ADVISORY.join(", ")))
}

/// One case's run.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// Members in the group.
    pub members: usize,
    /// Tasks in the topology.
    pub tasks: usize,
    /// What the first call used, when it succeeded.
    pub usage: Option<Usage>,
    /// How the first call failed.
    pub error: Option<TaskAssignorError>,
    /// Every rule judged, in order.
    pub checks: Vec<Check>,
    /// The capture of the failed call, when one was written.
    pub capture: Option<PathBuf>,
}

/// A whole check: the assignor, the limits, every case, what decides the verdict.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The assignor's name.
    pub assignor: String,
    /// Where it came from, as given (a file or a built-in's name).
    pub source: String,
    /// SHA-256 of the component; `None` for a built-in.
    pub sha256: Option<String>,
    /// The limits the calls ran under.
    pub limits: Limits,
    /// The options it ran with.
    pub options: CheckOptions,
    /// The standard cases, then the random ones.
    pub cases: Vec<CaseResult>,
}

/// Runs the standard suite and `options.cases` random groups against `assignor` (loaded from
/// `source`) under `limits`, the limits its runtime enforces.
pub fn run(
    assignor: &Assignor,
    source: &str,
    limits: &Limits,
    options: CheckOptions,
) -> CheckReport {
    let mut cases = suite::standard();
    cases.extend(suite::random(
        GroupBounds::default(),
        options.seed,
        options.cases,
    ));
    let results = cases
        .into_iter()
        .map(|case| run_case(assignor, case, &options))
        .collect();
    CheckReport {
        assignor: assignor.name().to_owned(),
        source: source.to_owned(),
        sha256: match assignor {
            Assignor::Component(c) => Some(c.sha256()),
            _ => None,
        },
        limits: limits.clone(),
        options,
        cases: results,
    }
}

impl CheckReport {
    /// The rules that decide the verdict: [`REQUIRED`] and the `--require`d ones.
    pub fn required(&self) -> Vec<&'static str> {
        REQUIRED
            .into_iter()
            .chain(self.options.require.iter().copied())
            .collect()
    }

    /// The verdict: every deciding rule held on every case.
    pub fn passed(&self) -> bool {
        let required = self.required();
        self.cases
            .iter()
            .flat_map(|r| &r.checks)
            .all(|c| c.passed() || !required.contains(&c.rule))
    }

    /// The rules that failed on some case, deciding ones first.
    pub fn failed_rules(&self) -> Vec<&'static str> {
        rule_summaries(&self.cases)
            .into_iter()
            .filter(|(_, _, failed, _)| *failed > 0)
            .map(|(rule, ..)| rule)
            .collect()
    }
}

fn run_case(assignor: &Assignor, case: Case, options: &CheckOptions) -> CaseResult {
    let Case {
        name,
        group,
        topology,
    } = case;
    let mut result = CaseResult {
        name,
        members: group.members.len(),
        tasks: topology.tasks().count(),
        usage: None,
        error: None,
        checks: Vec::new(),
        capture: None,
    };
    let run = |g: &GroupSpec, t: &Topology| -> Result<GroupAssignment, String> {
        assignor
            .assign(g, t)
            .map(|(a, _)| a)
            .map_err(|e| e.to_string())
    };
    let assignment = match assignor.assign(&group, &topology) {
        Ok((assignment, usage)) => {
            result.usage = Some(usage);
            result.checks.push(pass("runs"));
            result.checks.push(pass("valid"));
            assignment
        }
        Err(e) => {
            let (runs, valid) = if e.kind == ErrorKind::InvalidOutput {
                (pass("runs"), fail("valid", e.message.clone()))
            } else {
                (
                    fail("runs", format!("{}: {}", e.kind, e.message)),
                    skipped("valid"),
                )
            };
            result.checks.extend([runs, valid]);
            if let Some(dir) = &options.capture_dir {
                let capture = capture::of_failure(assignor, &group, &topology, &e);
                result.capture = capture::save(dir, &capture).ok();
            }
            result.error = Some(e);
            return result;
        }
    };
    let deterministic = match run(&group, &topology) {
        Ok(again) if again == assignment => pass("deterministic"),
        Ok(_) => fail(
            "deterministic",
            "the same input gave a different assignment the second time".into(),
        ),
        Err(e) => fail("deterministic", format!("the second call failed: {e}")),
    };
    result.checks.push(deterministic);
    result.checks.extend([
        checks::active_balance(&group, &assignment, 1),
        checks::total_balance(&group, &assignment, 1),
        checks::minimum_movement(&group, &topology, &assignment),
        checks::fixed_point(&run, &group, &topology, &assignment),
        checks::standby_placement(&group, &topology, &assignment),
        checks::tag_diversity(&group, &topology, &assignment),
        checks::caught_up_placement(
            &group,
            &topology,
            &assignment,
            options.acceptable_recovery_lag,
        ),
    ]);
    result
}

fn pass(rule: &'static str) -> Check {
    Check {
        rule,
        outcome: Ok(()),
    }
}

fn fail(rule: &'static str, why: String) -> Check {
    Check {
        rule,
        outcome: Err(why),
    }
}

/// A rule that could not be judged because an earlier one failed: counted as failed so a
/// required rule never passes by default.
fn skipped(rule: &'static str) -> Check {
    fail(rule, "not checked: the call failed".into())
}

/// Per rule: (rule, checked, failed, first failure as (case, detail)).
type RuleSummary<'a> = (&'static str, usize, usize, Option<(&'a str, &'a str)>);

fn rule_summaries(results: &[CaseResult]) -> Vec<RuleSummary<'_>> {
    REQUIRED
        .into_iter()
        .chain(ADVISORY)
        .map(|rule| {
            let mut checked = 0;
            let mut failed = 0;
            let mut first = None;
            for r in results {
                for c in r.checks.iter().filter(|c| c.rule == rule) {
                    checked += 1;
                    if let Err(why) = &c.outcome {
                        failed += 1;
                        first.get_or_insert((r.name.as_str(), why.as_str()));
                    }
                }
            }
            (rule, checked, failed, first)
        })
        .collect()
}

/// Figures at or over [`NEAR_LIMIT`] of their limit: (case, resource, used, limit).
fn near_limits<'a>(
    results: &'a [CaseResult],
    limits: &Limits,
) -> Vec<(&'a str, &'static str, u64, u64)> {
    let mut flagged = Vec::new();
    for r in results {
        let Some(usage) = &r.usage else { continue };
        let mut flag = |resource, used: u64, limit: u64| {
            if limit > 0 && used as f64 >= NEAR_LIMIT * limit as f64 {
                flagged.push((r.name.as_str(), resource, used, limit));
            }
        };
        if let (Some(fuel), Some(limit)) = (usage.fuel, limits.get_fuel()) {
            flag("fuel", fuel, limit);
        }
        if let Some(memory) = usage.peak_memory_bytes {
            flag("memory", memory as u64, limits.get_memory_bytes() as u64);
        }
        if usage.fuel.is_some() {
            let timeout = u64::try_from(limits.get_timeout().as_micros()).unwrap_or(u64::MAX);
            let wall = u64::try_from(usage.wall_time.as_micros()).unwrap_or(u64::MAX);
            flag("wall time (µs)", wall, timeout);
        }
        if let Some(output) = usage.output_bytes {
            flag(
                "output",
                output as u64,
                limits.get_max_output_bytes() as u64,
            );
        }
    }
    flagged
}

impl CheckReport {
    /// The report as one JSON object (its fields are documented in the README).
    pub fn to_json(&self) -> serde_json::Value {
        let (limits, results, required) = (&self.limits, &self.cases, self.required());
        let cases: Vec<_> = results
            .iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "members": r.members,
                    "tasks": r.tasks,
                    // The report's limits are given once, at the top.
                    "usage": r.usage.as_ref().map(|u| {
                        let mut u = json!(wire::usage_report(u, limits));
                        u.as_object_mut().map(|o| o.remove("limits"));
                        u
                    }),
                    "error": r.error.as_ref().map(CallError::from),
                    "checks": r.checks.iter().map(|c| json!({
                        "rule": c.rule,
                        "passed": c.passed(),
                        "detail": c.outcome.as_ref().err(),
                    })).collect::<Vec<_>>(),
                    "capture": r.capture,
                })
            })
            .collect();
        let rules: Vec<_> = rule_summaries(results)
        .into_iter()
        .map(|(rule, checked, failed, first)| {
            json!({
                "rule": rule,
                "required": required.contains(&rule),
                "checked": checked,
                "failed": failed,
                "firstFailure": first.map(|(case, detail)| json!({"case": case, "detail": detail})),
            })
        })
        .collect();
        let near: Vec<_> = near_limits(results, limits)
        .into_iter()
        .map(|(case, resource, used, limit)| {
            json!({"case": case, "resource": resource, "used": used, "limit": limit})
        })
        .collect();
        json!({
            "assignor": { "name": self.assignor, "source": self.source, "sha256": self.sha256 },
            "limits": CallLimits::from(limits),
            "seed": self.options.seed,
            "acceptableRecoveryLag": self.options.acceptable_recovery_lag,
            "cases": cases,
            "rules": rules,
            "nearLimit": near,
            "verdict": if self.passed() { "pass" } else { "fail" },
        })
    }

    /// The report as text: a usage table (figures beside their limits), one line per rule,
    /// flagged figures, captures, the verdict; ANSI colours when `color`.
    pub fn render(&self, color: bool) -> String {
        let (limits, results, required) = (&self.limits, &self.cases, self.required());
        let paint = |text: String, code: &str| {
            if color {
                format!("\x1b[{code}m{text}\x1b[0m")
            } else {
                text
            }
        };
        let mut out = String::new();
        let origin = match &self.sha256 {
            Some(sha) => format!("component, sha256 {}", &sha[..sha.len().min(12)]),
            None => "built-in, run natively".to_owned(),
        };
        out.push_str(&format!(
            "assignor check: {} — assignor `{}` ({origin})\n",
            self.source, self.assignor
        ));
        out.push_str(&format!(
            "limits: fuel {}, memory {} MiB, wall time {} ms, output {} B\n\n",
            limits
                .get_fuel()
                .map_or_else(|| "unlimited".to_owned(), |f| f.to_string()),
            limits.get_memory_bytes() >> 20,
            limits.get_timeout().as_millis(),
            limits.get_max_output_bytes()
        ));
        out.push_str(&format!(
            "{:<28} {:>7} {:>6} {:>15} {:>12} {:>10}  result\n",
            "case", "members", "tasks", "fuel", "memory", "time"
        ));
        let percent = |used: u64, limit: Option<u64>| match limit {
            Some(l) if l > 0 => format!(" {:>3.0}%", used as f64 * 100.0 / l as f64),
            _ => String::new(),
        };
        let standard = results.len() - self.options.cases;
        for r in &results[..standard] {
            let (fuel, memory, time) = match &r.usage {
                Some(u) => (
                    u.fuel.map_or_else(
                        || "-".to_owned(),
                        |f| format!("{}{}", millions(f), percent(f, limits.get_fuel())),
                    ),
                    u.peak_memory_bytes.map_or_else(
                        || "-".to_owned(),
                        |m| {
                            format!(
                                "{:.1}MiB{}",
                                m as f64 / (1 << 20) as f64,
                                percent(m as u64, Some(limits.get_memory_bytes() as u64))
                            )
                        },
                    ),
                    format!("{:.2} ms", u.wall_time.as_secs_f64() * 1e3),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            let failed: Vec<&str> = r
                .checks
                .iter()
                .filter(|c| !c.passed())
                .map(|c| c.rule)
                .collect();
            let verdict = if failed.is_empty() {
                "pass".to_owned()
            } else if failed.iter().any(|f| required.contains(f)) {
                paint(format!("FAIL {}", failed.join(", ")), "31")
            } else {
                paint(format!("warn {}", failed.join(", ")), "33")
            };
            out.push_str(&format!(
                "{:<28} {:>7} {:>6} {:>15} {:>12} {:>10}  {verdict}\n",
                r.name, r.members, r.tasks, fuel, memory, time
            ));
        }
        let random = &results[standard..];
        if !random.is_empty() {
            let max_fuel = random.iter().filter_map(|r| r.usage?.fuel).max();
            let failing = random
                .iter()
                .filter(|r| r.checks.iter().any(|c| !c.passed()))
                .count();
            out.push_str(&format!(
                "{:<28} {:>7} {:>6} {:>15} {:>12} {:>10}  {} of {} with a failed rule\n",
                format!("random ×{} (seed {})", random.len(), self.options.seed),
                "1-50",
                "",
                max_fuel.map_or_else(|| "-".to_owned(), |f| format!("max {}", millions(f))),
                "",
                "",
                failing,
                random.len()
            ));
        }
        out.push_str("\nrule                 decides  result\n");
        for (rule, checked, failed, first) in rule_summaries(results) {
            let decides = if required.contains(&rule) {
                "yes"
            } else {
                "no"
            };
            let result = match first {
                None => format!("pass ({checked} case(s))"),
                Some((case, detail)) => {
                    let text = format!("{failed} of {checked} failed; first, {case}: {detail}");
                    if required.contains(&rule) {
                        paint(format!("FAIL {text}"), "31")
                    } else {
                        paint(format!("warn {text}"), "33")
                    }
                }
            };
            out.push_str(&format!("{rule:<20} {decides:<8} {result}\n"));
        }
        let near = near_limits(results, limits);
        for (case, resource, used, limit) in &near {
            out.push_str(&paint(
                format!(
                    "near limit: {case} used {used} of {limit} {resource} ({:.0}%)\n",
                    *used as f64 * 100.0 / *limit as f64
                ),
                "33",
            ));
        }
        let captures: Vec<_> = results.iter().filter_map(|r| r.capture.as_ref()).collect();
        if let Some(first) = captures.first() {
            out.push_str(&format!(
                "{} failed call(s) captured; rerun one with `assignor replay {}`\n",
                captures.len(),
                first.display()
            ));
        }
        let verdict = if self.passed() {
            paint("verdict: PASS".into(), "32")
        } else {
            paint("verdict: FAIL".into(), "31")
        };
        out.push_str(&format!("{verdict}\n"));
        out
    }
}

/// `12345678` → `12.3M`, `45678` → `46K`.
fn millions(fuel: u64) -> String {
    if fuel < 1_000_000 {
        format!("{:.0}K", fuel as f64 / 1e3)
    } else {
        format!("{:.1}M", fuel as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The lag comes from the assignor's configuration when given, else Kafka's default; a
    /// value that is not a count is refused naming the key, and a count beyond `i64` is
    /// saturated rather than wrapped.
    #[test]
    fn acceptable_recovery_lag_reads_the_configuration() {
        let key = sticky_assignor::ACCEPTABLE_RECOVERY_LAG;
        let with = |v: &str| BTreeMap::from([(key.to_owned(), v.to_owned())]);
        assert_eq!(acceptable_recovery_lag(&BTreeMap::new()), Ok(10_000));
        assert_eq!(acceptable_recovery_lag(&with(" 300 ")), Ok(300));
        assert_eq!(
            acceptable_recovery_lag(&with(&u64::MAX.to_string())),
            Ok(i64::MAX)
        );
        for bad in ["-1", "ten", ""] {
            let why = acceptable_recovery_lag(&with(bad)).expect_err(bad);
            assert!(why.contains(key), "{why}");
        }
    }
}
