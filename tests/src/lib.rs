//! The workspace's integration tests, hostile test guests and benchmarks.
//!
//! The tests run real components through the runtime: the sample assignors, and guests built
//! to misbehave in one specific way each (spin forever, exhaust memory or stack, panic, return
//! invalid or oversized output, import what the sandbox forbids), checking that the runtime
//! reports each failure precisely and stays usable. The library part is [`guests`], the
//! paths of the built components, [`bench_input`], the project's standard benchmark
//! groups, and [`watch`], which runs a child process and measures its time and peak memory.
//!
//! # Layout
//!
//! - `guests/`: the test guests, one crate (`assignor-test-guests`) with one example per
//!   guest (`guests/examples/<name>.rs`), each built to a `wasm32-wasip2` component.
//! - `build.rs`: builds every guest and sample component in nested cargo builds and generates
//!   [`guests`]. Each guest must be classified there with its expected outcome, or the build
//!   fails.
//! - `all/`: the integration tests, one binary.
//! - `benches/`: benchmarks of the runtime and of the sandbox boundary.

#![deny(missing_docs)]

pub mod bench_input;
pub mod watch;

/// The test guests' components, built by `build.rs`: one `&str` constant per guest
/// (`endless-loop` → [`ENDLESS_LOOP`](crate::guests::ENDLESS_LOOP)) holding the absolute path
/// of its `.wasm`, and [`ALL`](crate::guests::ALL), every guest as (name, expected outcome,
/// path).
///
/// The expected outcome says what the runtime should report: `out-of-fuel`, `memory-limit`,
/// `stack-overflow`, `timeout`, `trap`, `guest-error`, `invalid-output`, `load` (refused when loaded) or
/// `ok`. A guest's name is its example's, which is also its assignor's `name()` except where the
/// guest is about its name (`bad-name`, `huge-name`, `not-an-assignor`) or is one of the
/// versions of `swap` (`swap-v1`, `swap-v2`, `swap-broken`).
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
