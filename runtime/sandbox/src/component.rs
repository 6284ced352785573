//! A loaded assignor component and its sandboxed calls: one fresh `Store` and instance per
//! call from a cached `InstancePre`, since a trap leaves an instance unusable and no state may
//! survive from one group's call to the next.
//!
//! Every call is bounded as a whole, host work included: its future is dropped at the
//! deadline. Wasm code gives the deadline its chance through fuel: every [`YIELD_FUEL`] units
//! the guest yields to the executor, which drops the call if the deadline has passed; a call
//! waiting in a host function (a sleep, a poll) is dropped at once. The fuel check that makes
//! the yields is one the CPU limit pays anyway, where epoch interruption would add a second
//! check at every loop header and function entry (12–14 % of a 1000-member call's
//! instructions). Fuel tracks time closely enough: bulk memory operations pay a unit per byte,
//! and an ordinary instruction, cache and TLB misses included, takes well under 300 ns, so a
//! call runs at most ~30 ms of guest code past its deadline, and ~0.1 ms in practice.
//! [`ComponentAssignor::assign_async`] runs the guest on the runtime's own call threads
//! (`call_threads`), never on the caller's executor, so a service's request threads stay free whatever a guest does.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use wasmtime::{PoolConcurrencyLimitError, Store, Trap, WasmBacktrace};

use crate::boundary::{self, AssignorPre, NAME_RESULT_BYTES, Output};
use crate::cache::{self, ContentHash};
use crate::call_threads::{self, Start};
use crate::error::{ErrorKind, TaskAssignorError};
use crate::limits::{self, Limits};
use crate::runtime::Runtime;
use crate::usage::Usage;
use crate::wasi::{CallState, Capture};

/// Fuel between a call's yields to the executor: about 50–100 µs of guest work, short enough
/// that the wall-clock deadline is checked often and that other calls on the same call thread
/// ([`ComponentAssignor::assign_async`]) are not held up noticeably, long enough that the
/// yields cost ~1 % of a call (~1,200 instructions each). (The standard 10-member sticky call
/// uses 91,000–105,000 fuel without standbys and 190,000–225,000 with one.)
pub const YIELD_FUEL: u64 = 100_000;

/// Longest assignor name accepted; names travel in configs and describe responses.
const MAX_NAME_BYTES: usize = 249;

/// An assignor component, compiled, linked, named and configured: ready to assign.
pub struct ComponentAssignor {
    inner: Arc<Loaded>,
}

/// What a call needs, shared with the call threads.
struct Loaded {
    runtime: Runtime,
    pre: AssignorPre<CallState>,
    hash: ContentHash,
    name: String,
    config: Vec<(String, String)>,
    /// Whether the last async call failed after the guest ran: the next one then starts on
    /// the lowest-priority threads (see `call_threads::Start::Background`).
    failed_last: AtomicBool,
}

impl fmt::Debug for ComponentAssignor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComponentAssignor")
            .field("name", &self.inner.name)
            .field("sha256", &cache::hex(&self.inner.hash))
            .finish_non_exhaustive()
    }
}

/// A store set up for one call under the runtime's limits, with its captured output.
struct Sandbox {
    store: Store<CallState>,
    capture: Capture,
    fuel: u64,
}

impl Sandbox {
    /// Fuel used so far: instantiation, `configure` and `assign` together.
    fn consumed(&self) -> u64 {
        self.fuel - self.store.get_fuel().unwrap_or(0)
    }
}

/// What ended a sandboxed call early.
enum Stop {
    /// Wasmtime's error (a trap, a limit, a failed host call, a result over its hostcall
    /// fuel).
    Error(wasmtime::Error),
    /// The call ran past its deadline and was dropped: at a fuel yield in wasm code, or
    /// while it waited in a host function.
    Deadline,
}

/// Why `assign` gave no output to convert.
enum Refusal {
    /// The guest returned an `assign-error`; its message, cut to the message limit.
    Guest(String),
}

/// A finished call on the call threads: its output or error, and what it used.
struct Called {
    output: Result<Output, TaskAssignorError>,
    fuel: u64,
    peak_memory: usize,
}

impl ComponentAssignor {
    pub(crate) fn load(
        runtime: Runtime,
        pre: AssignorPre<CallState>,
        hash: ContentHash,
        origin: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<Self, TaskAssignorError> {
        let mut loaded = Loaded {
            runtime,
            pre,
            hash,
            name: origin.to_owned(),
            config: config.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            failed_last: AtomicBool::new(false),
        };
        // Each sandbox is dropped before the next is made: it holds one of the runtime's
        // instance slots. A name longer than `NAME_RESULT_BYTES` is refused before it is
        // copied; a shorter one is echoed in a refusal only in part.
        let name = {
            let this = &loaded;
            let mut sandbox = this.sandbox();
            sandbox.store.data_mut().result_bytes = NAME_RESULT_BYTES;
            let called = block_on(this.bounded(&mut sandbox, |instance, store| async move {
                api(&instance).call_name(store).await
            }));
            called.map_err(|e| match e {
                Stop::Error(e) if is_over_result_fuel(&e) => TaskAssignorError::new(
                    origin,
                    ErrorKind::Load,
                    format!(
                        "name() returned more than {}; a name must be 1 to {MAX_NAME_BYTES} \
                         bytes without whitespace",
                        limits::bytes(NAME_RESULT_BYTES as u64)
                    ),
                ),
                e => this.classify(e, &sandbox, "calling name()"),
            })?
        };
        if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_whitespace) {
            return Err(TaskAssignorError::new(
                origin,
                ErrorKind::Load,
                format!(
                    "name() returned {:?} ({} bytes); a name must be 1 to {MAX_NAME_BYTES} bytes \
                     without whitespace",
                    limits::cut(&name, 64),
                    name.len()
                ),
            ));
        }
        loaded.name = name;
        let this = &loaded;
        let mut sandbox = this.sandbox();
        let max_message = this.limits().get_max_message_bytes();
        let configured = block_on(this.bounded(&mut sandbox, |instance, store| async move {
            api(&instance)
                .call_configure(store, &this.config_args())
                .await
        }));
        match configured {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                return Err(TaskAssignorError::new(
                    &loaded.name,
                    ErrorKind::Load,
                    format!(
                        "configure rejected the configuration: {}",
                        limits::cut(&message, max_message)
                    ),
                ));
            }
            Err(e) => return Err(loaded.classify(e, &sandbox, "calling configure()")),
        }
        drop(sandbox);
        tracing::debug!(assignor = %loaded.name, sha256 = %cache::hex(&loaded.hash), "loaded assignor component");
        Ok(Self {
            inner: Arc::new(loaded),
        })
    }

    /// The assignor's `name()`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The configuration `configure` was given.
    pub fn config(&self) -> BTreeMap<String, String> {
        self.inner.config.iter().cloned().collect()
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        self.inner.limits()
    }

    /// SHA-256 of the component's bytes, hex-encoded.
    pub fn sha256(&self) -> String {
        cache::hex(&self.inner.hash)
    }

    /// Runs one assignment in a fresh sandbox and validates the result against the input.
    ///
    /// Blocks the calling thread for the whole call; it must not be a thread that drives
    /// async tasks (use [`assign_async`](Self::assign_async) there).
    pub fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        block_on(self.inner.run(group, topology, true))
    }

    /// [`assign`](Self::assign) for async code: the whole call (the input checked and
    /// converted, the guest run, its output converted and validated) runs on the runtime's
    /// call threads, one per core and shared by every runtime, and this future waits for it
    /// without holding a thread. So a guest's output, however large, is never worked on by
    /// the caller's executor. The guest yields after every [`YIELD_FUEL`] units of fuel so
    /// that calls share the threads, and a call that works for longer than
    /// [`FOREGROUND_TIME`](crate::FOREGROUND_TIME) finishes on threads of the lowest
    /// priority, so that it cannot slow short calls down. A call after one that failed once
    /// the guest ran (any kind but `input-limit` and `capacity`) runs on those threads from
    /// its start: a hostile guest fails fast, on little fuel, and would otherwise do all its
    /// work at normal priority.
    ///
    /// The group and topology are shared because the call may outlive this future: dropping
    /// it does not stop the call early; its limits do.
    pub async fn assign_async(
        &self,
        group: Arc<GroupSpec>,
        topology: Arc<Topology>,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        let loaded = Arc::clone(&self.inner);
        let start = if loaded.failed_last.load(Ordering::Relaxed) {
            Start::Background
        } else {
            Start::Foreground
        };
        call_threads::run(
            Box::pin(async move {
                let result = loaded.run(&group, &topology, true).await;
                let ran_and_failed = matches!(&result, Err(e) if e.kind.ran_guest());
                loaded.failed_last.store(ran_and_failed, Ordering::Relaxed);
                result
            }),
            start,
        )
        .await
    }

    /// [`ComponentAssignor::assign`] without output validation beyond what the domain model
    /// needs (member indices, no duplicate entries, output size): for measuring the boundary.
    #[doc(hidden)]
    pub fn assign_unvalidated(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        block_on(self.inner.run(group, topology, false))
    }

    /// Creates a sandbox and instantiates the component, nothing else: the fixed cost every
    /// call pays, for benchmarks.
    #[doc(hidden)]
    pub fn fresh_instance(&self) -> Result<(), TaskAssignorError> {
        let inner = &self.inner;
        let mut sandbox = inner.sandbox();
        block_on(inner.bounded(&mut sandbox, |_, _| async { Ok(()) }))
            .map_err(|e| inner.classify(e, &sandbox, "instantiating"))
    }
}

impl Loaded {
    fn limits(&self) -> &Limits {
        &self.runtime.inner.limits
    }

    /// The configuration as `configure`'s argument.
    fn config_args(&self) -> Vec<(&str, &str)> {
        self.config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// One assignment: the group checked against the input limits and converted, the call,
    /// then its output converted and, if `validate`, validated.
    async fn run(
        &self,
        group: &GroupSpec,
        topology: &Topology,
        validate: bool,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        let start = Instant::now();
        let input = self.lower(group, topology)?;
        let called = self.call(&input).await;
        self.finish(called, &input, group, topology, start, validate)
    }

    /// Checks the group against the input limits, then converts it to WIT values.
    fn lower<'a>(
        &self,
        group: &'a GroupSpec,
        topology: &'a Topology,
    ) -> Result<boundary::Input<'a>, TaskAssignorError> {
        self.limits().check_group(group, topology).map_err(|e| {
            TaskAssignorError::new(&self.name, ErrorKind::InputLimit, e.to_string())
        })?;
        Ok(boundary::input(group, topology))
    }

    /// Converts a finished call's output into the domain model and, if `validate`, checks it.
    fn finish(
        &self,
        called: Called,
        input: &boundary::Input<'_>,
        group: &GroupSpec,
        topology: &Topology,
        start: Instant,
        validate: bool,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        let fuel = Some(called.fuel);
        let output = called.output?;
        let output_bytes = boundary::output_bytes(&output);
        let invalid = |m: String| {
            TaskAssignorError::new(&self.name, ErrorKind::InvalidOutput, m).with_fuel(fuel)
        };
        let assignment = boundary::output(output, group, topology).map_err(invalid)?;
        if validate {
            // `assignor_sdk::validate`'s rules, with the processes the input was lowered with.
            assignor_sdk::__private::validate_with_processes(
                group,
                topology,
                &assignment,
                input.process_of(),
            )
            .map_err(invalid)?;
        }
        let usage = Usage {
            fuel,
            peak_memory_bytes: Some(called.peak_memory),
            wall_time: start.elapsed(),
            input_bytes: Some(input.bytes),
            output_bytes: Some(output_bytes),
        };
        Ok((assignment, usage))
    }

    /// One call of `assign` in a fresh sandbox: instantiate, `configure`, `assign`, and copy
    /// the output out, all under the call's deadline.
    async fn call(&self, input: &boundary::Input<'_>) -> Called {
        let mut sandbox = self.sandbox();
        let limits = self.limits();
        let max_message = limits.get_max_message_bytes();
        sandbox.store.data_mut().result_bytes = boundary::result_bytes(limits);
        let this = self;
        let config = self.config_args();
        let records = input.records();
        let subtopologies = input.subtopologies(&records);
        let (group, topology) = input.args(&records, &subtopologies);
        let result = this
            .bounded(&mut sandbox, |instance, store| async move {
                let api = api(&instance);
                if let Err(message) = api.call_configure(&mut *store, &config).await? {
                    return Ok(Err(Refusal::Guest(format!(
                        "configure failed in the call's instance, after succeeding at load \
                         (is it deterministic?): {}",
                        limits::cut(&message, max_message)
                    ))));
                }
                Ok(api
                    .call_assign(store, group, topology)
                    .await?
                    .map_err(|e| Refusal::Guest(limits::cut(&e.message, max_message).into_owned())))
            })
            .await;
        let fuel = sandbox.consumed();
        let output = match result {
            Ok(Ok(output)) => {
                self.log_output(&sandbox);
                Ok(output)
            }
            Ok(Err(Refusal::Guest(message))) => {
                self.log_output(&sandbox);
                Err(TaskAssignorError::new(
                    &self.name,
                    ErrorKind::GuestError,
                    message,
                ))
            }
            Err(Stop::Error(e)) if is_over_result_fuel(&e) && !from_a_host_call(&e) => {
                self.log_output(&sandbox);
                Err(TaskAssignorError::new(
                    &self.name,
                    ErrorKind::InvalidOutput,
                    format!(
                        "output too large: it returned more than {} (max.output.bytes), refused \
                         before it was copied; an assignment has 12 bytes per task and member, \
                         an error message should be short",
                        limits::bytes(limits.get_max_output_bytes() as u64)
                    ),
                ))
            }
            Err(e) => Err(self.classify(e, &sandbox, "assigning")),
        };
        Called {
            output: output.map_err(|e| e.with_fuel(Some(fuel))),
            fuel,
            peak_memory: sandbox.store.data().peak_memory,
        }
    }

    /// Instantiates the component in `sandbox` and runs `f` on the instance, the whole of it
    /// under the call's deadline: the call is dropped at its first yield after the deadline
    /// (in wasm code, every [`YIELD_FUEL`]), or at the deadline while it waits in a host
    /// function.
    async fn bounded<'a, F, Fut, R>(&self, sandbox: &'a mut Sandbox, f: F) -> Result<R, Stop>
    where
        F: FnOnce(boundary::Assignor, &'a mut Store<CallState>) -> Fut,
        Fut: Future<Output = wasmtime::Result<R>>,
    {
        let deadline = self.limits().get_timeout();
        let store = &mut sandbox.store;
        let call = async move {
            let instance = self.pre.instantiate_async(&mut *store).await?;
            f(instance, store).await
        };
        match tokio::time::timeout(deadline, call).await {
            Ok(result) => result.map_err(Stop::Error),
            Err(_) => Err(Stop::Deadline),
        }
    }

    fn sandbox(&self) -> Sandbox {
        let limits = self.limits();
        let capture = Capture::new(limits.get_max_stderr_bytes());
        let mut store = Store::new(
            &self.runtime.inner.engine,
            CallState::new(limits.get_memory_bytes(), &capture),
        );
        store.limiter(|state| state);
        store.call_hook(CallState::hook);
        let fuel = limits.get_fuel().unwrap_or(u64::MAX);
        store
            .set_fuel(fuel)
            .expect("fuel is enabled on the runtime's engine");
        store
            .fuel_async_yield_interval(Some(YIELD_FUEL))
            .expect("fuel is enabled on the runtime's engine");
        Sandbox {
            store,
            capture,
            fuel,
        }
    }

    fn log_output(&self, sandbox: &Sandbox) {
        let text = sandbox.capture.text();
        if !text.is_empty() {
            tracing::info!(assignor = %self.name, output = %text, "guest output");
        }
    }

    /// Turns a failed call into the error kind the limits and trap say, with the guest's
    /// captured output for context.
    fn classify(&self, stop: Stop, sandbox: &Sandbox, doing: &str) -> TaskAssignorError {
        let limits = self.limits();
        let state = sandbox.store.data();
        let output = sandbox.capture.text();
        let fuel = sandbox.consumed();
        let (kind, mut message, source) = match stop {
            // A deadline has no wasmtime error to keep as the cause: the call's future was
            // dropped.
            Stop::Deadline => {
                let mut message = format!(
                    "exceeded the wall-clock deadline of {:?} while {doing}",
                    limits.get_timeout()
                );
                message.push_str(if state.in_host_call {
                    ", waiting in a host call (a sleep or poll: a guest's clock never advances, \
                     so it waits forever); raise the timeout only if the assignor needs the time"
                } else {
                    "; raise the timeout only if the assignor needs the time"
                });
                (ErrorKind::Timeout, message, None)
            }
            Stop::Error(error) => {
                if error.downcast_ref::<PoolConcurrencyLimitError>().is_some() {
                    return self.not_started(error);
                }
                let (kind, message) = self.failure(&error, sandbox, &output, doing);
                (kind, message, Some(error))
            }
        };
        if !output.is_empty() {
            message.push_str("; guest output:\n");
            message.push_str(output.trim_end());
        }
        tracing::warn!(assignor = %self.name, kind = %kind, fuel, "assignor call failed");
        let failure = TaskAssignorError::new(&self.name, kind, message).with_fuel(Some(fuel));
        match source {
            Some(error) => failure.with_source(error),
            None => failure,
        }
    }

    /// A call the instance pool refused: the runtime was at its limit of concurrent calls.
    fn not_started(&self, error: wasmtime::Error) -> TaskAssignorError {
        TaskAssignorError::new(
            &self.name,
            ErrorKind::Capacity,
            format!(
                "not started: the runtime is already running its maximum of {} concurrent \
                 calls; retry at once or raise max.concurrent.calls",
                self.limits().get_max_concurrent_calls()
            ),
        )
        .with_source(error)
    }

    /// The kind and message of a call wasmtime stopped with `error`.
    fn failure(
        &self,
        error: &wasmtime::Error,
        sandbox: &Sandbox,
        output: &str,
        doing: &str,
    ) -> (ErrorKind, String) {
        let limits = self.limits();
        let state = sandbox.store.data();
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) if let Some(work) = state.host_fuel_exhausted => (
                ErrorKind::OutOfFuel,
                format!(
                    "ran out of fuel ({} units) while {doing}, charged for host calls: {work}",
                    sandbox.fuel
                ),
            ),
            Some(Trap::OutOfFuel) => (
                ErrorKind::OutOfFuel,
                format!(
                    "ran out of fuel ({} units) while {doing}; raise the fuel limit or make the \
                     assignor cheaper",
                    sandbox.fuel
                ),
            ),
            Some(Trap::StackOverflow) => (
                ErrorKind::StackOverflow,
                format!(
                    "overflowed the {}-byte wasm stack while {doing} (unbounded recursion?)",
                    limits.get_wasm_stack_bytes()
                ),
            ),
            _ if state.memory_denied => (
                ErrorKind::MemoryLimit,
                format!(
                    "tried to grow linear memory past the limit of {} while {doing} (peak \
                     granted: {})",
                    limits::bytes(limits.get_memory_bytes() as u64),
                    limits::bytes(state.peak_memory as u64)
                ),
            ),
            // A Rust guest keeps its stack in linear memory, growing down from its top to
            // address 0; past 0 the stack pointer wraps and the next access is out of bounds.
            // Safe Rust cannot access memory out of bounds otherwise, so this is how the
            // guest's own stack overflow shows.
            Some(Trap::MemoryOutOfBounds) => (
                ErrorKind::StackOverflow,
                format!(
                    "accessed linear memory out of bounds while {doing}: the guest's own stack \
                     (in linear memory) overflowed, from deep recursion or large locals (or \
                     unsafe code wrote through a wild pointer)"
                ),
            ),
            Some(trap) => match panic_report(output) {
                Some(panic) => (
                    ErrorKind::Trap,
                    format!("panicked while {doing} at {panic}"),
                ),
                None => (ErrorKind::Trap, format!("trapped while {doing}: {trap}")),
            },
            None => (ErrorKind::Trap, host_call_failure(error, doing)),
        }
    }
}

/// The exports of an instance.
fn api(instance: &boundary::Assignor) -> &boundary::TaskAssignorApi {
    instance.kafka_streams_assignor_task_assignor()
}

/// Whether lifting a result failed on the hostcall fuel its export was given, i.e. the guest
/// returned more than the host accepts (wasmtime says so only in the message).
fn is_over_result_fuel(error: &wasmtime::Error) -> bool {
    error
        .root_cause()
        .to_string()
        .contains("fuel allocated for hostcalls")
}

/// Whether `error` came out of a host function the guest called (it unwound through wasm
/// frames, which left a backtrace) rather than from lifting an export's results after the
/// guest returned: which of the two hostcall-fuel limits a "fuel exhausted" failure hit.
fn from_a_host_call(error: &wasmtime::Error) -> bool {
    error.downcast_ref::<WasmBacktrace>().is_some()
}

/// A call that failed in a host function or in lifting, said in terms of the limit it hit.
fn host_call_failure(error: &wasmtime::Error, doing: &str) -> String {
    let cause = error.root_cause().to_string();
    if is_over_result_fuel(error) {
        format!(
            "passed more than {} to one host call while {doing}; write in smaller pieces",
            limits::bytes(crate::wasi::HOST_CALL_BYTES as u64)
        )
    } else if cause.contains("requested len") {
        format!(
            "asked for more than {} of randomness in one call while {doing}",
            limits::bytes(crate::wasi::MAX_RANDOM_BYTES)
        )
    } else {
        format!("failed while {doing}: {}", limits::cut(&cause, 1024))
    }
}

/// Drives one of the calls above to completion on this thread, for the synchronous API.
/// WASI's synchronous bindings do the same per host call (inside Tokio, a runtime context
/// is needed for its host functions and the deadline's timer); here it is once per call.
///
/// The call's future is boxed first: it holds every nested future of the call inline (tens
/// of kilobytes), and Tokio's `block_on` moves what it is given several times, which was 16 %
/// of a one-task call's instructions.
fn block_on<F: Future>(call: F) -> F::Output {
    wasmtime_wasi::runtime::in_tokio(Box::pin(call))
}

/// The location and message of a Rust panic in captured guest output (`thread '…' panicked at
/// src/lib.rs:16:9:\nmessage`), as `src/lib.rs:16:9: message`.
fn panic_report(output: &str) -> Option<String> {
    let (_, rest) = output.rsplit_once("panicked at ")?;
    let (location, message) = rest.split_once('\n').unwrap_or((rest, ""));
    let message: Vec<&str> = message
        .lines()
        .take_while(|l| !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    Some(format!(
        "{} {}",
        location.trim_end(),
        message.join("\n").trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::panic_report;

    /// A Rust panic's location and message are lifted out of the guest's stderr.
    #[test]
    fn panic_report_finds_location_and_message() {
        let stderr = "starting\nthread '<unnamed>' (1) panicked at src/lib.rs:16:9:\nboom: 3 \
                      > 2\nnote: run with `RUST_BACKTRACE=1` environment variable to display a \
                      backtrace\n";
        assert_eq!(
            panic_report(stderr).as_deref(),
            Some("src/lib.rs:16:9: boom: 3 > 2")
        );
        assert_eq!(panic_report("no panic here"), None);
    }
}
