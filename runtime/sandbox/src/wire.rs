//! The sandbox's values in [`assignor_protocol`]'s wire shapes and back, in one
//! place: [`Limits`] ⇄ [`CallLimits`] (usage reports) and ⇄ [`CapturedLimits`] (captures),
//! [`Usage`] ⇄ [`UsageReport`], [`TaskAssignorError`] → [`CallError`]. They live here, beside
//! the runtime's types, because the protocol depends on nothing but serde and the SDK.

use std::time::Duration;

use assignor_sdk::capture::CapturedLimits;

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
        }
    }
}

impl From<&Limits> for CapturedLimits {
    fn from(limits: &Limits) -> Self {
        Self {
            fuel: limits.get_fuel(),
            memory_bytes: limits.get_memory_bytes() as u64,
            wasm_stack_bytes: limits.get_wasm_stack_bytes() as u64,
            timeout_ms: millis(limits.get_timeout()),
            max_output_bytes: limits.get_max_output_bytes() as u64,
        }
    }
}

impl Limits {
    /// These limits with a report's call limits in place of their own (the others, which a
    /// report does not carry, stay).
    pub fn with_call_limits(self, call: &CallLimits) -> Self {
        self.fuel(call.fuel)
            .memory_bytes(size(call.memory_bytes))
            .timeout(Duration::from_millis(call.timeout_ms))
            .max_output_bytes(size(call.max_output_bytes))
    }

    /// These limits with a capture's in place of their own (the others, which a capture does
    /// not record — output capture, component size, concurrency — stay).
    pub fn with_captured(self, captured: &CapturedLimits) -> Self {
        self.fuel(captured.fuel)
            .memory_bytes(size(captured.memory_bytes))
            .wasm_stack_bytes(size(captured.wasm_stack_bytes))
            .timeout(Duration::from_millis(captured.timeout_ms))
            .max_output_bytes(size(captured.max_output_bytes))
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

    /// Limits survive the trip through a capture and through a usage report, what each does
    /// not carry taken from the base.
    #[test]
    fn limits_round_trip() {
        let limits = Limits::default()
            .fuel(Some(123))
            .memory_bytes(3 << 20)
            .wasm_stack_bytes(64 << 10)
            .timeout(Duration::from_millis(250))
            .max_output_bytes(999);
        let captured = CapturedLimits::from(&limits);
        assert_eq!(Limits::default().with_captured(&captured), limits);
        let call = CallLimits::from(&limits);
        let base = Limits::default().wasm_stack_bytes(64 << 10);
        assert_eq!(base.with_call_limits(&call), limits);
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
