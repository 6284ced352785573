//! Versions 1 and 2 of the group record: the coordinator's in-memory state of their time, SDK
//! structs included, in postcard (positional: every field in declaration order). Frozen here
//! as copies of those shapes, so that neither a change of the SDK nor of the coordinator can
//! change how they read: a data directory written by those runtimes keeps loading, and each
//! group is rewritten as a current record the next time it changes.
//!
//! Version 2 added the fuel of a failed call; nothing else differs.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use assignor_sdk::{TaskId, TaskSet};
use serde::Deserialize;

use super::super::{ECHO_BYTES, Failure, GroupConfig, GroupState, TargetAssignment};
use crate::store::Revision;
use assignor_sandbox::Usage;
use assignor_sandbox::cut;
use assignor_sandbox::{ErrorKind, TaskAssignorError};

/// A version 1 or 2 value (its leading varint included) as the coordinator's state.
pub(super) fn decode(bytes: &[u8]) -> Result<GroupState, String> {
    let (version, rest): (u32, &[u8]) =
        postcard::take_from_bytes(bytes).map_err(|e| e.to_string())?;
    match version {
        1 => postcard::from_bytes::<Group<ErrorV1>>(rest)
            .map_err(|e| e.to_string())?
            .into_state(),
        2 => postcard::from_bytes::<Group<ErrorV2>>(rest)
            .map_err(|e| e.to_string())?
            .into_state(),
        _ => Err(format!("format version {version} is not a postcard record")),
    }
}

#[derive(Deserialize)]
struct Group<E> {
    config: Config,
    group_epoch: u32,
    topology: Option<Topology>,
    members: BTreeMap<String, Member>,
    target: Option<Target>,
    last_failure: Option<FailureOf<E>>,
}

#[derive(Deserialize)]
struct Config {
    assignor_name: Option<String>,
    num_standby_replicas: Option<u32>,
    rack_aware_assignment_tags: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Topology {
    subtopologies: Vec<Subtopology>,
    racks: Vec<String>,
}

#[derive(Deserialize)]
struct Subtopology {
    id: String,
    max_num_input_partitions: u32,
    is_stateful: bool,
    source_topics: Vec<SourceTopic>,
}

#[derive(Deserialize)]
struct SourceTopic {
    name: String,
    partition_racks: Vec<Vec<u32>>,
}

/// A task: `(subtopology index, partition)`, as the SDK's `TaskId` serialized.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Task {
    subtopology: u32,
    partition: u32,
}

impl From<Task> for TaskId {
    fn from(t: Task) -> Self {
        TaskId::new(t.subtopology, t.partition)
    }
}

#[derive(Deserialize)]
struct Member {
    member_id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    process_id: String,
    client_tags: BTreeMap<String, String>,
    active_tasks: Vec<Task>,
    standby_tasks: Vec<Task>,
    warmup_tasks: Vec<Task>,
    task_offsets: BTreeMap<Task, i64>,
    task_end_offsets: BTreeMap<Task, i64>,
}

#[derive(Deserialize)]
struct Assigned {
    active_tasks: Vec<Task>,
    standby_tasks: Vec<Task>,
}

#[derive(Deserialize)]
struct Target {
    epoch: u32,
    assignor: String,
    members: BTreeMap<String, Assigned>,
    usage: UsageV1,
    computed_at: SystemTime,
}

#[derive(Deserialize)]
struct UsageV1 {
    fuel: Option<u64>,
    peak_memory_bytes: Option<usize>,
    wall_time: Duration,
    input_bytes: Option<usize>,
    output_bytes: Option<usize>,
}

#[derive(Deserialize)]
struct FailureOf<E> {
    error: E,
    at: SystemTime,
    group_epoch: u32,
    consecutive: u32,
    retry_at: SystemTime,
}

/// A failure's error in version 1: no fuel.
#[derive(Deserialize)]
struct ErrorV1 {
    assignor: String,
    kind: u32,
    message: String,
}

/// A failure's error in version 2.
#[derive(Deserialize)]
struct ErrorV2 {
    assignor: String,
    kind: u32,
    message: String,
    fuel: Option<u64>,
}

/// What both versions' errors hold.
trait StoredError {
    fn into_error(self) -> Result<TaskAssignorError, String>;
}

/// Postcard wrote an `ErrorKind` as the index of its variant, in the order the enum declares
/// them (new kinds were only ever appended).
fn kind_at(index: u32) -> Result<ErrorKind, String> {
    ErrorKind::ALL
        .get(index as usize)
        .copied()
        .ok_or_else(|| format!("unknown error kind #{index}"))
}

impl StoredError for ErrorV1 {
    fn into_error(self) -> Result<TaskAssignorError, String> {
        Ok(TaskAssignorError::new(
            self.assignor,
            kind_at(self.kind)?,
            self.message,
        ))
    }
}

impl StoredError for ErrorV2 {
    fn into_error(self) -> Result<TaskAssignorError, String> {
        Ok(
            TaskAssignorError::new(self.assignor, kind_at(self.kind)?, self.message)
                .with_fuel(self.fuel),
        )
    }
}

/// A task set as postcard wrote the SDK's: a list the SDK refused to hold twice.
fn tasks(list: Vec<Task>) -> Result<TaskSet, String> {
    TaskSet::from_unique(list.into_iter().map(TaskId::from).collect())
        .map_err(|t| format!("task {t} twice in a task set"))
}

fn offsets(map: BTreeMap<Task, i64>) -> BTreeMap<TaskId, i64> {
    map.into_iter().map(|(t, o)| (t.into(), o)).collect()
}

impl<E: StoredError> Group<E> {
    fn into_state(self) -> Result<GroupState, String> {
        let members = self
            .members
            .into_iter()
            .map(|(id, m)| {
                // The coordinator keys members by their id; another key is damage, and a current
                // record (which stores the id once) could not hold it.
                if id != m.member_id {
                    return Err(format!(
                        "member `{}` stored under `{}`",
                        cut(&m.member_id, ECHO_BYTES),
                        cut(&id, ECHO_BYTES)
                    ));
                }
                let member = assignor_sdk::Member {
                    member_id: m.member_id,
                    instance_id: m.instance_id,
                    rack_id: m.rack_id,
                    process_id: m.process_id,
                    client_tags: m.client_tags,
                    active_tasks: tasks(m.active_tasks)?,
                    standby_tasks: tasks(m.standby_tasks)?,
                    warmup_tasks: tasks(m.warmup_tasks)?,
                    task_offsets: offsets(m.task_offsets),
                    task_end_offsets: offsets(m.task_end_offsets),
                };
                Ok((id, member))
            })
            .collect::<Result<_, String>>()?;
        let target = self
            .target
            .map(|t| {
                let members = t
                    .members
                    .into_iter()
                    .map(|(id, a)| {
                        let assignment = assignor_sdk::MemberAssignment {
                            active_tasks: tasks(a.active_tasks)?,
                            standby_tasks: tasks(a.standby_tasks)?,
                        };
                        Ok((id, assignment))
                    })
                    .collect::<Result<_, String>>()?;
                Ok::<_, String>(TargetAssignment {
                    epoch: t.epoch,
                    assignor: t.assignor,
                    members,
                    usage: Usage {
                        fuel: t.usage.fuel,
                        peak_memory_bytes: t.usage.peak_memory_bytes,
                        wall_time: t.usage.wall_time,
                        input_bytes: t.usage.input_bytes,
                        output_bytes: t.usage.output_bytes,
                    },
                    computed_at: t.computed_at,
                })
            })
            .transpose()?;
        let last_failure = self
            .last_failure
            .map(|f| {
                Ok::<_, String>(Failure {
                    error: f.error.into_error()?,
                    at: f.at,
                    group_epoch: f.group_epoch,
                    consecutive: f.consecutive,
                    retry_at: f.retry_at,
                })
            })
            .transpose()?;
        Ok(GroupState {
            config: GroupConfig {
                assignor_name: self.config.assignor_name,
                num_standby_replicas: self.config.num_standby_replicas,
                rack_aware_assignment_tags: self.config.rack_aware_assignment_tags,
            },
            group_epoch: self.group_epoch,
            topology: self.topology.map(|t| assignor_sdk::Topology {
                subtopologies: t
                    .subtopologies
                    .into_iter()
                    .map(|s| assignor_sdk::Subtopology {
                        id: s.id,
                        max_num_input_partitions: s.max_num_input_partitions,
                        is_stateful: s.is_stateful,
                        source_topics: s
                            .source_topics
                            .into_iter()
                            .map(|t| assignor_sdk::SourceTopic {
                                name: t.name,
                                partition_racks: t.partition_racks,
                            })
                            .collect(),
                    })
                    .collect(),
                racks: t.racks,
            }),
            members,
            target,
            last_failure,
            incarnation: 0,
            revision: Revision::ABSENT,
        })
    }
}
