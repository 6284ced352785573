//! proptest strategies: random groups (with random, possibly stale or conflicting, current
//! assignments) and random membership churn.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::{AssignmentConfigs, GroupSpec, Member, Subtopology, TaskId, TaskSet, Topology};

use super::converge::Event;

/// Bounds of [`groups`].
#[derive(Debug, Clone)]
pub struct GroupBounds {
    /// Members (inclusive range).
    pub members: (usize, usize),
    /// Processes the members are spread over.
    pub processes: (usize, usize),
    /// Subtopologies; about a third are stateless.
    pub subtopologies: (usize, usize),
    /// Partitions per subtopology.
    pub partitions: (u32, u32),
    /// `numStandbyReplicas`.
    pub standbys: (u32, u32),
    /// Whether some groups use a `zone` client tag as `rackAwareAssignmentTags`.
    pub tags: bool,
}

impl Default for GroupBounds {
    /// Kafka-test sized: 1–50 members, 1–12 processes, 1–5 subtopologies of 1–32 partitions,
    /// 0–2 standbys, tags on.
    fn default() -> Self {
        Self {
            members: (1, 50),
            processes: (1, 12),
            subtopologies: (1, 5),
            partitions: (1, 32),
            standbys: (0, 2),
            tags: true,
        }
    }
}

/// A small xorshift stream: one proptest-chosen seed fixes every detail of a group, so cases
/// stay reproducible while the sizes above still shrink.
fn stream(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed | 1;
    move |n| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n.max(1)
    }
}

/// Random groups within `bounds`: members on processes (and zones), a topology, and a current
/// assignment that may be partial, conflicting (a task active on two members) or stale (tasks
/// of partitions that no longer exist), with some members reporting offsets of tasks they
/// lost.
pub fn groups(bounds: GroupBounds) -> impl Strategy<Value = (GroupSpec, Topology)> {
    (
        bounds.members.0..=bounds.members.1,
        bounds.processes.0..=bounds.processes.1,
        prop::collection::vec(
            (bounds.partitions.0..=bounds.partitions.1, 0u8..3),
            bounds.subtopologies.0..=bounds.subtopologies.1,
        ),
        bounds.standbys.0..=bounds.standbys.1,
        any::<bool>().prop_map(move |t| t && bounds.tags),
        any::<u64>(),
    )
        .prop_map(|(members, processes, subs, standbys, tagged, seed)| {
            let topology = Topology {
                subtopologies: subs
                    .iter()
                    .enumerate()
                    .map(|(i, &(partitions, kind))| Subtopology {
                        id: format!("s{i}"),
                        max_num_input_partitions: partitions,
                        is_stateful: kind != 0,
                        source_topics: Vec::new(),
                    })
                    .collect(),
                racks: Vec::new(),
            };
            let mut next = stream(seed);
            let tasks: Vec<TaskId> = topology.tasks().collect();
            let members = (0..members)
                .map(|i| {
                    let mut pick = |odds: u64| -> TaskSet {
                        let stale = (next(8) == 0).then_some(TaskId::new(0, 1000));
                        tasks
                            .iter()
                            .copied()
                            .filter(|_| next(odds) == 0)
                            .chain(stale)
                            .collect()
                    };
                    let active_tasks = pick(members as u64 + 1);
                    let standby_tasks: TaskSet = pick(members as u64 * 2 + 1)
                        .into_iter()
                        .filter(|t| !active_tasks.contains(t))
                        .collect();
                    let task_offsets: BTreeMap<TaskId, i64> = pick(members as u64 * 3 + 1)
                        .into_iter()
                        .map(|t| (t, next(10_000) as i64))
                        .collect();
                    let process = next(processes as u64);
                    Member {
                        member_id: format!("m{i:03}"),
                        process_id: format!("p{process:03}"),
                        client_tags: if tagged {
                            BTreeMap::from([("zone".to_owned(), format!("z{}", process % 3))])
                        } else {
                            BTreeMap::new()
                        },
                        active_tasks,
                        standby_tasks,
                        task_offsets,
                        ..Member::default()
                    }
                })
                .collect();
            let configs = AssignmentConfigs {
                num_standby_replicas: standbys,
                rack_aware_assignment_tags: if tagged {
                    vec!["zone".to_owned()]
                } else {
                    Vec::new()
                },
            };
            (GroupSpec { members, configs }, topology)
        })
}

/// Up to `max` membership events against a group whose members are named `m000`…: leaves of
/// existing members and joins of new ones (`j000`… on processes `p000`…), never emptying the
/// group.
pub fn churn(max: usize) -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec((any::<bool>(), any::<u16>()), 0..=max).prop_map(|steps| {
        let mut present: Vec<String> = (0..50).map(|i| format!("m{i:03}")).collect();
        let mut joined = 0;
        let mut events = Vec::new();
        for (join, pick) in steps {
            if join || present.len() <= 1 {
                let id = format!("j{joined:03}");
                events.push(Event::Join(Box::new(Member {
                    member_id: id.clone(),
                    process_id: format!("p{:03}", pick % 12),
                    ..Member::default()
                })));
                present.push(id);
                joined += 1;
            } else {
                let id = present.remove(pick as usize % present.len());
                events.push(Event::Leave(id));
            }
        }
        events
    })
}
