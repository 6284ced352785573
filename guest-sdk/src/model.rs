//! The domain model: Kafka's `GroupSpec`, `TopologyDescriber` and `GroupAssignment` as plain Rust.
//!
//! Subtopologies are referred to by their index in [`Topology::subtopologies`] (a [`TaskId`] is
//! two integers), so sets of tasks are cheap to build, compare and move across the sandbox
//! boundary; [`Topology::subtopology_id`] gives the Kafka id back.

use std::collections::BTreeMap;
use std::fmt;

use crate::TaskSet;

/// A task: one partition of one subtopology (Kafka's `TaskId`).
///
/// Orders by subtopology, then partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TaskId {
    /// Index of the subtopology in [`Topology::subtopologies`].
    pub subtopology: u32,
    /// The partition, below the subtopology's `max_num_input_partitions`.
    pub partition: u32,
}

impl TaskId {
    /// The task for `partition` of the subtopology at index `subtopology`.
    pub const fn new(subtopology: u32, partition: u32) -> Self {
        Self {
            subtopology,
            partition,
        }
    }

    /// The task as one integer ordered as tasks are (subtopology, then partition): one
    /// comparison instead of two.
    pub(crate) const fn key(self) -> u64 {
        ((self.subtopology as u64) << 32) | self.partition as u64
    }
}

impl fmt::Display for TaskId {
    /// Kafka's `subtopology_partition` notation, with the subtopology index.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.subtopology, self.partition)
    }
}

/// The group's topology (Kafka's `TopologyDescriber`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Topology {
    /// The subtopologies; a [`TaskId`] names one by index.
    pub subtopologies: Vec<Subtopology>,
    /// Rack names referred to by [`SourceTopic::partition_racks`].
    pub racks: Vec<String>,
}

impl Topology {
    /// The Kafka id of the subtopology a task belongs to, if the index is in range.
    pub fn subtopology_id(&self, task: TaskId) -> Option<&str> {
        self.subtopology(task).map(|s| s.id.as_str())
    }

    /// The subtopology a task belongs to, if the index is in range.
    pub fn subtopology(&self, task: TaskId) -> Option<&Subtopology> {
        self.subtopologies.get(task.subtopology as usize)
    }

    /// Every task of the topology, in [`TaskId`] order.
    pub fn tasks(&self) -> impl Iterator<Item = TaskId> + '_ {
        (0u32..).zip(&self.subtopologies).flat_map(|(index, s)| {
            (0..s.max_num_input_partitions).map(move |p| TaskId::new(index, p))
        })
    }

    /// A task as Kafka users know it, `<subtopology id>_<partition>`; an index out of range
    /// shows as `<subtopology #N>`.
    pub fn task_name(&self, task: TaskId) -> String {
        match self.subtopology_id(task) {
            Some(id) => format!("{id}_{}", task.partition),
            None => format!("<subtopology #{}>_{}", task.subtopology, task.partition),
        }
    }

    /// Whether `task` exists in this topology.
    pub fn contains(&self, task: TaskId) -> bool {
        self.subtopology(task)
            .is_some_and(|s| task.partition < s.max_num_input_partitions)
    }
}

/// One subtopology.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Subtopology {
    /// Kafka's subtopology id.
    pub id: String,
    /// The number of tasks: the largest partition count among the source topics.
    pub max_num_input_partitions: u32,
    /// Whether the subtopology has changelogs, so that its tasks may have standbys.
    pub is_stateful: bool,
    /// Source topics with replica racks; empty when the coordinator has no rack information.
    pub source_topics: Vec<SourceTopic>,
}

/// A source topic with the racks holding each partition's replicas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SourceTopic {
    /// The topic name.
    pub name: String,
    /// Per partition, the indices into [`Topology::racks`] of the racks holding a replica.
    pub partition_racks: Vec<Vec<u32>>,
}

/// The input of an assignment (Kafka's `GroupSpec`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GroupSpec {
    /// The members, in the coordinator's order; [`GroupAssignment::members`] follows it.
    pub members: Vec<Member>,
    /// The resolved assignment configs.
    pub configs: AssignmentConfigs,
}

/// One member: its static metadata and its current assignment state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Member {
    /// The member id.
    pub member_id: String,
    /// Static membership `group.instance.id`.
    pub instance_id: Option<String>,
    /// The member's rack (`client.rack`).
    pub rack_id: Option<String>,
    /// The Streams client (process) the member runs in; members of one process share state.
    pub process_id: String,
    /// Client tags, used for rack-aware standby placement.
    pub client_tags: BTreeMap<String, String>,
    /// Current target active tasks.
    pub active_tasks: TaskSet,
    /// Current target standby tasks.
    pub standby_tasks: TaskSet,
    /// Current warm-up tasks.
    pub warmup_tasks: TaskSet,
    /// Last reported cumulative offsets of assigned or dormant tasks (local state).
    pub task_offsets: BTreeMap<TaskId, i64>,
    /// Last reported end offsets.
    pub task_end_offsets: BTreeMap<TaskId, i64>,
}

/// Kafka's `AssignmentConfigs`, resolved from the group override or the broker value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AssignmentConfigs {
    /// Standby replicas wanted per stateful task.
    pub num_standby_replicas: u32,
    /// Client tag keys over which a task's standbys should be spread.
    pub rack_aware_assignment_tags: Vec<String>,
}

/// The output of an assignment (Kafka's `GroupAssignment`): `members[i]` is the new assignment
/// of `GroupSpec::members[i]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GroupAssignment {
    /// One entry per member of the input, in the same order.
    pub members: Vec<MemberAssignment>,
}

impl GroupAssignment {
    /// An assignment that gives nothing to each of `group`'s members; fill it in.
    pub fn empty_for(group: &GroupSpec) -> Self {
        Self {
            members: vec![MemberAssignment::default(); group.members.len()],
        }
    }
}

/// One member's new tasks. Warm-ups are not part of it: the coordinator derives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemberAssignment {
    /// Active tasks.
    pub active_tasks: TaskSet,
    /// Standby tasks (stateful subtopologies only).
    pub standby_tasks: TaskSet,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Topology {
        let sub = |id: &str, n| Subtopology {
            id: id.into(),
            max_num_input_partitions: n,
            is_stateful: true,
            source_topics: Vec::new(),
        };
        Topology {
            subtopologies: vec![sub("a", 2), sub("b", 0), sub("c", 1)],
            racks: Vec::new(),
        }
    }

    /// Tasks enumerate subtopology-major in `TaskId` order; empty subtopologies contribute none.
    #[test]
    fn tasks_in_order() {
        let tasks: Vec<TaskId> = topology().tasks().collect();
        assert_eq!(
            tasks,
            [TaskId::new(0, 0), TaskId::new(0, 1), TaskId::new(2, 0)]
        );
        assert!(tasks.windows(2).all(|w| w[0] < w[1]));
    }

    /// Membership and id lookup reject out-of-range subtopologies and partitions.
    #[test]
    fn contains_and_ids() {
        let t = topology();
        assert!(t.contains(TaskId::new(2, 0)));
        assert!(!t.contains(TaskId::new(0, 2)));
        assert!(!t.contains(TaskId::new(3, 0)));
        assert_eq!(t.subtopology_id(TaskId::new(2, 0)), Some("c"));
        assert_eq!(t.subtopology_id(TaskId::new(9, 0)), None);
        assert_eq!(TaskId::new(1, 4).to_string(), "1_4");
    }
}
