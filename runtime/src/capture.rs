//! Captures of failed calls: the exact input, assignor, configuration, limits and failure in
//! the SDK's [`Capture`] file format, written by `assignor assign` and the coordinator, read
//! back by `assignor replay` and by tests.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use assignor_sdk::capture::{Capture, CapturedFailure, CapturedLimits};
use assignor_sdk::{GroupAssignment, GroupSpec, Topology};

use crate::assignor::Assignor;
use crate::error::{ErrorKind, TaskAssignorError};
use crate::limits::Limits;
use crate::usage::Usage;

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
        Assignor::Component(c) => (Some(c.sha256()), Some(captured_limits(c.limits()))),
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

/// `limits` in the capture's plain units.
pub fn captured_limits(limits: &Limits) -> CapturedLimits {
    CapturedLimits {
        fuel: limits.get_fuel(),
        memory_bytes: limits.get_memory_bytes() as u64,
        wasm_stack_bytes: limits.get_wasm_stack_bytes() as u64,
        timeout_ms: u64::try_from(limits.get_timeout().as_millis()).unwrap_or(u64::MAX),
        max_output_bytes: limits.get_max_output_bytes() as u64,
    }
}

/// The limits a capture ran under, over `base` (for what a capture does not record: output
/// capture, component size, concurrency).
pub fn limits_of(captured: &CapturedLimits, base: Limits) -> Limits {
    let size = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
    base.fuel(captured.fuel)
        .memory_bytes(size(captured.memory_bytes))
        .wasm_stack_bytes(size(captured.wasm_stack_bytes))
        .timeout(Duration::from_millis(captured.timeout_ms))
        .max_output_bytes(size(captured.max_output_bytes))
}

/// The limits to replay `capture` under: its own, or the defaults for a built-in's capture.
pub fn limits_for(capture: &Capture) -> Limits {
    capture
        .limits
        .as_ref()
        .map_or_else(Limits::default, |l| limits_of(l, Limits::default()))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits survive the trip through a capture, the unrecorded ones taken from the base.
    #[test]
    fn limits_round_trip() {
        let limits = Limits::default()
            .fuel(Some(123))
            .memory_bytes(3 << 20)
            .wasm_stack_bytes(64 << 10)
            .timeout(Duration::from_millis(250))
            .max_output_bytes(999);
        assert_eq!(
            limits_of(&captured_limits(&limits), Limits::default()),
            limits
        );
    }
}
