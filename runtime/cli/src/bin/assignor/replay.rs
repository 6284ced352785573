//! `assignor replay FILE`: rerun a captured call and say whether it fails the same way.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use assignor_coordinator::capture::{self, EXTENSION};
use assignor_coordinator::{Assignor, json};
use assignor_protocol::ErrorDoc;
use assignor_sandbox::wire;
use assignor_sandbox::{TaskAssignorError, Usage};
use assignor_sdk::capture::Capture;
use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use clap::Args;

use crate::resolve_assignor;

#[derive(Args)]
pub struct ReplayArgs {
    /// A capture file (written by `assignor assign`, the coordinator or the service when a
    /// call fails).
    file: PathBuf,
    /// Run this assignor instead: a built-in name or a `.wasm` component. Needed for a
    /// captured component (a capture records its SHA-256, not its bytes).
    #[arg(long)]
    assignor: Option<String>,
    /// Print one JSON object: `{"captured", "replayed", "reproduced"}`.
    #[arg(long)]
    json: bool,
}

/// Exit 0 when the replay ends as the capture did (same error kind and message, and the same
/// fuel except for timeouts), 1 when it differs, 2 on bad arguments.
pub fn replay(args: ReplayArgs, cache: &crate::CacheArgs) -> anyhow::Result<ExitCode> {
    let capture = Capture::read(&args.file).map_err(anyhow::Error::msg)?;
    let limits = capture::limits_for(&capture);
    let runtime = crate::runtime(limits.clone(), cache)?;
    let name = match (&args.assignor, &capture.component_sha256) {
        (Some(name), _) => name.clone(),
        (None, None) => capture.assignor.clone(),
        (None, Some(sha)) => anyhow::bail!(
            "{} captured a call of the component `{}` (sha256 {}); pass the component with \
             --assignor FILE.wasm",
            args.file.display(),
            capture.assignor,
            short(sha)
        ),
    };
    let mut notes = Vec::new();
    let outcome = match resolve_assignor(&runtime, &name, &capture.config) {
        Ok(assignor) => {
            if let (Assignor::Component(c), Some(sha)) = (&assignor, &capture.component_sha256)
                && c.sha256() != *sha
            {
                notes.push(format!(
                    "replaying with a different build: sha256 {}, captured {}",
                    short(&c.sha256()),
                    short(sha)
                ));
            }
            assignor.assign(&capture.group, &capture.topology)
        }
        Err(e) => Err(e),
    };
    let reproduced = capture::reproduces(&capture, &outcome);
    let mut out = std::io::stdout().lock();
    if args.json {
        let replayed = match &outcome {
            Ok((assignment, usage)) => serde_json::json!({
                "assignment": json::assignment_doc(&capture.group, &capture.topology, assignment),
                "usage": wire::usage_report(usage, &limits),
            }),
            Err(e) => serde_json::json!(ErrorDoc::from(e)),
        };
        let doc = serde_json::json!({
            "captured": {
                "assignor": capture.assignor,
                "component_sha256": capture.component_sha256,
                "failure": capture.failure,
            },
            "replayed": replayed,
            "reproduced": reproduced,
            "notes": notes,
        });
        writeln!(out, "{doc}")?;
    } else {
        write!(out, "{}", summary(&args.file, &capture, &outcome, &notes))?;
        writeln!(
            out,
            "{}",
            if reproduced {
                "reproduced: the replay ends as the captured call did"
            } else {
                "DIFFERS: the replay does not end as the captured call did"
            }
        )?;
    }
    Ok(if reproduced {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes a capture for a failed call of `assignor` into `dir` and says where, for the
/// one-shot commands.
pub fn save_failure(
    dir: &Path,
    assignor: &Assignor,
    group: &GroupSpec,
    topology: &Topology,
    error: &TaskAssignorError,
) -> anyhow::Result<PathBuf> {
    let capture = capture::of_failure(assignor, group, topology, error);
    capture::save(dir, &capture)
        .with_context(|| format!("cannot write a .{EXTENSION} file into {}", dir.display()))
}

fn summary(
    file: &Path,
    capture: &Capture,
    outcome: &Result<(GroupAssignment, Usage), TaskAssignorError>,
    notes: &[String],
) -> String {
    let tasks = capture.topology.tasks().count();
    let mut text = format!(
        "replaying {}: assignor `{}`{}, {} members, {tasks} tasks\n",
        file.display(),
        capture.assignor,
        capture.component_sha256.as_ref().map_or_else(
            || " (built-in)".to_owned(),
            |s| format!(" (sha256 {})", short(s))
        ),
        capture.group.members.len(),
    );
    for note in notes {
        text.push_str(&format!("note: {note}\n"));
    }
    let captured = match &capture.failure {
        Some(f) => format!("{}{}: {}", f.kind, fuel_text(f.fuel), f.message),
        None => "succeeded".to_owned(),
    };
    text.push_str(&format!("captured: {captured}\n"));
    let replayed = match outcome {
        Ok((_, usage)) => format!("succeeded{}", fuel_text(usage.fuel)),
        Err(e) => format!("{}{}: {}", e.kind, fuel_text(e.fuel), e.message),
    };
    text.push_str(&format!("replayed: {replayed}\n"));
    text
}

fn fuel_text(fuel: Option<u64>) -> String {
    fuel.map_or_else(String::new, |f| format!(" after {f} fuel"))
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
