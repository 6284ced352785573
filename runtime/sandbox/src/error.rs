//! The one error every failed assignment becomes.

use std::fmt;
use std::sync::Arc;

/// Why an assignment failed (DESIGN §5 error kinds; the wire names are the `Display` form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The call used up its fuel.
    OutOfFuel,
    /// The instance tried to grow its memory past the limit.
    MemoryLimit,
    /// The guest overflowed the wasm stack.
    StackOverflow,
    /// The wall-clock deadline passed.
    Timeout,
    /// Any other trap (a panic, `unreachable`, a bad lift); the message carries the guest's
    /// stderr tail.
    Trap,
    /// The assignor returned an error (Kafka's `TaskAssignorException`).
    GuestError,
    /// The assignor returned an assignment that breaks a rule; the message says which.
    InvalidOutput,
    /// The component could not be loaded: not a component, wrong world or version, forbidden
    /// import, too big to compile, failing `configure`.
    Load,
    /// The group is over one of the runtime's input limits (members, subtopologies,
    /// partitions, tasks, id length): refused before any work, the assignor never ran.
    InputLimit,
    /// The host had no capacity for the call (every instance slot in use): not the assignor's
    /// fault, so a coordinator retries at once, without backoff or capture.
    Capacity,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 10] = [
        Self::OutOfFuel,
        Self::MemoryLimit,
        Self::StackOverflow,
        Self::Timeout,
        Self::Trap,
        Self::GuestError,
        Self::InvalidOutput,
        Self::Load,
        Self::InputLimit,
        Self::Capacity,
    ];

    /// The kind's stable wire name, e.g. `out-of-fuel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OutOfFuel => "out-of-fuel",
            Self::MemoryLimit => "memory-limit",
            Self::StackOverflow => "stack-overflow",
            Self::Timeout => "timeout",
            Self::Trap => "trap",
            Self::GuestError => "guest-error",
            Self::InvalidOutput => "invalid-output",
            Self::Load => "load",
            Self::InputLimit => "input-limit",
            Self::Capacity => "capacity",
        }
    }
}

impl ErrorKind {
    /// Whether a failure of this kind means the guest ran: every kind but `input-limit` and
    /// `capacity`, which refuse a call before it starts (and `load`, which no call returns).
    pub fn ran_guest(self) -> bool {
        !matches!(self, Self::InputLimit | Self::Capacity | Self::Load)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kafka's `TaskAssignorException`, with the failing assignor and the kind of failure.
///
/// Whatever goes wrong in a call (trap, limit, guest error, invalid output) ends here; the
/// coordinator keeps the group's previous target assignment. The message says what happened
/// in the assignor author's terms; where a lower layer failed (wasmtime's trap or compile
/// error, an I/O error reading a file) that error is kept as the [`source`](std::error::Error::source),
/// for embedders that walk the chain. The source is not part of the serde form, nor of
/// equality: two errors are equal when they say the same.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("task assignor `{assignor}` failed ({kind}): {message}")]
pub struct TaskAssignorError {
    /// The assignor's name, or the file it was loaded from when it has no name yet.
    pub assignor: String,
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What went wrong and, where it helps, what to do about it.
    pub message: String,
    /// Fuel the call consumed before it failed, where the sandbox measured it (`None` for
    /// built-ins and for failures before the call started). Deterministic for every kind but
    /// `timeout`: a replay of the same input consumes the same fuel.
    pub fuel: Option<u64>,
    /// The lower layer's error behind this one, if any. Boxed twice so that the pointer is
    /// thin: errors that embed this one stay small enough to return by value.
    #[source]
    #[serde(skip)]
    source: Option<Arc<Box<dyn std::error::Error + Send + Sync + 'static>>>,
}

impl PartialEq for TaskAssignorError {
    fn eq(&self, other: &Self) -> bool {
        (&self.assignor, self.kind, &self.message, self.fuel)
            == (&other.assignor, other.kind, &other.message, other.fuel)
    }
}

impl Eq for TaskAssignorError {}

impl TaskAssignorError {
    /// An error of `kind` for `assignor`.
    pub fn new(assignor: impl Into<String>, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            assignor: assignor.into(),
            kind,
            message: message.into(),
            fuel: None,
            source: None,
        }
    }

    /// The same error, with the fuel consumed before it.
    pub fn with_fuel(mut self, fuel: Option<u64>) -> Self {
        self.fuel = fuel;
        self
    }

    /// The same error, caused by `source` (wasmtime's, an I/O error, …).
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.source = Some(Arc::new(source.into()));
        self
    }
}
