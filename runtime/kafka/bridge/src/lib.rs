//! The native side of the Kafka broker plugin (`runtime/kafka`): a JNI library that runs
//! assignor components in the sandbox (`assignor-sandbox`, and nothing above it: no
//! coordinator, service or storage inside a broker) for the Java `WasmTaskAssignor`, a
//! KIP-1357 `TaskAssignor`.
//!
//! A group crosses JNI as a few primitive arrays and one string table ([`flat`]); the
//! assignment comes back as one `int[]`. Every failure — a sandbox error, a malformed input,
//! a JNI error, a Rust panic — is thrown as a `dev.assignor.kafka.SandboxFailure` naming the
//! kind and the assignor, which the plugin turns into Kafka's `TaskAssignorException`.
//!
//! The runtimes this library makes never use signals-based traps unless a plugin entry asks
//! for them: wasmtime would install `SIGSEGV`/`SIGILL`/`SIGFPE` handlers process-wide, in
//! front of HotSpot's own.
//!
//! # Layout
//!
//! - [`flat`]: the flat form of a group and of an assignment, decoded and encoded.
//! - [`call`]: loading a component under an entry's limits (the broker's
//!   `group.streams.assignor.*` keys, parsed by the sandbox's `properties`), the shared
//!   runtimes, and one call on the flat form.
//! - `exports`: the JNI functions of `dev.assignor.kafka.NativeComponent`, panics caught,
//!   failures thrown, the component handle's lifecycle.

#![deny(missing_docs)]

pub mod call;
mod exports;
pub mod flat;
