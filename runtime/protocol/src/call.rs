//! One call's report: its usage beside the limits it ran under, or its error. `assignor
//! assign --json` prints them, the service's answers carry them, `assignor check` and
//! `replay` reuse them.

use serde::{Deserialize, Serialize};

pub use assignor_sdk::CallLimits;

use super::document::AssignmentDoc;

/// A call's resource use beside the limits it ran under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// Fuel consumed; `None` for a native built-in.
    pub fuel: Option<u64>,
    /// Bytes copied into the guest; `None` for a native built-in.
    pub input_bytes: Option<u64>,
    /// The limits of the call.
    pub limits: CallLimits,
    /// Bytes the guest returned; `None` for a native built-in.
    pub output_bytes: Option<u64>,
    /// Peak linear memory, in bytes; `None` for a native built-in.
    pub peak_memory_bytes: Option<u64>,
    /// Wall time of the whole call, in microseconds.
    pub wall_time_us: u64,
}

/// A failed call: Kafka's `TaskAssignorException` message with the kind beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallError {
    /// The assignor that failed.
    pub assignor: String,
    /// Fuel consumed before the failure, where the sandbox measured it.
    pub fuel: Option<u64>,
    /// The error kind, e.g. `out-of-fuel` (a string, so that a newer runtime's kinds still
    /// read).
    pub kind: String,
    /// What happened and what to do.
    pub message: String,
}

/// `{"error": …}`: how `--json` output reports a failed call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDoc {
    /// The failure.
    pub error: CallError,
}

/// `{"assignment", "usage"}`: how `--json` output reports a successful call. `A` is the
/// assignment's type: a borrowed view when written, [`AssignmentDoc`] when read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome<A = AssignmentDoc> {
    /// The assignment, in the output JSON contract.
    pub assignment: A,
    /// What the call used.
    pub usage: UsageReport,
}
