//! The JSON contract (DESIGN §5): the group input `assignor assign` reads, checked into the
//! model; input errors name the offending field by path. The output document and the other
//! shapes printed are the [`protocol`](assignor_protocol)'s (re-exported here).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use assignor_sdk::{
    AssignmentConfigs, GroupSpec, Member, SourceTopic, Subtopology, TaskId, TaskSet, Topology,
};
use serde::Deserialize;

pub use assignor_protocol::document::{
    AssignmentDoc, AssignmentView, MemberAssignmentDoc, assignment_doc,
};
use assignor_sandbox::{Limits, cut};

/// Subtopology id → partitions, as in Kafka's per-member task maps.
type TaskMap = BTreeMap<String, Vec<u32>>;
/// Subtopology id → partition → offset.
type OffsetMap = BTreeMap<String, BTreeMap<u32, i64>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InputDoc {
    topology: TopologyDoc,
    /// `None` when the document has none (the group's configs are then its defaults); a
    /// `null` is refused like any value that is not an object.
    #[serde(default, deserialize_with = "present")]
    configs: Option<ConfigsDoc>,
    members: Vec<MemberDoc>,
}

/// An optional field that, when present, must be a `T` (`null` included in what it refuses).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TopologyDoc {
    subtopologies: Vec<SubtopologyDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SubtopologyDoc {
    id: String,
    max_num_input_partitions: u32,
    is_stateful: bool,
    #[serde(default)]
    source_topics: Vec<SourceTopicDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SourceTopicDoc {
    name: String,
    #[serde(default)]
    partition_racks: Vec<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConfigsDoc {
    #[serde(default)]
    num_standby_replicas: u32,
    #[serde(default)]
    rack_aware_assignment_tags: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MemberDoc {
    member_id: String,
    process_id: String,
    #[serde(default)]
    instance_id: Option<String>,
    #[serde(default)]
    rack_id: Option<String>,
    #[serde(default)]
    client_tags: BTreeMap<String, String>,
    #[serde(default)]
    active_tasks: TaskMap,
    #[serde(default)]
    standby_tasks: TaskMap,
    #[serde(default)]
    warmup_tasks: TaskMap,
    #[serde(default)]
    task_offsets: OffsetMap,
    #[serde(default)]
    task_end_offsets: OffsetMap,
}

/// A bad input document: where (a JSON path such as `members[2].activeTasks["7"]`) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    /// Path of the offending field; `.` for the document itself.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid input at {}: {}", self.path, self.message)
    }
}

fn err(path: impl Into<String>, message: impl Into<String>) -> InputError {
    InputError {
        path: path.into(),
        message: message.into(),
    }
}

/// How much of a parser's message, or of an id it echoes, an input error keeps.
const ECHO_BYTES: usize = 256;

/// Parses and checks a group input document under the default [`Limits`]; see
/// [`parse_input_with`].
pub fn parse_input(text: &str) -> Result<(GroupSpec, Topology), InputError> {
    parse_input_with(text, &Limits::default())
}

/// Parses and checks a group input document; see [`parse_document_with`].
pub fn parse_input_with(text: &str, limits: &Limits) -> Result<(GroupSpec, Topology), InputError> {
    parse_document_with(text, limits).map(|d| (d.group, d.topology))
}

/// A parsed and checked group input document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDocument {
    /// The members and configs (the defaults where the document has no `configs`).
    pub group: GroupSpec,
    /// The topology.
    pub topology: Topology,
    /// Whether the document has `configs`: a service replacing a group applies them only
    /// then, so that a document without them leaves the group's own settings alone.
    pub has_configs: bool,
}

/// Parses and checks a group input document, in one pass over the text.
///
/// Beyond the JSON shape (unknown fields are errors), the document must be consistent: unique
/// subtopology and member ids, and every task a member reports must exist in the topology.
/// It must also be within `limits`' input limits (document size, members, subtopologies,
/// partitions, tasks, id length), checked before anything is sized from its numbers; the
/// work is linear in the document. Errors echo at most a few hundred bytes of it.
pub fn parse_document_with(text: &str, limits: &Limits) -> Result<GroupDocument, InputError> {
    let max = limits.get_max_input_bytes();
    if text.len() > max {
        return Err(err(
            ".",
            format!(
                "the document is {}, over the limit of {} (max.input.bytes)",
                assignor_sandbox::byte_count(text.len() as u64),
                assignor_sandbox::byte_count(max as u64)
            ),
        ));
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    let doc: InputDoc = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = cut(&e.path().to_string(), ECHO_BYTES).into_owned();
        err(path, cut(&e.into_inner().to_string(), ECHO_BYTES))
    })?;
    let limit = |e: assignor_sandbox::InputLimitError| err(e.field.clone(), e.to_string());
    limits
        .check_counts(
            doc.members.len(),
            doc.topology.subtopologies.len(),
            doc.topology
                .subtopologies
                .iter()
                .map(|s| s.max_num_input_partitions),
        )
        .map_err(limit)?;

    let mut index: HashMap<&str, u32> = HashMap::new();
    let mut racks: Vec<String> = Vec::new();
    let mut rack_index: HashMap<String, u32> = HashMap::new();
    let mut subtopologies = Vec::with_capacity(doc.topology.subtopologies.len());
    for (i, s) in doc.topology.subtopologies.iter().enumerate() {
        let path = format!("topology.subtopologies[{i}]");
        if index.insert(&s.id, i as u32).is_some() {
            return Err(err(
                format!("{path}.id"),
                format!("duplicate subtopology id {:?}", cut(&s.id, ECHO_BYTES)),
            ));
        }
        let mut source_topics = Vec::with_capacity(s.source_topics.len());
        for (t, topic) in s.source_topics.iter().enumerate() {
            if topic.partition_racks.len() > s.max_num_input_partitions as usize {
                return Err(err(
                    format!("{path}.sourceTopics[{t}].partitionRacks"),
                    format!(
                        "{} partitions, more than the subtopology's maxNumInputPartitions {}",
                        topic.partition_racks.len(),
                        s.max_num_input_partitions
                    ),
                ));
            }
            let partition_racks = topic
                .partition_racks
                .iter()
                .map(|names| {
                    names
                        .iter()
                        .map(|name| {
                            *rack_index.entry(name.clone()).or_insert_with(|| {
                                racks.push(name.clone());
                                racks.len() as u32 - 1
                            })
                        })
                        .collect()
                })
                .collect();
            source_topics.push(SourceTopic {
                name: topic.name.clone(),
                partition_racks,
            });
        }
        subtopologies.push(Subtopology {
            id: s.id.clone(),
            max_num_input_partitions: s.max_num_input_partitions,
            is_stateful: s.is_stateful,
            source_topics,
        });
    }

    let task = |path: &str, sid: &str, partition: u32| -> Result<TaskId, InputError> {
        let sid = cut(sid, ECHO_BYTES);
        let Some(&s) = index.get(&*sid) else {
            return Err(err(
                format!("{path}[{sid:?}]"),
                format!("unknown subtopology {sid:?}"),
            ));
        };
        let max = doc.topology.subtopologies[s as usize].max_num_input_partitions;
        if partition >= max {
            return Err(err(
                format!("{path}[{sid:?}]"),
                format!(
                    "partition {partition} out of range: subtopology {sid:?} has {max} partitions"
                ),
            ));
        }
        Ok(TaskId::new(s, partition))
    };
    let tasks = |path: String, map: &TaskMap| -> Result<TaskSet, InputError> {
        let mut tasks = Vec::new();
        for (sid, partitions) in map {
            for &p in partitions {
                tasks.push(task(&path, sid, p)?);
            }
        }
        Ok(tasks.into_iter().collect())
    };
    let offsets = |path: String, map: &OffsetMap| -> Result<BTreeMap<TaskId, i64>, InputError> {
        let mut out = BTreeMap::new();
        for (sid, partitions) in map {
            for (&p, &o) in partitions {
                out.insert(task(&path, sid, p)?, o);
            }
        }
        Ok(out)
    };

    let mut seen = HashMap::new();
    let mut members = Vec::with_capacity(doc.members.len());
    for (i, m) in doc.members.iter().enumerate() {
        let path = format!("members[{i}]");
        if let Some(first) = seen.insert(m.member_id.as_str(), i) {
            return Err(err(
                format!("{path}.memberId"),
                format!(
                    "duplicate member id {:?} (also members[{first}])",
                    cut(&m.member_id, ECHO_BYTES)
                ),
            ));
        }
        members.push(Member {
            member_id: m.member_id.clone(),
            instance_id: m.instance_id.clone(),
            rack_id: m.rack_id.clone(),
            process_id: m.process_id.clone(),
            client_tags: m.client_tags.clone(),
            active_tasks: tasks(format!("{path}.activeTasks"), &m.active_tasks)?,
            standby_tasks: tasks(format!("{path}.standbyTasks"), &m.standby_tasks)?,
            warmup_tasks: tasks(format!("{path}.warmupTasks"), &m.warmup_tasks)?,
            task_offsets: offsets(format!("{path}.taskOffsets"), &m.task_offsets)?,
            task_end_offsets: offsets(format!("{path}.taskEndOffsets"), &m.task_end_offsets)?,
        });
    }
    let has_configs = doc.configs.is_some();
    let configs = doc.configs.unwrap_or_default();
    let group = GroupSpec {
        members,
        configs: AssignmentConfigs {
            num_standby_replicas: configs.num_standby_replicas,
            rack_aware_assignment_tags: configs.rack_aware_assignment_tags,
        },
    };
    let topology = Topology {
        subtopologies,
        racks,
    };
    limits.check_group(&group, &topology).map_err(limit)?;
    Ok(GroupDocument {
        group,
        topology,
        has_configs,
    })
}

#[cfg(test)]
mod tests {
    use assignor_sdk::GroupAssignment;

    use super::*;

    fn parse(text: &str) -> Result<(GroupSpec, Topology), InputError> {
        parse_input(text)
    }

    /// A group over an input limit is refused before anything is sized from its numbers,
    /// naming the field, the value and the limit: 100 subtopologies of `u32::MAX` partitions
    /// (which once made the host allocate 1.7 TB and abort), too many members, a huge id.
    #[test]
    fn limits_are_checked_before_the_work() {
        let subtopology = r#"{"id":"s","maxNumInputPartitions":4294967295,"isStateful":true}"#;
        let subtopologies: Vec<String> = (0..100)
            .map(|i| subtopology.replace(r#""s""#, &format!(r#""s{i}""#)))
            .collect();
        let text = format!(
            r#"{{"topology":{{"subtopologies":[{}]}},"members":[]}}"#,
            subtopologies.join(",")
        );
        let e = parse(&text).unwrap_err();
        assert_eq!(e.path, "topology.subtopologies[0].maxNumInputPartitions");
        assert!(
            e.message
                .contains("4294967295, over the limit of 100000 (max.partitions)"),
            "{e}"
        );
        let limits = Limits::default().max_partitions(u32::MAX);
        let e = parse_input_with(&text, &limits).unwrap_err();
        assert!(e.message.contains("(max.tasks)"), "{e}");

        let member = |i: usize| format!(r#"{{"memberId":"m{i}","processId":"p"}}"#);
        let members: Vec<String> = (0..3).map(member).collect();
        let text = format!(
            r#"{{"topology":{{"subtopologies":[]}},"members":[{}]}}"#,
            members.join(",")
        );
        let e = parse_input_with(&text, &Limits::default().max_members(2)).unwrap_err();
        assert_eq!(e.path, "members");
        assert!(
            e.message.contains("3, over the limit of 2 (max.members)"),
            "{e}"
        );

        let huge = "x".repeat(10 << 20);
        let text = format!(
            r#"{{"topology":{{"subtopologies":[]}},"members":[{{"memberId":"{huge}","processId":"p"}}]}}"#
        );
        let e = parse(&text).unwrap_err();
        assert_eq!(e.path, "members[0].memberId (bytes)");
        assert!(
            e.to_string().len() < 300,
            "the id is not echoed: {} bytes",
            e.to_string().len()
        );
        let e = parse_input_with(&text, &Limits::default().max_input_bytes(1 << 20)).unwrap_err();
        assert!(
            e.message
                .contains("over the limit of 1 MiB (max.input.bytes)"),
            "{e}"
        );
    }

    /// Parser messages and echoed ids are cut, so an error never carries the document.
    #[test]
    fn errors_echo_little() {
        let field = "f".repeat(1 << 20);
        let text = format!(r#"{{"{field}":1}}"#);
        let e = parse(&text).unwrap_err();
        assert!(e.to_string().len() < 1024, "{} bytes", e.to_string().len());
    }

    /// The contract's example parses into indices, interned racks and per-member task sets.
    #[test]
    fn example_parses() {
        let (group, topology) = parse(include_str!("../../demo/group.json")).expect("parses");
        assert_eq!(group.members.len(), 3);
        assert_eq!(group.configs.num_standby_replicas, 1);
        assert_eq!(group.configs.rack_aware_assignment_tags, ["zone"]);
        assert_eq!(topology.racks, ["rack-1", "rack-2", "rack-3"]);
        let orders = &topology.subtopologies[0].source_topics[0];
        assert_eq!(orders.partition_racks[1], [1, 2]);
        let a1 = &group.members[0];
        assert_eq!(a1.instance_id.as_deref(), Some("instance-a1"));
        assert!(a1.active_tasks.contains(&TaskId::new(1, 0)));
        assert_eq!(a1.task_offsets[&TaskId::new(0, 2)], 1200);
        let c1 = &group.members[2];
        assert!(
            c1.active_tasks.is_empty() && c1.rack_id.is_none(),
            "missing means empty"
        );
    }

    /// Consistency errors name the field: duplicate ids, unknown subtopologies, racks for more
    /// partitions than the subtopology has.
    #[test]
    fn inconsistent_documents_are_rejected_with_a_path() {
        let topo = r#""topology":{"subtopologies":[{"id":"0","maxNumInputPartitions":2,"isStateful":true}]}"#;
        let cases = [
            (
                format!(r#"{{{topo},"members":[{{"memberId":"m","processId":"p"}},{{"memberId":"m","processId":"q"}}]}}"#),
                "members[1].memberId",
                "duplicate member id",
            ),
            (
                format!(r#"{{{topo},"members":[{{"memberId":"m","processId":"p","standbyTasks":{{"9":[0]}}}}]}}"#),
                r#"members[0].standbyTasks["9"]"#,
                "unknown subtopology",
            ),
            (
                format!(r#"{{{topo},"members":[{{"memberId":"m","processId":"p","taskOffsets":{{"0":{{"7":5}}}}}}]}}"#),
                r#"members[0].taskOffsets["0"]"#,
                "out of range",
            ),
            (
                r#"{"topology":{"subtopologies":[{"id":"0","maxNumInputPartitions":1,"isStateful":true},{"id":"0","maxNumInputPartitions":1,"isStateful":true}]},"members":[]}"#.to_owned(),
                "topology.subtopologies[1].id",
                "duplicate subtopology id",
            ),
            (
                r#"{"topology":{"subtopologies":[{"id":"0","maxNumInputPartitions":1,"isStateful":true,"sourceTopics":[{"name":"t","partitionRacks":[["r"],["r"]]}]}]},"members":[]}"#.to_owned(),
                "topology.subtopologies[0].sourceTopics[0].partitionRacks",
                "more than the subtopology's maxNumInputPartitions",
            ),
            (
                r#"{"members":[]}"#.to_owned(),
                ".",
                "missing field `topology`",
            ),
            (
                r#"{"topology":{"subtopologies":[]},"configs":null,"members":[]}"#.to_owned(),
                "configs",
                "invalid type: null",
            ),
        ];
        for (text, path, message) in cases {
            let e = parse(&text).expect_err(&text);
            assert_eq!(e.path, path, "{e}");
            assert!(e.message.contains(message), "{e}");
        }
    }

    /// One parse tells whether the document has `configs`, and gives them typed.
    #[test]
    fn documents_say_whether_they_have_configs() {
        let limits = Limits::default();
        let with =
            parse_document_with(include_str!("../../demo/group.json"), &limits).expect("parses");
        assert!(with.has_configs);
        assert_eq!(with.group.configs.rack_aware_assignment_tags, ["zone"]);
        let without = r#"{"topology":{"subtopologies":[]},"members":[]}"#;
        let without = parse_document_with(without, &limits).expect("parses");
        assert!(!without.has_configs);
        assert_eq!(without.group.configs, AssignmentConfigs::default());
    }

    /// Every input member appears in the output document, even with nothing assigned, with
    /// sorted partitions under subtopology ids.
    #[test]
    fn output_lists_every_member() {
        let (group, topology) = parse(include_str!("../../demo/group.json")).expect("parses");
        let mut assignment = GroupAssignment::empty_for(&group);
        assignment.members[0].active_tasks =
            [TaskId::new(0, 3), TaskId::new(0, 1), TaskId::new(1, 0)].into();
        let doc: AssignmentDoc = serde_json::from_value(
            serde_json::to_value(assignment_doc(&group, &topology, &assignment))
                .expect("serialises"),
        )
        .expect("an assignment document");
        assert_eq!(doc.members.len(), 3);
        let a1 = &doc.members["member-a1"];
        assert_eq!(a1.active_tasks["0"], [1, 3]);
        assert_eq!(a1.active_tasks["1"], [0]);
        assert!(doc.members["member-c1"].active_tasks.is_empty());
        let text = serde_json::to_string(&doc).expect("serialises");
        assert!(
            text.contains(r#""member-b1":{"activeTasks":{},"standbyTasks":{}}"#),
            "{text}"
        );
    }

    /// The document lists members and subtopologies in the order of their ids (`"10"` before
    /// `"2"`, whatever their indices) and never lists a subtopology without tasks.
    #[test]
    fn output_is_ordered_by_id() {
        let (mut group, mut topology) =
            parse(include_str!("../../demo/group.json")).expect("parses");
        topology.subtopologies[0].id = "2".into();
        topology.subtopologies[1].id = "10".into();
        group.members.swap(0, 2);
        let mut assignment = GroupAssignment::empty_for(&group);
        assignment.members[2].active_tasks = [TaskId::new(0, 2), TaskId::new(1, 1)].into();
        assignment.members[2].standby_tasks = [TaskId::new(0, 0)].into();
        let text = serde_json::to_string(&assignment_doc(&group, &topology, &assignment))
            .expect("serialises");
        assert_eq!(
            text,
            r#"{"members":{"member-a1":{"activeTasks":{"10":[1],"2":[2]},"standbyTasks":{"2":[0]}},"member-b1":{"activeTasks":{},"standbyTasks":{}},"member-c1":{"activeTasks":{},"standbyTasks":{}}}}"#
        );
    }
}
