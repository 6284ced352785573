//! [`CallLimits`] (feature `serde`): the sandbox limits one call runs under, in plain units.
//!
//! One shape for every place they cross a process boundary: a capture records them (so a
//! replay runs exactly as the failed call did), and `assignor-protocol` reports them beside a
//! call's usage (`assignor assign --json`, `assignor check`, the service's answers). It lives
//! here, below both, because the SDK's capture files need it and the protocol depends on the
//! SDK, not the other way round.

/// The sandbox limits of one call. As JSON (a usage report's `limits`) the keys are
/// camelCase, in this order; the wasm stack is not among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallLimits {
    /// Fuel per call; `None` (JSON `null`) when only the deadline bounds a call.
    pub fuel: Option<u64>,
    /// Largest output, in bytes.
    pub max_output_bytes: u64,
    /// Linear memory per instance, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock deadline, in milliseconds.
    pub timeout_ms: u64,
    /// Wasm stack, in bytes. Captures record it; a usage report's JSON does not carry it
    /// (its contract predates the field, and a report is about what the call used), so it is
    /// `None` when read from JSON.
    #[serde(skip)]
    pub wasm_stack_bytes: Option<u64>,
}
