//! The output JSON (DESIGN §5): member id → its new tasks, every input member listed, and
//! the view that writes it straight from the model.

use std::collections::BTreeMap;

use assignor_sdk::{GroupAssignment, GroupSpec, MemberAssignment, TaskSet, Topology};
use serde::{Deserialize, Serialize};

/// Subtopology id → partitions, as in Kafka's per-member task maps.
type TaskMap = BTreeMap<String, Vec<u32>>;

/// The output document: member id → its new tasks.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct AssignmentDoc {
    /// Every member of the input, even with nothing assigned.
    pub members: BTreeMap<String, MemberAssignmentDoc>,
}

/// One member's new tasks: subtopology id → sorted partitions.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MemberAssignmentDoc {
    /// Active tasks.
    pub active_tasks: TaskMap,
    /// Standby tasks.
    pub standby_tasks: TaskMap,
}

/// Renders an assignment of `group` as the output document (the JSON of [`AssignmentDoc`]).
pub fn assignment_doc<'a>(
    group: &'a GroupSpec,
    topology: &'a Topology,
    assignment: &'a GroupAssignment,
) -> AssignmentView<'a> {
    AssignmentView::new(
        group
            .members
            .iter()
            .map(|m| m.member_id.as_str())
            .zip(&assignment.members),
        topology,
    )
}

/// An assignment serialized as the output document straight from the model: the same JSON as
/// [`AssignmentDoc`] (members by id, subtopologies by id, partitions ascending) without
/// building its maps, because the service answers one per assignment, thousands a second.
#[derive(Debug)]
pub struct AssignmentView<'a> {
    /// Sorted by member id.
    members: Vec<(&'a str, &'a MemberAssignment)>,
    /// Subtopology indices in the order of their ids.
    order: Vec<u32>,
    topology: &'a Topology,
}

impl<'a> AssignmentView<'a> {
    /// The document of `members` (id, tasks) over `topology`.
    pub fn new(
        members: impl IntoIterator<Item = (&'a str, &'a MemberAssignment)>,
        topology: &'a Topology,
    ) -> Self {
        let mut members: Vec<_> = members.into_iter().collect();
        members.sort_unstable_by_key(|&(id, _)| id);
        let subtopologies = &topology.subtopologies;
        let mut order: Vec<u32> = (0..subtopologies.len() as u32).collect();
        order.sort_unstable_by_key(|&i| subtopologies[i as usize].id.as_str());
        Self {
            members,
            order,
            topology,
        }
    }
}

impl Serialize for AssignmentView<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeStruct};

        /// One member's tasks, as [`MemberAssignmentDoc`].
        struct Member<'v>(&'v AssignmentView<'v>, &'v MemberAssignment);
        /// Subtopology id → partitions of one task set, as [`TaskMap`].
        struct Tasks<'v>(&'v AssignmentView<'v>, &'v TaskSet);
        /// The member map.
        struct Members<'v>(&'v AssignmentView<'v>);

        impl Serialize for Tasks<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let Tasks(view, tasks) = *self;
                // A task set is sorted by (subtopology index, partition), so each
                // subtopology's tasks are one run of the slice, found by binary search.
                let tasks = tasks.as_slice();
                let mut map = serializer.serialize_map(None)?;
                for &index in &view.order {
                    let from = tasks.partition_point(|t| t.subtopology < index);
                    let to = tasks.partition_point(|t| t.subtopology <= index);
                    if from < to {
                        let partitions: Vec<u32> =
                            tasks[from..to].iter().map(|t| t.partition).collect();
                        let id = &view.topology.subtopologies[index as usize].id;
                        map.serialize_entry(id, &partitions)?;
                    }
                }
                // Indices beyond the topology (never in a validated assignment) are listed
                // under "?" rather than dropped.
                let stray: Vec<u32> = tasks
                    .iter()
                    .filter(|t| t.subtopology as usize >= view.order.len())
                    .map(|t| t.partition)
                    .collect();
                if !stray.is_empty() {
                    map.serialize_entry("?", &stray)?;
                }
                map.end()
            }
        }

        impl Serialize for Member<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let Member(view, assignment) = *self;
                let mut doc = serializer.serialize_struct("MemberAssignmentDoc", 2)?;
                doc.serialize_field("activeTasks", &Tasks(view, &assignment.active_tasks))?;
                doc.serialize_field("standbyTasks", &Tasks(view, &assignment.standby_tasks))?;
                doc.end()
            }
        }

        impl Serialize for Members<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let view = self.0;
                let mut map = serializer.serialize_map(Some(view.members.len()))?;
                for &(id, assignment) in &view.members {
                    map.serialize_entry(id, &Member(view, assignment))?;
                }
                map.end()
            }
        }

        let mut doc = serializer.serialize_struct("AssignmentDoc", 1)?;
        doc.serialize_field("members", &Members(self))?;
        doc.end()
    }
}
