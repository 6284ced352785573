//! Checks of an assignment, each a [`Check`] naming its rule and, when it fails, saying
//! exactly what broke; a [`Report`] collects them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// `minimum-movement`, `fixed-point`, `standby-placement`, `tag-diversity`,
    /// `caught-up-placement`.
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

/// Kafka Streams' default `acceptable.recovery.lag`: the lag up to which a process counts as
/// caught up on a task in [`caught_up_placement`].
pub const ACCEPTABLE_RECOVERY_LAG: i64 = 10_000;

/// Member `member`'s lag on `task`: the task's end (the highest end offset or offset any
/// member reports for it) less the member's reported offset. A current standby reporting no
/// offset is at the end (lag 0), a warm-up reporting none at offset 0; `None`: the member
/// holds no state of the task.
pub fn lag(group: &GroupSpec, member: usize, task: TaskId) -> Option<i64> {
    let end = group
        .members
        .iter()
        .flat_map(|m| [m.task_end_offsets.get(&task), m.task_offsets.get(&task)])
        .flatten()
        .copied()
        .max()
        .unwrap_or(0);
    lag_to(group.members.get(member)?, task, end)
}

fn lag_to(member: &crate::Member, task: TaskId, end: i64) -> Option<i64> {
    match member.task_offsets.get(&task) {
        Some(&offset) => Some(end.saturating_sub(offset).max(0)),
        None if member.standby_tasks.contains(&task) => Some(0),
        None if member.warmup_tasks.contains(&task) => Some(end.max(0)),
        None => None,
    }
}

/// Which processes are caught up on which tasks: a process is caught up on a task when any
/// of its members (they share one state directory) is within `acceptable_lag` of its end.
struct CaughtUp {
    /// Each member's process, as an index.
    process: Vec<usize>,
    /// Each process's members.
    members: Vec<Vec<usize>>,
    /// Per task, the processes caught up on it.
    processes: HashMap<TaskId, BTreeSet<usize>>,
}

impl CaughtUp {
    fn new(group: &GroupSpec, acceptable_lag: i64) -> Self {
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut process = Vec::with_capacity(group.members.len());
        for (i, m) in group.members.iter().enumerate() {
            let next = ids.len();
            let p = *ids.entry(m.process_id.as_str()).or_insert(next);
            if p == members.len() {
                members.push(Vec::new());
            }
            members[p].push(i);
            process.push(p);
        }
        let mut end: HashMap<TaskId, i64> = HashMap::new();
        for m in &group.members {
            for (&t, &o) in m.task_end_offsets.iter().chain(&m.task_offsets) {
                let e = end.entry(t).or_insert(o);
                *e = (*e).max(o);
            }
        }
        let mut processes: HashMap<TaskId, BTreeSet<usize>> = HashMap::new();
        for (i, m) in group.members.iter().enumerate() {
            let held = m
                .task_offsets
                .keys()
                .chain(&m.standby_tasks)
                .chain(&m.warmup_tasks);
            for &t in held {
                let task_end = end.get(&t).copied().unwrap_or(0);
                if lag_to(m, t, task_end).is_some_and(|l| l <= acceptable_lag) {
                    processes.entry(t).or_default().insert(process[i]);
                }
            }
        }
        Self {
            process,
            members,
            processes,
        }
    }

    fn of(&self, member: usize, task: TaskId) -> bool {
        self.processes
            .get(&task)
            .is_some_and(|p| p.contains(&self.process[member]))
    }

    /// The members of the processes caught up on `task`.
    fn holders(&self, task: TaskId) -> impl Iterator<Item = usize> + '_ {
        self.processes
            .get(&task)
            .into_iter()
            .flatten()
            .flat_map(|&p| self.members[p].iter().copied())
    }
}

/// `caught-up-placement`: stateful actives follow their state where that costs no balance.
/// No two stateful actives of one subtopology that changed owner could trade owners (which
/// changes no member's counts) and put more of them on caught-up processes — a process being
/// caught up on a task when one of its members is within `acceptable_lag` of the task's end
/// (see [`lag`]; [`ACCEPTABLE_RECOVERY_LAG`] is Kafka's default). Actives kept by their
/// current owner are left out: stickiness ranks above lag. An orphaned active given to a
/// process with no state while a process holding its standby took another moved active of
/// the subtopology that it is not caught up on breaks the rule too.
///
/// Assignors that ignore offsets (as Kafka's own `balanced` does) fail it on groups that
/// report them; `assignor check` reports it without deciding the verdict.
pub fn caught_up_placement(
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
    acceptable_lag: i64,
) -> Check {
    let caught_up = CaughtUp::new(group, acceptable_lag);
    let stateful = |t: TaskId| topology.subtopology(t).is_some_and(|s| s.is_stateful);
    // Per member, per subtopology: the stateful actives it took over.
    let moved: Vec<BTreeMap<u32, Vec<TaskId>>> = group
        .members
        .iter()
        .zip(&assignment.members)
        .map(|(m, out)| {
            let mut by_subtopology: BTreeMap<u32, Vec<TaskId>> = BTreeMap::new();
            for &t in &out.active_tasks {
                if stateful(t) && !m.active_tasks.contains(&t) {
                    by_subtopology.entry(t.subtopology).or_default().push(t);
                }
            }
            by_subtopology
        })
        .collect();
    let outcome = (|| {
        for (o, tasks) in moved.iter().enumerate() {
            for &t in tasks.values().flatten().filter(|&&t| !caught_up.of(o, t)) {
                for c in caught_up.holders(t) {
                    let partners = moved[c].get(&t.subtopology).map_or(&[][..], Vec::as_slice);
                    let better = partners
                        .iter()
                        .find(|&&u| caught_up.of(o, u) || !caught_up.of(c, u));
                    if let Some(&u) = better {
                        return Err(format!(
                            "{} on \"{}\" and {} on \"{}\" would be better exchanged: more \
                             of them would be on processes caught up on them",
                            topology.task_name(t),
                            group.members[o].member_id,
                            topology.task_name(u),
                            group.members[c].member_id,
                        ));
                    }
                }
            }
        }
        Ok(())
    })();
    Check::new("caught-up-placement", outcome)
}

/// Every check: validity, active balance (spread ≤ 1), total balance (spread ≤ 1), minimum
/// movement, fixed point, standby placement, tag diversity and caught-up placement (within
/// [`ACCEPTABLE_RECOVERY_LAG`]). If the assignment is invalid
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
        .with(caught_up_placement(
            group,
            topology,
            assignment,
            ACCEPTABLE_RECOVERY_LAG,
        ))
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
    /// Two moved actives whose exchange would put both on processes caught up on them are
    /// named; after the exchange, or with a lag bound that counts neither member caught up,
    /// the rule holds.
    #[test]
    fn caught_up_placement_names_a_better_exchange() {
        let (group, topology) = Scenario::new()
            .stateful("s", 2)
            .member("a", "p1", |m| m.offset("s", 1, 1_000))
            .member("b", "p2", |m| m.offset("s", 0, 1_000))
            .build();
        let (t0, t1) = (TaskId::new(0, 0), TaskId::new(0, 1));
        let mut a = GroupAssignment::empty_for(&group);
        a.members[0].active_tasks.insert(t0);
        a.members[1].active_tasks.insert(t1);
        assert_eq!(
            caught_up_placement(&group, &topology, &a, ACCEPTABLE_RECOVERY_LAG).outcome,
            Err(
                "s_0 on \"a\" and s_1 on \"b\" would be better exchanged: more of them would \
                 be on processes caught up on them"
                    .into()
            )
        );
        assert!(caught_up_placement(&group, &topology, &a, -1).passed());
        a.members[0].active_tasks = [t1].into();
        a.members[1].active_tasks = [t0].into();
        assert!(caught_up_placement(&group, &topology, &a, ACCEPTABLE_RECOVERY_LAG).passed());
    }

    /// A member caught up only beyond the bound is not caught up: an end offset far ahead
    /// of the reported offset leaves the exchange worthless.
    #[test]
    fn caught_up_placement_uses_the_lag_bound() {
        let (mut group, topology) = Scenario::new()
            .stateful("s", 2)
            .member("a", "p1", |m| m.offset("s", 1, 100))
            .member("b", "p2", |m| m)
            .build();
        let t1 = TaskId::new(0, 1);
        group.members[1]
            .task_end_offsets
            .insert(t1, 100 + ACCEPTABLE_RECOVERY_LAG);
        let mut a = GroupAssignment::empty_for(&group);
        a.members[0].active_tasks.insert(TaskId::new(0, 0));
        a.members[1].active_tasks.insert(t1);
        assert_eq!(lag(&group, 0, t1), Some(ACCEPTABLE_RECOVERY_LAG));
        assert!(!caught_up_placement(&group, &topology, &a, ACCEPTABLE_RECOVERY_LAG).passed());
        group.members[1]
            .task_end_offsets
            .insert(t1, 101 + ACCEPTABLE_RECOVERY_LAG);
        assert!(caught_up_placement(&group, &topology, &a, ACCEPTABLE_RECOVERY_LAG).passed());
    }

    /// An orphaned active given to a process with no state, while the process holding its
    /// standby took another moved active it holds no state of, breaks the rule; a kept
    /// active is never an exchange partner (stickiness first), and another member of a
    /// caught-up process counts as caught up (one state directory).
    #[test]
    fn caught_up_placement_promotes_standbys() {
        let (group, topology) = Scenario::new()
            .stateful("s", 3)
            .member("a", "p1", |m| m.active("s", [2]).offset("s", 0, 0))
            .member("b", "p2", |m| m.standby("s", [0]))
            .member("b2", "p2", |m| m)
            .member("c", "p3", |m| m)
            .build();
        let (t0, t1, t2) = (TaskId::new(0, 0), TaskId::new(0, 1), TaskId::new(0, 2));
        let mut a = GroupAssignment::empty_for(&group);
        a.members[0].active_tasks.insert(t2);
        a.members[2].active_tasks.insert(t1);
        a.members[3].active_tasks.insert(t0);
        assert_eq!(
            caught_up_placement(&group, &topology, &a, 0).outcome,
            Err(
                "s_0 on \"c\" and s_1 on \"b2\" would be better exchanged: more of them would \
                 be on processes caught up on them"
                    .into()
            )
        );
        a.members[2].active_tasks = [t0].into();
        a.members[3].active_tasks = [t1].into();
        assert!(caught_up_placement(&group, &topology, &a, 0).passed());
    }
}
