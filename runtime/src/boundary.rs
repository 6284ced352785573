//! The host side of the WIT boundary: the generated bindings (private to this module) and the
//! conversion between them and the SDK's domain model. Nothing else in the runtime sees WIT
//! types.

use std::collections::HashMap;

use assignor_sdk::{GroupAssignment, GroupSpec, TaskId, Topology};

use crate::validate;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "assignor",
    });
}

use bindings::kafka::streams_assignor::types as wit;

pub(crate) use bindings::AssignorPre;
pub(crate) use bindings::exports::kafka::streams_assignor::task_assignor::Guest as TaskAssignorApi;

/// Canonical-ABI bytes of one `member-task` entry (three `u32`s).
pub(crate) const MEMBER_TASK_BYTES: usize = 12;
/// Canonical-ABI bytes of one `member-task-offset` entry (three `u32`s, padding, an `s64`).
const MEMBER_TASK_OFFSET_BYTES: usize = 24;
/// Canonical-ABI bytes of a string or list header (pointer and length).
const HEADER_BYTES: usize = 8;

/// The input of one call, in WIT form, with its size.
pub(crate) struct Input {
    pub(crate) group: wit::GroupSpec,
    pub(crate) topology: wit::Topology,
    /// Bytes the call copies into the guest: list elements, strings and their headers.
    pub(crate) bytes: usize,
}

fn task(t: TaskId) -> wit::TaskId {
    wit::TaskId {
        subtopology: t.subtopology,
        partition: t.partition,
    }
}

fn string_bytes(s: &str) -> usize {
    HEADER_BYTES + s.len()
}

/// Converts the domain input into WIT values: processes interned, per-member task maps
/// flattened into `member-task` lists.
pub(crate) fn input(group: &GroupSpec, topology: &Topology) -> Input {
    let mut bytes = 0;
    let mut process_index: HashMap<&str, u32> = HashMap::new();
    let mut processes = Vec::new();
    let mut members = Vec::with_capacity(group.members.len());
    let mut active = Vec::new();
    let mut standby = Vec::new();
    let mut warmup = Vec::new();
    let mut offsets = Vec::new();
    let mut end_offsets = Vec::new();
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
        let entry = |t: &TaskId| wit::MemberTask {
            member: index,
            task: task(*t),
        };
        active.extend(m.active_tasks.iter().map(entry));
        standby.extend(m.standby_tasks.iter().map(entry));
        warmup.extend(m.warmup_tasks.iter().map(entry));
        let offset = |(t, o): (&TaskId, &i64)| wit::MemberTaskOffset {
            member: index,
            task: task(*t),
            offset: *o,
        };
        offsets.extend(m.task_offsets.iter().map(offset));
        end_offsets.extend(m.task_end_offsets.iter().map(offset));
    }
    bytes += (active.len() + standby.len() + warmup.len()) * MEMBER_TASK_BYTES
        + (offsets.len() + end_offsets.len()) * MEMBER_TASK_OFFSET_BYTES
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
                        let replica_racks: Vec<_> = (0u32..)
                            .zip(&t.partition_racks)
                            .flat_map(|(partition, racks)| {
                                racks
                                    .iter()
                                    .map(move |&rack| wit::PartitionReplica { partition, rack })
                            })
                            .collect();
                        bytes += string_bytes(&t.name) + 4 + HEADER_BYTES + replica_racks.len() * 8;
                        wit::SourceTopic {
                            name: t.name.clone(),
                            partitions: t.partition_racks.len() as u32,
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

/// Canonical-ABI size of a returned assignment.
pub(crate) fn output_bytes(out: &wit::GroupAssignment) -> usize {
    (out.active_tasks.len() + out.standby_tasks.len()) * MEMBER_TASK_BYTES
}

/// Converts a returned assignment into the domain model for `group`'s members.
///
/// Fails, naming the entry, on what the domain model cannot hold: a member index out of range
/// or the same task listed twice for one member.
pub(crate) fn output(
    out: wit::GroupAssignment,
    group: &GroupSpec,
    topology: &Topology,
) -> Result<GroupAssignment, String> {
    let mut assignment = GroupAssignment::empty_for(group);
    for (kind, list) in [("active", out.active_tasks), ("standby", out.standby_tasks)] {
        for entry in list {
            let t = TaskId::new(entry.task.subtopology, entry.task.partition);
            let Some(m) = assignment.members.get_mut(entry.member as usize) else {
                return Err(format!(
                    "unknown member: {kind} task {} is assigned to member index {}, but the \
                     group has {} members",
                    validate::describe(topology, t),
                    entry.member,
                    group.members.len()
                ));
            };
            let set = if kind == "active" {
                &mut m.active_tasks
            } else {
                &mut m.standby_tasks
            };
            if !set.insert(t) {
                return Err(format!(
                    "duplicate {kind} task: {} is listed twice for member \"{}\"",
                    validate::describe(topology, t),
                    group.members[entry.member as usize].member_id
                ));
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

    fn entry(member: u32, partition: u32) -> wit::MemberTask {
        wit::MemberTask {
            member,
            task: wit::TaskId {
                subtopology: 0,
                partition,
            },
        }
    }

    /// The input is flattened into indexed lists and its copied size is counted.
    #[test]
    fn input_is_flat_and_sized() {
        let (group, topology) = input();
        let input = super::input(&group, &topology);
        assert_eq!(input.group.processes, ["p"]);
        assert_eq!(input.group.members[0].process, 0);
        assert_eq!(input.group.active_tasks.len(), 1);
        assert_eq!(input.group.active_tasks[0].task.partition, 1);
        assert!(input.bytes >= MEMBER_TASK_BYTES + "a".len() + "p".len() + "s".len());
    }

    /// A member index past the group and a task listed twice for one member are rejected
    /// with the member and task named.
    #[test]
    fn output_rejects_what_the_model_cannot_hold() {
        let (group, topology) = input();
        let out = |active| wit::GroupAssignment {
            active_tasks: active,
            standby_tasks: Vec::new(),
        };
        let ok = output(out(vec![entry(0, 0), entry(0, 1)]), &group, &topology).expect("ok");
        assert_eq!(ok.members[0].active_tasks.len(), 2);
        let unknown = output(out(vec![entry(3, 0)]), &group, &topology).expect_err("member 3");
        assert!(
            unknown.starts_with("unknown member: active task s_0 is assigned to member index 3"),
            "{unknown}"
        );
        let twice =
            output(out(vec![entry(0, 1), entry(0, 1)]), &group, &topology).expect_err("dup");
        assert_eq!(
            twice,
            "duplicate active task: s_1 is listed twice for member \"a\""
        );
    }
}
