//! Output validation: the rules an assignment must satisfy before anyone sees it. Kafka checks
//! none of them; a broken assignor would otherwise corrupt the group's target assignment. The
//! runtime applies them to every result, and assignor tests can apply them too.

use std::collections::HashMap;

use crate::{GroupAssignment, GroupSpec, TaskId, Topology};

/// Checks `assignment` against its input; the error says which rule broke and where.
///
/// Rules: one entry per input member; every task exists (known subtopology, partition in
/// range); every task active on exactly one member (when the group has members); standbys only
/// for stateful subtopologies and never on the process holding the same task as active (the
/// members of one process share its state directory, so such a standby protects nothing).
/// Linear in the group and the assignment.
pub fn validate(
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
) -> Result<(), String> {
    // Each member's process as a small index, so the same-process rule compares integers.
    // Foldhash rather than std's SipHash: interning the ids (SipHash and the map's probes) was
    // 2.6 % of a native 1000-member sticky call's time, validation included, and foldhash took
    // 2.1 % of its instructions off.
    let mut processes: HashMap<&str, u32, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(group.members.len(), Default::default());
    let process: Vec<u32> = group
        .members
        .iter()
        .map(|m| {
            let next = processes.len() as u32;
            *processes.entry(m.process_id.as_str()).or_insert(next)
        })
        .collect();
    validate_with_processes(group, topology, assignment, &process)
}

/// [`validate`] for a caller that has each member's process as an index already: `process[i]`
/// is member `i`'s, equal for members of one process and different otherwise. The runtime
/// interns processes to lower the input, and hashing every process id again cost 0.17M of the
/// 1.29M instructions validating a 1000-member assignment took. Not public API.
#[doc(hidden)]
pub fn validate_with_processes(
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
    process: &[u32],
) -> Result<(), String> {
    assert_eq!(process.len(), group.members.len(), "one process per member");
    if assignment.members.len() != group.members.len() {
        return Err(format!(
            "{} member entries for a group of {} members: {}",
            assignment.members.len(),
            group.members.len(),
            if assignment.members.len() > group.members.len() {
                "unknown member"
            } else {
                "members missing"
            }
        ));
    }
    let member = |i: usize| &group.members[i].member_id;
    // Per subtopology, where its tasks start in `owner`, how many it has and whether it is
    // stateful: one small array the per-task checks index, instead of the topology's records.
    let mut subtopologies = Vec::with_capacity(topology.subtopologies.len());
    let mut total = 0usize;
    for s in &topology.subtopologies {
        subtopologies.push((total, s.max_num_input_partitions, s.is_stateful));
        total += s.max_num_input_partitions as usize;
    }
    let out_of_range = |t: TaskId| match topology.subtopology(t) {
        None => format!(
            "unknown subtopology: task names subtopology index {}, but the topology has {} \
             subtopologies",
            t.subtopology,
            topology.subtopologies.len()
        ),
        Some(s) => format!(
            "partition out of range: task {} but subtopology \"{}\" has {} partitions",
            topology.task_name(t),
            s.id,
            s.max_num_input_partitions
        ),
    };
    // `owner[slot]` is the active owner of the task in that slot, with its process above it
    // (`process << 32 | member`), so that a standby's same-process check is one look-up and
    // one comparison (reading the owner, then its process, cost 0.2M of the 1.1M
    // instructions validating a 1000-member assignment); `UNOWNED` while unowned.
    const UNOWNED: u64 = u64::MAX;
    let mut owner = vec![UNOWNED; total];
    // Tasks made active so far: duplicates are refused, so all are owned once this is `total`.
    let mut owned = 0usize;
    for ((i, m), &p) in (0u32..).zip(&assignment.members).zip(process) {
        let entry = u64::from(p) << 32 | u64::from(i);
        for &t in &m.active_tasks {
            let (k, _) = slot(&subtopologies, t).ok_or_else(|| out_of_range(t))?;
            if owner[k] != UNOWNED {
                return Err(format!(
                    "duplicate active task: {} is active on member \"{}\" and member \"{}\"",
                    topology.task_name(t),
                    member(owner[k] as u32 as usize),
                    member(i as usize)
                ));
            }
            owner[k] = entry;
            owned += 1;
        }
    }
    for ((i, m), &p) in (0u32..).zip(&assignment.members).zip(process) {
        for &t in &m.standby_tasks {
            let (k, stateful) = slot(&subtopologies, t).ok_or_else(|| out_of_range(t))?;
            if !stateful {
                return Err(format!(
                    "standby for a stateless subtopology: {} on member \"{}\"",
                    topology.task_name(t),
                    member(i as usize)
                ));
            }
            let active = owner[k];
            // The active's process is this member's (the active may be this member itself).
            if active >> 32 == u64::from(p) && active != UNOWNED {
                let active = active as u32;
                return Err(if active == i {
                    format!(
                        "task both active and standby: {} on member \"{}\"",
                        topology.task_name(t),
                        member(i as usize)
                    )
                } else {
                    format!(
                        "standby on the active's process: {} is active on member \"{}\" and \
                         standby on member \"{}\", both of process \"{}\" (one state directory, \
                         so the standby protects nothing)",
                        topology.task_name(t),
                        member(active as usize),
                        member(i as usize),
                        group.members[i as usize].process_id
                    )
                });
            }
        }
    }
    // Only a group with a missing task pays for the walk that names it.
    if !group.members.is_empty() && owned < total {
        let first = topology
            .tasks()
            .zip(&owner)
            .find(|&(_, &o)| o == UNOWNED)
            .map(|(t, _)| t)
            .expect("fewer tasks owned than there are leaves one unowned");
        return Err(format!(
            "missing task: {} is not active on any member ({} task(s) unassigned)",
            topology.task_name(first),
            total - owned
        ));
    }
    Ok(())
}

/// Where task `t` sits in `validate`'s owner table, and whether its subtopology is stateful;
/// `None` for a task outside the topology. Returned in registers and inlined: it runs once per
/// assigned task.
#[inline(always)]
fn slot(subtopologies: &[(usize, u32, bool)], t: TaskId) -> Option<(usize, bool)> {
    match subtopologies.get(t.subtopology as usize) {
        Some(&(offset, partitions, stateful)) if t.partition < partitions => {
            Some((offset + t.partition as usize, stateful))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::{Member, MemberAssignment, Subtopology};

    use super::*;

    /// Two members; subtopology "s" stateful with 2 partitions, "l" stateless with 1.
    fn input() -> (GroupSpec, Topology) {
        let member = |id: &str| Member {
            member_id: id.into(),
            process_id: format!("p-{id}"),
            ..Member::default()
        };
        let sub = |id: &str, n, is_stateful| Subtopology {
            id: id.into(),
            max_num_input_partitions: n,
            is_stateful,
            source_topics: Vec::new(),
        };
        (
            GroupSpec {
                members: vec![member("a"), member("b")],
                configs: Default::default(),
            },
            Topology {
                subtopologies: vec![sub("s", 2, true), sub("l", 1, false)],
                racks: Vec::new(),
            },
        )
    }

    /// Per member: (active tasks, standby tasks).
    type Entries<'a> = [(&'a [TaskId], &'a [TaskId]); 2];

    fn assignment(entries: Entries<'_>) -> GroupAssignment {
        GroupAssignment {
            members: entries
                .iter()
                .map(|(a, s)| MemberAssignment {
                    active_tasks: a.iter().copied().collect(),
                    standby_tasks: s.iter().copied().collect(),
                })
                .collect(),
        }
    }

    const S0: TaskId = TaskId::new(0, 0);
    const S1: TaskId = TaskId::new(0, 1);
    const L0: TaskId = TaskId::new(1, 0);

    fn check(entries: Entries<'_>) -> Result<(), String> {
        let (group, topology) = input();
        validate(&group, &topology, &assignment(entries))
    }

    /// A complete assignment with a standby on the other member passes.
    #[test]
    fn valid_assignment_passes() {
        check([(&[S0, L0], &[S1]), (&[S1], &[S0])]).expect("valid");
    }

    /// Each rule, broken alone, is reported by name with the task and member.
    #[test]
    fn each_rule_is_reported() {
        let cases: [(Entries<'_>, &str); 5] = [
            (
                [(&[S0, S1, L0], &[]), (&[S1], &[])],
                "duplicate active task: s_1 is active on member \"a\" and member \"b\"",
            ),
            (
                [(&[S0, L0], &[]), (&[], &[])],
                "missing task: s_1 is not active on any member (1 task(s) unassigned)",
            ),
            (
                [(&[S0, S1, L0], &[S0]), (&[], &[])],
                "task both active and standby: s_0 on member \"a\"",
            ),
            (
                [(&[S0, S1], &[]), (&[], &[L0])],
                "standby for a stateless subtopology: l_0 on member \"b\"",
            ),
            (
                [(&[S0, S1, L0, TaskId::new(0, 2)], &[]), (&[], &[])],
                "partition out of range: task s_2 but subtopology \"s\" has 2 partitions",
            ),
        ];
        for (entries, expected) in cases {
            assert_eq!(check(entries).expect_err(expected), expected);
        }
        let unknown = check([(&[S0, S1, L0, TaskId::new(7, 0)], &[]), (&[], &[])]);
        assert!(
            unknown
                .expect_err("unknown")
                .starts_with("unknown subtopology")
        );
    }

    /// A standby on another member of the active's process is refused, naming the rule.
    #[test]
    fn standby_on_the_active_process_is_refused() {
        let (mut group, topology) = input();
        group.members[1].process_id = "p-a".into();
        let e = validate(
            &group,
            &topology,
            &assignment([(&[S0, S1, L0], &[]), (&[], &[S0])]),
        )
        .expect_err("same process");
        assert_eq!(
            e,
            "standby on the active's process: s_0 is active on member \"a\" and standby on \
             member \"b\", both of process \"p-a\" (one state directory, so the standby \
             protects nothing)"
        );
    }

    /// Process indices from the caller decide the same-process rule as the process ids do.
    #[test]
    fn process_indices_stand_for_the_ids() {
        let (group, topology) = input();
        let a = assignment([(&[S0, S1, L0], &[]), (&[], &[S0])]);
        validate_with_processes(&group, &topology, &a, &[0, 1]).expect("two processes");
        let e = validate_with_processes(&group, &topology, &a, &[3, 3]).expect_err("one");
        assert!(e.starts_with("standby on the active's process: s_0"), "{e}");
    }

    /// Missing tasks are counted from the tasks made active (not by walking every task), and
    /// the first one in task order is named, whichever subtopology it is in.
    #[test]
    fn missing_tasks_are_counted_and_the_first_named() {
        assert_eq!(
            check([(&[S1], &[]), (&[], &[])]).expect_err("two missing"),
            "missing task: s_0 is not active on any member (2 task(s) unassigned)"
        );
        assert_eq!(
            check([(&[S1], &[]), (&[S0], &[])]).expect_err("one missing"),
            "missing task: l_0 is not active on any member (1 task(s) unassigned)"
        );
    }

    /// One entry per member is required; a group without members accepts only nothing.
    #[test]
    fn member_count_must_match() {
        let (group, topology) = input();
        let short = GroupAssignment {
            members: vec![MemberAssignment::default()],
        };
        let e = validate(&group, &topology, &short).expect_err("short");
        assert!(e.contains("members missing"), "{e}");
        let empty = GroupSpec::default();
        validate(&empty, &topology, &GroupAssignment::default()).expect("nothing to assign to");
    }
}
