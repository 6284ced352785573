//! The service's own stored record: a tenant's limit overrides, under the tenant's `limits`
//! key. The coordinator owns (and encodes) everything else the service keeps.
//!
//! The record is JSON with the admin API's field names, which is what the first runtimes
//! stored (the API's `LimitOverrides` itself), so those values read unchanged. It is a type of
//! the service's own so that the API's shape can change without changing what is on disk: a
//! change to either is a compile error in the conversions below, never a silently different
//! record. A field is added as an optional key. Unknown keys are refused rather than skipped:
//! a record written by a newer runtime, read by an older one, would otherwise lose a limit an
//! admin set and run the tenant under looser ones; the tenant then does not start, naming
//! the record.

use assignor_protocol::{FuelLimit, LimitOverrides};
use serde::{Deserialize, Serialize};

/// A tenant's stored limit overrides; absent fields keep the config file's values.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct LimitsRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compile_timeout_ms: Option<u64>,
    /// A number of fuel units, or `"none"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fuel: Option<FuelLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_assignors: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_capture_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_captures: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_component_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_concurrent_assignments: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_groups: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_input_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
}

impl LimitsRecord {
    /// The stored bytes of `overrides`.
    pub(crate) fn encode(overrides: &LimitOverrides) -> Vec<u8> {
        let record = Self {
            compile_timeout_ms: overrides.compile_timeout_ms,
            fuel: overrides.fuel,
            max_assignors: overrides.max_assignors,
            max_capture_bytes: overrides.max_capture_bytes,
            max_captures: overrides.max_captures,
            max_component_bytes: overrides.max_component_bytes,
            max_concurrent_assignments: overrides.max_concurrent_assignments,
            max_groups: overrides.max_groups,
            max_input_bytes: overrides.max_input_bytes,
            memory_bytes: overrides.memory_bytes,
            timeout_ms: overrides.timeout_ms,
        };
        serde_json::to_vec(&record).expect("a limits record always serializes")
    }

    /// The overrides stored as `bytes`; `Err` says why they are not a limits record.
    pub(crate) fn decode(bytes: &[u8]) -> Result<LimitOverrides, serde_json::Error> {
        let r: Self = serde_json::from_slice(bytes)?;
        Ok(LimitOverrides {
            compile_timeout_ms: r.compile_timeout_ms,
            fuel: r.fuel,
            max_assignors: r.max_assignors,
            max_capture_bytes: r.max_capture_bytes,
            max_captures: r.max_captures,
            max_component_bytes: r.max_component_bytes,
            max_concurrent_assignments: r.max_concurrent_assignments,
            max_groups: r.max_groups,
            max_input_bytes: r.max_input_bytes,
            memory_bytes: r.memory_bytes,
            timeout_ms: r.timeout_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Overrides survive the trip through their record, and a record as the first runtimes
    /// stored it (the API's JSON) reads as the same overrides.
    #[test]
    fn round_trips_and_reads_what_was_stored() {
        let stored = br#"{"fuel":"none","memoryBytes":1048576,"maxGroups":3}"#;
        let overrides = LimitsRecord::decode(stored).expect("reads");
        assert_eq!(overrides.fuel.and_then(FuelLimit::units), None);
        assert!(overrides.fuel.is_some());
        assert_eq!(overrides.memory_bytes, Some(1 << 20));
        assert_eq!(overrides.max_groups, Some(3));
        let again = LimitsRecord::decode(&LimitsRecord::encode(&overrides)).expect("reads");
        assert_eq!(again, overrides);
    }

    /// A key this runtime does not know is refused, naming it: a newer runtime's limit is
    /// never dropped silently.
    #[test]
    fn refuses_unknown_keys() {
        let err = LimitsRecord::decode(br#"{"maxWidgets":1}"#).expect_err("refused");
        assert!(err.to_string().contains("maxWidgets"), "{err}");
    }
}
