//! KIP-1357's broker side, over the sandbox: the assignors a broker offers
//! (`group.streams.assignors`, resolved at startup and fail-fast), streams groups with their
//! configs, epochs and target assignments (a failed call keeps the previous target), the
//! stores that keep them, captures of failed calls, and the JSON input contract.
//!
//! It picks no executor and speaks no HTTP: async callers await a component's call and a
//! commit's flush on whatever runtime they use, and run built-ins (native code that cannot
//! yield) where they may block; the service turns its errors into status codes.
//!
//! # Layout
//!
//! - `assignor`: [`Assignor`] — built-in or component behind one validated call.
//! - `builtin`: the native built-in assignors (the sample assignors' own code).
//! - [`config`]: the broker's static configuration (`server.properties` keys, overrides).
//! - `registry`: [`Registry`] — `group.streams.assignors` resolved at startup, fail-fast.
//! - `coordinator`: [`Coordinator`] — streams groups, their configs, epochs and target
//!   assignments, and the records it stores them as (`coordinator/records.rs`, versioned
//!   CBOR owned here, with the older formats read in `records/legacy.rs`).
//! - [`store`]: durable named blobs for coordinator state — the [`store::Store`] trait (with
//!   two-phase writes for group commit), the embedded [`store::RedbStore`] (one redb database,
//!   group commit by one writer thread), [`store::MemoryStore`], and [`store::import`], the
//!   readers of the two formats the service stored before.
//! - [`capture`]: captures of failed calls (the SDK's file format) for `assignor replay`.
//! - [`json`]: the JSON input contract, parsed and checked into the model.

#![deny(missing_docs)]

mod assignor;
mod builtin;
pub mod capture;
pub mod config;
mod coordinator;
pub mod json;
mod registry;
pub mod store;

pub use assignor::Assignor;
pub use builtin::{BUILTIN_NAMES, builtin};
pub use coordinator::*;
pub use registry::{KAFKA_STICKY_CLASS, Registry, RegistryError};
