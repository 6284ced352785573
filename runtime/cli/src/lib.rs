//! The `assignor` command (`src/bin/assignor`) and what its `check` subcommand runs, as a
//! library so tests and other tools can run the same checks.
//!
//! # Layout
//!
//! - [`check`]: the SDK harness's suite and random groups against an assignor in production
//!   limits, as a [`check::CheckReport`].
//! - `src/bin/assignor/`: the command: `main.rs` (arguments, `assign`, `registry`, `serve`,
//!   `demo`), `check.rs`, `replay.rs`, `remote.rs` (the service client's subcommands) and
//!   `report.rs` (usage and limits as text).
//!
//! The layers below are their own crates: `assignor-sandbox` (the sandbox),
//! `assignor-protocol` (every shape that crosses a process boundary),
//! `assignor-coordinator` (registry, groups, stores, captures, the JSON input),
//! `assignor-service` (`assignor serve`) and `assignor-client` (its HTTP client).

#![deny(missing_docs)]

pub mod check;
