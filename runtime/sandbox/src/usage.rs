//! What one call used, reported with every successful result.

use std::time::Duration;

/// Resources one assignment used. Sandbox-only figures are `None` for native built-ins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Fuel consumed by instantiation, `configure` and `assign` together (deterministic).
    pub fuel: Option<u64>,
    /// Peak linear memory of the instance, in bytes.
    pub peak_memory_bytes: Option<usize>,
    /// Wall time of the whole call, conversion and validation included.
    pub wall_time: Duration,
    /// Canonical-ABI bytes copied into the guest.
    pub input_bytes: Option<usize>,
    /// Canonical-ABI bytes the guest returned.
    pub output_bytes: Option<usize>,
}
