//! The flat form a group crosses JNI in, and the flat form an assignment comes back in: a few
//! primitive arrays and one string table, so that a call costs a handful of JNI array copies
//! whatever the group's size (no JSON, no JNI call per member or task). The Java side is
//! `FlatGroup.java`; the two must agree on the layout below.
//!
//! **Strings**: one UTF-8 byte array holding every string back to back, and `ends[i]`, the
//! end offset of string `i` (its start is `ends[i - 1]`, or 0). Strings are referred to by
//! index; `-1` is "absent" (an empty `Optional`).
//!
//! **Ints** (one `int[]`, read front to back; subtopologies referred to by their index):
//!
//! ```text
//! S                                   subtopologies
//! S × [id string, maxNumInputPartitions, isStateful 0|1]
//! numStandbyReplicas, T, T × tag string          rackAwareAssignmentTags
//! M                                   members
//! M × [memberId, processId, instanceId|-1, rackId|-1,
//!      C, C × (key, value)            clientTags
//!      A, A × (subtopology, partition) activeTasks
//!      B, B × (subtopology, partition) standbyTasks
//!      W, W × (subtopology, partition) warmupTasks
//!      O, O × (subtopology, partition) taskOffsets (values in the long[])
//!      E, E × (subtopology, partition)] taskEndOffsets (values in the long[])
//! ```
//!
//! **Longs**: the offsets of every member's `taskOffsets` then `taskEndOffsets`, in the order
//! their tasks appear in the ints.
//!
//! **Assignment** (the `int[]` returned): per member, in input order,
//! `A, A × (subtopology, partition), B, B × (subtopology, partition)`, each list sorted.

use std::collections::BTreeMap;

use assignor_sdk::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, Subtopology, TaskId, TaskSet, Topology,
};

/// The string table: UTF-8 bytes and each string's end offset.
#[derive(Debug, Clone, Copy)]
pub struct Strings<'a> {
    /// Every string's bytes, back to back.
    pub bytes: &'a [u8],
    /// The end offset of each string in `bytes`.
    pub ends: &'a [i32],
}

impl<'a> Strings<'a> {
    fn get(&self, index: i32) -> Result<&'a str, String> {
        let i = usize::try_from(index).map_err(|_| format!("string index {index}"))?;
        let end = *self
            .ends
            .get(i)
            .ok_or_else(|| format!("string index {i} of {}", self.ends.len()))?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        let (start, end) = (to_usize(start)?, to_usize(end)?);
        let bytes = self
            .bytes
            .get(start..end)
            .ok_or_else(|| format!("string {i} at {start}..{end} of {}", self.bytes.len()))?;
        std::str::from_utf8(bytes).map_err(|e| format!("string {i}: {e}"))
    }

    fn optional(&self, index: i32) -> Result<Option<String>, String> {
        match index {
            -1 => Ok(None),
            i => self.get(i).map(|s| Some(s.to_owned())),
        }
    }
}

fn to_usize(v: i32) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("negative offset {v}"))
}

/// Reads the ints front to back; every count is checked against what is left, so a bad count
/// fails instead of sizing an allocation.
struct Cursor<'a> {
    ints: &'a [i32],
    longs: &'a [i64],
    pos: usize,
    long_pos: usize,
    /// Each subtopology's partition count, once read: a task must be one of the topology's.
    partitions: Vec<u32>,
}

impl Cursor<'_> {
    fn int(&mut self) -> Result<i32, String> {
        let v = *self
            .ints
            .get(self.pos)
            .ok_or_else(|| format!("the ints end at {}", self.pos))?;
        self.pos += 1;
        Ok(v)
    }

    /// A count of items of `width` ints each that must still be there.
    fn count(&mut self, width: usize) -> Result<usize, String> {
        let n = to_usize(self.int()?)?;
        if n.saturating_mul(width) > self.ints.len() - self.pos {
            return Err(format!(
                "a count of {n} at {} overruns the ints",
                self.pos - 1
            ));
        }
        Ok(n)
    }

    fn unsigned(&mut self) -> Result<u32, String> {
        let v = self.int()?;
        u32::try_from(v).map_err(|_| format!("negative value {v} at {}", self.pos - 1))
    }

    /// A task of the topology: the Java encoder leaves out state reported against another
    /// topology, so a task outside it is a malformed form, not something to pass on.
    fn task(&mut self) -> Result<TaskId, String> {
        let at = self.pos;
        let (subtopology, partition) = (self.unsigned()?, self.unsigned()?);
        match self.partitions.get(subtopology as usize) {
            Some(&n) if partition < n => Ok(TaskId::new(subtopology, partition)),
            _ => Err(format!(
                "task {subtopology}_{partition} at {at} is not in the topology"
            )),
        }
    }

    fn tasks(&mut self) -> Result<TaskSet, String> {
        let n = self.count(2)?;
        // Sized up front (collecting `Result`s starts from an empty vector and doubles it):
        // `count` checked that the ints hold `n` tasks, so the input bounds the allocation.
        let mut tasks = Vec::with_capacity(n);
        for _ in 0..n {
            tasks.push(self.task()?);
        }
        TaskSet::from_unique(tasks).map_err(|t| format!("task {t} given twice"))
    }

    fn offsets(&mut self) -> Result<BTreeMap<TaskId, i64>, String> {
        let n = self.count(2)?;
        let mut offsets = BTreeMap::new();
        for _ in 0..n {
            let task = self.task()?;
            let offset = *self
                .longs
                .get(self.long_pos)
                .ok_or_else(|| format!("the longs end at {}", self.long_pos))?;
            self.long_pos += 1;
            offsets.insert(task, offset);
        }
        Ok(offsets)
    }
}

/// The group and topology of the flat form; `Err` says where it is malformed (a bug of the
/// Java encoder, never of the assignor).
pub fn decode(
    strings: Strings<'_>,
    ints: &[i32],
    longs: &[i64],
) -> Result<(GroupSpec, Topology), String> {
    let mut c = Cursor {
        ints,
        longs,
        pos: 0,
        long_pos: 0,
        partitions: Vec::new(),
    };
    let subtopologies = c.count(3)?;
    let mut topology = Topology {
        subtopologies: Vec::with_capacity(subtopologies),
        racks: Vec::new(),
    };
    for _ in 0..subtopologies {
        topology.subtopologies.push(Subtopology {
            id: strings.get(c.int()?)?.to_owned(),
            max_num_input_partitions: c.unsigned()?,
            is_stateful: c.int()? != 0,
            source_topics: Vec::new(),
        });
    }
    c.partitions = topology
        .subtopologies
        .iter()
        .map(|s| s.max_num_input_partitions)
        .collect();
    let num_standby_replicas = c.unsigned()?;
    let tags = c.count(1)?;
    let rack_aware_assignment_tags = (0..tags)
        .map(|_| Ok(strings.get(c.int()?)?.to_owned()))
        .collect::<Result<_, String>>()?;
    // Ten ints at least per member: its four ids and six counts.
    let members = c.count(10)?;
    let mut group = GroupSpec {
        members: Vec::with_capacity(members),
        configs: AssignmentConfigs {
            num_standby_replicas,
            rack_aware_assignment_tags,
        },
    };
    for _ in 0..members {
        let member_id = strings.get(c.int()?)?.to_owned();
        let process_id = strings.get(c.int()?)?.to_owned();
        let instance_id = strings.optional(c.int()?)?;
        let rack_id = strings.optional(c.int()?)?;
        let tags = c.count(2)?;
        let mut client_tags = BTreeMap::new();
        for _ in 0..tags {
            let key = strings.get(c.int()?)?.to_owned();
            client_tags.insert(key, strings.get(c.int()?)?.to_owned());
        }
        group.members.push(Member {
            member_id,
            instance_id,
            rack_id,
            process_id,
            client_tags,
            active_tasks: c.tasks()?,
            standby_tasks: c.tasks()?,
            warmup_tasks: c.tasks()?,
            task_offsets: c.offsets()?,
            task_end_offsets: c.offsets()?,
        });
    }
    if c.pos != ints.len() || c.long_pos != longs.len() {
        return Err(format!(
            "{} ints and {} longs left over",
            ints.len() - c.pos,
            longs.len() - c.long_pos
        ));
    }
    Ok((group, topology))
}

/// The assignment's flat form (see the module doc). Task ids are below `i32::MAX`: the
/// sandbox validated them against the topology, whose counts came in as `int`s.
pub fn encode(assignment: &GroupAssignment) -> Vec<i32> {
    let tasks: usize = assignment
        .members
        .iter()
        .map(|m| m.active_tasks.len() + m.standby_tasks.len())
        .sum();
    let mut out = Vec::with_capacity(assignment.members.len() * 2 + tasks * 2);
    for member in &assignment.members {
        for set in [&member.active_tasks, &member.standby_tasks] {
            out.push(set.len() as i32);
            for task in set {
                out.extend([task.subtopology as i32, task.partition as i32]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(strings: &[&str]) -> (Vec<u8>, Vec<i32>) {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for s in strings {
            bytes.extend_from_slice(s.as_bytes());
            ends.push(bytes.len() as i32);
        }
        (bytes, ends)
    }

    /// A group in the flat form decodes to the same model the Java side described.
    #[test]
    fn decodes_a_member_with_everything() {
        let (bytes, ends) = table(&["s0", "zone", "m", "p", "i", "k", "v"]);
        let ints = [
            1, 0, 4, 1, // one stateful subtopology "s0" of 4 partitions
            1, 1, 1, // one standby, tag "zone"
            1, 2, 3, 4, -1, // member m of process p, instance i, no rack
            1, 5, 6, // tag k=v
            1, 0, 0, // active 0_0
            1, 0, 1, // standby 0_1
            0, // no warm-ups
            1, 0, 2, // offset of 0_2
            0,
        ];
        let (group, topology) = decode(
            Strings {
                bytes: &bytes,
                ends: &ends,
            },
            &ints,
            &[42],
        )
        .expect("well formed");
        assert_eq!(topology.subtopologies[0].id, "s0");
        assert!(topology.subtopologies[0].is_stateful);
        let m = &group.members[0];
        assert_eq!(
            (
                m.member_id.as_str(),
                m.instance_id.as_deref(),
                m.rack_id.as_deref()
            ),
            ("m", Some("i"), None)
        );
        assert_eq!(m.client_tags["k"], "v");
        assert_eq!(m.active_tasks, TaskSet::from([TaskId::new(0, 0)]));
        assert_eq!(m.task_offsets[&TaskId::new(0, 2)], 42);
        assert_eq!(group.configs.rack_aware_assignment_tags, ["zone"]);
    }

    /// Counts that overrun the arrays, bad string indices and leftovers are errors, not
    /// panics or huge allocations.
    #[test]
    fn malformed_input_is_an_error() {
        let (bytes, ends) = table(&["s0"]);
        let strings = Strings {
            bytes: &bytes,
            ends: &ends,
        };
        assert!(
            decode(strings, &[i32::MAX], &[])
                .unwrap_err()
                .contains("overruns")
        );
        assert!(
            decode(strings, &[1, 7, 1, 0], &[])
                .unwrap_err()
                .contains("string index 7")
        );
        assert!(
            decode(strings, &[0, 0, 0, 0, 9], &[])
                .unwrap_err()
                .contains("left over")
        );
    }

    /// Every count and index the decoder reads is checked: negative counts, indices and
    /// offsets, string ends out of order or past the bytes, tasks outside the topology, a
    /// task given twice, longs missing; each is an error naming where, never a panic.
    #[test]
    fn every_trusted_value_is_checked() {
        let (bytes, ends) = table(&["s0", "m", "p"]);
        let ok = Strings {
            bytes: &bytes,
            ends: &ends,
        };
        // One subtopology "s0" of 2 partitions, no standbys or tags, one member m of p.
        let head = [1, 0, 2, 1, 0, 0, 1, 1, 2, -1, -1, 0];
        let member = |rest: &[i32]| [&head[..], rest].concat();
        let cases: &[(Strings<'_>, Vec<i32>, &[i64], &str)] = &[
            (ok, vec![-1], &[], "negative offset -1"),
            (ok, vec![1, 0, -2, 1], &[], "negative value -2"),
            (ok, vec![1, -3, 2, 1], &[], "string index -3"),
            (ok, member(&[1, 0, 2, 0, 0, 0, 0]), &[], "task 0_2 at"),
            (ok, member(&[1, 1, 0, 0, 0, 0, 0]), &[], "task 1_0 at"),
            (ok, member(&[2, 0, 1, 0, 1, 0, 0, 0, 0]), &[], "given twice"),
            (ok, member(&[0, 0, 0, 1, 0, 1, 0]), &[], "the longs end"),
            (ok, member(&[0, 0, 0, 0, 0]), &[7], "longs left over"),
            (
                Strings {
                    bytes: &bytes,
                    ends: &[2, 1, 4],
                },
                member(&[0, 0, 0, 0, 0]),
                &[],
                "string 1 at 2..1",
            ),
            (
                Strings {
                    bytes: &bytes,
                    ends: &[2, 3, 99],
                },
                member(&[0, 0, 0, 0, 0]),
                &[],
                "string 2 at 3..99",
            ),
            (
                Strings {
                    bytes: &[0xff, 0xfe],
                    ends: &[2],
                },
                vec![1, 0, 2, 1],
                &[],
                "string 0: invalid utf-8",
            ),
        ];
        for (strings, ints, longs, expected) in cases {
            let e = decode(*strings, ints, longs).unwrap_err();
            assert!(e.contains(expected), "{ints:?}: {e}");
        }
        // The well-formed member the cases above break decodes.
        let (group, _) = decode(ok, &member(&[1, 0, 1, 0, 0, 0, 0]), &[]).expect("well formed");
        assert_eq!(group.members[0].member_id, "m");
    }

    /// The assignment's flat form lists each member's active then standby tasks.
    #[test]
    fn encodes_active_then_standby() {
        let mut a = GroupAssignment::default();
        a.members.push(assignor_sdk::MemberAssignment {
            active_tasks: TaskSet::from([TaskId::new(0, 1), TaskId::new(1, 0)]),
            standby_tasks: TaskSet::from([TaskId::new(0, 0)]),
        });
        assert_eq!(encode(&a), [2, 0, 1, 1, 0, 1, 0, 0]);
    }
}
