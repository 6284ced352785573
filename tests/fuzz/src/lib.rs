//! What the fuzz targets share: groups, topologies and assignments built from the fuzzer's
//! bytes, and a scratch directory for the targets that parse files.
//!
//! The model is small by construction (a few members, subtopologies and partitions), so the
//! fuzzer spends its time in the logic under test rather than in allocating large groups;
//! the runtime's own limits are fuzzed through the parsers that enforce them. Assignments
//! start from a valid one and are then perturbed, because arbitrary bytes almost never make a
//! valid assignment and the rules after the first failing one would go unexplored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use assignor_coordinator::Registry;
use assignor_coordinator::config::{ASSIGNORS, BrokerConfig};
use assignor_sandbox::{Limits, Runtime};
use assignor_sdk::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, MemberAssignment, Subtopology, TaskId,
    TaskSet, Topology,
};

/// Most subtopologies in a generated topology.
pub const MAX_SUBTOPOLOGIES: u32 = 4;
/// Most partitions of a generated subtopology.
pub const MAX_PARTITIONS: u32 = 8;
/// Most members in a generated group.
pub const MAX_MEMBERS: u32 = 5;
/// Most changes applied to a valid assignment.
pub const MAX_PERTURBATIONS: u32 = 3;

/// A topology of up to [`MAX_SUBTOPOLOGIES`] subtopologies with unique ids (as the runtime's
/// parsers guarantee), each of up to [`MAX_PARTITIONS`] partitions.
pub fn topology(u: &mut Unstructured<'_>) -> Result<Topology> {
    let count = u.int_in_range(0..=MAX_SUBTOPOLOGIES)?;
    let subtopologies = (0..count)
        .map(|i| {
            Ok(Subtopology {
                id: format!("s{i}"),
                max_num_input_partitions: u.int_in_range(0..=MAX_PARTITIONS)?,
                is_stateful: u.arbitrary()?,
                source_topics: Vec::new(),
            })
        })
        .collect::<Result<_>>()?;
    Ok(Topology {
        subtopologies,
        racks: Vec::new(),
    })
}

/// A group of up to [`MAX_MEMBERS`] members with unique ids on at most three processes (so
/// that members share processes), reporting no tasks.
pub fn group(u: &mut Unstructured<'_>) -> Result<GroupSpec> {
    let count = u.int_in_range(0..=MAX_MEMBERS)?;
    let members = (0..count)
        .map(|i| {
            Ok(Member {
                member_id: format!("m{i}"),
                process_id: format!("p{}", u.int_in_range(0..=2u8)?),
                ..Member::default()
            })
        })
        .collect::<Result<_>>()?;
    Ok(GroupSpec {
        members,
        configs: AssignmentConfigs {
            num_standby_replicas: u.int_in_range(0..=2)?,
            rack_aware_assignment_tags: Vec::new(),
        },
    })
}

/// A valid assignment's shape: per member, its active and standby tasks, every task active on
/// one member, standbys only of stateful subtopologies and on another process than the
/// task's active. Nothing when the group has no members.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Per member, (active tasks, standby tasks), each sorted.
    pub members: Vec<(Vec<TaskId>, Vec<TaskId>)>,
}

impl Placement {
    /// A valid placement of every task of `topology` on `group`'s members.
    pub fn valid(u: &mut Unstructured<'_>, group: &GroupSpec, topology: &Topology) -> Result<Self> {
        let members = &group.members;
        let mut placement = Self {
            members: vec![(Vec::new(), Vec::new()); members.len()],
        };
        if members.is_empty() {
            return Ok(placement);
        }
        for task in topology.tasks() {
            let owner = u.choose_index(members.len())?;
            placement.members[owner].0.push(task);
            let stateful = topology.subtopology(task).is_some_and(|s| s.is_stateful);
            if stateful && u.ratio(1, 3)? {
                let standby = u.choose_index(members.len())?;
                if members[standby].process_id != members[owner].process_id {
                    placement.members[standby].1.push(task);
                }
            }
        }
        Ok(placement)
    }

    /// Up to [`MAX_PERTURBATIONS`] changes, each of which may break a rule: a task (possibly
    /// unknown or out of range) added to a member's actives or standbys, or a task removed.
    pub fn perturb(&mut self, u: &mut Unstructured<'_>, topology: &Topology) -> Result<()> {
        for _ in 0..u.int_in_range(0..=MAX_PERTURBATIONS)? {
            if self.members.is_empty() {
                break;
            }
            let member = u.choose_index(self.members.len())?;
            let standby = u.arbitrary::<bool>()?;
            let tasks = if standby {
                &mut self.members[member].1
            } else {
                &mut self.members[member].0
            };
            if u.arbitrary()? {
                tasks.push(task(u, topology)?);
            } else if !tasks.is_empty() {
                let at = u.choose_index(tasks.len())?;
                tasks.remove(at);
            }
        }
        Ok(())
    }

    /// As a [`GroupAssignment`] (duplicates within one member's list collapse).
    pub fn assignment(&self) -> GroupAssignment {
        GroupAssignment {
            members: self
                .members
                .iter()
                .map(|(active, standby)| MemberAssignment {
                    active_tasks: active.iter().copied().collect::<TaskSet>(),
                    standby_tasks: standby.iter().copied().collect::<TaskSet>(),
                })
                .collect(),
        }
    }
}

/// A task that usually exists in `topology`, and otherwise names a subtopology one past its
/// last or a partition at or just past its subtopology's count.
pub fn task(u: &mut Unstructured<'_>, topology: &Topology) -> Result<TaskId> {
    let count = u32::try_from(topology.subtopologies.len()).expect("a handful");
    let subtopology = u.int_in_range(0..=count)?;
    let partitions = topology
        .subtopologies
        .get(subtopology as usize)
        .map_or(MAX_PARTITIONS, |s| s.max_num_input_partitions);
    Ok(TaskId::new(subtopology, u.int_in_range(0..=partitions)?))
}

/// Panics unless `assignment` obeys the rules `validate` stands for (called on what it
/// accepted): one entry per member, every task known, every task active on exactly one member
/// (when there are members), standbys only for stateful subtopologies and never on the
/// process of the member holding the same task as active.
pub fn check_rules(group: &GroupSpec, topology: &Topology, assignment: &GroupAssignment) {
    assert_eq!(assignment.members.len(), group.members.len(), "entry count");
    let mut active = BTreeMap::new();
    for (m, a) in group.members.iter().zip(&assignment.members) {
        for &t in &a.active_tasks {
            assert!(topology.contains(t), "unknown active task {t} accepted");
            assert!(
                active.insert(t, &m.process_id).is_none(),
                "task {t} accepted active twice"
            );
        }
    }
    for (m, a) in group.members.iter().zip(&assignment.members) {
        for &t in &a.standby_tasks {
            assert!(topology.contains(t), "unknown standby task {t} accepted");
            let sub = topology.subtopology(t).expect("checked above");
            assert!(sub.is_stateful, "standby of stateless task {t} accepted");
            assert_ne!(
                active.get(&t),
                Some(&&m.process_id),
                "standby of {t} accepted on its active's process"
            );
        }
    }
    if !group.members.is_empty() {
        assert!(
            topology.tasks().all(|t| active.contains_key(&t)),
            "a task with no active member accepted"
        );
    }
}

/// The broker config of the coordinator targets: every built-in assignor registered, so that
/// a group's `streams.assignor.name` can select each.
pub fn broker_config() -> BrokerConfig {
    let assignors = [(
        ASSIGNORS.to_owned(),
        "sticky,balanced,rack-aware".to_owned(),
    )];
    BrokerConfig::from_properties(assignors.into()).expect("the built-ins are valid")
}

/// The registry of [`broker_config`], built once per process (its engine is not cheap).
pub fn registry() -> Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY
        .get_or_init(|| {
            let runtime = Runtime::new(Limits::default()).expect("the default engine builds");
            Registry::build(&runtime, &broker_config()).expect("the built-ins register")
        })
        .clone()
}

/// A directory private to this process, for targets that write the file they parse; under
/// `TMPDIR`, which `tests/fuzz/run` points at tmpfs (the stores `fsync`, which on a disk would
/// cost more than the parsing being fuzzed) and removes afterwards.
pub fn scratch_dir(name: &str) -> PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    let root = ROOT.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("assignor-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&root).expect("the scratch directory can be created");
        root
    });
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("the scratch directory can be created");
    dir
}

/// Removes every entry of `dir` but its `LOCK` file (a store recreates its other files).
pub fn clear_dir(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("the scratch directory is readable") {
        let path = entry.expect("the scratch directory is readable").path();
        if path.file_name().is_some_and(|n| n != "LOCK") {
            std::fs::remove_file(&path).expect("a scratch file can be removed");
        }
    }
}
