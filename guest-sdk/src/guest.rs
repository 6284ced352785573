//! The component side: wit-bindgen glue and the conversion between WIT values and the domain
//! model. Compiled only for `wasm32`; nothing here is public API except what [`export!`]
//! needs to reach.
//!
//! [`export!`]: crate::export

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use crate::assignor::TaskAssignor;
use crate::model::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, SourceTopic, Subtopology, TaskId,
    Topology,
};
use crate::task_set::TaskSet;

/// Generated bindings; `export!` needs to name them, nobody else should.
#[allow(unsafe_code, missing_docs, unused_qualifications)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/v0.1.0",
        world: "assignor",
        pub_export_macro: true,
        export_macro_name: "__export_assignor_world",
        default_bindings_module: "::assignor_sdk::__private::bindings",
    });
}

use bindings::kafka::streams_assignor::types as wit;

thread_local! {
    // The instance's one assignor. Instances are single-threaded and live for one call, so this
    // is created by `configure` (or lazily) and dropped with the instance.
    static ASSIGNOR: RefCell<Option<Box<dyn TaskAssignor>>> = const { RefCell::new(None) };
}

/// Adapts a `TaskAssignor + Default` to the generated `Guest` trait.
#[derive(Debug)]
pub struct Component<T>(PhantomData<T>);

fn with_assignor<T, R>(f: impl FnOnce(&mut dyn TaskAssignor) -> R) -> R
where
    T: TaskAssignor + Default + 'static,
{
    ASSIGNOR.with_borrow_mut(|slot| f(slot.get_or_insert_with(|| Box::new(T::default())).as_mut()))
}

impl<T> bindings::exports::kafka::streams_assignor::task_assignor::Guest for Component<T>
where
    T: TaskAssignor + Default + 'static,
{
    fn name() -> String {
        with_assignor::<T, _>(|a| a.name().to_owned())
    }

    fn configure(config: Vec<(String, String)>) -> Result<(), String> {
        let config: BTreeMap<String, String> = config.into_iter().collect();
        with_assignor::<T, _>(|a| a.configure(&config))
    }

    fn assign(
        group: wit::GroupSpec,
        topology: wit::Topology,
    ) -> Result<wit::GroupAssignment, wit::AssignError> {
        let topology = topology_from_wit(topology);
        let group = group_from_wit(group);
        let result = with_assignor::<T, _>(|a| a.assign(&group, &topology));
        // The instance is discarded after this call, so freeing the input node by node would
        // be wasted work (a measurable share of a large call).
        std::mem::forget((group, topology));
        result.map(assignment_to_wit).map_err(|e| wit::AssignError {
            message: e.message().to_owned(),
        })
    }
}

fn topology_from_wit(t: wit::Topology) -> Topology {
    let subtopologies = t
        .subtopologies
        .into_iter()
        .map(|s| Subtopology {
            id: s.id,
            max_num_input_partitions: s.max_num_input_partitions,
            is_stateful: s.is_stateful,
            source_topics: s
                .source_topics
                .into_iter()
                .map(|topic| {
                    let mut partition_racks = vec![Vec::new(); topic.partitions as usize];
                    // The host checks partitions against the topic's count.
                    for (&p, &rack) in topic.replica_partitions.iter().zip(&topic.replica_racks) {
                        partition_racks[p as usize].push(rack);
                    }
                    SourceTopic {
                        name: topic.name,
                        partition_racks,
                    }
                })
                .collect(),
        })
        .collect();
    Topology {
        subtopologies,
        racks: t.racks,
    }
}

/// Splits parallel lists into per-member runs: the `(member, start, end)` of each stretch of
/// equal member indices. The host sends each member's entries contiguously and in order, so
/// each run is one member's whole map.
fn runs(members: &[u32]) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        let &member = members.get(start)?;
        let end = run_end(members, start);
        let run = (member as usize, start, end);
        start = end;
        Some(run)
    })
}

/// The end of the run of entries equal to `members[start]` (which exists) from `start`.
/// Four entries per step, then one at a time: a member's run is typically tens of entries,
/// and stepping one by one cost 0.5–0.75 % more fuel on a 1000-member call that lowers a
/// current assignment (124–138 K).
fn run_end(members: &[u32], start: usize) -> usize {
    let member = members[start];
    let mut end = start + 1;
    while let Some(&[a, b, c, d]) = members.get(end..end + 4) {
        if (a ^ member) | (b ^ member) | (c ^ member) | (d ^ member) != 0 {
            break;
        }
        end += 4;
    }
    while members.get(end) == Some(&member) {
        end += 1;
    }
    end
}

/// Puts the entries of `tasks` into their members' sets (`set` picks which of a member's).
///
/// The host sends each member's entries as one strictly increasing run. A run's end is found
/// on the members list alone; its tasks are then copied into a vector of that size in one
/// loop that also checks their order, and that vector becomes the member's set, sorted only if
/// the run was not in order, and merged with what an earlier run of the same member put there.
/// (Checking the order in the loop that finds the end, then copying, into per-member vectors
/// of sets zipped into the members afterwards, cost 0.64M more fuel for a 1000-member,
/// 32,768-task input.)
fn fill(members: &mut [Member], tasks: &wit::MemberTasks, set: fn(&mut Member) -> &mut TaskSet) {
    let wit::MemberTasks {
        members: m,
        subtopologies: s,
        partitions: p,
    } = tasks;
    // One length for the lists (the host sends them so), which lets the compiler drop the
    // bounds checks below.
    let (s, p) = (&s[..m.len()], &p[..m.len()]);
    for (member, start, end) in runs(m) {
        let mut run = Vec::with_capacity(end - start);
        let first = TaskId::new(s[start], p[start]);
        run.push(first);
        let mut last = first.key();
        let mut increasing = true;
        run.extend(
            s[start + 1..end]
                .iter()
                .zip(&p[start + 1..end])
                .map(|(&s, &p)| {
                    let task = TaskId::new(s, p);
                    increasing &= last < task.key();
                    last = task.key();
                    task
                }),
        );
        let set = set(&mut members[member]);
        if increasing && set.is_empty() {
            *set = TaskSet::from_increasing(run);
        } else {
            set.extend(run);
        }
    }
}

/// Puts the entries of `o` into their members' maps (`map` picks which of a member's).
fn fill_offsets(
    members: &mut [Member],
    o: &wit::MemberTaskOffsets,
    map: fn(&mut Member) -> &mut BTreeMap<TaskId, i64>,
) {
    for (member, start, end) in runs(&o.members) {
        let run = o.subtopologies[start..end]
            .iter()
            .zip(&o.partitions[start..end])
            .zip(&o.offsets[start..end])
            .map(|((&s, &p), &offset)| (TaskId::new(s, p), offset));
        let map = map(&mut members[member]);
        if map.is_empty() {
            // Collecting (unlike inserting) bulk-builds the map from the sorted run.
            *map = run.collect();
        } else {
            map.extend(run);
        }
    }
}

fn group_from_wit(g: wit::GroupSpec) -> GroupSpec {
    let mut processes = g.processes;
    // Each process id is moved into the last of its members and cloned for the others: one
    // allocation fewer per process (500 of 1000 in the 1000-member benchmark group).
    let mut last_member = vec![0u32; processes.len()];
    for (i, m) in (0u32..).zip(&g.members) {
        last_member[m.process as usize] = i;
    }
    // Members first, their tasks then put straight into them: no per-member vectors of sets
    // and maps to build, zip and move.
    let mut members: Vec<Member> = (0u32..)
        .zip(g.members)
        .map(|(i, m)| {
            let process = m.process as usize;
            Member {
                member_id: m.member_id,
                instance_id: m.instance_id,
                rack_id: m.rack_id,
                process_id: if last_member[process] == i {
                    std::mem::take(&mut processes[process])
                } else {
                    processes[process].clone()
                },
                client_tags: m.client_tags.into_iter().collect(),
                ..Member::default()
            }
        })
        .collect();
    fill(&mut members, &g.active_tasks, |m| &mut m.active_tasks);
    fill(&mut members, &g.standby_tasks, |m| &mut m.standby_tasks);
    fill(&mut members, &g.warmup_tasks, |m| &mut m.warmup_tasks);
    fill_offsets(&mut members, &g.task_offsets, |m| &mut m.task_offsets);
    fill_offsets(&mut members, &g.task_end_offsets, |m| {
        &mut m.task_end_offsets
    });
    GroupSpec {
        members,
        configs: AssignmentConfigs {
            num_standby_replicas: g.configs.num_standby_replicas,
            rack_aware_assignment_tags: g.configs.rack_aware_assignment_tags,
        },
    }
}

/// Appends `member`'s `tasks` to `list`: three extends of known length (one tight loop each),
/// not a push of three values per task, each checking the capacity (~36 fuel per task more:
/// 1.2M of a 32,768-task output).
fn push_set(list: &mut wit::MemberTasks, member: u32, tasks: &TaskSet) {
    let tasks = tasks.as_slice();
    list.members
        .extend(std::iter::repeat_n(member, tasks.len()));
    list.subtopologies
        .extend(tasks.iter().map(|t| t.subtopology));
    list.partitions.extend(tasks.iter().map(|t| t.partition));
}

fn with_capacity(n: usize) -> wit::MemberTasks {
    wit::MemberTasks {
        members: Vec::with_capacity(n),
        subtopologies: Vec::with_capacity(n),
        partitions: Vec::with_capacity(n),
    }
}

fn assignment_to_wit(a: GroupAssignment) -> wit::GroupAssignment {
    let actives = a.members.iter().map(|m| m.active_tasks.len()).sum();
    let standbys = a.members.iter().map(|m| m.standby_tasks.len()).sum();
    let mut out = wit::GroupAssignment {
        active_tasks: with_capacity(actives),
        standby_tasks: with_capacity(standbys),
    };
    // Members beyond the input's count still go out: the host reports them as unknown members
    // instead of this glue hiding an assignor bug.
    for (member, m) in (0u32..).zip(&a.members) {
        push_set(&mut out.active_tasks, member, &m.active_tasks);
        push_set(&mut out.standby_tasks, member, &m.standby_tasks);
    }
    std::mem::forget(a);
    out
}
