//! A tenant's limits on the wire: all of them as the service reports them
//! (`GET /v1/admin/tenants`), and the admin's overrides it accepts, stores and echoes
//! (`PUT /v1/admin/tenants/{tenant}/limits`). The fields are the same names throughout; one
//! call's subset is [`CallLimits`](super::CallLimits).

use serde::{Deserialize, Serialize};

/// A tenant's limits in force, every one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantLimitsReport {
    /// Time an upload has to be validated, compiled and loaded, in milliseconds.
    pub compile_timeout_ms: u64,
    /// Fuel per call; `None` (JSON `null`) when only the deadline bounds a call.
    pub fuel: Option<u64>,
    /// Uploaded assignors kept at once.
    pub max_assignors: u64,
    /// Bytes of captures kept, all together.
    pub max_capture_bytes: u64,
    /// Captures of failed computations kept at once.
    pub max_captures: u64,
    /// Largest component accepted, in bytes.
    pub max_component_bytes: u64,
    /// Assignments (and upload checks) running at once.
    pub max_concurrent_assignments: u64,
    /// Groups kept at once.
    pub max_groups: u64,
    /// Largest group document accepted, in bytes.
    pub max_input_bytes: u64,
    /// Linear memory per call, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock deadline per call, in milliseconds.
    pub timeout_ms: u64,
}

/// An admin's changes to a tenant's limits: each field present replaces the configured
/// value, absent ones keep it. The service stores them as this JSON and applies them on top
/// of its config file's values until an admin clears them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitOverrides {
    /// Time to validate, compile and load an upload, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_timeout_ms: Option<u64>,
    /// Fuel per call, or `"none"` for no fuel limit (a JSON `null` would read as "not
    /// changed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<FuelLimit>,
    /// Uploaded assignors kept at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_assignors: Option<u64>,
    /// Bytes of captures kept, all together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_capture_bytes: Option<u64>,
    /// Captures of failed computations kept at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_captures: Option<u64>,
    /// Largest component accepted, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_component_bytes: Option<u64>,
    /// Assignments (and upload checks) running at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_assignments: Option<u64>,
    /// Groups kept at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_groups: Option<u64>,
    /// Largest group document accepted, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_bytes: Option<u64>,
    /// Linear memory per call, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Wall-clock deadline per call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A fuel limit as JSON: a number of units, or `"none"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum FuelLimit {
    /// At most this many units per call.
    Units(u64),
    /// No fuel limit; the deadline alone bounds a call.
    Off(NoFuel),
}

/// The `"none"` of [`FuelLimit::Off`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum NoFuel {
    /// `"none"`.
    #[serde(rename = "none")]
    None,
}

impl FuelLimit {
    /// The limit as the runtime takes it: `None` for no fuel limit.
    pub fn units(self) -> Option<u64> {
        match self {
            Self::Units(units) => Some(units),
            Self::Off(NoFuel::None) => None,
        }
    }
}

impl LimitOverrides {
    /// These overrides, then `later`'s on top.
    pub fn then(&self, later: &Self) -> Self {
        Self {
            fuel: later.fuel.or(self.fuel),
            memory_bytes: later.memory_bytes.or(self.memory_bytes),
            timeout_ms: later.timeout_ms.or(self.timeout_ms),
            compile_timeout_ms: later.compile_timeout_ms.or(self.compile_timeout_ms),
            max_assignors: later.max_assignors.or(self.max_assignors),
            max_component_bytes: later.max_component_bytes.or(self.max_component_bytes),
            max_concurrent_assignments: later
                .max_concurrent_assignments
                .or(self.max_concurrent_assignments),
            max_input_bytes: later.max_input_bytes.or(self.max_input_bytes),
            max_groups: later.max_groups.or(self.max_groups),
            max_captures: later.max_captures.or(self.max_captures),
            max_capture_bytes: later.max_capture_bytes.or(self.max_capture_bytes),
        }
    }
}
