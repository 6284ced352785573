//! The convergence driver: membership events one after another, each assignment fed back as
//! the next one's current assignment, checked after every event (in the spirit of Kafka
//! Streams' `TaskAssignorConvergenceTest`).

use crate::{GroupAssignment, GroupSpec, Member, Topology};

use super::checks::{Report, Run, with_current};

/// A change of the group's membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A member joins (with nothing assigned unless its task sets say otherwise).
    Join(Box<Member>),
    /// The member with this id leaves.
    Leave(String),
}

/// Where a convergence run stopped: the event index and what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the event after which the checks failed (or the assignor failed).
    pub step: usize,
    /// The event.
    pub event: Event,
    /// The checks of that step; empty when the assignor itself failed.
    pub report: Report,
    /// The assignor's error, if it failed.
    pub error: Option<String>,
}

/// Assigns `group` once, then applies `events` in order, assigning after each with the
/// previous output as the current assignment, and runs `check` on every result. Returns the
/// last assignment, or the first step whose checks (or assignment) failed.
pub fn converge(
    run: &Run<'_>,
    group: &GroupSpec,
    topology: &Topology,
    events: impl IntoIterator<Item = Event>,
    check: impl Fn(&GroupSpec, &Topology, &GroupAssignment) -> Report,
) -> Result<GroupAssignment, Box<Divergence>> {
    let mut group = group.clone();
    let start = Event::Leave(String::new());
    let mut assignment = step(run, &group, topology, &check, 0, &start)?;
    for (i, event) in events.into_iter().enumerate() {
        let mut next = with_current(&group, &assignment);
        match &event {
            Event::Join(m) => next.members.push(m.as_ref().clone()),
            Event::Leave(id) => next.members.retain(|m| m.member_id != *id),
        }
        group = next;
        assignment = step(run, &group, topology, &check, i + 1, &event)?;
    }
    Ok(assignment)
}

fn step(
    run: &Run<'_>,
    group: &GroupSpec,
    topology: &Topology,
    check: &impl Fn(&GroupSpec, &Topology, &GroupAssignment) -> Report,
    step: usize,
    event: &Event,
) -> Result<GroupAssignment, Box<Divergence>> {
    let diverged = |report, error| {
        Box::new(Divergence {
            step,
            event: event.clone(),
            report,
            error,
        })
    };
    let assignment = run(group, topology).map_err(|e| diverged(Report::default(), Some(e)))?;
    let report = check(group, topology, &assignment);
    if report.passed() {
        Ok(assignment)
    } else {
        Err(diverged(report, None))
    }
}
