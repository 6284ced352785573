//! The sandbox's values in [`assignor_protocol`]'s wire shapes and back, in one
//! place: [`Limits`] ⇄ [`CallLimits`] (usage reports and captures),
//! [`Usage`] ⇄ [`UsageReport`], [`TaskAssignorError`] → [`CallError`]. They live here, beside
//! the runtime's types, because the protocol depends on nothing but serde and the SDK.

use std::time::Duration;

use crate::Limits;
use crate::TaskAssignorError;
use crate::Usage;
use assignor_protocol::{CallError, CallLimits, ErrorDoc, UsageReport};

/// A duration in whole milliseconds, saturating.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A wire count or size as the host's `usize`, saturating on 32-bit hosts.
pub fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl From<&Limits> for CallLimits {
    fn from(limits: &Limits) -> Self {
        Self {
            fuel: limits.get_fuel(),
            max_output_bytes: limits.get_max_output_bytes() as u64,
            memory_bytes: limits.get_memory_bytes() as u64,
            timeout_ms: millis(limits.get_timeout()),
            wasm_stack_bytes: Some(limits.get_wasm_stack_bytes() as u64),
        }
    }
}

impl Limits {
    /// These limits with a call's (a usage report's or a capture's) in place of their own;
    /// the others, which a call's limits do not carry (output capture, component size,
    /// concurrency, input limits, and the wasm stack where a report leaves it out), stay.
    pub fn with_call_limits(self, call: &CallLimits) -> Self {
        let limits = self
            .fuel(call.fuel)
            .memory_bytes(size(call.memory_bytes))
            .timeout(Duration::from_millis(call.timeout_ms))
            .max_output_bytes(size(call.max_output_bytes));
        match call.wasm_stack_bytes {
            Some(stack) => limits.wasm_stack_bytes(size(stack)),
            None => limits,
        }
    }
}

/// The report of a call that used `usage` under `limits`.
pub fn usage_report(usage: &Usage, limits: &Limits) -> UsageReport {
    UsageReport {
        fuel: usage.fuel,
        input_bytes: usage.input_bytes.map(|b| b as u64),
        limits: limits.into(),
        output_bytes: usage.output_bytes.map(|b| b as u64),
        peak_memory_bytes: usage.peak_memory_bytes.map(|b| b as u64),
        wall_time_us: u64::try_from(usage.wall_time.as_micros()).unwrap_or(u64::MAX),
    }
}

impl From<&UsageReport> for Usage {
    fn from(report: &UsageReport) -> Self {
        Self {
            fuel: report.fuel,
            peak_memory_bytes: report.peak_memory_bytes.map(size),
            wall_time: Duration::from_micros(report.wall_time_us),
            input_bytes: report.input_bytes.map(size),
            output_bytes: report.output_bytes.map(size),
        }
    }
}

impl From<&TaskAssignorError> for CallError {
    fn from(error: &TaskAssignorError) -> Self {
        Self {
            assignor: error.assignor.clone(),
            fuel: error.fuel,
            kind: error.kind.as_str().to_owned(),
            message: error.message.clone(),
        }
    }
}

impl From<&TaskAssignorError> for ErrorDoc {
    fn from(error: &TaskAssignorError) -> Self {
        Self {
            error: error.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits survive the trip through a call's limits, and through their JSON (a usage
    /// report's), which leaves the wasm stack to the base.
    #[test]
    fn limits_round_trip() {
        let limits = Limits::default()
            .fuel(Some(123))
            .memory_bytes(3 << 20)
            .wasm_stack_bytes(64 << 10)
            .timeout(Duration::from_millis(250))
            .max_output_bytes(999);
        let call = CallLimits::from(&limits);
        assert_eq!(Limits::default().with_call_limits(&call), limits);
        let json = serde_json::to_string(&call).expect("serializes");
        assert!(!json.contains("wasmStack"), "{json}");
        let read: CallLimits = serde_json::from_str(&json).expect("reads");
        let base = Limits::default().wasm_stack_bytes(64 << 10);
        assert_eq!(base.with_call_limits(&read), limits);
    }

    /// A usage report reads back as the usage it was made from.
    #[test]
    fn usage_round_trips() {
        let usage = Usage {
            fuel: Some(7),
            peak_memory_bytes: Some(1 << 16),
            wall_time: Duration::from_micros(1234),
            input_bytes: Some(10),
            output_bytes: None,
        };
        let report = usage_report(&usage, &Limits::default());
        assert_eq!(Usage::from(&report), usage);
        assert_eq!(report.limits.timeout_ms, 5000);
    }
}
