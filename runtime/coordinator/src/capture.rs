//! Captures of failed calls: the exact input, assignor, configuration, limits and failure in
//! the SDK's [`Capture`] file format, written by `assignor assign` and the coordinator, read
//! back by `assignor replay` and by tests.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use assignor_sdk::capture::{Capture, CapturedFailure};
use assignor_sdk::{CallLimits, GroupAssignment, GroupSpec, Topology};

use crate::assignor::Assignor;
use assignor_sandbox::Limits;
use assignor_sandbox::Usage;
use assignor_sandbox::{ErrorKind, TaskAssignorError};

/// The file extension of captures.
pub const EXTENSION: &str = "capture";

/// The capture of a call of `assignor` on `group` and `topology` that failed with `error`.
pub fn of_failure(
    assignor: &Assignor,
    group: &GroupSpec,
    topology: &Topology,
    error: &TaskAssignorError,
) -> Capture {
    let (component_sha256, limits) = match assignor {
        Assignor::BuiltIn { .. } => (None, None),
        Assignor::Component(c) => (Some(c.sha256()), Some(CallLimits::from(c.limits()))),
    };
    Capture {
        assignor: assignor.name().to_owned(),
        component_sha256,
        config: assignor.config(),
        limits,
        group: group.clone(),
        topology: topology.clone(),
        failure: Some(CapturedFailure {
            kind: error.kind.as_str().to_owned(),
            message: error.message.clone(),
            fuel: error.fuel,
        }),
    }
}

/// The limits to replay `capture` under: its own (over the defaults, for what a capture does
/// not record), or the defaults for a built-in's capture. The conversion is
/// [`Limits::with_call_limits`].
pub fn limits_for(capture: &Capture) -> Limits {
    capture
        .limits
        .as_ref()
        .map_or_else(Limits::default, |l| Limits::default().with_call_limits(l))
}

/// Whether a replay's `outcome` ends as `capture` did: the same error kind and message and
/// the same fuel (except for timeouts, which stop at a time-dependent point), or success for a
/// capture of a call that succeeded.
pub fn reproduces(
    capture: &Capture,
    outcome: &Result<(GroupAssignment, Usage), TaskAssignorError>,
) -> bool {
    match (&capture.failure, outcome) {
        (None, Ok(_)) => true,
        (Some(c), Err(e)) => {
            c.kind == e.kind.as_str()
                && c.message == e.message
                && (e.kind == ErrorKind::Timeout || c.fuel == e.fuel)
        }
        _ => false,
    }
}

/// Writes `capture` into `dir` (created if missing) as `<assignor>-<unix ms>.capture` and
/// returns the path. The name keeps only characters safe in file names.
pub fn save(dir: &Path, capture: &Capture) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let millis = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let name: String = capture
        .assignor
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{name}-{millis}.{EXTENSION}"));
    std::fs::write(&path, capture.to_bytes())?;
    Ok(path)
}
