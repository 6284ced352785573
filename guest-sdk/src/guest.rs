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
        with_assignor::<T, _>(|a| a.assign(&group, &topology))
            .map(assignment_to_wit)
            .map_err(|e| wit::AssignError {
                message: e.message().to_owned(),
            })
    }
}

fn task(t: wit::TaskId) -> TaskId {
    TaskId::new(t.subtopology, t.partition)
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
                    for r in topic.replica_racks {
                        // The host checks partitions against the topic's count.
                        partition_racks[r.partition as usize].push(r.rack);
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

fn group_from_wit(g: wit::GroupSpec) -> GroupSpec {
    let processes = g.processes;
    let mut members: Vec<Member> = g
        .members
        .into_iter()
        .map(|m| Member {
            member_id: m.member_id,
            instance_id: m.instance_id,
            rack_id: m.rack_id,
            process_id: processes[m.process as usize].clone(),
            client_tags: m.client_tags.into_iter().collect(),
            ..Member::default()
        })
        .collect();
    // Member indices come from the host, which builds them from this same list.
    for t in g.active_tasks {
        members[t.member as usize].active_tasks.insert(task(t.task));
    }
    for t in g.standby_tasks {
        members[t.member as usize]
            .standby_tasks
            .insert(task(t.task));
    }
    for t in g.warmup_tasks {
        members[t.member as usize].warmup_tasks.insert(task(t.task));
    }
    for o in g.task_offsets {
        members[o.member as usize]
            .task_offsets
            .insert(task(o.task), o.offset);
    }
    for o in g.task_end_offsets {
        members[o.member as usize]
            .task_end_offsets
            .insert(task(o.task), o.offset);
    }
    GroupSpec {
        members,
        configs: AssignmentConfigs {
            num_standby_replicas: g.configs.num_standby_replicas,
            rack_aware_assignment_tags: g.configs.rack_aware_assignment_tags,
        },
    }
}

fn assignment_to_wit(a: GroupAssignment) -> wit::GroupAssignment {
    let mut out = wit::GroupAssignment {
        active_tasks: Vec::new(),
        standby_tasks: Vec::new(),
    };
    // Members beyond the input's count still go out: the host reports them as unknown members
    // instead of this glue hiding an assignor bug.
    for (member, m) in (0u32..).zip(a.members) {
        let entry = |t: TaskId| wit::MemberTask {
            member,
            task: wit::TaskId {
                subtopology: t.subtopology,
                partition: t.partition,
            },
        };
        out.active_tasks
            .extend(m.active_tasks.into_iter().map(entry));
        out.standby_tasks
            .extend(m.standby_tasks.into_iter().map(entry));
    }
    out
}
