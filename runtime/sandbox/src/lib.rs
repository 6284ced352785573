//! Runs Kafka Streams task assignors (KIP-1357) compiled to WebAssembly components, safely:
//! every call in a fresh sandbox with fuel, memory, stack, wall-clock, output and host-work
//! limits, every input checked against input limits before any work, and every result
//! validated before anyone sees it. Any failure is one [`TaskAssignorError`] (Kafka's
//! `TaskAssignorException`), after which the caller keeps the previous target assignment.
//!
//! This crate is the sandbox alone, for embedders (a broker plugin, a coordinator of their
//! own): no HTTP, no storage, no input JSON; only its own values' wire shapes ([`wire`]). The layers above it are their own crates
//! (`assignor-coordinator`, `assignor-service`, `assignor-client`, `assignor-cli`).
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use assignor_sandbox::{Limits, Runtime};
//! # use assignor_sdk::{GroupSpec, Topology};
//!
//! # fn main() -> anyhow::Result<()> {
//! # let (group, topology): (GroupSpec, Topology) = todo!();
//! let runtime = Runtime::new(Limits::default())?;
//! let assignor = runtime.load_file("balanced_assignor.wasm", &BTreeMap::new())?;
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
//!   [`FOREGROUND_TIME`] (or start there after their assignor failed), so long or hostile
//!   calls never slow short ones or the requests of whoever embeds the runtime.
//! - `boundary`: the generated WIT bindings (private), the export calls with lazily lifted
//!   results (lengths checked before anything is copied), and domain ⇄ WIT conversion.
//! - `wasi`: WASI with nothing granted, bounded output capture, the memory limiter, and the
//!   call hook that caps and charges host calls.
//! - `cache`: compiled components by content hash, in memory and on disk.
//! - `compiler`: compiling in a child process, killed at the compile time limit, for
//!   [`RuntimeBuilder::compiler`].
//! - `limits`, `usage`, `error`: the call's limits (and the input limits every group is
//!   checked against before any work), its usage report, its one error type.
//! - [`properties`]: the broker configuration keys of the limits (`group.streams.assignor.*`)
//!   and how their values are parsed, for every embedder that reads broker properties.
//! - [`wire`]: those values in `assignor-protocol`'s wire shapes and back (the protocol is
//!   serde only, so the conversions live here, beside the types).

#![deny(missing_docs)]

mod boundary;
mod cache;
mod call_threads;
mod compiler;
mod component;
mod error;
mod limits;
pub mod properties;
mod runtime;
mod usage;
mod wasi;
pub mod wire;

#[doc(hidden)]
pub use boundary::fuzz_output;
pub use cache::{CacheRef, SharedDir};
pub use call_threads::{FOREGROUND_TIME, LONG_CALL_NICE};
#[doc(hidden)]
pub use compiler::{COMPILE_COMMAND, child_main as compiler_main};
pub use component::{ComponentAssignor, YIELD_FUEL};
pub use error::{ErrorKind, TaskAssignorError};
pub use limits::{
    DEFAULT_COMPILE_TIMEOUT, DEFAULT_FUEL, DEFAULT_MAX_CODE_BYTES, DEFAULT_MAX_COMPILED_BYTES,
    DEFAULT_MAX_COMPONENT_BYTES, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_FUNCTION_BYTES,
    DEFAULT_MAX_ID_BYTES, DEFAULT_MAX_INPUT_BYTES, DEFAULT_MAX_MEMBERS, DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_PARTITIONS, DEFAULT_MAX_STDERR_BYTES,
    DEFAULT_MAX_SUBTOPOLOGIES, DEFAULT_MAX_TASKS, DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT,
    DEFAULT_WASM_STACK_BYTES, InputLimitError, Limits, bytes as byte_count, cut,
};
pub use runtime::{EXPORT_NAME, MAX_CORE_INSTANCES, Runtime, RuntimeBuilder};
pub use usage::Usage;
