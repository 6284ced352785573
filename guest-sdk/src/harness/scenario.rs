//! [`Scenario`]: groups written the way Kafka's own assignor tests read.

use crate::{AssignmentConfigs, GroupSpec, Member, Subtopology, TaskId, TaskSet, Topology};

/// Builds a group and its topology; subtopologies and tasks are named by their Kafka ids.
///
/// ```
/// use assignor_sdk::harness::Scenario;
///
/// let (group, topology) = Scenario::new()
///     .stateful("orders", 4)
///     .stateless("enrich", 2)
///     .standbys(1)
///     .member("a1", "process-a", |m| m.active("orders", [0, 1]).standby("orders", [2]))
///     .member("b1", "process-b", |m| m.rack("r2").tag("zone", "eu-1b").offset("orders", 3, 42))
///     .build();
/// assert_eq!(group.members.len(), 2);
/// assert_eq!(topology.tasks().count(), 6);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Scenario {
    topology: Topology,
    configs: AssignmentConfigs,
    members: Vec<Member>,
}

/// One member of a [`Scenario`], filled in by the closure given to [`Scenario::member`].
#[derive(Debug)]
pub struct MemberBuilder<'a> {
    topology: &'a Topology,
    member: Member,
}

fn task(topology: &Topology, subtopology: &str, partition: u32) -> TaskId {
    let index = topology
        .subtopologies
        .iter()
        .position(|s| s.id == subtopology)
        .unwrap_or_else(|| {
            panic!("scenario: no subtopology `{subtopology}`; declare it before the members")
        });
    TaskId::new(index as u32, partition)
}

impl MemberBuilder<'_> {
    /// Sets the member's rack (`client.rack`).
    pub fn rack(mut self, rack: &str) -> Self {
        self.member.rack_id = Some(rack.to_owned());
        self
    }

    /// Sets the static-membership instance id.
    pub fn instance(mut self, instance: &str) -> Self {
        self.member.instance_id = Some(instance.to_owned());
        self
    }

    /// Adds a client tag.
    pub fn tag(mut self, key: &str, value: &str) -> Self {
        self.member
            .client_tags
            .insert(key.to_owned(), value.to_owned());
        self
    }

    fn tasks(&self, subtopology: &str, partitions: impl IntoIterator<Item = u32>) -> TaskSet {
        partitions
            .into_iter()
            .map(|p| task(self.topology, subtopology, p))
            .collect()
    }

    /// The member currently owns these partitions of `subtopology` as active tasks.
    pub fn active(mut self, subtopology: &str, partitions: impl IntoIterator<Item = u32>) -> Self {
        let tasks = self.tasks(subtopology, partitions);
        self.member.active_tasks.extend(&tasks);
        self
    }

    /// The member currently holds these partitions of `subtopology` as standbys.
    pub fn standby(mut self, subtopology: &str, partitions: impl IntoIterator<Item = u32>) -> Self {
        let tasks = self.tasks(subtopology, partitions);
        self.member.standby_tasks.extend(&tasks);
        self
    }

    /// The member is warming these partitions of `subtopology` up.
    pub fn warmup(mut self, subtopology: &str, partitions: impl IntoIterator<Item = u32>) -> Self {
        let tasks = self.tasks(subtopology, partitions);
        self.member.warmup_tasks.extend(&tasks);
        self
    }

    /// The member reports local state of a task at `offset` (its cumulative changelog
    /// offset), as a member with a dormant state store does.
    pub fn offset(mut self, subtopology: &str, partition: u32, offset: i64) -> Self {
        let t = task(self.topology, subtopology, partition);
        self.member.task_offsets.insert(t, offset);
        self
    }
}

impl Scenario {
    /// An empty group without subtopologies.
    pub fn new() -> Self {
        Self::default()
    }

    fn subtopology(mut self, id: &str, partitions: u32, is_stateful: bool) -> Self {
        self.topology.subtopologies.push(Subtopology {
            id: id.to_owned(),
            max_num_input_partitions: partitions,
            is_stateful,
            source_topics: Vec::new(),
        });
        self
    }

    /// Adds a stateful subtopology (its tasks may have standbys) with `partitions` tasks.
    pub fn stateful(self, id: &str, partitions: u32) -> Self {
        self.subtopology(id, partitions, true)
    }

    /// Adds a stateless subtopology with `partitions` tasks.
    pub fn stateless(self, id: &str, partitions: u32) -> Self {
        self.subtopology(id, partitions, false)
    }

    /// Sets `numStandbyReplicas`.
    pub fn standbys(mut self, replicas: u32) -> Self {
        self.configs.num_standby_replicas = replicas;
        self
    }

    /// Sets `rackAwareAssignmentTags`.
    pub fn tags<'t>(mut self, keys: impl IntoIterator<Item = &'t str>) -> Self {
        self.configs.rack_aware_assignment_tags = keys.into_iter().map(str::to_owned).collect();
        self
    }

    /// Adds member `id` of process `process`, filled in by `build` (pass `|m| m` for a member
    /// with nothing).
    pub fn member(
        mut self,
        id: &str,
        process: &str,
        build: impl FnOnce(MemberBuilder<'_>) -> MemberBuilder<'_>,
    ) -> Self {
        let builder = MemberBuilder {
            topology: &self.topology,
            member: Member {
                member_id: id.to_owned(),
                process_id: process.to_owned(),
                ..Member::default()
            },
        };
        let member = build(builder).member;
        self.members.push(member);
        self
    }

    /// Adds `count` members with nothing assigned, `per_process` to a process, named
    /// `<prefix>-<i>` on processes `<prefix>-p<i / per_process>`.
    pub fn members(mut self, prefix: &str, count: usize, per_process: usize) -> Self {
        for i in 0..count {
            self.members.push(Member {
                member_id: format!("{prefix}-{i:04}"),
                process_id: format!("{prefix}-p{:04}", i / per_process.max(1)),
                ..Member::default()
            });
        }
        self
    }

    /// The group and topology.
    pub fn build(self) -> (GroupSpec, Topology) {
        (
            GroupSpec {
                members: self.members,
                configs: self.configs,
            },
            self.topology,
        )
    }
}
