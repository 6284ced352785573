//! The model's stored encoding (feature `capture`): CBOR maps keyed by small integers
//! ([`minicbor`]'s derive) for the topology and the members, shared by capture files and by
//! the coordinator's stored groups, so the model has one encoding on disk.
//!
//! - A field is added under a new key: old records lack it and read it as `None` (or its
//!   default), and a reader that does not know a key skips it, so adding a field needs
//!   neither a version nor a migration. A field is retired by no longer writing its key,
//!   never by reusing it.
//! - The model's types are only the in-memory form: a change to them is a compile error in
//!   the conversions below, never a silently different encoding.
//! - Task sets, most of a large group's bytes, are one CBOR byte string each of LEB128 pairs
//!   (subtopology index, partition): as compact as postcard's varints, decoded in one pass.
//! - Records borrow what they encode ([`Cow`]), so encoding copies nothing first.
//!
//! Decoding never trusts a length: sequences grow as items are read (each takes at least one
//! byte of the record), and a task set's capacity is bounded by its byte string.

use std::borrow::Cow;
use std::collections::BTreeMap;

use minicbor::decode::{self, Decoder};
use minicbor::encode::{self, Encoder, Write};
use minicbor::{Decode, Encode};

use crate::{Member, SourceTopic, Subtopology, TaskId, TaskSet, Topology};

/// A [`Topology`].
#[derive(Debug, Encode, Decode)]
#[cbor(map)]
pub struct TopologyRecord<'a> {
    #[n(0)]
    subtopologies: Vec<SubtopologyRecord<'a>>,
    #[n(1)]
    racks: Vec<Cow<'a, str>>,
}

#[derive(Debug, Encode, Decode)]
#[cbor(map)]
struct SubtopologyRecord<'a> {
    #[n(0)]
    id: Cow<'a, str>,
    #[n(1)]
    max_num_input_partitions: u32,
    #[n(2)]
    is_stateful: bool,
    #[n(3)]
    source_topics: Vec<SourceTopicRecord<'a>>,
}

#[derive(Debug, Encode, Decode)]
#[cbor(map)]
struct SourceTopicRecord<'a> {
    #[n(0)]
    name: Cow<'a, str>,
    #[n(1)]
    partition_racks: Cow<'a, [Vec<u32>]>,
}

/// A [`Member`]; empty collections are not written.
#[derive(Debug, Encode, Decode)]
#[cbor(map)]
pub struct MemberRecord<'a> {
    #[n(0)]
    member_id: Cow<'a, str>,
    #[n(1)]
    instance_id: Option<Cow<'a, str>>,
    #[n(2)]
    rack_id: Option<Cow<'a, str>>,
    #[n(3)]
    process_id: Cow<'a, str>,
    #[n(4)]
    #[cbor(default, skip_if = "Tags::is_empty")]
    client_tags: Tags<'a>,
    #[n(5)]
    #[cbor(default, skip_if = "Tasks::is_empty")]
    active_tasks: Tasks<'a>,
    #[n(6)]
    #[cbor(default, skip_if = "Tasks::is_empty")]
    standby_tasks: Tasks<'a>,
    #[n(7)]
    #[cbor(default, skip_if = "Tasks::is_empty")]
    warmup_tasks: Tasks<'a>,
    #[n(8)]
    #[cbor(default, skip_if = "Offsets::is_empty")]
    task_offsets: Offsets<'a>,
    #[n(9)]
    #[cbor(default, skip_if = "Offsets::is_empty")]
    task_end_offsets: Offsets<'a>,
}

impl<'a> TopologyRecord<'a> {
    /// The record of `t`, borrowing from it.
    pub fn of(t: &'a Topology) -> Self {
        Self {
            subtopologies: t
                .subtopologies
                .iter()
                .map(|s| SubtopologyRecord {
                    id: Cow::Borrowed(&s.id),
                    max_num_input_partitions: s.max_num_input_partitions,
                    is_stateful: s.is_stateful,
                    source_topics: s
                        .source_topics
                        .iter()
                        .map(|t| SourceTopicRecord {
                            name: Cow::Borrowed(&t.name),
                            partition_racks: Cow::Borrowed(&t.partition_racks),
                        })
                        .collect(),
                })
                .collect(),
            racks: t.racks.iter().map(|r| Cow::Borrowed(r.as_str())).collect(),
        }
    }

    /// The topology this record holds.
    pub fn into_topology(self) -> Topology {
        Topology {
            subtopologies: self
                .subtopologies
                .into_iter()
                .map(|s| Subtopology {
                    id: s.id.into_owned(),
                    max_num_input_partitions: s.max_num_input_partitions,
                    is_stateful: s.is_stateful,
                    source_topics: s
                        .source_topics
                        .into_iter()
                        .map(|t| SourceTopic {
                            name: t.name.into_owned(),
                            partition_racks: t.partition_racks.into_owned(),
                        })
                        .collect(),
                })
                .collect(),
            racks: self.racks.into_iter().map(Cow::into_owned).collect(),
        }
    }
}

impl<'a> MemberRecord<'a> {
    /// The record of `m`, borrowing from it.
    pub fn of(m: &'a Member) -> Self {
        Self {
            member_id: Cow::Borrowed(&m.member_id),
            instance_id: m.instance_id.as_deref().map(Cow::Borrowed),
            rack_id: m.rack_id.as_deref().map(Cow::Borrowed),
            process_id: Cow::Borrowed(&m.process_id),
            client_tags: Tags(Cow::Borrowed(&m.client_tags)),
            active_tasks: Tasks::of(&m.active_tasks),
            standby_tasks: Tasks::of(&m.standby_tasks),
            warmup_tasks: Tasks::of(&m.warmup_tasks),
            task_offsets: Offsets(Cow::Borrowed(&m.task_offsets)),
            task_end_offsets: Offsets(Cow::Borrowed(&m.task_end_offsets)),
        }
    }

    /// The member this record holds.
    pub fn into_member(self) -> Member {
        Member {
            member_id: self.member_id.into_owned(),
            instance_id: self.instance_id.map(Cow::into_owned),
            rack_id: self.rack_id.map(Cow::into_owned),
            process_id: self.process_id.into_owned(),
            client_tags: self.client_tags.0.into_owned(),
            active_tasks: self.active_tasks.into_set(),
            standby_tasks: self.standby_tasks.into_set(),
            warmup_tasks: self.warmup_tasks.into_set(),
            task_offsets: self.task_offsets.0.into_owned(),
            task_end_offsets: self.task_end_offsets.0.into_owned(),
        }
    }

    /// The member's id.
    pub fn member_id(&self) -> &str {
        &self.member_id
    }
}

/// A task set, as one byte string of LEB128 (subtopology index, partition) pairs in order.
#[derive(Debug, Default)]
pub struct Tasks<'a>(Cow<'a, TaskSet>);

impl<'a> Tasks<'a> {
    /// The record of `tasks`, borrowing it.
    pub fn of(tasks: &'a TaskSet) -> Self {
        Self(Cow::Borrowed(tasks))
    }

    /// Whether the set is empty (such a field is not written).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The task set this record holds.
    pub fn into_set(self) -> TaskSet {
        self.0.into_owned()
    }
}

impl<C> Encode<C> for Tasks<'_> {
    fn encode<W: Write>(
        &self,
        e: &mut Encoder<W>,
        _: &mut C,
    ) -> Result<(), encode::Error<W::Error>> {
        let mut packed = Vec::with_capacity(self.0.len() * 3);
        for task in self.0.iter() {
            leb128(&mut packed, task.subtopology);
            leb128(&mut packed, task.partition);
        }
        e.bytes(&packed)?;
        Ok(())
    }
}

impl<'b, C> Decode<'b, C> for Tasks<'_> {
    fn decode(d: &mut Decoder<'b>, _: &mut C) -> Result<Self, decode::Error> {
        let mut packed = d.bytes()?;
        // Each task takes at least two bytes: the capacity is bounded by the record.
        let mut tasks = Vec::with_capacity(packed.len() / 2);
        while !packed.is_empty() {
            let subtopology = read_leb128(&mut packed)?;
            let partition = read_leb128(&mut packed)?;
            tasks.push(TaskId::new(subtopology, partition));
        }
        TaskSet::from_unique(tasks)
            .map(|set| Self(Cow::Owned(set)))
            .map_err(|t| decode::Error::message(format!("task {t} twice in a task set")))
    }
}

fn leb128(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_leb128(bytes: &mut &[u8]) -> Result<u32, decode::Error> {
    let mut n = 0u32;
    for shift in (0..35).step_by(7) {
        let (&byte, rest) = bytes
            .split_first()
            .ok_or_else(|| decode::Error::message("a task set ends inside a number"))?;
        *bytes = rest;
        let bits = u32::from(byte & 0x7f);
        if shift == 28 && bits > 0x0f {
            return Err(decode::Error::message("a task number over u32"));
        }
        n |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(decode::Error::message("a task number over u32"))
}

/// Offsets per task, as one array of (subtopology index, partition, offset) triples in task
/// order.
#[derive(Debug, Default)]
struct Offsets<'a>(Cow<'a, BTreeMap<TaskId, i64>>);

impl Offsets<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<C> Encode<C> for Offsets<'_> {
    fn encode<W: Write>(
        &self,
        e: &mut Encoder<W>,
        _: &mut C,
    ) -> Result<(), encode::Error<W::Error>> {
        e.array(3 * self.0.len() as u64)?;
        for (task, offset) in self.0.iter() {
            e.u32(task.subtopology)?.u32(task.partition)?.i64(*offset)?;
        }
        Ok(())
    }
}

impl<'b, C> Decode<'b, C> for Offsets<'_> {
    fn decode(d: &mut Decoder<'b>, _: &mut C) -> Result<Self, decode::Error> {
        let len = d
            .array()?
            .ok_or_else(|| decode::Error::message("offsets of indefinite length"))?;
        if len % 3 != 0 {
            return Err(decode::Error::message("offsets are not triples"));
        }
        let mut offsets = BTreeMap::new();
        for _ in 0..len / 3 {
            let task = TaskId::new(d.u32()?, d.u32()?);
            if offsets.insert(task, d.i64()?).is_some() {
                return Err(decode::Error::message(format!("task {task} offset twice")));
            }
        }
        Ok(Self(Cow::Owned(offsets)))
    }
}

/// Client tags, as a CBOR map of strings.
#[derive(Debug, Default)]
struct Tags<'a>(Cow<'a, BTreeMap<String, String>>);

impl Tags<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<C> Encode<C> for Tags<'_> {
    fn encode<W: Write>(
        &self,
        e: &mut Encoder<W>,
        _: &mut C,
    ) -> Result<(), encode::Error<W::Error>> {
        e.map(self.0.len() as u64)?;
        for (key, value) in self.0.iter() {
            e.str(key)?.str(value)?;
        }
        Ok(())
    }
}

impl<'b, C> Decode<'b, C> for Tags<'_> {
    fn decode(d: &mut Decoder<'b>, _: &mut C) -> Result<Self, decode::Error> {
        let len = d
            .map()?
            .ok_or_else(|| decode::Error::message("client tags of indefinite length"))?;
        let mut tags = BTreeMap::new();
        for _ in 0..len {
            let key = d.str()?.to_owned();
            if tags.insert(key, d.str()?.to_owned()).is_some() {
                return Err(decode::Error::message("a client tag twice"));
            }
        }
        Ok(Self(Cow::Owned(tags)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks(bytes: &[u8]) -> Result<TaskSet, String> {
        <Tasks<'_> as Decode<'_, ()>>::decode(&mut Decoder::new(bytes), &mut ())
            .map(Tasks::into_set)
            .map_err(|e| e.to_string())
    }

    /// A task set's damage is told, not guessed around: a number cut short or over `u32`, a
    /// task twice.
    #[test]
    fn refuses_damaged_task_sets() {
        assert_eq!(tasks(&[0x45, 0, 1, 0, 0x81, 0x01]).map(|t| t.len()), Ok(2));
        assert!(tasks(&[0x43, 0, 1, 0]).is_err_and(|e| e.contains("inside a number")));
        assert!(tasks(&[0x44, 0, 1, 0, 1]).is_err_and(|e| e.contains("twice")));
        let over = [0x46, 0x80, 0x80, 0x80, 0x80, 0x10, 0];
        assert!(tasks(&over).is_err_and(|e| e.contains("over u32")));
    }
}
