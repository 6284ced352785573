//! The coordinator's stored records: what a `group/<id>` value holds, as types of the
//! coordinator's own, converted to and from its in-memory state (the SDK's domain model) here
//! and nowhere else.
//!
//! # Why these types, and why CBOR maps with integer keys
//!
//! Until version 2 a group was the in-memory state itself, SDK structs included, in postcard:
//! positional, so a field added to the SDK's `Member` (or any type it holds) made every stored
//! group unreadable, and each change of the coordinator's own needed a frozen copy of the old
//! shape and a migration ([`legacy`], kept to read those records). Records of version 3 are
//! CBOR maps keyed by small integers ([`minicbor`]'s derive):
//!
//! - a field is added under a new key: old records lack it and read it as `None` (or its
//!   default, with `#[cbor(default)]`), and a runtime that does not know a key skips it, so
//!   adding a field needs neither a version nor a migration;
//! - a field is retired by no longer writing its key (never reusing it); a new version is
//!   needed only for a change of meaning, and the version is the record's first byte, read
//!   before anything else;
//! - the SDK's types are only the in-memory form: a change to them is a compile error in the
//!   conversions below, never a silently different encoding.
//!
//! The topology and the members are the SDK's own records ([`assignor_sdk::records`], which
//! capture files use too), so the model has one encoding on disk. Task sets, most of a large
//! group's bytes, are one CBOR byte string each of LEB128 pairs (subtopology index,
//! partition): as compact as postcard's varints, and decoded in one pass without a CBOR
//! header per number.
//!
//! Measured on this machine (release builds, a shared 2-core machine under other load), on a
//! group of `M` members each holding 16 active and 16 standby tasks, with a target of the same
//! (µs to encode / decode, bytes). The two candidates not taken were measured in a scratch
//! crate on the members and target only, under heavier load: compare them by their order.
//!
//! | encoding | 10 members, 128 tasks | 100 members, 2048 tasks | 1000 members, 16384 tasks |
//! |---|---|---|---|
//! | postcard of the state (version 2) | 9.0 / 15.1, 1,716 B | 105 / 202, 26,870 B | 828 / 1,867, 251,562 B |
//! | CBOR maps, tasks as CBOR integers | 12.0 / 13.9, 1,715 B | 168 / 179, 29,413 B | 1,506 / 1,531, 300,231 B |
//! | protobuf (prost), owned messages | 11.6 / 21.8, 1,574 B | 157 / 268, 26,080 B | 1,420 / 2,211, 244,002 B |
//! | **these records (version 3)** | 7.8 / 16.3, 1,692 B | 49 / 116, 26,332 B | 343 / 1,582, 245,672 B |
//!
//! Protobuf is as evolvable, but its messages own their data, so every commit would first copy
//! the group into them; these records borrow the state they encode, so a commit (the hot path:
//! the service commits thousands of 2–20 KB records a second) costs less than before. Task
//! sets as CBOR integers cost 3 bytes per partition past 255 (20 % more than postcard on the
//! large group), hence the packed task sets.
//!
//! Decoding never trusts a length: sequences grow as items are read (each takes at least one
//! byte of the record), and a task set's capacity is bounded by its byte string.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use assignor_sdk::MemberAssignment;
use assignor_sdk::records::{MemberRecord, Tasks, TopologyRecord};
use minicbor::{Decode, Encode};

use super::{ECHO_BYTES, Failure, GroupConfig, GroupState, TargetAssignment};
use crate::store::Revision;
use assignor_sandbox::Usage;
use assignor_sandbox::cut;
use assignor_sandbox::{ErrorKind, TaskAssignorError};

mod legacy;

/// The version of the records this runtime writes: the first byte of every group value
/// (postcard's varint of the version, as versions 1 and 2 began).
const FORMAT_VERSION: u8 = 3;

/// `state` as a stored group value.
pub(super) fn encode(state: &GroupState) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    minicbor::encode(GroupRecord::of(state), &mut out).expect("writing to a Vec cannot fail");
    out
}

/// A stored group value as the coordinator's state; `Err` says why it is not one.
pub(super) fn decode(bytes: &[u8]) -> Result<GroupState, String> {
    match bytes.split_first() {
        Some((&FORMAT_VERSION, record)) => {
            let record: GroupRecord<'_> = minicbor::decode(record).map_err(|e| e.to_string())?;
            record.into_state()
        }
        Some((1 | 2, _)) => legacy::decode(bytes),
        Some((version, _)) => Err(format!(
            "format version {version}, this runtime reads versions 1 to {FORMAT_VERSION} (a \
             newer runtime wrote it?)"
        )),
        None => Err("empty record".to_owned()),
    }
}

/// A group: its config, epoch, topology, members, target and last failure.
#[derive(Encode, Decode)]
#[cbor(map)]
struct GroupRecord<'a> {
    #[n(0)]
    config: ConfigRecord<'a>,
    #[n(1)]
    group_epoch: u32,
    #[n(2)]
    topology: Option<TopologyRecord<'a>>,
    /// Sorted by member id, each id once.
    #[n(3)]
    members: Vec<MemberRecord<'a>>,
    #[n(4)]
    target: Option<TargetRecord<'a>>,
    #[n(5)]
    last_failure: Option<FailureRecord<'a>>,
}

/// A group's own config; absent keys use the broker's values.
#[derive(Encode, Decode)]
#[cbor(map)]
struct ConfigRecord<'a> {
    #[n(0)]
    assignor_name: Option<Cow<'a, str>>,
    #[n(1)]
    num_standby_replicas: Option<u32>,
    #[n(2)]
    rack_aware_assignment_tags: Option<Vec<Cow<'a, str>>>,
}

#[derive(Encode, Decode)]
#[cbor(map)]
struct TargetRecord<'a> {
    #[n(0)]
    epoch: u32,
    #[n(1)]
    assignor: Cow<'a, str>,
    /// Sorted by member id, each id once.
    #[n(2)]
    members: Vec<AssignedRecord<'a>>,
    #[n(3)]
    usage: UsageRecord,
    #[n(4)]
    computed_at: Time,
}

/// One member's tasks in a target.
#[derive(Encode, Decode)]
#[cbor(map)]
struct AssignedRecord<'a> {
    #[n(0)]
    member_id: Cow<'a, str>,
    #[n(1)]
    #[cbor(default, skip_if = "Tasks::is_empty")]
    active_tasks: Tasks<'a>,
    #[n(2)]
    #[cbor(default, skip_if = "Tasks::is_empty")]
    standby_tasks: Tasks<'a>,
}

#[derive(Encode, Decode)]
#[cbor(map)]
struct UsageRecord {
    #[n(0)]
    fuel: Option<u64>,
    #[n(1)]
    peak_memory_bytes: Option<u64>,
    #[n(2)]
    wall_time: Time,
    #[n(3)]
    input_bytes: Option<u64>,
    #[n(4)]
    output_bytes: Option<u64>,
}

#[derive(Encode, Decode)]
#[cbor(map)]
struct FailureRecord<'a> {
    #[n(0)]
    assignor: Cow<'a, str>,
    /// The kind's wire name ([`ErrorKind::as_str`]), which stays when kinds are added.
    #[n(1)]
    kind: Cow<'a, str>,
    #[n(2)]
    message: Cow<'a, str>,
    #[n(3)]
    fuel: Option<u64>,
    #[n(4)]
    at: Time,
    #[n(5)]
    group_epoch: u32,
    #[n(6)]
    consecutive: u32,
    #[n(7)]
    retry_at: Time,
}

/// A time since the Unix epoch (or a duration) as `[seconds, nanoseconds]`: exact for every
/// value a `SystemTime` read back from a record can hold.
#[derive(Encode, Decode)]
struct Time {
    #[n(0)]
    secs: u64,
    #[n(1)]
    nanos: u32,
}

impl Time {
    fn of_duration(d: Duration) -> Self {
        Self {
            secs: d.as_secs(),
            nanos: d.subsec_nanos(),
        }
    }

    /// A time before the epoch (which no clock of a coordinator gives) is kept as the epoch.
    fn of_time(t: SystemTime) -> Self {
        Self::of_duration(t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default())
    }

    fn duration(&self) -> Result<Duration, String> {
        if self.nanos >= 1_000_000_000 {
            return Err(format!("{} nanoseconds in a second", self.nanos));
        }
        Ok(Duration::new(self.secs, self.nanos))
    }

    fn time(&self) -> Result<SystemTime, String> {
        SystemTime::UNIX_EPOCH
            .checked_add(self.duration()?)
            .ok_or_else(|| {
                format!(
                    "{} s after the epoch is past this system's clock",
                    self.secs
                )
            })
    }
}

fn str_of(s: &str) -> Cow<'_, str> {
    Cow::Borrowed(s)
}

fn size(n: Option<usize>) -> Option<u64> {
    n.map(|n| n as u64)
}

fn size_of(n: Option<u64>, field: &str) -> Result<Option<usize>, String> {
    n.map(|n| usize::try_from(n).map_err(|_| format!("{field} {n} is over this system's size")))
        .transpose()
}

impl<'a> GroupRecord<'a> {
    /// The record of `g`, borrowing from it: a commit copies nothing before encoding.
    fn of(g: &'a GroupState) -> Self {
        Self {
            config: ConfigRecord {
                assignor_name: g.config.assignor_name.as_deref().map(str_of),
                num_standby_replicas: g.config.num_standby_replicas,
                rack_aware_assignment_tags: g
                    .config
                    .rack_aware_assignment_tags
                    .as_ref()
                    .map(|tags| tags.iter().map(|t| str_of(t)).collect()),
            },
            group_epoch: g.group_epoch,
            topology: g.topology.as_ref().map(TopologyRecord::of),
            members: g.members.values().map(MemberRecord::of).collect(),
            target: g.target.as_ref().map(|t| TargetRecord {
                epoch: t.epoch,
                assignor: str_of(&t.assignor),
                members: t
                    .members
                    .iter()
                    .map(|(id, a)| AssignedRecord {
                        member_id: str_of(id),
                        active_tasks: Tasks::of(&a.active_tasks),
                        standby_tasks: Tasks::of(&a.standby_tasks),
                    })
                    .collect(),
                usage: UsageRecord {
                    fuel: t.usage.fuel,
                    peak_memory_bytes: size(t.usage.peak_memory_bytes),
                    wall_time: Time::of_duration(t.usage.wall_time),
                    input_bytes: size(t.usage.input_bytes),
                    output_bytes: size(t.usage.output_bytes),
                },
                computed_at: Time::of_time(t.computed_at),
            }),
            last_failure: g.last_failure.as_ref().map(|f| FailureRecord {
                assignor: str_of(&f.error.assignor),
                kind: str_of(f.error.kind.as_str()),
                message: str_of(&f.error.message),
                fuel: f.error.fuel,
                at: Time::of_time(f.at),
                group_epoch: f.group_epoch,
                consecutive: f.consecutive,
                retry_at: Time::of_time(f.retry_at),
            }),
        }
    }

    /// The coordinator's state this record holds.
    fn into_state(self) -> Result<GroupState, String> {
        let mut members = BTreeMap::new();
        for m in self.members {
            let member = m.into_member();
            if let Some(twice) = members.insert(member.member_id.clone(), member) {
                return Err(format!(
                    "member `{}` twice",
                    cut(&twice.member_id, ECHO_BYTES)
                ));
            }
        }
        let target = self.target.map(TargetRecord::into_target).transpose()?;
        Ok(GroupState {
            config: GroupConfig {
                assignor_name: self.config.assignor_name.map(Cow::into_owned),
                num_standby_replicas: self.config.num_standby_replicas,
                rack_aware_assignment_tags: self
                    .config
                    .rack_aware_assignment_tags
                    .map(|tags| tags.into_iter().map(Cow::into_owned).collect()),
            },
            group_epoch: self.group_epoch,
            topology: self.topology.map(TopologyRecord::into_topology),
            members,
            target,
            last_failure: self
                .last_failure
                .map(FailureRecord::into_failure)
                .transpose()?,
            incarnation: 0,
            revision: Revision::ABSENT,
        })
    }
}

impl TargetRecord<'_> {
    fn into_target(self) -> Result<TargetAssignment, String> {
        let mut members = BTreeMap::new();
        for a in self.members {
            let id = a.member_id.into_owned();
            let assignment = MemberAssignment {
                active_tasks: a.active_tasks.into_set(),
                standby_tasks: a.standby_tasks.into_set(),
            };
            if members.insert(id.clone(), assignment).is_some() {
                return Err(format!("target member `{}` twice", cut(&id, ECHO_BYTES)));
            }
        }
        let u = self.usage;
        Ok(TargetAssignment {
            epoch: self.epoch,
            assignor: self.assignor.into_owned(),
            members,
            usage: Usage {
                fuel: u.fuel,
                peak_memory_bytes: size_of(u.peak_memory_bytes, "peak memory")?,
                wall_time: u.wall_time.duration()?,
                input_bytes: size_of(u.input_bytes, "input bytes")?,
                output_bytes: size_of(u.output_bytes, "output bytes")?,
            },
            computed_at: self.computed_at.time()?,
        })
    }
}

impl FailureRecord<'_> {
    fn into_failure(self) -> Result<Failure, String> {
        let kind = ErrorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == self.kind)
            .ok_or_else(|| format!("unknown error kind `{}`", self.kind))?;
        Ok(Failure {
            error: TaskAssignorError::new(self.assignor.into_owned(), kind, self.message)
                .with_fuel(self.fuel),
            at: self.at.time()?,
            group_epoch: self.group_epoch,
            consecutive: self.consecutive,
            retry_at: self.retry_at.time()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use assignor_sdk::{Member, SourceTopic, Subtopology, TaskId, TaskSet, Topology};
    use minicbor::Encoder;

    use super::*;
    use crate::coordinator::INITIAL_RETRY_BACKOFF;

    fn tasks(list: &[(u32, u32)]) -> TaskSet {
        list.iter().map(|&(s, p)| TaskId::new(s, p)).collect()
    }

    /// A state with every field of every record set, none at its default.
    fn full_state() -> GroupState {
        let at = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        let member = Member {
            member_id: "m1".into(),
            instance_id: Some("i1".into()),
            rack_id: Some("r1".into()),
            process_id: "p1".into(),
            client_tags: BTreeMap::from([("zone".into(), "z1".into())]),
            active_tasks: tasks(&[(0, 1), (0, 300), (1, 0)]),
            standby_tasks: tasks(&[(0, 2)]),
            warmup_tasks: tasks(&[(0, 3)]),
            task_offsets: BTreeMap::from([(TaskId::new(0, 2), -1)]),
            task_end_offsets: BTreeMap::from([(TaskId::new(0, 2), i64::MAX)]),
        };
        GroupState {
            config: GroupConfig {
                assignor_name: Some("sticky".into()),
                num_standby_replicas: Some(2),
                rack_aware_assignment_tags: Some(vec!["zone".into()]),
            },
            group_epoch: 9,
            topology: Some(Topology {
                subtopologies: vec![
                    Subtopology {
                        id: "s0".into(),
                        max_num_input_partitions: 301,
                        is_stateful: true,
                        source_topics: vec![SourceTopic {
                            name: "orders".into(),
                            partition_racks: vec![vec![0], vec![0, 1]],
                        }],
                    },
                    Subtopology {
                        id: "s1".into(),
                        max_num_input_partitions: 1,
                        ..Subtopology::default()
                    },
                ],
                racks: vec!["rack-a".into(), "rack-b".into()],
            }),
            members: BTreeMap::from([("m1".into(), member)]),
            target: Some(TargetAssignment {
                epoch: 8,
                assignor: "sticky".into(),
                members: BTreeMap::from([(
                    "m1".into(),
                    MemberAssignment {
                        active_tasks: tasks(&[(0, 1), (u32::MAX, u32::MAX)]),
                        standby_tasks: tasks(&[(0, 2)]),
                    },
                )]),
                usage: Usage {
                    fuel: Some(u64::MAX),
                    peak_memory_bytes: Some(1 << 20),
                    wall_time: Duration::new(1, 5),
                    input_bytes: Some(100),
                    output_bytes: Some(200),
                },
                computed_at: at,
            }),
            last_failure: Some(Failure {
                error: TaskAssignorError::new("sticky", ErrorKind::InvalidOutput, "dup")
                    .with_fuel(Some(77)),
                at,
                group_epoch: 9,
                consecutive: 3,
                retry_at: at + Duration::from_secs(4),
            }),
            incarnation: 0,
            revision: Revision::ABSENT,
        }
    }

    /// Every field of a group survives the trip through its record exactly, and so does an
    /// empty group (whose record leaves out every absent field).
    #[test]
    fn round_trips_every_field() {
        for state in [full_state(), GroupState::default()] {
            let bytes = encode(&state);
            assert_eq!(bytes[0], FORMAT_VERSION);
            assert_eq!(decode(&bytes), Ok(state));
        }
    }

    /// A key this runtime does not know (what a newer runtime adds) is skipped, at the top and
    /// inside a member, and the rest reads as written.
    #[test]
    fn skips_fields_it_does_not_know() {
        let state = full_state();
        let record = GroupRecord::of(&state);
        let mut e = Encoder::new(vec![FORMAT_VERSION]);
        e.map(8).expect("writes");
        e.u32(0)
            .and_then(|e| e.encode(&record.config))
            .expect("writes");
        e.u32(1)
            .and_then(|e| e.u32(record.group_epoch))
            .expect("writes");
        e.u32(2)
            .and_then(|e| e.encode(&record.topology))
            .expect("writes");
        // The one member, with a key from the future in it: one more entry in its map.
        let member = minicbor::to_vec(&record.members[0]).expect("writes");
        let mut newer = Encoder::new(vec![member[0] + 1]);
        newer.writer_mut().extend_from_slice(&member[1..]);
        newer
            .u32(40)
            .and_then(|e| e.str("a new member field"))
            .expect("writes");
        let newer = newer.into_writer();
        e.u32(3).and_then(|e| e.array(1)).expect("writes");
        let mut bytes = e.into_writer();
        bytes.extend_from_slice(&newer);
        let mut e = Encoder::new(bytes);
        e.u32(4)
            .and_then(|e| e.encode(&record.target))
            .expect("writes");
        e.u32(5)
            .and_then(|e| e.encode(&record.last_failure))
            .expect("writes");
        e.u32(99)
            .and_then(|e| e.map(1))
            .and_then(|e| e.str("nested"))
            .and_then(|e| e.array(2))
            .and_then(|e| e.u8(1))
            .and_then(|e| e.bytes(b"x"))
            .expect("writes");
        e.u32(100).and_then(|e| e.null()).expect("writes");
        assert_eq!(decode(&e.into_writer()), Ok(state));
    }

    /// A record's damage is told, not guessed around: a member twice, an unknown error kind,
    /// a time past the clock (a task set's own damage: `assignor_sdk::records`' tests).
    #[test]
    fn refuses_damaged_records() {
        let refused = |record: &GroupRecord<'_>, why: &str| {
            let mut bytes = vec![FORMAT_VERSION];
            minicbor::encode(record, &mut bytes).expect("writes");
            let err = decode(&bytes).expect_err(why);
            assert!(err.contains(why), "{err}");
        };
        let full = full_state();
        let mut record = GroupRecord::of(&full);
        record.members.extend(GroupRecord::of(&full).members);
        refused(&record, "member `m1` twice");

        let mut record = GroupRecord::of(&full);
        let failure = record.last_failure.as_mut().expect("set");
        failure.kind = Cow::Borrowed("a-kind-from-the-future");
        refused(&record, "unknown error kind `a-kind-from-the-future`");
        let mut record = GroupRecord::of(&full);
        record.last_failure.as_mut().expect("set").at.secs = u64::MAX;
        refused(&record, "past this system's clock");
    }

    /// A group written by a version-1 runtime (a failure without fuel) still loads, with its
    /// failure intact and no fuel, and is written back as a current record.
    #[test]
    fn reads_version_1() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let retry_at = at + INITIAL_RETRY_BACKOFF;
        // postcard encodes a struct as its fields in order, so tuples reproduce version 1.
        let v1_failure = (
            ("sticky", ErrorKind::Trap, "boom"),
            at,
            3u32,
            2u32,
            retry_at,
        );
        let no_config = (None::<String>, None::<u32>, None::<Vec<String>>);
        let bytes = postcard::to_stdvec(&(
            1u32,
            no_config,
            3u32,
            None::<()>,
            BTreeMap::<String, ()>::new(),
            None::<()>,
            Some(v1_failure),
        ))
        .expect("serializes");
        let state = decode(&bytes).expect("version 1 decodes");
        assert_eq!(state.group_epoch, 3);
        let failure = state.last_failure.as_ref().expect("the failure survives");
        assert_eq!(
            failure.error,
            TaskAssignorError::new("sticky", ErrorKind::Trap, "boom")
        );
        assert_eq!((failure.consecutive, failure.retry_at), (2, retry_at));
        assert_eq!(decode(&encode(&state)), Ok(state));
    }

    /// A group written by a version-2 runtime (today's data directories), every field set,
    /// reads as the same state the current record holds: topology, members with tasks,
    /// offsets and tags, target with usage, failure with fuel and a kind added after version
    /// 2 was (postcard wrote kinds by index).
    #[test]
    fn reads_version_2() {
        let full = full_state();
        let pairs = |t: &TaskSet| {
            t.iter()
                .map(|t| (t.subtopology, t.partition))
                .collect::<Vec<_>>()
        };
        let offsets = |o: &BTreeMap<TaskId, i64>| {
            o.iter()
                .map(|(t, &v)| ((t.subtopology, t.partition), v))
                .collect::<BTreeMap<_, _>>()
        };
        let c = &full.config;
        let t = full.topology.as_ref().expect("set");
        let topology = (
            t.subtopologies
                .iter()
                .map(|s| {
                    let topics: Vec<_> = s
                        .source_topics
                        .iter()
                        .map(|t| (t.name.clone(), t.partition_racks.clone()))
                        .collect();
                    (
                        s.id.clone(),
                        s.max_num_input_partitions,
                        s.is_stateful,
                        topics,
                    )
                })
                .collect::<Vec<_>>(),
            t.racks.clone(),
        );
        let members: BTreeMap<_, _> = full
            .members
            .iter()
            .map(|(id, m)| {
                let member = (
                    m.member_id.clone(),
                    m.instance_id.clone(),
                    m.rack_id.clone(),
                    m.process_id.clone(),
                    m.client_tags.clone(),
                    pairs(&m.active_tasks),
                    pairs(&m.standby_tasks),
                    pairs(&m.warmup_tasks),
                    offsets(&m.task_offsets),
                    offsets(&m.task_end_offsets),
                );
                (id.clone(), member)
            })
            .collect();
        let target = full.target.as_ref().map(|t| {
            let members: BTreeMap<_, _> = t
                .members
                .iter()
                .map(|(id, a)| {
                    (
                        id.clone(),
                        (pairs(&a.active_tasks), pairs(&a.standby_tasks)),
                    )
                })
                .collect();
            (t.epoch, t.assignor.clone(), members, t.usage, t.computed_at)
        });
        let f = full.last_failure.as_ref().expect("set");
        let failure = (
            (
                &f.error.assignor,
                f.error.kind,
                &f.error.message,
                f.error.fuel,
            ),
            f.at,
            f.group_epoch,
            f.consecutive,
            f.retry_at,
        );
        let bytes = postcard::to_stdvec(&(
            2u32,
            (
                &c.assignor_name,
                c.num_standby_replicas,
                &c.rack_aware_assignment_tags,
            ),
            full.group_epoch,
            Some(topology),
            &members,
            target,
            Some(failure),
        ))
        .expect("serializes");
        assert_eq!(decode(&bytes), Ok(full.clone()));
        let misfiled: BTreeMap<_, _> = members
            .values()
            .map(|m| ("another-id".to_owned(), m.clone()))
            .collect();
        let other = postcard::to_stdvec(&(
            2u32,
            (None::<String>, None::<u32>, None::<Vec<String>>),
            1u32,
            None::<()>,
            misfiled,
            None::<()>,
            None::<()>,
        ))
        .expect("serializes");
        let err = decode(&other).expect_err("a member under another id is damage");
        assert!(
            err.contains("member `m1` stored under `another-id`"),
            "{err}"
        );

        let mut input_limit = bytes.clone();
        let at = input_limit.len() - 1 - failure_tail_len(f);
        // The kind's index sits before the message; InvalidOutput is 6, InputLimit 8.
        let kind_at = at - 1 - (1 + f.error.message.len());
        assert_eq!(input_limit[kind_at], 6);
        input_limit[kind_at] = 8;
        let failure = decode(&input_limit).expect("decodes").last_failure;
        assert_eq!(failure.map(|f| f.error.kind), Some(ErrorKind::InputLimit));
    }

    /// The bytes after a version-2 failure's message: its fuel, times and counters.
    fn failure_tail_len(f: &Failure) -> usize {
        postcard::to_stdvec(&(f.error.fuel, f.at, f.group_epoch, f.consecutive, f.retry_at))
            .expect("serializes")
            .len()
            - 1
    }

    /// A version this runtime does not know is refused with both versions named.
    #[test]
    fn refuses_unknown_versions() {
        let err = decode(&[9, 0]).expect_err("version 9 is unknown");
        assert!(err.contains("format version 9"), "unexpected error: {err}");
        assert!(decode(&[]).is_err());
    }
}
