//! Runs Kafka Streams task assignors (KIP-1357) safely: WebAssembly components in a fresh
//! sandbox per call, with fuel, memory, stack, wall-clock and output limits, and every result
//! validated before anyone sees it.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use assignor_runtime::{Limits, Runtime};
//!
//! # fn main() -> anyhow::Result<()> {
//! let runtime = Runtime::new(Limits::default())?;
//! let assignor = runtime.load_file("balanced_assignor.wasm", &BTreeMap::new())?;
//! let input = std::fs::read_to_string("group.json")?;
//! let (group, topology) = assignor_runtime::json::parse_input(&input)?;
//! match assignor.assign(&group, &topology) {
//!     Ok((assignment, usage)) => println!("{usage:?}"),
//!     // Keep the previous target assignment; the error names assignor and kind.
//!     Err(e) => eprintln!("{e}"),
//! }
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - `runtime`: [`Runtime`] — the engine, WASI linker, epoch ticker and loading checks.
//! - `component`: [`ComponentAssignor`] — one fresh store and instance per call, the whole
//!   call under its deadline (host calls included), failure classification.
//! - `call_threads`: the threads async calls run on, in two tiers: calls start at normal
//!   priority and move to lowered-priority threads once they have worked for
//!   [`FOREGROUND_TIME`], so long calls never slow short ones or the service's requests.
//! - `assignor`: [`Assignor`] — built-in or component behind one validated call.
//! - `builtin`: the native built-in assignors.
//! - `boundary`: the generated WIT bindings (private), the export calls with lazily lifted
//!   results (lengths checked before anything is copied), and domain ⇄ WIT conversion.
//! - `wasi`: WASI with nothing granted, bounded output capture, the memory limiter, and the
//!   call hook that caps and charges host calls.
//! - `cache`: compiled components by content hash, in memory and on disk.
//! - `compiler`: compiling in a child process (the `assignor` binary), killed at the compile
//!   time limit, for [`RuntimeBuilder::compiler`].
//! - `limits`, `usage`, `error`: the call's limits (and the input limits every group is
//!   checked against before any work), its usage report, its one error type.
//! - [`json`]: the JSON input contract, parsed and checked into the model.
//! - [`protocol`]: every shape that crosses a process boundary (the output JSON, usage,
//!   limits, errors, the service's requests and answers), declared once for both sides;
//!   serde-only. [`wire`] converts the runtime's values to and from them.
//! - [`check`]: what `assignor check` runs — the SDK harness's suite and random groups
//!   against an assignor in production limits, as a [`check::CheckReport`].
//! - [`capture`]: captures of failed calls (the SDK's file format) for `assignor replay`.
//! - [`config`]: the broker's static configuration (`server.properties` keys, overrides).
//! - `registry`: [`Registry`] — `group.streams.assignors` resolved at startup, fail-fast.
//! - [`coordinator`]: streams groups, their configs, epochs and target assignments;
//!   failures keep the previous target.
//! - [`store`]: durable named blobs for coordinator state — the [`store::Store`] trait (with
//!   two-phase writes for group commit), the embedded [`store::LogStore`] (one compacted log)
//!   and [`store::DirStore`] (a locked directory of checksummed files), and
//!   [`store::MemoryStore`].
//! - [`service`]: `assignor serve`, the multi-tenant HTTP service over registries,
//!   coordinators and the store (uploads, group configs, triggers, describe).
//! - [`client`]: a blocking client of that service's API, behind the `assignor` command's
//!   `upload`, `list`, `delete` and `group` subcommands.

#![deny(missing_docs)]

mod assignor;
mod boundary;
mod builtin;
mod cache;
mod call_threads;
pub mod capture;
pub mod check;
pub mod client;
mod compiler;
mod component;
pub mod config;
pub mod coordinator;
mod error;
pub mod json;
mod limits;
pub mod protocol;
mod registry;
mod runtime;
pub mod service;
pub mod store;
mod usage;
mod wasi;
pub mod wire;

pub use assignor::Assignor;
#[doc(hidden)]
pub use boundary::fuzz_output;
pub use builtin::{BUILTIN_NAMES, builtin};
pub use call_threads::{FOREGROUND_TIME, LONG_CALL_NICE};
#[doc(hidden)]
pub use compiler::{COMPILE_COMMAND, child_main as compiler_main};
pub use component::{ComponentAssignor, DEADLINE_GRACE, YIELD_FUEL};
pub use error::{ErrorKind, TaskAssignorError};
pub use limits::{
    DEFAULT_COMPILE_TIMEOUT, DEFAULT_FUEL, DEFAULT_MAX_CODE_BYTES, DEFAULT_MAX_COMPILED_BYTES,
    DEFAULT_MAX_COMPONENT_BYTES, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_FUNCTION_BYTES,
    DEFAULT_MAX_ID_BYTES, DEFAULT_MAX_INPUT_BYTES, DEFAULT_MAX_MEMBERS, DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_PARTITIONS, DEFAULT_MAX_STDERR_BYTES,
    DEFAULT_MAX_SUBTOPOLOGIES, DEFAULT_MAX_TASKS, DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT,
    DEFAULT_WASM_STACK_BYTES, InputLimitError, Limits,
};
pub use registry::{KAFKA_STICKY_CLASS, Registry, RegistryError};
pub use runtime::{EPOCH_TICK, EXPORT_NAME, Runtime, RuntimeBuilder};
pub use usage::Usage;
