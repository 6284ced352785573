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
        // The arguments of exports borrow: the input is lowered from references into the
        // caller's group (see `Input`), results are owned.
        ownership: Borrowing { duplicate_if_necessary: true },
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

/// Parallel `member-tasks` lists, owned until they are lowered.
#[derive(Default)]
struct Tasks {
    members: Vec<u32>,
    subtopologies: Vec<u32>,
    partitions: Vec<u32>,
}

impl Tasks {
    fn with_capacity(n: usize) -> Self {
        Self {
            members: Vec::with_capacity(n),
            subtopologies: Vec::with_capacity(n),
            partitions: Vec::with_capacity(n),
        }
    }

    /// Appends `member`'s `tasks`: three extends of known length, not a push per value.
    fn push(&mut self, member: u32, tasks: &TaskSet) {
        let tasks = tasks.as_slice();
        self.members
            .extend(std::iter::repeat_n(member, tasks.len()));
        self.subtopologies
            .extend(tasks.iter().map(|t| t.subtopology));
        self.partitions.extend(tasks.iter().map(|t| t.partition));
    }

    fn wit(&self) -> wit::MemberTasksParam<'_> {
        wit::MemberTasksParam {
            members: &self.members,
            subtopologies: &self.subtopologies,
            partitions: &self.partitions,
        }
    }
}

/// Parallel `member-task-offsets` lists, owned until they are lowered.
#[derive(Default)]
struct Offsets {
    members: Vec<u32>,
    subtopologies: Vec<u32>,
    partitions: Vec<u32>,
    offsets: Vec<i64>,
}

impl Offsets {
    fn with_capacity(n: usize) -> Self {
        Self {
            members: Vec::with_capacity(n),
            subtopologies: Vec::with_capacity(n),
            partitions: Vec::with_capacity(n),
            offsets: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, member: u32, offsets: &BTreeMap<TaskId, i64>) {
        for (t, &offset) in offsets {
            self.members.push(member);
            self.subtopologies.push(t.subtopology);
            self.partitions.push(t.partition);
            self.offsets.push(offset);
        }
    }

    fn wit(&self) -> wit::MemberTaskOffsets<'_> {
        wit::MemberTaskOffsets {
            members: &self.members,
            subtopologies: &self.subtopologies,
            partitions: &self.partitions,
            offsets: &self.offsets,
        }
    }
}

/// The input of one call, prepared for lowering, with its size: the per-member task maps
/// flattened into parallel integer lists, processes interned and replica racks listed. Every
/// string stays a reference into the caller's group and topology, so that lowering copies
/// each straight into the guest (owned WIT values took a clone of every string, freed again
/// after the call).
pub(crate) struct Input<'a> {
    group: &'a GroupSpec,
    topology: &'a Topology,
    processes: Vec<&'a str>,
    /// Each member's index into `processes`.
    process_of: Vec<u32>,
    /// Every member's client tags, member after member; `tag_ends[i]` ends member `i`'s.
    client_tags: Vec<(&'a str, &'a str)>,
    tag_ends: Vec<usize>,
    rack_aware_tags: Vec<&'a str>,
    active: Tasks,
    standby: Tasks,
    warmup: Tasks,
    offsets: Offsets,
    end_offsets: Offsets,
    /// Each source topic's replica lists (partitions, racks), subtopology after subtopology.
    replicas: Vec<(Vec<u32>, Vec<u32>)>,
    racks: Vec<&'a str>,
    /// Bytes the call copies into the guest: list elements, strings and their headers.
    pub(crate) bytes: usize,
}

/// The WIT records of an [`Input`] that hold slices of others: built just before the call
/// (they borrow the input), in the order the WIT nests them.
pub(crate) struct Records<'a> {
    members: Vec<wit::Member<'a>>,
    source_topics: Vec<wit::SourceTopic<'a>>,
}

fn string_bytes(s: &str) -> usize {
    HEADER_BYTES + s.len()
}

/// Prepares the domain input for lowering: processes interned, per-member task maps
/// flattened into parallel integer lists, each member's entries contiguous and in order.
pub(crate) fn input<'a>(group: &'a GroupSpec, topology: &'a Topology) -> Input<'a> {
    let mut bytes = 0;
    let n = group.members.len();
    // Foldhash, seeded per process as std's SipHash is (a group's process ids are chosen by
    // its clients), hashes a short id in a fraction of SipHash's instructions.
    let mut process_index: HashMap<&str, u32, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(n, foldhash::fast::RandomState::default());
    let mut processes = Vec::new();
    let mut process_of = Vec::with_capacity(n);
    let mut client_tags = Vec::new();
    let mut tag_ends = Vec::with_capacity(n);
    let count = |f: fn(&assignor_sdk::Member) -> usize| group.members.iter().map(f).sum::<usize>();
    let mut active = Tasks::with_capacity(count(|m| m.active_tasks.len()));
    let mut standby = Tasks::with_capacity(count(|m| m.standby_tasks.len()));
    let mut warmup = Tasks::with_capacity(count(|m| m.warmup_tasks.len()));
    let mut offsets = Offsets::with_capacity(count(|m| m.task_offsets.len()));
    let mut end_offsets = Offsets::with_capacity(count(|m| m.task_end_offsets.len()));
    for (index, m) in (0u32..).zip(&group.members) {
        let process = *process_index.entry(&m.process_id).or_insert_with(|| {
            processes.push(m.process_id.as_str());
            bytes += string_bytes(&m.process_id);
            processes.len() as u32 - 1
        });
        process_of.push(process);
        bytes += string_bytes(&m.member_id)
            + m.instance_id.as_deref().map_or(4, string_bytes)
            + m.rack_id.as_deref().map_or(4, string_bytes)
            + 4
            + HEADER_BYTES
            + m.client_tags
                .iter()
                .map(|(k, v)| string_bytes(k) + string_bytes(v))
                .sum::<usize>();
        client_tags.extend(m.client_tags.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        tag_ends.push(client_tags.len());
        active.push(index, &m.active_tasks);
        standby.push(index, &m.standby_tasks);
        warmup.push(index, &m.warmup_tasks);
        offsets.push(index, &m.task_offsets);
        end_offsets.push(index, &m.task_end_offsets);
    }
    let rack_aware_tags: Vec<&str> = group
        .configs
        .rack_aware_assignment_tags
        .iter()
        .map(String::as_str)
        .collect();
    bytes += (active.members.len() + standby.members.len() + warmup.members.len())
        * MEMBER_TASK_BYTES
        + (offsets.members.len() + end_offsets.members.len()) * MEMBER_TASK_OFFSET_BYTES
        + rack_aware_tags
            .iter()
            .map(|t| string_bytes(t))
            .sum::<usize>();

    let mut replicas = Vec::new();
    for s in &topology.subtopologies {
        bytes += string_bytes(&s.id) + 4 + 1 + HEADER_BYTES;
        for t in &s.source_topics {
            let (replica_partitions, replica_racks): (Vec<u32>, Vec<u32>) = (0u32..)
                .zip(&t.partition_racks)
                .flat_map(|(partition, racks)| racks.iter().map(move |&r| (partition, r)))
                .unzip();
            bytes += string_bytes(&t.name) + 4 + 2 * HEADER_BYTES + replica_racks.len() * 8;
            replicas.push((replica_partitions, replica_racks));
        }
    }
    let racks: Vec<&str> = topology.racks.iter().map(String::as_str).collect();
    bytes += racks.iter().map(|r| string_bytes(r)).sum::<usize>();

    Input {
        group,
        topology,
        processes,
        process_of,
        client_tags,
        tag_ends,
        rack_aware_tags,
        active,
        standby,
        warmup,
        offsets,
        end_offsets,
        replicas,
        racks,
        bytes,
    }
}

impl<'a> Input<'a> {
    /// Each member's process as an index: equal for members of one process, different
    /// otherwise (what validation's same-process rule compares).
    pub(crate) fn process_of(&self) -> &[u32] {
        &self.process_of
    }

    /// The member and source-topic records, which the group and topology hold slices of.
    pub(crate) fn records(&self) -> Records<'_> {
        let mut start = 0;
        let members = (self.group.members.iter())
            .zip(&self.process_of)
            .zip(&self.tag_ends)
            .map(|((m, &process), &end)| {
                let client_tags = &self.client_tags[start..end];
                start = end;
                wit::Member {
                    member_id: &m.member_id,
                    instance_id: m.instance_id.as_deref(),
                    rack_id: m.rack_id.as_deref(),
                    process,
                    client_tags,
                }
            })
            .collect();
        let source_topics = (self.topology.subtopologies.iter())
            .flat_map(|s| &s.source_topics)
            .zip(&self.replicas)
            .map(|(t, (partitions, racks))| wit::SourceTopic {
                name: &t.name,
                partitions: t.partition_racks.len() as u32,
                replica_partitions: partitions,
                replica_racks: racks,
            })
            .collect();
        Records {
            members,
            source_topics,
        }
    }

    /// The subtopology records, which hold slices of `records`' source topics.
    pub(crate) fn subtopologies<'r>(
        &'r self,
        records: &'r Records<'r>,
    ) -> Vec<wit::Subtopology<'r>> {
        let mut start = 0;
        (self.topology.subtopologies.iter())
            .map(|s| {
                let end = start + s.source_topics.len();
                let source_topics = &records.source_topics[start..end];
                start = end;
                wit::Subtopology {
                    id: &s.id,
                    max_num_input_partitions: s.max_num_input_partitions,
                    is_stateful: s.is_stateful,
                    source_topics,
                }
            })
            .collect()
    }

    /// The `assign` arguments: the group spec and the topology.
    pub(crate) fn args<'r>(
        &'r self,
        records: &'r Records<'r>,
        subtopologies: &'r [wit::Subtopology<'r>],
    ) -> (wit::GroupSpec<'r>, wit::Topology<'r>) {
        let group = wit::GroupSpec {
            members: &records.members,
            processes: &self.processes,
            configs: wit::AssignmentConfigs {
                num_standby_replicas: self.group.configs.num_standby_replicas,
                rack_aware_assignment_tags: &self.rack_aware_tags,
            },
            active_tasks: self.active.wit(),
            standby_tasks: self.standby.wit(),
            warmup_tasks: self.warmup.wit(),
            task_offsets: self.offsets.wit(),
            task_end_offsets: self.end_offsets.wit(),
        };
        let topology = wit::Topology {
            subtopologies,
            racks: &self.racks,
        };
        (group, topology)
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
    let tasks = |[members, subtopologies, partitions]: [Vec<u32>; 3]| wit::MemberTasksResult {
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
/// Entries may come in any order; the SDK sends each member's tasks as one sorted run, which
/// converts without a counting pass and a scatter ([`in_member_runs`]).
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
        let mut place = |member: usize, tasks: Vec<TaskId>| {
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
            Ok::<_, String>(())
        };
        if in_member_runs(&list.members, n) {
            for (member, tasks) in member_runs(&list) {
                place(member, tasks)?;
            }
        } else {
            for (member, tasks) in scattered(&list, n, kind, topology)?.into_iter().enumerate() {
                place(member, tasks)?;
            }
        }
    }
    Ok(assignment)
}

/// Whether each member's entries form one run, members in increasing order, every index
/// below `n`: the SDK's order, which [`member_runs`] converts without a counting pass and a
/// scatter. Anything else, a member out of range included, takes [`scattered`], so that a
/// refusal is the same whichever way an output arrives.
fn in_member_runs(members: &[u32], n: usize) -> bool {
    members.is_sorted() && members.last().is_none_or(|&m| (m as usize) < n)
}

/// Each member's entries of a list [`in_member_runs`], copied out of its run.
fn member_runs(list: &wit::MemberTasksResult) -> impl Iterator<Item = (usize, Vec<TaskId>)> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        let &member = list.members.get(start)?;
        let len = list.members[start..]
            .iter()
            .position(|&m| m != member)
            .unwrap_or(list.members.len() - start);
        let end = start + len;
        let tasks = list.subtopologies[start..end]
            .iter()
            .zip(&list.partitions[start..end])
            .map(|(&s, &p)| TaskId::new(s, p))
            .collect();
        start = end;
        Some((member as usize, tasks))
    })
}

/// Each member's entries of a list in any order: counted per member, then each placed in its
/// member's vector, one pass each. Fails on the first entry whose member is out of range.
fn scattered(
    list: &wit::MemberTasksResult,
    n: usize,
    kind: &str,
    topology: &Topology,
) -> Result<Vec<Vec<TaskId>>, String> {
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
    let mut per_member: Vec<Vec<TaskId>> = counts.iter().map(|&c| Vec::with_capacity(c)).collect();
    for ((&m, &s), &p) in list
        .members
        .iter()
        .zip(&list.subtopologies)
        .zip(&list.partitions)
    {
        per_member[m as usize].push(TaskId::new(s, p));
    }
    Ok(per_member)
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

    fn tasks(entries: &[(u32, u32)]) -> wit::MemberTasksResult {
        wit::MemberTasksResult {
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
        assert_eq!(input.processes, ["p"]);
        let records = input.records();
        assert_eq!(records.members[0].process, 0);
        assert_eq!(input.active.members, [0]);
        assert_eq!(input.active.partitions, [1]);
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
            active_tasks: wit::MemberTasksResult {
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

    /// A group of `members` members and a topology of one subtopology with `partitions`
    /// partitions.
    fn wide(members: usize, partitions: u32) -> (GroupSpec, Topology) {
        let (mut group, mut topology) = input();
        group.members = (0..members)
            .map(|i| Member {
                member_id: format!("m{i}"),
                process_id: "p".into(),
                ..Member::default()
            })
            .collect();
        topology.subtopologies[0].max_num_input_partitions = partitions;
        (group, topology)
    }

    /// Output lists of `entries` (member, partition of subtopology 0), active only.
    fn active(entries: &[(u32, u32)]) -> Output {
        Output {
            active_tasks: tasks(entries),
            standby_tasks: tasks(&[]),
        }
    }

    /// Entries in member runs (the fast path) and the same entries scattered (the general
    /// path) convert to the same assignment, runs out of order within a member included.
    #[test]
    fn member_runs_and_scattered_entries_convert_alike() {
        let (group, topology) = wide(7, 1000);
        // Deterministic pseudo-random members and partitions, each partition once.
        let mut entries: Vec<(u32, u32)> = (0..1000u32).map(|p| ((p * 7919 + 13) % 7, p)).collect();
        let scattered = output(active(&entries), &group, &topology).expect("scattered");
        entries.sort_by_key(|&(m, p)| (m, (p * 31) % 1000));
        assert!(in_member_runs(&tasks(&entries).members, 7));
        let runs = output(active(&entries), &group, &topology).expect("runs");
        assert_eq!(runs, scattered);
        assert_eq!(
            runs.members
                .iter()
                .map(|m| m.active_tasks.len())
                .sum::<usize>(),
            1000
        );
    }

    /// Member runs refuse what the general path refuses, with the same message: a member
    /// index out of range (the runs are then not taken) and a task twice in one member's run.
    #[test]
    fn member_runs_refuse_as_the_general_path_does() {
        let (group, topology) = wide(2, 10);
        let beyond = [(0, 0), (1, 1), (2, 2), (7, 3)];
        assert!(!in_member_runs(&tasks(&beyond).members, 2));
        let e = output(active(&beyond), &group, &topology).expect_err("member 2");
        assert_eq!(
            e,
            "unknown member: active task s_2 is assigned to member index 2, but the group has 2 \
             members"
        );
        let mut reversed = beyond;
        reversed.reverse();
        let e = output(active(&reversed), &group, &topology).expect_err("member 7");
        assert!(e.contains("member index 7"), "{e}");

        let twice = [(0, 0), (1, 4), (1, 2), (1, 4)];
        assert!(in_member_runs(&tasks(&twice).members, 2));
        let e = output(active(&twice), &group, &topology).expect_err("twice");
        assert_eq!(
            e,
            "duplicate active task: s_4 is listed twice for member \"m1\""
        );
        let scattered = [(1, 4), (0, 0), (1, 2), (1, 4)];
        assert!(!in_member_runs(&tasks(&scattered).members, 2));
        assert_eq!(
            output(active(&scattered), &group, &topology).expect_err("twice"),
            e
        );

        let standby = Output {
            active_tasks: tasks(&[]),
            standby_tasks: tasks(&[(0, 1), (0, 1)]),
        };
        assert_eq!(
            output(standby, &group, &topology).expect_err("twice"),
            "duplicate standby task: s_1 is listed twice for member \"m0\""
        );
    }

    /// Ragged lists in member order are refused before either path runs.
    #[test]
    fn ragged_member_runs_are_malformed() {
        let (group, topology) = wide(2, 10);
        let out = Output {
            active_tasks: wit::MemberTasksResult {
                members: vec![0, 0, 1],
                subtopologies: vec![0, 0, 0],
                partitions: vec![0, 1],
            },
            standby_tasks: tasks(&[]),
        };
        let e = output(out, &group, &topology).expect_err("ragged");
        assert!(
            e.starts_with("malformed output: the active task lists"),
            "{e}"
        );
    }
}
