//! The test harness (feature `harness`): what an assignor author needs to show, before
//! uploading, that an assignor is correct and good — natively with `cargo test`, and in the
//! real sandbox through the runtime with exactly the same scenarios and checks.
//!
//! - [`Scenario`]: groups written the way Kafka's own tests read.
//! - [`checks`]: validity, balance, minimum movement, fixed point, standby placement, tag
//!   diversity and caught-up placement, each a [`Check`] naming its rule and saying what
//!   broke; [`checks::all`] runs them into a [`Report`].
//! - [`counts`]: per-member task counts and their spread, for an assignor's own balance
//!   assertions.
//! - [`converge`](fn@converge): membership churn, each output fed back, checked every step.
//! - [`strategy`]: proptest strategies for random groups and churn.
//! - [`suite`]: the standard named cases `assignor check` runs, and seeded random ones.
//!
//! An assignor runs through a [`Run`]: [`native`] wraps a [`TaskAssignor`]; the runtime's
//! `ComponentAssignor::assign` wrapped the same way runs the built component, so one test
//! can compare both outputs.
//!
//! ```
//! use assignor_sdk::harness::{self, Scenario};
//! # use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};
//! # #[derive(Default)]
//! # struct RoundRobin;
//! # impl TaskAssignor for RoundRobin {
//! #     fn name(&self) -> &str { "round-robin" }
//! #     fn assign(&self, g: &GroupSpec, t: &Topology) -> Result<GroupAssignment, AssignError> {
//! #         let mut a = GroupAssignment::empty_for(g);
//! #         for (i, task) in t.tasks().enumerate() {
//! #             a.members[i % g.members.len()].active_tasks.insert(task);
//! #         }
//! #         Ok(a)
//! #     }
//! # }
//! let (group, topology) = Scenario::new()
//!     .stateless("s0", 4)
//!     .member("a", "p1", |m| m)
//!     .member("b", "p2", |m| m)
//!     .build();
//! let assignor = RoundRobin;
//! let run = harness::native(&assignor);
//! let assignment = run(&group, &topology).expect("assigns");
//! harness::checks::all(&run, &group, &topology, &assignment).assert_passed();
//! ```

pub mod checks;
mod converge;
pub mod counts;
mod scenario;
pub mod strategy;
pub mod suite;

pub use checks::{Check, Report, Run, with_current};
pub use converge::{Divergence, Event, converge};
pub use scenario::{MemberBuilder, Scenario};

use crate::{GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Runs `assignor` natively, its error as a message.
pub fn native(
    assignor: &dyn TaskAssignor,
) -> impl Fn(&GroupSpec, &Topology) -> Result<GroupAssignment, String> + '_ {
    move |group, topology| {
        assignor
            .assign(group, topology)
            .map_err(|e| e.message().to_owned())
    }
}
