//! Standby tasks: per-member targets, keep what is still valid, fill the rest.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::group::{Candidates, Group, NONE};
use crate::queue::{Loads, Steps};

/// The standbys of every task: `slots[t * per_task ..][.. per_task]`, [`NONE`] where a slot
/// stays empty (stateless tasks).
pub(crate) struct Standbys {
    /// Standbys per stateful task: `numStandbyReplicas`, or one less than the number of
    /// processes if that is smaller.
    pub per_task: usize,
    /// Flat per-task slots of member ranks.
    pub slots: Vec<u32>,
}

/// How many times the standby pass may run on its own output before its result is taken.
/// A balanced result is settled after one run; only placements the processes force out of
/// balance need more: two rounds without rack-aware tags in every property-test case so far,
/// at most five with them (with a tag load slack, where a round must reproduce its input,
/// mostly two or three).
const ROUNDS: usize = 8;

/// What the standby pass starts from: who held each task before.
struct Previous<'a> {
    /// Dense task → previous active owner ([`NONE`] or the current owner: no extra candidate).
    owner: &'a [u32],
    candidates: &'a Candidates,
    /// Members, by rank: their current standby count.
    standbys: &'a [u32],
}

/// Places `replicas` standbys for every stateful task, given the active `owner`s; with
/// rack-aware tags and a `slack`, every member's standby count ends within `slack` of its
/// target.
///
/// The pass runs again with its own output as the current standbys until that output keeps
/// all of itself (with tags and a slack: until a run reproduces its input), at most
/// [`ROUNDS`] times: then assigning again with the output as the current assignment
/// reproduces it, which is the fixed point.
pub(crate) fn assign(g: &Group, owner: &[u32], replicas: u32, slack: Option<u32>) -> Standbys {
    let per_task = (replicas as usize).min(g.process_count.saturating_sub(1));
    if per_task == 0 {
        return Standbys {
            per_task,
            slots: Vec::new(),
        };
    }
    // Per member its actives, per process its stateful actives, and the stateful tasks: one
    // walk over the owners, a subtopology at a time (the stateful tasks extended a range at a
    // time: collecting a flattened iterator pays a check per task), counting each task once
    // for its owner by kind; the processes' counts are then summed per member, not per task.
    let mut stateful: Vec<u32> = Vec::with_capacity(g.tasks());
    let mut active = vec![0u32; g.members()];
    let mut stateful_active = vec![0u32; g.members()];
    for s in 0..g.subtopology_start.len() {
        let tasks = g.subtopology_tasks(s);
        let owners = &owner[tasks.start as usize..tasks.end as usize];
        let counts = if g.subtopology_stateful[s] {
            stateful.extend(tasks);
            &mut stateful_active
        } else {
            &mut active
        };
        for &o in owners {
            counts[o as usize] += 1;
        }
    }
    let mut stateful_on = vec![0u32; g.process_count];
    for ((a, &n), &p) in active.iter_mut().zip(&stateful_active).zip(&g.process) {
        *a += n;
        stateful_on[p as usize] += n;
    }
    let total = stateful.len() * per_task;
    // Per process: the most standbys it can hold, one of every stateful task not active there.
    let cap: Vec<u32> = stateful_on
        .iter()
        .map(|&a| stateful.len() as u32 - a)
        .collect();
    let mut previous = Previous {
        owner: &g.prev_owner,
        candidates: &g.candidates,
        standbys: &g.prev_standbys,
    };
    let (mut candidates, mut counts);
    // With tags and a slack, what a round keeps of its input can still be moved by the bound
    // and by `improve` (the targets follow the counts), so only a round that reproduces its
    // input is settled.
    let bounded = slack.is_some() && !g.tag_values.is_empty();
    let mut last = Vec::new();
    for round in 1.. {
        let target = targets(g, &active, &cap, total, previous.standbys);
        let Kept {
            mut slots,
            standbys,
            cold,
            open,
            blocked,
        } = keep(g, owner, per_task, &stateful, &previous, &target, slack);
        // A cold start leaves every stateful task open, blocked where it is active: the
        // lists the pass already has, not copies.
        let (open, blocked) = if cold {
            (&stateful[..], &stateful_on[..])
        } else {
            (&open[..], &blocked[..])
        };
        let mut filled = fill(
            g, owner, per_task, open, blocked, &active, &target, &mut slots, &standbys, slack,
        );
        if g.tag_values.is_empty() && !same(&filled, &target) {
            repair(
                g,
                owner,
                per_task,
                &mut slots,
                &mut filled,
                &target,
                |_, _, _| true,
            );
        } else if let Some(slack) = slack.filter(|_| !g.tag_values.is_empty()) {
            bound_load(g, owner, per_task, &mut slots, &mut filled, &target, slack);
        }
        if !same(&filled, &target) {
            level_within_processes(g, &active, &mut slots, &mut filled);
        }
        // Every member exactly at its target, without tags: a keep pass on this output would
        // compute the same targets (the members at the higher level are the ones with the
        // extra) and keep every slot (each holder is below target until its last task, on a
        // process of its own, and ahead of members only reporting offsets), so it is settled.
        if g.tag_values.is_empty() && same(&filled, &target) || bounded && same(&slots, &last) {
            return Standbys { per_task, slots };
        }
        (candidates, counts) = as_current(g, per_task, &slots);
        previous = Previous {
            owner,
            candidates: &candidates,
            standbys: &counts,
        };
        if round == ROUNDS {
            return Standbys { per_task, slots };
        }
        if bounded {
            last = slots;
            continue;
        }
        let target = targets(g, &active, &cap, total, previous.standbys);
        let kept = keep(g, owner, per_task, &stateful, &previous, &target, slack).slots;
        // Slots of one task name distinct members, so equal sets are equal counts plus
        // containment.
        let settled = slots
            .chunks(per_task)
            .zip(kept.chunks(per_task))
            .all(|(a, b)| {
                let filled = |s: &[u32]| s.iter().filter(|&&x| x != NONE).count();
                filled(a) == filled(b) && a.iter().all(|x| *x == NONE || b.contains(x))
            });
        if settled {
            return Standbys { per_task, slots };
        }
    }
    unreachable!("the loop returns by round {ROUNDS}")
}

/// `slots` seen as the current standbys of a new input: candidates per task (each slot with
/// the offset its member reports, then members only reporting offsets) and counts per member.
fn as_current(g: &Group, per_task: usize, slots: &[u32]) -> (Candidates, Vec<u32>) {
    let mut counts = vec![0u32; g.members()];
    let mut entries = Vec::with_capacity(slots.len() + g.offsets.len());
    for (t, slot) in (0u32..).zip(slots.chunks(per_task)) {
        for &s in slot.iter().filter(|&&s| s != NONE) {
            counts[s as usize] += 1;
            // Lags only rank the actives' warm state; these candidates place standbys.
            entries.push((t, false, Reverse(g.offset(t, s)), s, 0));
        }
    }
    for &(t, r, off) in &g.offsets {
        if !slots[t as usize * per_task..][..per_task].contains(&r) {
            entries.push((t, true, Reverse(off), r, 0));
        }
    }
    (Candidates::new(entries, g.tasks()), counts)
}

/// What [`keep`] kept.
struct Kept {
    /// Per task, its kept standbys first, then [`NONE`].
    slots: Vec<u32>,
    /// Members, by rank: the standbys they kept.
    standbys: Vec<u32>,
    /// A cold start: nothing kept, every stateful task open, each blocked only where it is
    /// active (`open` and `blocked` are left empty).
    cold: bool,
    /// The stateful tasks with an empty slot left, in order: all the fill has to visit.
    open: Vec<u32>,
    /// Per process: the open tasks it cannot take (it runs the active or kept a copy).
    blocked: Vec<u32>,
}

/// Keeps what the previous holders can keep: per task, the previous active owner (its state
/// is there), then current standbys and warm-ups, then members reporting offsets — each while
/// below its target, on a process not yet holding the task, and (rack-aware) adding tag values
/// unless every tag already shows every value. With rack-aware tags and a `slack`, each while
/// below its target plus the slack, in candidate order whatever its tag values: diversity is
/// then [`improve`]'s, which leaves nothing to improve, so an output keeps all of itself.
#[allow(clippy::too_many_arguments)]
fn keep(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    stateful: &[u32],
    previous: &Previous<'_>,
    target: &[u32],
    slack: Option<u32>,
) -> Kept {
    let mut kept = Kept {
        slots: vec![NONE; g.tasks() * per_task],
        standbys: Vec::new(),
        cold: false,
        open: Vec::new(),
        blocked: Vec::new(),
    };
    // A cold start: nothing to keep.
    if previous.candidates.is_empty() && unowned(previous.owner) {
        kept.standbys = vec![0; g.members()];
        kept.cold = true;
        return kept;
    }
    kept.blocked = vec![0; g.process_count];
    let tagged = !g.tag_values.is_empty();
    if !tagged || slack.is_some() {
        let limit = slack.filter(|_| tagged).unwrap_or(0);
        keep_within(g, owner, per_task, previous, target, limit, &mut kept);
    } else {
        keep_diverse(g, owner, per_task, stateful, previous, target, &mut kept);
    }
    kept
}

/// Whether every task of `owner` is [`NONE`]: and-ed together eight at a time ([`NONE`] has
/// every bit set, and a fixed eight unroll), where a test and branch per task was all of a
/// cold start's keep (in wasm 0.39 M instructions of the JIT's code, now 0.09 M). Not
/// inlined: inside [`keep`] it changed the code of the keep loop, which then cost more.
#[inline(never)]
fn unowned(owner: &[u32]) -> bool {
    let all = |owners: &[u32]| owners.iter().fold(NONE, |all, &o| all & o) == NONE;
    let mut chunks = owner.chunks_exact(8);
    chunks.all(all) && all(chunks.remainder())
}

/// [`keep`] without tags, or with tags and a slack `limit`: every candidate in order while
/// below its target plus `limit`, on a process not holding the task yet.
fn keep_within(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    previous: &Previous<'_>,
    target: &[u32],
    limit: u32,
    kept: &mut Kept,
) {
    // Each member's room below its bound, worked out once rather than per candidate.
    let mut left: Vec<u32> = target.iter().map(|&t| t.saturating_add(limit)).collect();
    // One replica, the usual case, walks its own copy of the loop with the count a constant:
    // no slot offsets multiplied and no kept copies to compare with.
    if per_task == 1 {
        keep_tasks(g, owner, 1, previous, &mut left, kept);
    } else {
        keep_tasks(g, owner, per_task, previous, &mut left, kept);
    }
    kept.standbys = target
        .iter()
        .zip(&left)
        .map(|(&t, &l)| t.saturating_add(limit) - l)
        .collect();
}

/// [`keep_within`]'s walk over the stateful tasks, taking from each member's room `left`.
#[inline(always)]
fn keep_tasks(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    previous: &Previous<'_>,
    left: &mut [u32],
    kept: &mut Kept,
) {
    let candidates = previous.candidates.lists();
    // A stateful subtopology at a time, its tasks' slots, owners and previous owners walked
    // side by side (stateful tasks are these ranges in order).
    for s in (0..g.subtopology_start.len()).filter(|&s| g.subtopology_stateful[s]) {
        let tasks = g.subtopology_tasks(s);
        let (a, b) = (tasks.start as usize, tasks.end as usize);
        let slots = kept.slots[a * per_task..b * per_task].chunks_exact_mut(per_task);
        let owners = owner[a..b].iter().zip(&previous.owner[a..b]);
        for ((t, slot), (&o, &prev)) in tasks.zip(slots).zip(owners) {
            let active_process = g.process[o as usize];
            let mut n = 0;
            // Candidates in order, in one pass: one passed over stays ineligible (its room and
            // the task's holders only shrink and grow). The task's holders are its active's
            // process and its kept copies' (fewer than `per_task`): compared directly, which
            // with one replica is a single comparison, no per-process marks to write.
            let mut consider = |c: u32| {
                let p = g.process[c as usize];
                let room = &mut left[c as usize];
                if *room > 0
                    && p != active_process
                    && slot[..n].iter().all(|&s| g.process[s as usize] != p)
                {
                    *room -= 1;
                    slot[n] = c;
                    n += 1;
                }
                n == per_task
            };
            let full = (prev != NONE && prev != o && consider(prev))
                || candidates.of(t).iter().any(|&c| consider(c));
            if !full {
                kept.open.push(t);
                kept.blocked[active_process as usize] += 1;
                for &c in &slot[..n] {
                    kept.blocked[g.process[c as usize] as usize] += 1;
                }
            }
        }
    }
}

/// [`keep`] with tags and no slack: per task, the candidate adding the most new tag values
/// first (then candidate order), while below its target, on a process not holding the task,
/// and adding a value unless every tag already shows every value.
fn keep_diverse(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    stateful: &[u32],
    previous: &Previous<'_>,
    target: &[u32],
    kept: &mut Kept,
) {
    let mut coverage = Coverage::new(g);
    let mut standbys = vec![0u32; g.members()];
    let mut candidates: Vec<u32> = Vec::new();
    for &t in stateful {
        let slot = &mut kept.slots[t as usize * per_task..][..per_task];
        let active_process = g.process[owner[t as usize] as usize];
        let prev = previous.owner[t as usize];
        let prev = (prev != NONE && prev != owner[t as usize]).then_some(prev);
        candidates.clear();
        candidates.extend(prev);
        candidates.extend_from_slice(previous.candidates.of(t));
        let mut n = 0;
        if !candidates.is_empty() {
            coverage.reset(active_process);
        }
        while n < per_task && !candidates.is_empty() {
            let holds = |p: u32| {
                p == active_process || slot[..n].iter().any(|&s| g.process[s as usize] == p)
            };
            let open = candidates.iter().copied().filter(|&c| {
                c != NONE
                    && standbys[c as usize] < target[c as usize]
                    && !holds(g.process[c as usize])
            });
            // Most new tag values first, then candidate order.
            let best = open.min_by_key(|&c| Reverse(coverage.gain(g.process[c as usize])));
            let pick =
                best.filter(|&c| coverage.saturated() || coverage.gain(g.process[c as usize]) > 0);
            let Some(c) = pick else { break };
            slot[n] = c;
            n += 1;
            standbys[c as usize] += 1;
            coverage.add(g.process[c as usize]);
            if let Some(used) = candidates.iter_mut().find(|x| **x == c) {
                *used = NONE;
            }
        }
        if n < per_task {
            kept.open.push(t);
            kept.blocked[active_process as usize] += 1;
            for &c in &slot[..n] {
                kept.blocked[g.process[c as usize] as usize] += 1;
            }
        }
    }
    kept.standbys = standbys;
}

/// Fills the empty slots of the `open` tasks, task by task: among the processes not holding
/// the task (rack-aware: in the tag classes adding the most new values), the tightest one with
/// room (see `queue`: without keeps this meets every target the processes' caps allow), and
/// there its least loaded member below target; a process never holds a task twice. `blocked`:
/// per process, the open tasks it cannot take. Returns each member's standby count.
#[allow(clippy::too_many_arguments)]
fn fill(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    open: &[u32],
    blocked: &[u32],
    active: &[u32],
    target: &[u32],
    slots: &mut [u32],
    standbys: &[u32],
    slack: Option<u32>,
) -> Vec<u32> {
    let tagged = !g.tag_values.is_empty();
    let (class_of, class_tags) = classes(g);
    // The queue marks each process with the last task it was passed or taken for, so that
    // whether a process holds the task being filled is one look-up whatever the number of
    // replicas.
    let mut loads = Loads::new(active, standbys, target, &g.process, &class_of, blocked);
    if !tagged {
        let mut steps = loads.steps();
        if per_task == 1 {
            // One replica, the usual case: an open task has no kept copy, so its one slot is
            // filled from the best process not running it, with no loop over slots, no slot
            // offsets multiplied and no marks left or read (the process running the task is
            // the only one to skip).
            for &t in open {
                let a = g.process[owner[t as usize] as usize];
                steps.block(a);
                if let Some(p) = steps.best_of_all_but(a) {
                    slots[t as usize] = steps.take_last(p);
                }
            }
        } else {
            fill_untagged(g, owner, per_task, open, slots, &mut steps);
        }
        return loads.into_standbys();
    }
    let mut coverage = Coverage::new(g);
    let all_classes: Vec<usize> = (0..loads.classes()).collect();
    let mut best_classes: Vec<usize> = Vec::new();
    let mut gains: Vec<usize> = Vec::new();
    for &t in open {
        let base = t as usize * per_task;
        let mut n = slots[base..base + per_task]
            .iter()
            .take_while(|&&s| s != NONE)
            .count();
        let active_process = g.process[owner[t as usize] as usize];
        loads.pass(active_process, t);
        coverage.reset(active_process);
        for &s in &slots[base..base + n] {
            let p = g.process[s as usize];
            loads.pass(p, t);
            coverage.add(p);
        }
        while n < per_task {
            let try_classes = if !coverage.saturated() {
                let most = class_tags
                    .iter()
                    .map(|c| coverage.gain_of(c))
                    .max()
                    .unwrap_or(0);
                best_classes.clear();
                best_classes.extend(
                    (0..class_tags.len()).filter(|&c| coverage.gain_of(&class_tags[c]) == most),
                );
                &best_classes
            } else {
                &all_classes
            };
            let best = match slack {
                None => try_classes
                    .iter()
                    .filter_map(|&c| loads.best(c, t))
                    .min_by_key(|&p| loads.key(p)),
                Some(slack) => {
                    // Most new tag values first, but only on a member below its target plus
                    // the slack; where every such class is that full, the next fewest values.
                    gains.clear();
                    gains.extend(class_tags.iter().map(|c| coverage.gain_of(c)));
                    let mut levels = gains.clone();
                    levels.sort_unstable_by(|a, b| b.cmp(a));
                    levels.dedup();
                    levels
                        .iter()
                        .find_map(|&level| {
                            (0..class_tags.len())
                                .filter(|&c| gains[c] == level)
                                .filter_map(|c| loads.best(c, t))
                                .min_by_key(|&p| loads.key(p))
                                .filter(|&p| {
                                    let r = loads.first(p);
                                    loads.standbys(r) < loads.target(r).saturating_add(slack)
                                })
                        })
                        .or_else(|| {
                            all_classes
                                .iter()
                                .filter_map(|&c| loads.best(c, t))
                                .min_by_key(|&p| loads.key(p))
                        })
                }
            };
            let Some(p) = best else { break };
            slots[base + n] = loads.take(p, t);
            n += 1;
            coverage.add(p);
        }
    }
    loads.into_standbys()
}

/// `a == b`. In wasm, slice equality calls wasi-libc's `memcmp`, a loop over single bytes
/// (~116 K instructions for one comparison of 1,000 members' counts), so there the slices are
/// compared an element at a time; natively libc's `memcmp` is the faster.
fn same(a: &[u32], b: &[u32]) -> bool {
    if !cfg!(target_family = "wasm") {
        return a == b;
    }
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Evens out actives plus standbys among the members of each process: while one member of a
/// process holds two more than another, it hands that one a standby. Always valid (the
/// receiver's process, and so its tags, already hold that copy) and needed when the targets
/// are missed: with tags (diversity first) or when no placement meets them.
fn level_within_processes(g: &Group, active: &[u32], slots: &mut [u32], standbys: &mut [u32]) {
    let m = g.members();
    let total = |r: usize, standbys: &[u32]| active[r] + standbys[r];
    let mut by_process: Vec<BTreeSet<(u32, u32)>> = vec![BTreeSet::new(); g.process_count];
    for r in 0..m {
        by_process[g.process[r] as usize].insert((total(r, standbys), r as u32));
    }
    let uneven = |set: &BTreeSet<(u32, u32)>| match (set.first(), set.last()) {
        (Some(lo), Some(hi)) => hi.0 >= lo.0 + 2,
        _ => false,
    };
    if !by_process.iter().any(uneven) {
        return;
    }
    let mut held: Vec<Vec<usize>> = vec![Vec::new(); m];
    for (i, &s) in slots.iter().enumerate() {
        if s != NONE {
            held[s as usize].push(i);
        }
    }
    for set in &mut by_process {
        while uneven(set) {
            let (Some((_, lo)), Some((_, hi))) = (set.pop_first(), set.pop_last()) else {
                break;
            };
            // `hi` holds a standby: its total exceeds `lo`'s, and actives are within one.
            let Some(i) = held[hi as usize].pop() else {
                break;
            };
            slots[i] = lo;
            held[lo as usize].push(i);
            standbys[hi as usize] -= 1;
            standbys[lo as usize] += 1;
            set.insert((total(hi as usize, standbys), hi));
            set.insert((total(lo as usize, standbys), lo));
        }
    }
}

/// Brings every member's standby count within `slack` of its target, after a rack-aware fill
/// that preferred tag values and so may have missed the targets either way.
///
/// The fill put a copy above its member's target plus `slack` only where every member within
/// that bound was on a process already holding the task (or its tag classes added fewer new
/// values), so first that excess moves on; then members left more than `slack` below their
/// targets take standbys from members above theirs. Both are [`repair`] chains, and both always
/// succeed: the targets themselves are a placement within the caps (see [`targets`]), so from a
/// process above its members' bounds there is a chain to one below them, and back. Each time,
/// chains of moves that cost no task any tag value are tried first, and only where those run
/// out do moves trade diversity for the bound. Members between the bounds keep what they have.
fn bound_load(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    slots: &mut [u32],
    standbys: &mut [u32],
    target: &[u32],
    slack: u32,
) {
    // Where some member's count is `off` its `bound`: repair chains that keep every task's
    // tag values, then, for what those leave, chains of any moves.
    let repair_to =
        |slots: &mut [u32], standbys: &mut [u32], bound: &[u32], off: fn(u32, u32) -> bool| {
            let missed = |standbys: &[u32]| standbys.iter().zip(bound).any(|(&s, &b)| off(s, b));
            if missed(standbys) {
                let keeps_values =
                    |slots: &[u32], i: usize, b: u32| keeps_values(g, owner, per_task, slots, i, b);
                repair(g, owner, per_task, slots, standbys, bound, keeps_values);
                if missed(standbys) {
                    repair(g, owner, per_task, slots, standbys, bound, |_, _, _| true);
                }
            }
        };
    let most: Vec<u32> = target.iter().map(|&t| t.saturating_add(slack)).collect();
    repair_to(slots, standbys, &most, |s, most| s > most);
    // Members above their targets give (down to them), members more than `slack` below take
    // (up to that), the rest stay as they are.
    let least: Vec<u32> = standbys
        .iter()
        .zip(target)
        .map(|(&s, &t)| s.min(t).max(t.saturating_sub(slack)))
        .collect();
    repair_to(slots, standbys, &least, |s, least| s < least);
    improve(g, owner, per_task, slots, standbys, target, slack);
}

/// Raises tag coverage within the bound, one standby at a time: a standby moves to a process
/// of another tag class where its task would show more tag values, if that process's members
/// are not all at their targets plus `slack` and its own process keeps at least its members'
/// targets less `slack`. Both are process-level conditions, kept member by member (the taker
/// is the member furthest below its bound, and a giver left below its lower bound takes a
/// standby from the member of its process furthest above), so sharing standbys out within a
/// process afterwards changes nothing here. Every move adds a value, so the passes end, and
/// then no single move adds one: the output, kept as it is, is not improved again.
fn improve(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    slots: &mut [u32],
    standbys: &mut [u32],
    target: &[u32],
    slack: u32,
) {
    let (class_of, class_tags) = classes(g);
    let processes = g.process_count;
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); processes];
    let (mut have, mut most, mut least) = (
        vec![0u64; processes],
        vec![0u64; processes],
        vec![0u64; processes],
    );
    for r in 0..g.members() {
        let p = g.process[r] as usize;
        members[p].push(r as u32);
        have[p] += u64::from(standbys[r]);
        most[p] += u64::from(target[r].saturating_add(slack));
        least[p] += u64::from(target[r].saturating_sub(slack));
    }
    // Per class: its processes with room below their members' bounds.
    let mut open: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); class_tags.len()];
    for p in (0..processes).filter(|&p| have[p] < most[p]) {
        open[class_of[p] as usize].insert(p as u32);
    }
    let mut held: Vec<Vec<usize>> = vec![Vec::new(); g.members()];
    for (i, &s) in slots.iter().enumerate() {
        if s != NONE {
            held[s as usize].push(i);
        }
    }
    let mut coverage = Coverage::new(g);
    let mut classes_by_gain: Vec<(usize, usize)> = Vec::new();
    let mut moved = true;
    while moved {
        moved = false;
        for t in (0..g.tasks()).filter(|&t| g.is_stateful(t as u32)) {
            let active_process = g.process[owner[t] as usize];
            for i in t * per_task..(t + 1) * per_task {
                let giver = slots[i];
                if giver == NONE {
                    continue;
                }
                let a = g.process[giver as usize] as usize;
                if have[a] <= least[a] {
                    continue;
                }
                let task_slots = &slots[t * per_task..][..per_task];
                coverage.reset(active_process);
                for &s in task_slots.iter().filter(|&&s| s != NONE && s != giver) {
                    coverage.add(g.process[s as usize]);
                }
                let now = coverage.gain(a as u32);
                classes_by_gain.clear();
                classes_by_gain.extend(
                    (0..class_tags.len())
                        .map(|c| (coverage.gain_of(&class_tags[c]), c))
                        .filter(|&(gain, _)| gain > now),
                );
                // The most values first, then the lowest class.
                classes_by_gain.sort_unstable_by_key(|&(gain, c)| (Reverse(gain), c));
                let holds = |p: u32| {
                    p == active_process
                        || task_slots
                            .iter()
                            .any(|&s| s != NONE && g.process[s as usize] == p)
                };
                let Some(b) = classes_by_gain
                    .iter()
                    .find_map(|&(_, c)| open[c].iter().copied().find(|&p| !holds(p)))
                else {
                    continue;
                };
                let b = b as usize;
                let taker = members[b]
                    .iter()
                    .copied()
                    .max_by_key(|&r| {
                        let bound = i64::from(target[r as usize].saturating_add(slack));
                        (bound - i64::from(standbys[r as usize]), Reverse(r))
                    })
                    .expect("an open process has members");
                slots[i] = taker;
                standbys[giver as usize] -= 1;
                standbys[taker as usize] += 1;
                let at = held[giver as usize]
                    .iter()
                    .position(|&x| x == i)
                    .expect("held");
                held[giver as usize].swap_remove(at);
                held[taker as usize].push(i);
                have[a] -= 1;
                have[b] += 1;
                open[class_of[a] as usize].insert(a as u32);
                if have[b] == most[b] {
                    open[class_of[b] as usize].remove(&(b as u32));
                }
                if standbys[giver as usize] < target[giver as usize].saturating_sub(slack) {
                    // The process still keeps its members' lower bounds, so one is above its own.
                    let donor = members[a]
                        .iter()
                        .copied()
                        .max_by_key(|&r| {
                            let bound = i64::from(target[r as usize].saturating_sub(slack));
                            (i64::from(standbys[r as usize]) - bound, Reverse(r))
                        })
                        .expect("the giver's process has members");
                    let j = held[donor as usize]
                        .pop()
                        .expect("a donor above its bound holds one");
                    slots[j] = giver;
                    held[giver as usize].push(j);
                    standbys[donor as usize] -= 1;
                    standbys[giver as usize] += 1;
                }
                moved = true;
            }
        }
    }
}

/// Whether moving the standby in `slots[i]` to process `b` leaves its task covering at least as
/// many rack-aware tag values (summed over the tags) as before.
fn keeps_values(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    slots: &[u32],
    i: usize,
    b: u32,
) -> bool {
    let a = g.process[slots[i] as usize];
    if g.tags[a as usize] == g.tags[b as usize] {
        return true;
    }
    let t = i / per_task;
    let others: Vec<u32> = std::iter::once(g.process[owner[t] as usize])
        .chain(
            slots[t * per_task..][..per_task]
                .iter()
                .enumerate()
                .filter(|&(j, &s)| t * per_task + j != i && s != NONE)
                .map(|(_, &s)| g.process[s as usize]),
        )
        .collect();
    let values = |with: u32| {
        (0..g.tag_values.len())
            .map(|k| {
                let mut seen: Vec<u32> = Vec::new();
                for &p in others.iter().chain([&with]) {
                    if let Some(v) = g.tags[p as usize][k].filter(|v| !seen.contains(v)) {
                        seen.push(v);
                    }
                }
                seen.len()
            })
            .sum::<usize>()
    };
    values(b) >= values(a)
}

/// Moves standbys until every member is at its `target`, when the greedy fill (after what the
/// keep pass kept) missed it, using only moves `allowed` accepts (`allowed(slots, i, b)`:
/// whether `slots[i]` may go to process `b`). Any per-process counts within the processes'
/// caps can be placed (a max-flow cut argument, see the crate documentation), so while a
/// process holds more than its members' targets, a breadth-first search over processes finds a
/// chain of moves to one holding fewer — a standby of task `t` may move from process `A` to `B`
/// if `B` holds no copy of `t` — unless none exists, and then no placement meets the targets
/// (or none with the allowed moves). Each chain is `O(T·R)` when every move is allowed, up to
/// `O(T·R·P)` otherwise; the fill leaves few (none on the benchmark groups).
/// Then, within each process, members above target hand standbys to members below.
fn repair(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    slots: &mut [u32],
    standbys: &mut [u32],
    target: &[u32],
    allowed: impl Fn(&[u32], usize, u32) -> bool,
) {
    let processes = g.process_count;
    let mut on: Vec<Vec<usize>> = vec![Vec::new(); processes];
    for (i, &s) in slots.iter().enumerate() {
        if s != NONE {
            on[g.process[s as usize] as usize].push(i);
        }
    }
    let (mut have, mut want) = (vec![0i64; processes], vec![0i64; processes]);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); processes];
    for r in 0..g.members() {
        let p = g.process[r] as usize;
        have[p] += i64::from(standbys[r]);
        want[p] += i64::from(target[r]);
        members[p].push(r);
    }
    let holds = |slots: &[u32], i: usize, p: u32| {
        let t = i / per_task;
        g.process[owner[t] as usize] == p
            || slots[t * per_task..][..per_task]
                .iter()
                .any(|&s| s != NONE && g.process[s as usize] == p)
    };
    let mut from: Vec<Option<(usize, usize)>> = vec![None; processes];
    let (mut queue, mut unvisited) = (Vec::new(), Vec::new());
    loop {
        queue.clear();
        queue.extend((0..processes).filter(|&p| have[p] > want[p]));
        if queue.is_empty() {
            break;
        }
        from.fill(None);
        unvisited.clear();
        unvisited.extend((0..processes).filter(|&p| have[p] <= want[p]));
        let mut found = None;
        let mut head = 0;
        'search: while head < queue.len() {
            let a = queue[head];
            head += 1;
            for &i in &on[a] {
                let mut k = 0;
                while k < unvisited.len() {
                    let b = unvisited[k];
                    if holds(slots, i, b as u32) || !allowed(slots, i, b as u32) {
                        k += 1;
                        continue;
                    }
                    unvisited.swap_remove(k);
                    from[b] = Some((a, i));
                    if have[b] < want[b] {
                        found = Some(b);
                        break 'search;
                    }
                    queue.push(b);
                }
            }
        }
        let Some(mut b) = found else { break };
        while let Some((a, i)) = from[b] {
            // The member of `b` furthest below its target takes the task.
            let taker = members[b]
                .iter()
                .copied()
                .max_by_key(|&r| (i64::from(target[r]) - i64::from(standbys[r]), Reverse(r)))
                .expect("a process reached by a move has members");
            standbys[slots[i] as usize] -= 1;
            standbys[taker] += 1;
            slots[i] = taker as u32;
            let at = on[a]
                .iter()
                .position(|&x| x == i)
                .expect("slot on its process");
            on[a].swap_remove(at);
            on[b].push(i);
            have[a] -= 1;
            have[b] += 1;
            b = a;
        }
    }
    for p in 0..processes {
        for &i in &on[p] {
            let giver = slots[i] as usize;
            if standbys[giver] <= target[giver] {
                continue;
            }
            let taker = members[p]
                .iter()
                .copied()
                .find(|&r| standbys[r] < target[r]);
            if let Some(taker) = taker {
                standbys[giver] -= 1;
                standbys[taker] += 1;
                slots[i] = taker as u32;
            }
        }
    }
}

/// Each member's standby target: `total` standbys spread so that actives plus standbys are as
/// even as possible, the members with the most tasks now keeping the higher counts.
///
/// Process `p` can hold at most `cap[p]` standbys (every stateful task not active there), and
/// any per-process counts within those caps summing to `total` can be placed (see the crate
/// documentation). So the standbys fill members up to a common level — the lowest every member
/// can be topped up to, counting a process only up to its cap — and a process whose cap stops
/// it below that level spreads its cap evenly over its own members.
fn targets(
    g: &Group,
    active: &[u32],
    cap: &[u32],
    total: usize,
    prev_standbys: &[u32],
) -> Vec<u32> {
    let m = active.len();
    let mut target = vec![0u32; m];
    if total == 0 {
        return target;
    }
    let total = total as u64;
    let room = |level: u32, room: &mut Vec<u64>| {
        room.clear();
        room.resize(cap.len(), 0);
        for (&a, &p) in active.iter().zip(&g.process) {
            room[p as usize] += u64::from(level.saturating_sub(a));
        }
    };
    let reach = |room: &[u64]| -> u64 {
        room.iter()
            .zip(cap)
            .map(|(&r, &c)| r.min(u64::from(c)))
            .sum()
    };
    let (mut below, mut at) = (Vec::new(), Vec::new());
    let enough = |level: u32, room_at: &mut Vec<u64>| {
        room(level, room_at);
        reach(room_at) >= total
    };
    // The level is at least the least loaded member's plus one. Where no cap binds and the
    // active counts differ by at most one (the usual case), it is the average load rounded
    // up: that guess and the level below it settle it in two passes over the members, where
    // a search from the least loaded member took several. Otherwise the search doubles its
    // step from the bounds found until the level is reached (it is by the top active count
    // plus `total`).
    let least = active.iter().min().copied().unwrap_or(0);
    let load: u64 = active.iter().map(|&a| u64::from(a)).sum::<u64>() + total;
    let guess = (load.div_ceil(m as u64) as u32).max(least + 1);
    let (mut lo, mut hi);
    let settled = if enough(guess, &mut at) {
        let exact = guess == least + 1 || !enough(guess - 1, &mut below);
        (lo, hi) = if exact {
            (guess, guess)
        } else {
            (least + 1, guess - 1)
        };
        exact
    } else {
        lo = guess + 1;
        let mut step = (total as u32).div_ceil(m as u32).max(1);
        hi = loop {
            if enough(lo + step, &mut at) {
                break lo + step;
            }
            lo += step + 1;
            step *= 2;
        };
        false
    };
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if enough(mid, &mut at) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let level = lo;
    // Settled by the guess: `at` holds the room at `level`, and `below` at `level - 1` unless
    // that is the least loaded member's level, where no member has room (nothing to count).
    if !settled {
        room(level - 1, &mut below);
        room(level, &mut at);
    } else if level == least + 1 {
        below.resize(cap.len(), 0);
    }
    // The standbys left after every member is raised to `level - 1` (a process whose cap is
    // reached below that, to its cap), and whether every process can raise all its members
    // below `level` to it (the extras per process below are only needed where one cannot).
    let mut left = total;
    let mut uncapped = true;
    for ((&c, &below), &at) in cap.iter().zip(&below).zip(&at) {
        let c = u64::from(c);
        left -= c.min(below);
        uncapped &= c > below && c >= at;
    }
    // Most tasks now first, then rank: each member's key packed into one integer (the
    // complement of its count above its rank), so an unstable sort of distinct keys is exact
    // and compares no tuples.
    let key = |r: usize| u64::from(!(active[r] + prev_standbys[r])) << 32 | r as u64;
    if uncapped {
        // No process's cap binds (the usual case), so the `left` extra standbys go to the first
        // `left` members below `level` in that order, whatever the order of the rest: a
        // selection among those members, `O(M)`, rather than a sort of all of them, and none
        // when they already come in that order (as the cold deal leaves them on the benchmark
        // groups).
        let mut keys = Vec::with_capacity(m);
        for (r, (t, &a)) in target.iter_mut().zip(active).enumerate() {
            *t = (level - 1).saturating_sub(a);
            if a < level {
                keys.push(key(r));
            }
        }
        let left = left as usize;
        if 0 < left && left < keys.len() && !keys.is_sorted() {
            keys.select_nth_unstable(left);
        }
        for &k in &keys[..left] {
            target[k as u32 as usize] += 1;
        }
        return target;
    }
    // Per process: how many members may still rise from `level - 1` to `level`, or `None` for
    // a process whose cap is reached below `level - 1`.
    let mut extras: Vec<Option<u64>> = (cap.iter().zip(&below).zip(&at))
        .map(|((&c, &below), &at)| {
            let c = u64::from(c);
            (c > below).then(|| c.min(at) - below)
        })
        .collect();
    let mut keys: Vec<u64> = (0..m).map(key).collect();
    keys.sort_unstable();
    // A key's low half is its rank: the order is read off the keys, not copied out.
    let order = || keys.iter().map(|&k| k as u32);
    for r in order() {
        let (a, p) = (active[r as usize], g.process[r as usize] as usize);
        if let Some(extra) = &mut extras[p] {
            target[r as usize] = (level - 1).saturating_sub(a);
            if a < level && left > 0 && *extra > 0 {
                target[r as usize] += 1;
                *extra -= 1;
                left -= 1;
            }
        }
    }
    // Capped processes: their cap spread evenly over their members, the same way.
    let mut members: Vec<u32> = Vec::new();
    for p in (0..cap.len()).filter(|&p| extras[p].is_none()) {
        members.clear();
        members.extend(order().filter(|&r| g.process[r as usize] as usize == p));
        let room = |level: u32| -> u64 {
            members
                .iter()
                .map(|&r| u64::from(level.saturating_sub(active[r as usize])))
                .sum()
        };
        let c = u64::from(cap[p]);
        let (mut lo, mut hi) = (0u32, level);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if room(mid) >= c {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo == 0 {
            continue;
        }
        let mut left = c - room(lo - 1);
        for &r in &members {
            let a = active[r as usize];
            target[r as usize] = (lo - 1).saturating_sub(a);
            if a < lo && left > 0 {
                target[r as usize] += 1;
                left -= 1;
            }
        }
    }
    target
}

/// [`fill`] without tags and with several replicas: each open task's empty slots from the
/// single class's best process.
fn fill_untagged(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    open: &[u32],
    slots: &mut [u32],
    steps: &mut Steps<'_>,
) {
    for &t in open {
        steps.pass(g.process[owner[t as usize] as usize], t);
        // Kept standbys come first, so every process holding the task is passed before the
        // first empty slot is filled.
        for s in &mut slots[t as usize * per_task..][..per_task] {
            if *s != NONE {
                steps.pass(g.process[*s as usize], t);
                continue;
            }
            let Some(p) = steps.best_of_all(t) else {
                break;
            };
            *s = steps.take(p, t);
        }
    }
}

/// Processes grouped by their rack-aware tag values (one class without tags): per process its
/// class, per class its values.
fn classes(g: &Group) -> (Vec<u32>, Vec<Vec<Option<u32>>>) {
    if g.tag_values.is_empty() {
        // No tags: every process has the empty tag list, one class.
        return (vec![0; g.process_count], vec![Vec::new()]);
    }
    let mut ids: BTreeMap<&[Option<u32>], u32> = BTreeMap::new();
    let class_of = g
        .tags
        .iter()
        .map(|t| {
            let next = ids.len() as u32;
            *ids.entry(t.as_slice()).or_insert(next)
        })
        .collect();
    let mut class_tags = vec![Vec::new(); ids.len()];
    for (t, c) in ids {
        class_tags[c as usize] = t.to_vec();
    }
    (class_of, class_tags)
}

/// The tag values a task's holders cover, per rack-aware tag.
struct Coverage<'a> {
    tags: &'a [Vec<Option<u32>>],
    values: &'a [u32],
    covered: Vec<Vec<u32>>,
}

impl<'a> Coverage<'a> {
    fn new(g: &'a Group) -> Self {
        Self {
            tags: &g.tags,
            values: &g.tag_values,
            covered: vec![Vec::new(); g.tag_values.len()],
        }
    }

    /// Starts a task held by process `p` only.
    fn reset(&mut self, p: u32) {
        self.covered.iter_mut().for_each(Vec::clear);
        self.add(p);
    }

    fn add(&mut self, p: u32) {
        for (covered, v) in self.covered.iter_mut().zip(&self.tags[p as usize]) {
            if let Some(v) = v.filter(|v| !covered.contains(v)) {
                covered.push(v);
            }
        }
    }

    /// How many tags process `p` would add a new value for.
    fn gain(&self, p: u32) -> usize {
        self.gain_of(&self.tags[p as usize])
    }

    fn gain_of(&self, values: &[Option<u32>]) -> usize {
        self.covered
            .iter()
            .zip(values)
            .filter(|(covered, v)| v.is_some_and(|v| !covered.contains(&v)))
            .count()
    }

    /// Whether every tag already has every value the group offers.
    fn saturated(&self) -> bool {
        self.covered
            .iter()
            .zip(self.values)
            .all(|(c, &n)| c.len() as u32 == n)
    }
}
