//! A loaded assignor component and its sandboxed calls: one fresh `Store` and instance per
//! call from a cached `InstancePre`, since a trap leaves an instance unusable and no state may
//! survive from one group's call to the next.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::time::Instant;

use assignor_sdk::{GroupAssignment, GroupSpec, Topology};
use wasmtime::{PoolConcurrencyLimitError, Store, Trap};

use crate::boundary::{self, AssignorPre};
use crate::cache::{self, ContentHash};
use crate::error::{ErrorKind, TaskAssignorError};
use crate::limits::Limits;
use crate::runtime::{EPOCH_TICK, Runtime};
use crate::usage::Usage;
use crate::wasi::{CallState, Capture};

/// Fuel between a call's yields to the executor in [`ComponentAssignor::assign_async`]: about
/// 50–100 µs of guest work, short enough that other requests on the same async thread are
/// not held up noticeably, long enough that yields cost nothing measurable. (The standard
/// 10-member sticky call uses ~140,000.)
pub const YIELD_FUEL: u64 = 100_000;

/// Longest assignor name accepted; names travel in configs and describe responses.
const MAX_NAME_BYTES: usize = 249;

/// An assignor component, compiled, linked, named and configured: ready to assign.
pub struct ComponentAssignor {
    runtime: Runtime,
    pre: AssignorPre<CallState>,
    hash: ContentHash,
    name: String,
    config: Vec<(String, String)>,
}

impl fmt::Debug for ComponentAssignor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComponentAssignor")
            .field("name", &self.name)
            .field("sha256", &cache::hex(&self.hash))
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

impl ComponentAssignor {
    pub(crate) fn load(
        runtime: Runtime,
        pre: AssignorPre<CallState>,
        hash: ContentHash,
        origin: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<Self, TaskAssignorError> {
        let mut this = Self {
            runtime,
            pre,
            hash,
            name: origin.to_owned(),
            config: config.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        // Each sandbox is dropped before the next is made: it holds one of the runtime's
        // instance slots.
        let name = {
            let mut sandbox = this.sandbox();
            let called = block_on(async {
                let instance = this.pre.instantiate_async(&mut sandbox.store).await?;
                api(&instance).call_name(&mut sandbox.store).await
            });
            called.map_err(|e| this.classify(e, &sandbox, "calling name()"))?
        };
        if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_whitespace) {
            return Err(TaskAssignorError::new(
                origin,
                ErrorKind::Load,
                format!(
                    "name() returned {name:?}; a name must be 1 to {MAX_NAME_BYTES} bytes \
                     without whitespace"
                ),
            ));
        }
        this.name = name;
        let mut sandbox = this.sandbox();
        let configured = block_on(async {
            let instance = this.pre.instantiate_async(&mut sandbox.store).await?;
            api(&instance)
                .call_configure(&mut sandbox.store, &this.config)
                .await
        });
        match configured {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                return Err(TaskAssignorError::new(
                    &this.name,
                    ErrorKind::Load,
                    format!("configure rejected the configuration: {message}"),
                ));
            }
            Err(e) => return Err(this.classify(e, &sandbox, "calling configure()")),
        }
        tracing::debug!(assignor = %this.name, sha256 = %cache::hex(&this.hash), "loaded assignor component");
        Ok(this)
    }

    /// The assignor's `name()`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration `configure` was given.
    pub fn config(&self) -> BTreeMap<String, String> {
        self.config.iter().cloned().collect()
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.runtime.inner.limits
    }

    /// SHA-256 of the component's bytes, hex-encoded.
    pub fn sha256(&self) -> String {
        cache::hex(&self.hash)
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
        block_on(self.assign_in(group, topology, None))
    }

    /// [`assign`](Self::assign) for async code: the guest runs on the polling thread and
    /// yields to the executor after every [`YIELD_FUEL`] units of fuel, so a long or endless
    /// call never holds an async thread for more than a slice (its limits still end it).
    pub async fn assign_async(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        self.assign_in(group, topology, Some(YIELD_FUEL)).await
    }

    async fn assign_in(
        &self,
        group: &GroupSpec,
        topology: &Topology,
        yield_fuel: Option<u64>,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        let start = Instant::now();
        let (assignment, mut usage) = self
            .assign_unvalidated_in(group, topology, yield_fuel)
            .await?;
        assignor_sdk::validate(group, topology, &assignment)
            .map_err(|m| self.invalid(m).with_fuel(usage.fuel))?;
        usage.wall_time = start.elapsed();
        Ok((assignment, usage))
    }

    /// [`ComponentAssignor::assign`] without output validation beyond what the domain model
    /// needs (member indices, no duplicate entries, output size): for measuring the boundary.
    #[doc(hidden)]
    pub fn assign_unvalidated(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        block_on(self.assign_unvalidated_in(group, topology, None))
    }

    async fn assign_unvalidated_in(
        &self,
        group: &GroupSpec,
        topology: &Topology,
        yield_fuel: Option<u64>,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        let start = Instant::now();
        let input = boundary::input(group, topology);
        let mut sandbox = self.sandbox();
        sandbox
            .store
            .fuel_async_yield_interval(yield_fuel)
            .expect("fuel is enabled on the runtime's engine");
        let config = &self.config;
        let result = async {
            let instance = self.pre.instantiate_async(&mut sandbox.store).await?;
            let api = api(&instance);
            if let Err(message) = api.call_configure(&mut sandbox.store, config).await? {
                return Ok(Err(format!(
                    "configure failed in the call's instance, after succeeding at load \
                     (is it deterministic?): {message}"
                )));
            }
            Ok(api
                .call_assign(&mut sandbox.store, &input.group, &input.topology)
                .await?
                .map_err(|e| e.message))
        }
        .await;
        let fuel = Some(sandbox.consumed());
        let output = match result {
            Ok(Ok(output)) => output,
            Ok(Err(message)) => {
                self.log_output(&sandbox);
                return Err(
                    TaskAssignorError::new(&self.name, ErrorKind::GuestError, message)
                        .with_fuel(fuel),
                );
            }
            Err(e) => return Err(self.classify(e, &sandbox, "assigning")),
        };
        self.log_output(&sandbox);
        let limits = &self.runtime.inner.limits;
        let output_bytes = boundary::output_bytes(&output);
        if output_bytes > limits.get_max_output_bytes() {
            return Err(self
                .invalid(format!(
                    "output too large: {output_bytes} bytes, over the limit of {} bytes",
                    limits.get_max_output_bytes()
                ))
                .with_fuel(fuel));
        }
        let assignment = boundary::output(output, group, topology)
            .map_err(|m| self.invalid(m).with_fuel(fuel))?;
        let state = sandbox.store.data();
        let usage = Usage {
            fuel,
            peak_memory_bytes: Some(state.peak_memory),
            wall_time: start.elapsed(),
            input_bytes: Some(input.bytes),
            output_bytes: Some(output_bytes),
        };
        Ok((assignment, usage))
    }

    /// Creates a sandbox and instantiates the component, nothing else: the fixed cost every
    /// call pays, for benchmarks.
    #[doc(hidden)]
    pub fn fresh_instance(&self) -> Result<(), TaskAssignorError> {
        let mut sandbox = self.sandbox();
        block_on(self.pre.instantiate_async(&mut sandbox.store))
            .map(drop)
            .map_err(|e| self.classify(e, &sandbox, "instantiating"))
    }

    fn invalid(&self, message: String) -> TaskAssignorError {
        TaskAssignorError::new(&self.name, ErrorKind::InvalidOutput, message)
    }

    fn sandbox(&self) -> Sandbox {
        let limits = &self.runtime.inner.limits;
        let capture = Capture::new(limits.get_max_stderr_bytes());
        let mut store = Store::new(
            &self.runtime.inner.engine,
            CallState::new(limits.get_memory_bytes(), &capture),
        );
        store.limiter(|state| state);
        let fuel = limits.get_fuel().unwrap_or(u64::MAX);
        store
            .set_fuel(fuel)
            .expect("fuel is enabled on the runtime's engine");
        let ticks = limits
            .get_timeout()
            .as_nanos()
            .div_ceil(EPOCH_TICK.as_nanos());
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1));
        store.epoch_deadline_trap();
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
    fn classify(
        &self,
        error: wasmtime::Error,
        sandbox: &Sandbox,
        doing: &str,
    ) -> TaskAssignorError {
        let limits = &self.runtime.inner.limits;
        let state = sandbox.store.data();
        let output = sandbox.capture.text();
        if error.downcast_ref::<PoolConcurrencyLimitError>().is_some() {
            return TaskAssignorError::new(
                &self.name,
                ErrorKind::Trap,
                format!(
                    "not started: the runtime is already running its maximum of {} concurrent \
                     calls; retry later",
                    limits.get_max_concurrent_calls()
                ),
            );
        }
        let (kind, mut message) = match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => (
                ErrorKind::OutOfFuel,
                format!(
                    "ran out of fuel ({} units) while {doing}; raise the fuel limit or make the \
                     assignor cheaper",
                    sandbox.fuel
                ),
            ),
            Some(Trap::Interrupt) => (
                ErrorKind::Timeout,
                format!(
                    "exceeded the wall-clock deadline of {:?} while {doing}",
                    limits.get_timeout()
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
                    "tried to grow linear memory past the limit of {} bytes while {doing} (peak \
                     granted: {} bytes)",
                    limits.get_memory_bytes(),
                    state.peak_memory
                ),
            ),
            Some(trap) => match panic_report(&output) {
                Some(panic) => (
                    ErrorKind::Trap,
                    format!("panicked while {doing} at {panic}"),
                ),
                None => (ErrorKind::Trap, format!("trapped while {doing}: {trap}")),
            },
            None => (
                ErrorKind::Trap,
                format!("failed while {doing}: {}", error.root_cause()),
            ),
        };
        if !output.is_empty() {
            message.push_str("; guest output:\n");
            message.push_str(output.trim_end());
        }
        let fuel = sandbox.consumed();
        tracing::warn!(assignor = %self.name, kind = %kind, fuel, "assignor call failed");
        TaskAssignorError::new(&self.name, kind, message).with_fuel(Some(fuel))
    }
}

/// The exports of an instance.
fn api(instance: &boundary::Assignor) -> &boundary::TaskAssignorApi {
    instance.kafka_streams_assignor_task_assignor()
}

/// Drives one of the calls above to completion on this thread, for the synchronous API.
/// WASI's synchronous bindings do the same per host call (inside Tokio, a runtime context
/// is needed for its host functions); here it is once per call.
fn block_on<F: Future>(call: F) -> F::Output {
    wasmtime_wasi::runtime::in_tokio(call)
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
