//! Write Kafka Streams task assignors (KIP-1357's `TaskAssignor`) in Rust and ship them as
//! WebAssembly components that the `assignor` runtime runs in a sandbox.
//!
//! An assignor is a type implementing [`TaskAssignor`] and [`Default`]; [`export!`] turns it
//! into a component of the `kafka:streams-assignor/assignor@0.1.0` world. The same type runs
//! natively in tests, and the runtime uses this very trait and model for its built-in
//! assignors, so a component and a built-in can be compared output for output.
//!
//! ```
//! use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};
//!
//! /// Deals tasks out to members in turn.
//! #[derive(Default)]
//! struct RoundRobin;
//!
//! impl TaskAssignor for RoundRobin {
//!     fn name(&self) -> &str {
//!         "round-robin"
//!     }
//!
//!     fn assign(
//!         &self,
//!         group: &GroupSpec,
//!         topology: &Topology,
//!     ) -> Result<GroupAssignment, AssignError> {
//!         if group.members.is_empty() {
//!             return Err(AssignError::new("the group has no members"));
//!         }
//!         let mut assignment = GroupAssignment::empty_for(group);
//!         for (i, task) in topology.tasks().enumerate() {
//!             let member = i % group.members.len();
//!             assignment.members[member].active_tasks.insert(task);
//!         }
//!         Ok(assignment)
//!     }
//! }
//!
//! assignor_sdk::export!(RoundRobin);
//! # fn main() {}
//! ```
//!
//! Build the component with `cargo build --release --target wasm32-wasip2` from a crate whose
//! `[lib]` has `crate-type = ["cdylib", "rlib"]`; the `.wasm` under
//! `target/wasm32-wasip2/release/` is the assignor.
//!
//! # Layout
//!
//! - `model`: the domain types ([`GroupSpec`], [`Topology`], [`GroupAssignment`], [`TaskId`]).
//! - `validate`: [`validate`], the rules every assignment must satisfy (the runtime enforces
//!   them on every result).
//! - [`harness`] (feature `harness`): scenarios, checks, convergence driver and proptest
//!   strategies for testing assignors natively and in the sandbox.
//! - [`capture`] (feature `capture`): the files the runtime writes when a call fails, for
//!   `assignor replay` and for loading a production failure as a test case.
//! - `limits` (feature `serde`): [`CallLimits`], the sandbox limits of one call, as captures
//!   record them and usage reports carry them.
//! - [`records`] (feature `capture`): the model's stored encoding, shared by captures and the
//!   coordinator's stored groups.
//! - `task_set`: [`TaskSet`], the sorted-vector task set members' assignments are made of.
//! - `assignor`: the [`TaskAssignor`] trait and [`AssignError`].
//! - `guest` (wasm32 only): wit-bindgen glue and the WIT ⇄ model conversion behind [`export!`].

#![deny(missing_docs)]

mod assignor;
#[cfg(feature = "capture")]
pub mod capture;
#[cfg(feature = "harness")]
pub mod harness;
#[cfg(feature = "serde")]
mod limits;
mod model;
#[cfg(feature = "capture")]
pub mod records;
mod task_set;
mod validate;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod guest;

pub use assignor::{AssignError, TaskAssignor};
#[cfg(feature = "serde")]
pub use limits::CallLimits;
pub use model::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, MemberAssignment, SourceTopic,
    Subtopology, TaskId, Topology,
};
pub use task_set::TaskSet;
pub use validate::validate;

/// Not public API: what [`export!`] expands to and what the runtime calls need these paths.
#[doc(hidden)]
pub mod __private {
    #[cfg(target_arch = "wasm32")]
    pub use crate::guest::{Component, bindings};
    pub use crate::validate::validate_with_processes;
}

/// Exports a type implementing [`TaskAssignor`] and [`Default`] as the component's assignor.
///
/// Invoke it once, at the crate root of a `cdylib` crate. On non-wasm targets it only checks
/// that the type qualifies, so the crate still builds and tests natively.
#[macro_export]
macro_rules! export {
    ($assignor:ty) => {
        const _: fn() -> ::std::boxed::Box<dyn $crate::TaskAssignor> =
            || ::std::boxed::Box::new(<$assignor as ::std::default::Default>::default());

        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type ExportedAssignor = $crate::__private::Component<$assignor>;
            $crate::__private::bindings::__export_assignor_world!(
                ExportedAssignor with_types_in $crate::__private::bindings
            );
        };
    };
}
