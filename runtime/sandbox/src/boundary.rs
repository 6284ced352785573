//! The host side of the WIT boundary: the generated bindings (private to this module), the
//! calls of the three exports, and the conversion between WIT values and the SDK's domain
//! model. Nothing else in the runtime sees WIT types.
//!
//! What a guest returns is lifted under wasmtime's hostcall fuel, which the store's call hook
//! sets when an export returns ([`CallState::hook`](crate::wasi::CallState)): a list or string
//! is checked against it before it is copied, so a guest cannot make the host allocate more
//! than the output limit, however much it returns. (Lifting lazily, as `WasmList`, is not an
//! option: the guest's post-return function frees the lists before the host could read them.)

use std::collections::{BTreeMap, HashMap};

use assignor_sdk::{GroupAssignment, GroupSpec, TaskId, TaskSet, Topology};

use crate::limits::cut;

mod bindings {
    // Exports are called with `call_async` so that the service can run a call on its async
    // threads, yielding every so much fuel; synchronous callers drive the same futures.
    wasmtime::component::bindgen!({
        path: "../../wit/v0.1.0",
        world: "assignor",
        exports: { default: async },
    });
}

use bindings::kafka::streams_assignor::types as wit;

pub(crate) use bindings::exports::kafka::streams_assignor::task_assignor::Guest as TaskAssignorApi;
pub(crate) use bindings::{Assignor, AssignorPre};

/// What a guest returned from `assign`.
pub(crate) type Output = wit::GroupAssignment;

/// Hostcall fuel for lifting `name()`'s result: a name is at most 249 bytes, and one up to
/// this size is still lifted so that the refusal can say how long it was.
pub(crate) const NAME_RESULT_BYTES: usize = 4 << 10;

/// Hostcall fuel for lifting what `configure` or `assign` returned under `limits`: the output
/// limit (an error message is cut to its own, smaller limit once lifted), plus list headers.
pub(crate) fn result_bytes(limits: &crate::Limits) -> usize {
    limits
        .get_max_output_bytes()
        .max(limits.get_max_message_bytes())
        .saturating_add(64)
}

/// Canonical-ABI bytes of one `member-tasks` entry (three `u32`s).
pub(crate) const MEMBER_TASK_BYTES: usize = 12;
/// Canonical-ABI bytes of one `member-task-offsets` entry (three `u32`s and an `s64`).
const MEMBER_TASK_OFFSET_BYTES: usize = 20;
/// Canonical-ABI bytes of a string or list header (pointer and length).
const HEADER_BYTES: usize = 8;

/// The input of one call, in WIT form, with its size.
pub(crate) struct Input {
    pub(crate) group: wit::GroupSpec,
    pub(crate) topology: wit::Topology,
    /// Bytes the call copies into the guest: list elements, strings and their headers.
    pub(crate) bytes: usize,
}

fn string_bytes(s: &str) -> usize {
    HEADER_BYTES + s.len()
}

fn tasks_with_capacity(n: usize) -> wit::MemberTasks {
    wit::MemberTasks {
        members: Vec::with_capacity(n),
        subtopologies: Vec::with_capacity(n),
        partitions: Vec::with_capacity(n),
    }
}

fn push_tasks<'a>(
    list: &mut wit::MemberTasks,
    member: u32,
    tasks: impl IntoIterator<Item = &'a TaskId>,
) {
    for t in tasks {
        list.members.push(member);
        list.subtopologies.push(t.subtopology);
        list.partitions.push(t.partition);
    }
}

fn push_offsets(list: &mut wit::MemberTaskOffsets, member: u32, offsets: &BTreeMap<TaskId, i64>) {
    for (t, &offset) in offsets {
        list.members.push(member);
        list.subtopologies.push(t.subtopology);
        list.partitions.push(t.partition);
        list.offsets.push(offset);
    }
}

fn offsets_with_capacity(n: usize) -> wit::MemberTaskOffsets {
    wit::MemberTaskOffsets {
        members: Vec::with_capacity(n),
        subtopologies: Vec::with_capacity(n),
        partitions: Vec::with_capacity(n),
        offsets: Vec::with_capacity(n),
    }
}

/// Converts the domain input into WIT values: processes interned, per-member task maps
/// flattened into parallel integer lists, each member's entries contiguous and in order.
pub(crate) fn input(group: &GroupSpec, topology: &Topology) -> Input {
    let mut bytes = 0;
    let mut process_index: HashMap<&str, u32> = HashMap::with_capacity(group.members.len());
    let mut processes = Vec::new();
    let mut members = Vec::with_capacity(group.members.len());
    let count = |f: fn(&assignor_sdk::Member) -> usize| group.members.iter().map(f).sum::<usize>();
    let mut active = tasks_with_capacity(count(|m| m.active_tasks.len()));
    let mut standby = tasks_with_capacity(count(|m| m.standby_tasks.len()));
    let mut warmup = tasks_with_capacity(count(|m| m.warmup_tasks.len()));
    let mut offsets = offsets_with_capacity(count(|m| m.task_offsets.len()));
    let mut end_offsets = offsets_with_capacity(count(|m| m.task_end_offsets.len()));
    for (index, m) in (0u32..).zip(&group.members) {
        let process = *process_index.entry(&m.process_id).or_insert_with(|| {
            processes.push(m.process_id.clone());
            bytes += string_bytes(&m.process_id);
            processes.len() as u32 - 1
        });
        bytes += string_bytes(&m.member_id)
            + m.instance_id.as_deref().map_or(4, string_bytes)
            + m.rack_id.as_deref().map_or(4, string_bytes)
            + 4
            + HEADER_BYTES
            + m.client_tags
                .iter()
                .map(|(k, v)| string_bytes(k) + string_bytes(v))
                .sum::<usize>();
        members.push(wit::Member {
            member_id: m.member_id.clone(),
            instance_id: m.instance_id.clone(),
            rack_id: m.rack_id.clone(),
            process,
            client_tags: m
                .client_tags
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        });
        push_tasks(&mut active, index, &m.active_tasks);
        push_tasks(&mut standby, index, &m.standby_tasks);
        push_tasks(&mut warmup, index, &m.warmup_tasks);
        push_offsets(&mut offsets, index, &m.task_offsets);
        push_offsets(&mut end_offsets, index, &m.task_end_offsets);
    }
    bytes += (active.members.len() + standby.members.len() + warmup.members.len())
        * MEMBER_TASK_BYTES
        + (offsets.members.len() + end_offsets.members.len()) * MEMBER_TASK_OFFSET_BYTES
        + group
            .configs
            .rack_aware_assignment_tags
            .iter()
            .map(|t| string_bytes(t))
            .sum::<usize>();

    let subtopologies = topology
        .subtopologies
        .iter()
        .map(|s| {
            bytes += string_bytes(&s.id) + 4 + 1 + HEADER_BYTES;
            wit::Subtopology {
                id: s.id.clone(),
                max_num_input_partitions: s.max_num_input_partitions,
                is_stateful: s.is_stateful,
                source_topics: s
                    .source_topics
                    .iter()
                    .map(|t| {
                        let (replica_partitions, replica_racks): (Vec<u32>, Vec<u32>) = (0u32..)
                            .zip(&t.partition_racks)
                            .flat_map(|(partition, racks)| {
                                racks.iter().map(move |&r| (partition, r))
                            })
                            .unzip();
                        bytes +=
                            string_bytes(&t.name) + 4 + 2 * HEADER_BYTES + replica_racks.len() * 8;
                        wit::SourceTopic {
                            name: t.name.clone(),
                            partitions: t.partition_racks.len() as u32,
                            replica_partitions,
                            replica_racks,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    bytes += topology
        .racks
        .iter()
        .map(|r| string_bytes(r))
        .sum::<usize>();

    Input {
        group: wit::GroupSpec {
            members,
            processes,
            configs: wit::AssignmentConfigs {
                num_standby_replicas: group.configs.num_standby_replicas,
                rack_aware_assignment_tags: group.configs.rack_aware_assignment_tags.clone(),
            },
            active_tasks: active,
            standby_tasks: standby,
            warmup_tasks: warmup,
            task_offsets: offsets,
            task_end_offsets: end_offsets,
        },
        topology: wit::Topology {
            subtopologies,
            racks: topology.racks.clone(),
        },
        bytes,
    }
}

/// Parallel lists must have one length.
fn check_shape(kind: &str, [m, s, p]: [usize; 3]) -> Result<(), String> {
    if m != s || s != p {
        return Err(format!(
            "malformed output: the {kind} task lists differ in length (members {m}, \
             subtopologies {s}, partitions {p})"
        ));
    }
    Ok(())
}

/// The host's checks of a returned assignment without a guest, for the fuzz targets
/// (`tests/fuzz`): [`output`] on the lists. Each array is the members, subtopologies and
/// partitions lists.
#[doc(hidden)]
pub fn fuzz_output(
    active: [Vec<u32>; 3],
    standby: [Vec<u32>; 3],
    group: &GroupSpec,
    topology: &Topology,
) -> Result<GroupAssignment, String> {
    let tasks = |[members, subtopologies, partitions]: [Vec<u32>; 3]| wit::MemberTasks {
        members,
        subtopologies,
        partitions,
    };
    let out = Output {
        active_tasks: tasks(active),
        standby_tasks: tasks(standby),
    };
    output(out, group, topology)
}

/// Canonical-ABI size of a returned assignment.
pub(crate) fn output_bytes(out: &Output) -> usize {
    [&out.active_tasks, &out.standby_tasks]
        .iter()
        .map(|l| (l.members.len() + l.subtopologies.len() + l.partitions.len()) * 4)
        .sum()
}

/// Converts a returned assignment into the domain model for `group`'s members, in time
/// linear in the output (plus sorting each member's tasks).
///
/// Fails, naming the entry, on what the domain model cannot hold: parallel lists of different
/// lengths, a member index out of range, or the same task listed twice for one member.
/// Entries may come in any order; the SDK sends each member's tasks as one sorted run.
pub(crate) fn output(
    out: Output,
    group: &GroupSpec,
    topology: &Topology,
) -> Result<GroupAssignment, String> {
    let n = group.members.len();
    let mut assignment = GroupAssignment::empty_for(group);
    for (kind, list) in [("active", out.active_tasks), ("standby", out.standby_tasks)] {
        check_shape(
            kind,
            [
                list.members.len(),
                list.subtopologies.len(),
                list.partitions.len(),
            ],
        )?;
        // Count per member, then place every entry in its member's slice: one pass each,
        // whatever the order of the entries.
        let mut counts = vec![0usize; n];
        for (i, &member) in list.members.iter().enumerate() {
            let Some(c) = counts.get_mut(member as usize) else {
                let task = TaskId::new(list.subtopologies[i], list.partitions[i]);
                return Err(format!(
                    "unknown member: {kind} task {} is assigned to member index {member}, but \
                     the group has {n} members",
                    cut(&topology.task_name(task), 256),
                ));
            };
            *c += 1;
        }
        let mut per_member: Vec<Vec<TaskId>> =
            counts.iter().map(|&c| Vec::with_capacity(c)).collect();
        for ((&m, &s), &p) in list
            .members
            .iter()
            .zip(&list.subtopologies)
            .zip(&list.partitions)
        {
            per_member[m as usize].push(TaskId::new(s, p));
        }
        for (member, tasks) in per_member.into_iter().enumerate() {
            let set = TaskSet::from_unique(tasks).map_err(|twice| {
                format!(
                    "duplicate {kind} task: {} is listed twice for member \"{}\"",
                    cut(&topology.task_name(twice), 256),
                    cut(&group.members[member].member_id, 256)
                )
            })?;
            let a = &mut assignment.members[member];
            if kind == "active" {
                a.active_tasks = set;
            } else {
                a.standby_tasks = set;
            }
        }
    }
    Ok(assignment)
}

#[cfg(test)]
mod tests {
    use assignor_sdk::{Member, Subtopology};

    use super::*;

    fn input() -> (GroupSpec, Topology) {
        let group = GroupSpec {
            members: vec![Member {
                member_id: "a".into(),
                process_id: "p".into(),
                active_tasks: [TaskId::new(0, 1)].into(),
                ..Member::default()
            }],
            configs: Default::default(),
        };
        let topology = Topology {
            subtopologies: vec![Subtopology {
                id: "s".into(),
                max_num_input_partitions: 2,
                is_stateful: true,
                source_topics: Vec::new(),
            }],
            racks: Vec::new(),
        };
        (group, topology)
    }

    fn tasks(entries: &[(u32, u32)]) -> wit::MemberTasks {
        wit::MemberTasks {
            members: entries.iter().map(|e| e.0).collect(),
            subtopologies: vec![0; entries.len()],
            partitions: entries.iter().map(|e| e.1).collect(),
        }
    }

    /// The input is flattened into indexed lists and its copied size is counted.
    #[test]
    fn input_is_flat_and_sized() {
        let (group, topology) = input();
        let input = super::input(&group, &topology);
        assert_eq!(input.group.processes, ["p"]);
        assert_eq!(input.group.members[0].process, 0);
        assert_eq!(input.group.active_tasks.members, [0]);
        assert_eq!(input.group.active_tasks.partitions, [1]);
        assert!(input.bytes >= MEMBER_TASK_BYTES + "a".len() + "p".len() + "s".len());
    }

    /// Ragged lists are refused before conversion.
    #[test]
    fn ragged_lists_are_malformed() {
        let (group, topology) = input();
        let e = fuzz_output(
            [vec![0], vec![0], vec![]],
            Default::default(),
            &group,
            &topology,
        )
        .expect_err("ragged");
        assert!(
            e.starts_with("malformed output: the active task lists"),
            "{e}"
        );
    }

    /// Entries alternating between members (each member's tasks in 100,000 runs of one) are
    /// merged in one pass per list, not one merge per run.
    #[test]
    fn alternating_entries_are_merged() {
        let (mut group, mut topology) = input();
        group.members.push(Member {
            member_id: "b".into(),
            process_id: "q".into(),
            ..Member::default()
        });
        topology.subtopologies[0].max_num_input_partitions = 200_000;
        let n = 200_000u32;
        let out = Output {
            active_tasks: wit::MemberTasks {
                members: (0..n).map(|i| i % 2).collect(),
                subtopologies: vec![0; n as usize],
                partitions: (0..n).collect(),
            },
            standby_tasks: tasks(&[]),
        };
        let a = output(out, &group, &topology).expect("valid");
        assert_eq!(a.members[0].active_tasks.len(), 100_000);
        assert_eq!(a.members[1].active_tasks.len(), 100_000);
    }

    /// A member index past the group and a task listed twice for one member are rejected with
    /// the member and task named; entries of one member in any order are accepted.
    #[test]
    fn output_rejects_what_the_model_cannot_hold() {
        let (group, topology) = input();
        let out = |active_tasks| Output {
            active_tasks,
            standby_tasks: tasks(&[]),
        };
        let ok = output(out(tasks(&[(0, 0), (0, 1)])), &group, &topology).expect("ok");
        assert_eq!(ok.members[0].active_tasks.len(), 2);
        let runs = output(out(tasks(&[(0, 1), (0, 0)])), &group, &topology).expect("runs");
        assert_eq!(runs.members[0].active_tasks.len(), 2);
        let unknown = output(out(tasks(&[(3, 0)])), &group, &topology).expect_err("member 3");
        assert!(
            unknown.starts_with("unknown member: active task s_0 is assigned to member index 3"),
            "{unknown}"
        );
        let twice = output(out(tasks(&[(0, 1), (0, 1)])), &group, &topology).expect_err("dup");
        assert_eq!(
            twice,
            "duplicate active task: s_1 is listed twice for member \"a\""
        );
    }
}
