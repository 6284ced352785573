//! Checks of an assignment, each a [`Check`] naming its rule and, when it fails, saying
//! exactly what broke; a [`Report`] collects them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::counts;
use crate::{GroupAssignment, GroupSpec, TaskId, Topology};

/// How an assignor is run by the harness: natively (a [`TaskAssignor`](crate::TaskAssignor))
/// or in the sandbox (the runtime's component assignor), failures as messages.
pub type Run<'a> = dyn Fn(&GroupSpec, &Topology) -> Result<GroupAssignment, String> + 'a;

/// One rule checked against one assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The rule's stable name: `valid`, `active-balance`, `total-balance`,
    /// `minimum-movement`, `fixed-point`, `standby-placement`, `tag-diversity`.
    pub rule: &'static str,
    /// `Err` says what broke, naming members and tasks.
    pub outcome: Result<(), String>,
}

impl Check {
    fn new(rule: &'static str, outcome: Result<(), String>) -> Self {
        Self { rule, outcome }
    }

    /// Whether the rule held.
    pub fn passed(&self) -> bool {
        self.outcome.is_ok()
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Ok(()) => write!(f, "pass  {}", self.rule),
            Err(why) => write!(f, "FAIL  {}: {why}", self.rule),
        }
    }
}

/// Checks of one assignment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// In the order they ran.
    pub checks: Vec<Check>,
}

impl Report {
    /// Adds a check.
    pub fn with(mut self, check: Check) -> Self {
        self.checks.push(check);
        self
    }

    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(Check::passed)
    }

    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed())
    }

    /// The named check, if it ran.
    pub fn check(&self, rule: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.rule == rule)
    }

    /// Panics with the whole report unless every check passed; for tests.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed(), "assignment checks failed:\n{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.checks {
            writeln!(f, "{c}")?;
        }
        Ok(())
    }
}

/// `group` with each member's current active and standby tasks replaced by `assignment`'s
/// and its warm-up tasks cleared (an assignment has none): the input of the next rebalance.
/// Offsets are kept.
pub fn with_current(group: &GroupSpec, assignment: &GroupAssignment) -> GroupSpec {
    let mut next = group.clone();
    for (m, a) in next.members.iter_mut().zip(&assignment.members) {
        m.active_tasks = a.active_tasks.clone();
        m.standby_tasks = a.standby_tasks.clone();
        m.warmup_tasks = crate::TaskSet::new();
    }
    next
}

/// `valid`: every rule the runtime enforces ([`validate`](crate::validate)).
pub fn valid(group: &GroupSpec, topology: &Topology, assignment: &GroupAssignment) -> Check {
    Check::new("valid", crate::validate(group, topology, assignment))
}

/// The spread of `counts` (one per member), as an error naming the extremes when it exceeds
/// `max_spread`.
fn spread(
    group: &GroupSpec,
    counts: &[usize],
    what: &str,
    max_spread: usize,
) -> Result<(), String> {
    let (Some(lo), Some(hi)) = (
        (0..counts.len()).min_by_key(|&i| counts[i]),
        (0..counts.len()).max_by_key(|&i| counts[i]),
    ) else {
        return Ok(());
    };
    if counts[hi] - counts[lo] <= max_spread {
        return Ok(());
    }
    let id = |i: usize| group.members.get(i).map_or("?", |m| m.member_id.as_str());
    Err(format!(
        "member \"{}\" has {} {what}, member \"{}\" has {} (spread {}, allowed {max_spread})",
        id(hi),
        counts[hi],
        id(lo),
        counts[lo],
        counts[hi] - counts[lo]
    ))
}

/// `active-balance`: active task counts per member differ by at most `max_spread`.
pub fn active_balance(group: &GroupSpec, assignment: &GroupAssignment, max_spread: usize) -> Check {
    let outcome = spread(
        group,
        &counts::actives(assignment),
        "active tasks",
        max_spread,
    );
    Check::new("active-balance", outcome)
}

/// `total-balance`: active plus standby counts per member differ by at most `max_spread`.
pub fn total_balance(group: &GroupSpec, assignment: &GroupAssignment, max_spread: usize) -> Check {
    let outcome = spread(
        group,
        &counts::totals(assignment),
        "active+standby tasks",
        max_spread,
    );
    Check::new("total-balance", outcome)
}

/// The fewest active tasks that must change owner for per-member counts to end within one of
/// each other: every task not kept by its current owner, where each current owner keeps at
/// most its final count and the members holding the most keep the higher counts.
pub fn minimum_moves(group: &GroupSpec, topology: &Topology) -> usize {
    let tasks = topology.tasks().count();
    let members = group.members.len();
    if members == 0 {
        return 0;
    }
    // Each existing task counted once, for its first claimant.
    let mut claimed = BTreeSet::new();
    let mut held: Vec<usize> = group
        .members
        .iter()
        .map(|m| {
            m.active_tasks
                .iter()
                .filter(|&&t| topology.contains(t) && claimed.insert(t))
                .count()
        })
        .collect();
    held.sort_unstable_by(|a, b| b.cmp(a));
    let (base, extra) = (tasks / members, tasks % members);
    let kept: usize = held
        .iter()
        .enumerate()
        .map(|(rank, &h)| h.min(base + usize::from(rank < extra)))
        .sum();
    tasks - kept
}

/// `minimum-movement`: no more active tasks changed owner than [`minimum_moves`] requires.
pub fn minimum_movement(
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
) -> Check {
    let moved = group
        .members
        .iter()
        .zip(&assignment.members)
        .map(|(m, a)| {
            a.active_tasks
                .iter()
                .filter(|t| !m.active_tasks.contains(t))
                .count()
        })
        .sum::<usize>();
    let least = minimum_moves(group, topology);
    let outcome = if moved <= least {
        Ok(())
    } else {
        Err(format!(
            "{moved} active tasks changed owner where {least} suffice for a balanced assignment"
        ))
    };
    Check::new("minimum-movement", outcome)
}

/// `fixed-point`: assigning again with `assignment` as the current one changes nothing.
pub fn fixed_point(
    run: &Run<'_>,
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
) -> Check {
    let next = with_current(group, assignment);
    let outcome = match run(&next, topology) {
        Err(e) => Err(format!("the second assignment failed: {e}")),
        Ok(again) if again == *assignment => Ok(()),
        Ok(again) => {
            let changed = group
                .members
                .iter()
                .zip(assignment.members.iter().zip(&again.members))
                .filter(|(_, (a, b))| a != b)
                .map(|(m, _)| format!("\"{}\"", m.member_id))
                .collect::<Vec<_>>();
            Err(format!(
                "assigning again with this output as the current assignment changes {} \
                 member(s): {}",
                changed.len(),
                changed.join(", ")
            ))
        }
    };
    Check::new("fixed-point", outcome)
}

/// `standby-placement`: every stateful task has `min(numStandbyReplicas, processes − 1)`
/// standbys, each on a process that holds no other copy of the task (active or standby).
pub fn standby_placement(
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
) -> Check {
    let processes: BTreeSet<&str> = group
        .members
        .iter()
        .map(|m| m.process_id.as_str())
        .collect();
    let wanted =
        (group.configs.num_standby_replicas as usize).min(processes.len().saturating_sub(1));
    let mut copies: BTreeMap<TaskId, Vec<usize>> = BTreeMap::new();
    for (i, a) in assignment.members.iter().enumerate() {
        for &t in a.active_tasks.iter().chain(&a.standby_tasks) {
            copies.entry(t).or_default().push(i);
        }
    }
    let outcome = (|| {
        for t in topology.tasks() {
            if !topology.subtopologies[t.subtopology as usize].is_stateful {
                continue;
            }
            let holders = copies.get(&t).map_or(&[][..], Vec::as_slice);
            let standbys = holders.len().saturating_sub(1);
            if standbys != wanted {
                return Err(format!(
                    "task {} has {standbys} standby(s), expected {wanted} ({} replicas, {} \
                     processes)",
                    topology.task_name(t),
                    group.configs.num_standby_replicas,
                    processes.len()
                ));
            }
            let mut seen = BTreeSet::new();
            for &i in holders {
                let process = group.members.get(i).map_or("?", |m| m.process_id.as_str());
                if !seen.insert(process) {
                    return Err(format!(
                        "task {} has two copies on process \"{process}\"",
                        topology.task_name(t)
                    ));
                }
            }
        }
        Ok(())
    })();
    Check::new("standby-placement", outcome)
}

/// `tag-diversity`: for each stateful task and each of `rackAwareAssignmentTags`, its active
/// and standbys cover as many distinct values of the tag as they can: the smaller of its copy
/// count and the number of values the group's members offer.
pub fn tag_diversity(
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
) -> Check {
    let mut copies: BTreeMap<TaskId, Vec<usize>> = BTreeMap::new();
    for (i, a) in assignment.members.iter().enumerate() {
        for &t in a.active_tasks.iter().chain(&a.standby_tasks) {
            copies.entry(t).or_default().push(i);
        }
    }
    let outcome = (|| {
        for key in &group.configs.rack_aware_assignment_tags {
            let offered: BTreeSet<&str> = group
                .members
                .iter()
                .filter_map(|m| m.client_tags.get(key).map(String::as_str))
                .collect();
            for (t, holders) in &copies {
                if !topology.contains(*t)
                    || !topology.subtopologies[t.subtopology as usize].is_stateful
                {
                    continue;
                }
                let covered: BTreeSet<&str> = holders
                    .iter()
                    .filter_map(|&i| group.members.get(i)?.client_tags.get(key))
                    .map(String::as_str)
                    .collect();
                let best = holders.len().min(offered.len());
                if covered.len() < best {
                    return Err(format!(
                        "task {} covers {} value(s) of tag `{key}` with {} copies, where {best} \
                         are possible ({} offered)",
                        topology.task_name(*t),
                        covered.len(),
                        holders.len(),
                        offered.len()
                    ));
                }
            }
        }
        Ok(())
    })();
    Check::new("tag-diversity", outcome)
}

/// Every check: validity, active balance (spread ≤ 1), total balance (spread ≤ 1), minimum
/// movement, fixed point, standby placement and tag diversity. If the assignment is invalid
/// the others are skipped: they would only repeat the damage.
pub fn all(
    run: &Run<'_>,
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
) -> Report {
    let report = Report::default().with(valid(group, topology, assignment));
    if !report.passed() {
        return report;
    }
    report
        .with(active_balance(group, assignment, 1))
        .with(total_balance(group, assignment, 1))
        .with(minimum_movement(group, topology, assignment))
        .with(fixed_point(run, group, topology, assignment))
        .with(standby_placement(group, topology, assignment))
        .with(tag_diversity(group, topology, assignment))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Scenario;

    /// Two members on two processes in zones a and b, one stateful task, one standby.
    fn pair() -> (GroupSpec, Topology) {
        Scenario::new()
            .stateful("s", 1)
            .standbys(1)
            .tags(["zone"])
            .member("x", "p1", |m| m.tag("zone", "a"))
            .member("y", "p2", |m| m.tag("zone", "a"))
            .member("z", "p3", |m| m.tag("zone", "b"))
            .build()
    }

    /// An assignor that moves the task on every call is reported as no fixed point, naming
    /// the members that change.
    #[test]
    fn fixed_point_names_the_changed_members() {
        let (group, topology) = pair();
        let rotate = |g: &GroupSpec, t: &Topology| -> Result<GroupAssignment, String> {
            let mut a = GroupAssignment::empty_for(g);
            let holder = g.members.iter().position(|m| !m.active_tasks.is_empty());
            let next = holder.map_or(0, |h| (h + 1) % g.members.len());
            a.members[next].active_tasks = t.tasks().collect();
            Ok(a)
        };
        let a = rotate(&group, &topology).expect("ok");
        let c = fixed_point(&rotate, &group, &topology, &a);
        assert_eq!(
            c.outcome,
            Err(
                "assigning again with this output as the current assignment changes 2 \
                 member(s): \"x\", \"y\""
                    .into()
            )
        );
    }

    /// Copies of a task left in one zone when another zone is offered break tag diversity;
    /// two copies on one process break standby placement.
    #[test]
    fn placement_and_diversity_name_the_task() {
        let (group, topology) = pair();
        let t = TaskId::new(0, 0);
        let mut a = GroupAssignment::empty_for(&group);
        a.members[0].active_tasks.insert(t);
        a.members[1].standby_tasks.insert(t);
        assert_eq!(
            tag_diversity(&group, &topology, &a).outcome,
            Err(
                "task s_0 covers 1 value(s) of tag `zone` with 2 copies, where 2 are possible \
                 (2 offered)"
                    .into()
            )
        );
        assert!(standby_placement(&group, &topology, &a).passed());
        a.members[1].standby_tasks.clear();
        a.members[2].standby_tasks.insert(t);
        assert!(tag_diversity(&group, &topology, &a).passed());
        let mut same_process = group.clone();
        same_process.members[2].process_id = "p1".into();
        assert_eq!(
            standby_placement(&same_process, &topology, &a).outcome,
            Err("task s_0 has two copies on process \"p1\"".into())
        );
    }

    /// The minimum counts only what balance forces to move: a member holding three of four
    /// tasks with a newcomer gives up one.
    #[test]
    fn minimum_moves_counts_the_forced_moves() {
        let (group, topology) = Scenario::new()
            .stateless("s", 4)
            .member("a", "p1", |m| m.active("s", [0, 1, 2]))
            .member("b", "p2", |m| m.active("s", [3]))
            .member("c", "p3", |m| m)
            .build();
        assert_eq!(minimum_moves(&group, &topology), 1);
        let mut a = GroupAssignment::empty_for(&group);
        a.members[0].active_tasks = [TaskId::new(0, 1), TaskId::new(0, 2)].into();
        a.members[1].active_tasks = [TaskId::new(0, 3)].into();
        a.members[2].active_tasks = [TaskId::new(0, 0)].into();
        assert!(minimum_movement(&group, &topology, &a).passed());
        a.members[1].active_tasks = [TaskId::new(0, 0)].into();
        a.members[2].active_tasks = [TaskId::new(0, 3)].into();
        assert_eq!(
            minimum_movement(&group, &topology, &a).outcome,
            Err("2 active tasks changed owner where 1 suffice for a balanced assignment".into())
        );
    }
}
