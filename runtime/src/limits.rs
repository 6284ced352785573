//! Per-call resource limits for sandboxed assignors.

use std::time::Duration;

/// Default fuel per call: one billion units, about a quarter of a second of guest compute on
/// these machines (an endless loop stops in ~0.25 s) and far more than a well-behaved assignor
/// needs for 1000 members and 16384 tasks (see the README's figures).
pub const DEFAULT_FUEL: u64 = 1_000_000_000;
/// Default linear memory per instance, summed over its memories: 256 MiB.
pub const DEFAULT_MEMORY_BYTES: usize = 256 << 20;
/// Default wasm stack: 1 MiB, wasmtime's own default.
pub const DEFAULT_WASM_STACK_BYTES: usize = 1 << 20;
/// Default wall-clock deadline per call, the backstop when fuel is disabled or slow host work
/// (copying a huge input) dominates: 5 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default cap on the assignment a guest may return, in canonical-ABI bytes (12 bytes per
/// member/task entry): 16 MiB, about 1.4 million entries.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 << 20;
/// Default cap on captured guest stdout/stderr: the last 16 KiB are kept.
pub const DEFAULT_MAX_STDERR_BYTES: usize = 16 << 10;
/// Default number of calls one runtime runs at once: 256. Instances come from a pool of this
/// many pre-reserved slots, which makes a fresh instance per call cheap.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 256;
/// Default cap on a component's size at load: 32 MiB (a release-built Rust assignor is
/// ~100 KB).
pub const DEFAULT_MAX_COMPONENT_BYTES: usize = 32 << 20;

/// Limits applied to every sandboxed call, built with setters over documented defaults.
///
/// ```
/// use std::time::Duration;
/// use assignor_runtime::Limits;
///
/// let limits = Limits::default()
///     .fuel(Some(500_000_000))
///     .memory_bytes(64 << 20)
///     .timeout(Duration::from_millis(500));
/// assert_eq!(limits.get_memory_bytes(), 64 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    fuel: Option<u64>,
    memory_bytes: usize,
    wasm_stack_bytes: usize,
    timeout: Duration,
    max_output_bytes: usize,
    max_stderr_bytes: usize,
    max_component_bytes: usize,
    max_concurrent_calls: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: Some(DEFAULT_FUEL),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            wasm_stack_bytes: DEFAULT_WASM_STACK_BYTES,
            timeout: DEFAULT_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            max_component_bytes: DEFAULT_MAX_COMPONENT_BYTES,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
        }
    }
}

impl Limits {
    /// Fuel per call (instantiation, `configure` and `assign` together); `None` disables the
    /// fuel limit and leaves the wall-clock deadline as the only bound on compute. Fuel is
    /// deterministic: the same input consumes the same fuel. Default [`DEFAULT_FUEL`].
    pub fn fuel(mut self, fuel: Option<u64>) -> Self {
        self.fuel = fuel;
        self
    }

    /// Linear memory per instance in bytes, summed over the instance's memories; growth past
    /// it fails and the call reports `memory-limit`. Default [`DEFAULT_MEMORY_BYTES`].
    pub fn memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Maximum wasm stack in bytes. Wasmtime fixes it per engine, so it takes effect when a
    /// [`Runtime`](crate::Runtime) is created from these limits. Default
    /// [`DEFAULT_WASM_STACK_BYTES`].
    pub fn wasm_stack_bytes(mut self, bytes: usize) -> Self {
        self.wasm_stack_bytes = bytes;
        self
    }

    /// Wall-clock deadline per call, enforced by epoch interruption with
    /// [`EPOCH_TICK`](crate::EPOCH_TICK) granularity. Default [`DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Largest assignment a guest may return, in canonical-ABI bytes. Default
    /// [`DEFAULT_MAX_OUTPUT_BYTES`].
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// How much of the guest's stdout/stderr is kept (the tail). Default
    /// [`DEFAULT_MAX_STDERR_BYTES`].
    pub fn max_stderr_bytes(mut self, bytes: usize) -> Self {
        self.max_stderr_bytes = bytes;
        self
    }

    /// Largest component accepted at load, in bytes. Default [`DEFAULT_MAX_COMPONENT_BYTES`].
    pub fn max_component_bytes(mut self, bytes: usize) -> Self {
        self.max_component_bytes = bytes;
        self
    }

    /// How many calls a runtime runs at once (its instance pool size); a call beyond it fails
    /// at once rather than waiting. Fixed when a [`Runtime`](crate::Runtime) is created.
    /// Default [`DEFAULT_MAX_CONCURRENT_CALLS`].
    pub fn max_concurrent_calls(mut self, calls: u32) -> Self {
        self.max_concurrent_calls = calls;
        self
    }

    /// The fuel limit, `None` when disabled.
    pub fn get_fuel(&self) -> Option<u64> {
        self.fuel
    }

    /// The memory limit in bytes.
    pub fn get_memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// The wasm stack limit in bytes.
    pub fn get_wasm_stack_bytes(&self) -> usize {
        self.wasm_stack_bytes
    }

    /// The wall-clock deadline.
    pub fn get_timeout(&self) -> Duration {
        self.timeout
    }

    /// The output limit in bytes.
    pub fn get_max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// The captured-output limit in bytes.
    pub fn get_max_stderr_bytes(&self) -> usize {
        self.max_stderr_bytes
    }

    /// The component size limit in bytes.
    pub fn get_max_component_bytes(&self) -> usize {
        self.max_component_bytes
    }

    /// The concurrent call limit.
    pub fn get_max_concurrent_calls(&self) -> u32 {
        self.max_concurrent_calls
    }
}
