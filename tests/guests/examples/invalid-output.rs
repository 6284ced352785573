//! Test guest that returns a deliberately invalid assignment, one kind of mistake per
//! configuration, so that each of the runtime's output checks can be shown to catch it.
//!
//! The configuration key `invalid` picks the mistake: `duplicate-active`, `unknown-member`,
//! `partition-out-of-range`, `unknown-subtopology`, `active-and-standby`, `standby-stateless`
//! or `missing-task`. The guest computes a valid round-robin assignment of every task and then
//! breaks it in exactly that one way (an input too small for the chosen mistake, e.g. one
//! member for `duplicate-active`, gets an `assign-error` saying what is missing). A missing
//! or unknown value fails `configure`.

use std::collections::BTreeMap;

use assignor_sdk::{
    AssignError, GroupAssignment, GroupSpec, MemberAssignment, TaskAssignor, TaskId, Topology,
};

/// The ways this guest can break its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The same task active on two members.
    DuplicateActive,
    /// One assignment entry more than the group has members.
    UnknownMember,
    /// A task whose partition is subtopology 0's `max_num_input_partitions`.
    PartitionOutOfRange,
    /// A task whose subtopology index is the number of subtopologies.
    UnknownSubtopology,
    /// A member holding the same (stateful) task as active and as standby.
    ActiveAndStandby,
    /// A standby of a task of a stateless subtopology.
    StandbyStateless,
    /// One task left unassigned.
    MissingTask,
}

/// The accepted values of the `invalid` key.
const MODES: [(&str, Mode); 7] = [
    ("duplicate-active", Mode::DuplicateActive),
    ("unknown-member", Mode::UnknownMember),
    ("partition-out-of-range", Mode::PartitionOutOfRange),
    ("unknown-subtopology", Mode::UnknownSubtopology),
    ("active-and-standby", Mode::ActiveAndStandby),
    ("standby-stateless", Mode::StandbyStateless),
    ("missing-task", Mode::MissingTask),
];

/// Produces the invalid assignment selected by the `invalid` configuration key.
#[derive(Debug, Default)]
pub struct InvalidOutput {
    /// The configured mode and its name.
    mode: Option<(&'static str, Mode)>,
}

fn accepted() -> String {
    MODES.map(|(name, _)| name).join(", ")
}

/// The precondition a mode needs from the input, as an error.
fn needs(mode: &str, what: &str) -> AssignError {
    AssignError::new(format!("invalid={mode} needs {what} in the input"))
}

impl TaskAssignor for InvalidOutput {
    fn name(&self) -> &str {
        "invalid-output"
    }

    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        let Some(value) = config.get("invalid") else {
            return Err(format!(
                "missing configuration key `invalid`: expected one of {}",
                accepted()
            ));
        };
        let Some(&mode) = MODES.iter().find(|(name, _)| name == value) else {
            return Err(format!(
                "invalid={value:?} is not accepted: expected one of {}",
                accepted()
            ));
        };
        self.mode = Some(mode);
        Ok(())
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        let Some((name, mode)) = self.mode else {
            return Err(AssignError::new(format!(
                "not configured: set `invalid` to one of {}",
                accepted()
            )));
        };
        let n = group.members.len();
        if n == 0 {
            return Err(needs(name, "at least one member"));
        }
        // The valid starting point: task i active on member i % n.
        let mut out = GroupAssignment::empty_for(group);
        let tasks: Vec<TaskId> = topology.tasks().collect();
        for (i, &task) in tasks.iter().enumerate() {
            out.members[i % n].active_tasks.insert(task);
        }
        let stateful = |t: &TaskId| topology.subtopology(*t).is_some_and(|s| s.is_stateful);

        match mode {
            Mode::DuplicateActive => {
                let &first = tasks.first().ok_or_else(|| needs(name, "a task"))?;
                if n < 2 {
                    return Err(needs(name, "two members"));
                }
                // Task 0 is on member 0; give it to member 1 as well.
                out.members[1].active_tasks.insert(first);
            }
            Mode::UnknownMember => {
                // An empty entry would not cross the boundary (only tasks do), so the extra
                // member takes over the last task, leaving every other rule satisfied.
                let &last = tasks.last().ok_or_else(|| needs(name, "a task"))?;
                out.members[(tasks.len() - 1) % n]
                    .active_tasks
                    .remove(&last);
                let mut extra = MemberAssignment::default();
                extra.active_tasks.insert(last);
                out.members.push(extra);
            }
            Mode::PartitionOutOfRange => {
                let sub = topology
                    .subtopologies
                    .first()
                    .ok_or_else(|| needs(name, "a subtopology"))?;
                out.members[0]
                    .active_tasks
                    .insert(TaskId::new(0, sub.max_num_input_partitions));
            }
            Mode::UnknownSubtopology => {
                let count = u32::try_from(topology.subtopologies.len())
                    .map_err(|_| needs(name, "fewer subtopologies"))?;
                out.members[0].active_tasks.insert(TaskId::new(count, 0));
            }
            Mode::ActiveAndStandby => {
                let (i, &task) = tasks
                    .iter()
                    .enumerate()
                    .find(|(_, t)| stateful(t))
                    .ok_or_else(|| needs(name, "a stateful subtopology with a task"))?;
                out.members[i % n].standby_tasks.insert(task);
            }
            Mode::StandbyStateless => {
                let (i, &task) = tasks
                    .iter()
                    .enumerate()
                    .find(|(_, t)| !stateful(t))
                    .ok_or_else(|| needs(name, "a stateless subtopology with a task"))?;
                if n < 2 {
                    return Err(needs(name, "two members"));
                }
                // On a member other than the active's, so that is the only thing wrong.
                out.members[(i + 1) % n].standby_tasks.insert(task);
            }
            Mode::MissingTask => {
                let &last = tasks.last().ok_or_else(|| needs(name, "a task"))?;
                out.members[(tasks.len() - 1) % n]
                    .active_tasks
                    .remove(&last);
            }
        }
        Ok(out)
    }
}

assignor_sdk::export!(InvalidOutput);
