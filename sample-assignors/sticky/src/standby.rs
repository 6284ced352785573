//! Standby tasks: per-member targets, keep what is still valid, fill the rest.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::group::{Candidates, Group, NONE};
use crate::queue::Loads;

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
/// at most five with them.
const ROUNDS: usize = 8;

/// What the standby pass starts from: who held each task before.
struct Previous<'a> {
    /// Dense task → previous active owner ([`NONE`] or the current owner: no extra candidate).
    owner: &'a [u32],
    candidates: &'a Candidates,
    /// Members, by rank: their current standby count.
    standbys: &'a [u32],
}

/// Places `replicas` standbys for every stateful task, given the active `owner`s.
///
/// The pass runs again with its own output as the current standbys until that output keeps
/// all of itself (at most [`ROUNDS`] times): then assigning again with the output as the
/// current assignment reproduces it, which is the fixed point.
pub(crate) fn assign(g: &Group, owner: &[u32], replicas: u32) -> Standbys {
    let per_task = (replicas as usize).min(g.process_count.saturating_sub(1));
    if per_task == 0 {
        return Standbys {
            per_task,
            slots: Vec::new(),
        };
    }
    let stateful: Vec<u32> = (0..g.tasks() as u32)
        .filter(|&t| g.is_stateful(t))
        .collect();
    let mut active = vec![0u32; g.members()];
    for &o in owner {
        active[o as usize] += 1;
    }
    let total = stateful.len() * per_task;
    let mut previous = Previous {
        owner: &g.prev_owner,
        candidates: &g.candidates,
        standbys: &g.prev_standbys,
    };
    let (mut candidates, mut counts);
    for round in 1.. {
        let target = targets(&active, total, previous.standbys);
        let (mut slots, kept) = keep(g, owner, per_task, &stateful, &previous, &target);
        let mut filled = fill(
            g,
            owner,
            per_task,
            &stateful,
            &active,
            target.clone(),
            &mut slots,
            kept,
        );
        level_within_processes(g, &active, &mut slots, &mut filled);
        // Every member exactly at its target, without tags: a keep pass on this output would
        // compute the same targets (the members at the higher level are the ones with the
        // extra) and keep every slot (each holder is below target until its last task, on a
        // process of its own, and ahead of members only reporting offsets), so it is settled.
        if g.tag_values.is_empty() && filled == target {
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
        let target = targets(&active, total, previous.standbys);
        let (kept, _) = keep(g, owner, per_task, &stateful, &previous, &target);
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
            entries.push((t, false, Reverse(g.offset(t, s)), s));
        }
    }
    for &(t, r, off) in &g.offsets {
        if !slots[t as usize * per_task..][..per_task].contains(&r) {
            entries.push((t, true, Reverse(off), r));
        }
    }
    (Candidates::new(entries, g.tasks()), counts)
}

/// Keeps what the previous holders can keep: per task, the previous active owner (its state
/// is there), then current standbys and warm-ups, then members reporting offsets — each while
/// below its target, on a process not yet holding the task, and (rack-aware) adding tag values
/// unless every tag already shows every value. Returns the slots and each member's standby
/// count.
fn keep(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    stateful: &[u32],
    previous: &Previous<'_>,
    target: &[u32],
) -> (Vec<u32>, Vec<u32>) {
    let m = g.members();
    let mut slots = vec![NONE; g.tasks() * per_task];
    let tagged = !g.tag_values.is_empty();
    let mut coverage = Coverage::new(g);
    let mut standbys = vec![0u32; m];
    let mut candidates: Vec<u32> = Vec::new();
    for &t in stateful {
        let slot = &mut slots[t as usize * per_task..][..per_task];
        let active_process = g.process[owner[t as usize] as usize];
        let prev = previous.owner[t as usize];
        candidates.clear();
        if prev != NONE && prev != owner[t as usize] {
            candidates.push(prev);
        }
        candidates.extend_from_slice(previous.candidates.of(t));
        if candidates.is_empty() {
            continue;
        }
        if tagged {
            coverage.reset(active_process);
        }
        let mut n = 0;
        while n < per_task {
            let holds = |p: u32| {
                p == active_process || slot[..n].iter().any(|&s| g.process[s as usize] == p)
            };
            let mut open = candidates.iter().copied().filter(|&c| {
                c != NONE
                    && standbys[c as usize] < target[c as usize]
                    && !holds(g.process[c as usize])
            });
            let pick = if tagged {
                // Most new tag values first, then candidate order.
                let best = open.min_by_key(|&c| Reverse(coverage.gain(g.process[c as usize])));
                best.filter(|&c| coverage.saturated() || coverage.gain(g.process[c as usize]) > 0)
            } else {
                open.next()
            };
            let Some(c) = pick else { break };
            slot[n] = c;
            n += 1;
            standbys[c as usize] += 1;
            if tagged {
                coverage.add(g.process[c as usize]);
            }
            if let Some(used) = candidates.iter_mut().find(|x| **x == c) {
                *used = NONE;
            }
        }
    }
    (slots, standbys)
}

/// Fills the empty slots: the member with the most new tag values (rack-aware), then below
/// target, then least loaded; a process never holds a task twice. Returns each member's
/// standby count.
#[allow(clippy::too_many_arguments)]
fn fill(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    stateful: &[u32],
    active: &[u32],
    target: Vec<u32>,
    slots: &mut [u32],
    standbys: Vec<u32>,
) -> Vec<u32> {
    let tagged = !g.tag_values.is_empty();
    let mut coverage = Coverage::new(g);
    let (class_of, class_tags) = classes(g);
    // Per task, how many of its slots the keep pass filled (recorded as the fill reaches it).
    let mut kept = vec![0u32; g.tasks()];
    // Each member's standbys in the order it took them, built on the first swap (rare).
    let mut held: Option<Vec<Vec<u32>>> = None;
    let load = active.iter().zip(&standbys).map(|(a, s)| a + s).collect();
    let mut loads = Loads::new(load, standbys, target, g.process.clone(), class_of);
    let all_classes: Vec<usize> = (0..loads.classes()).collect();
    let mut best_classes: Vec<usize> = Vec::new();
    for &t in stateful {
        let base = t as usize * per_task;
        let active_process = g.process[owner[t as usize] as usize];
        let mut n = slots[base..base + per_task]
            .iter()
            .take_while(|&&s| s != NONE)
            .count();
        kept[t as usize] = n as u32;
        if n == per_task {
            continue;
        }
        if tagged {
            coverage.reset(active_process);
            for &s in &slots[base..base + n] {
                coverage.add(g.process[s as usize]);
            }
        }
        while n < per_task {
            let try_classes = if tagged && !coverage.saturated() {
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
            let slot = &slots[base..base + n];
            let holds =
                |p: u32| p == active_process || slot.iter().any(|&s| g.process[s as usize] == p);
            let (mut pick, mut key, mut blocked) = (None, u64::MAX, None);
            for &c in try_classes {
                let best = loads.best(c, holds);
                if best.eligible.is_some() && best.key < key {
                    (pick, key) = (best.eligible, best.key);
                }
                blocked = blocked.or(best.blocked_with_room);
            }
            let Some(pick) = pick else { break };
            if let Some(free) = blocked.filter(|_| !loads.has_room(pick) && !tagged) {
                let held = held
                    .get_or_insert_with(|| held_so_far(g, per_task, stateful, slots, &mut kept, t));
                swap_one(g, owner, per_task, slots, held, &mut loads, pick, free);
            }
            slots[base + n] = pick;
            n += 1;
            loads.add(pick);
            if let Some(held) = &mut held {
                held[pick as usize].push(t);
            }
            if tagged {
                coverage.add(g.process[pick as usize]);
            }
        }
    }
    loads.standbys
}

/// Each member's standbys in the order the keep pass and then the fill (up to task `now`)
/// gave them: kept slots of every task first, then filled ones task by task. `kept` holds the
/// kept count of the tasks the fill has reached; it is completed here for the rest.
fn held_so_far(
    g: &Group,
    per_task: usize,
    stateful: &[u32],
    slots: &[u32],
    kept: &mut [u32],
    now: u32,
) -> Vec<Vec<u32>> {
    let mut held: Vec<Vec<u32>> = vec![Vec::new(); g.members()];
    for &t in stateful.iter().filter(|&&t| t > now) {
        let slot = &slots[t as usize * per_task..][..per_task];
        kept[t as usize] = slot.iter().take_while(|&&s| s != NONE).count() as u32;
    }
    for &t in stateful {
        let slot = &slots[t as usize * per_task..][..kept[t as usize] as usize];
        for &s in slot {
            held[s as usize].push(t);
        }
    }
    for &t in stateful.iter().take_while(|&&t| t <= now) {
        let slot = &slots[t as usize * per_task..][..per_task];
        for &s in slot[kept[t as usize] as usize..]
            .iter()
            .filter(|&&s| s != NONE)
        {
            held[s as usize].push(t);
        }
    }
    held
}

/// Evens out actives plus standbys among the members of each process: while one member of a
/// process holds two more than another, it hands that one a standby. Always valid (the
/// receiver's process, and so its tags, already hold that copy) and needed when the targets
/// ask more of a process than the standbys its actives leave it (targets are per member;
/// which process may take a task is fixed by where the actives are).
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

/// Makes room on `full` (no room, but eligible for the task being placed) by handing one of
/// its standbys to `free` (room, but its process holds the task being placed), if `free`'s
/// process does not hold that standby's task. One step of an augmenting path: without it a
/// greedy fill can end with the only members below target sitting on the very process that
/// holds the last tasks.
#[allow(clippy::too_many_arguments)]
fn swap_one(
    g: &Group,
    owner: &[u32],
    per_task: usize,
    slots: &mut [u32],
    held: &mut [Vec<u32>],
    loads: &mut Loads,
    full: u32,
    free: u32,
) {
    let free_process = g.process[free as usize];
    let movable = held[full as usize].iter().position(|&t| {
        let slot = &slots[t as usize * per_task..][..per_task];
        g.process[owner[t as usize] as usize] != free_process
            && slot
                .iter()
                .all(|&s| s == NONE || g.process[s as usize] != free_process)
    });
    let Some(i) = movable else { return };
    let t = held[full as usize].swap_remove(i);
    for s in &mut slots[t as usize * per_task..][..per_task] {
        if *s == full {
            *s = free;
        }
    }
    held[free as usize].push(t);
    loads.remove(full);
    loads.add(free);
}

/// Each member's standby target: `total` standbys spread so that actives plus standbys are as
/// even as possible (the smallest level every member can be topped up to), the members with
/// the most tasks now keeping the higher counts.
fn targets(active: &[u32], total: usize, prev_standbys: &[u32]) -> Vec<u32> {
    let m = active.len();
    if total == 0 {
        return vec![0; m];
    }
    let reach = |level: u32| -> usize {
        active
            .iter()
            .map(|&a| level.saturating_sub(a) as usize)
            .sum()
    };
    let (mut lo, mut hi) = (
        0u32,
        active.iter().max().copied().unwrap_or(0) + total.div_ceil(m) as u32,
    );
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if reach(mid) >= total {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let level = lo;
    let mut target: Vec<u32> = active
        .iter()
        .map(|&a| (level - 1).saturating_sub(a))
        .collect();
    let mut left = total - target.iter().map(|&s| s as usize).sum::<usize>();
    let mut order: Vec<usize> = (0..m).filter(|&r| active[r] < level).collect();
    order.sort_by_key(|&r| (Reverse(active[r] + prev_standbys[r]), r));
    for r in order {
        if left == 0 {
            break;
        }
        target[r] += 1;
        left -= 1;
    }
    target
}

/// Processes grouped by their rack-aware tag values (one class without tags): per process its
/// class, per class its values.
fn classes(g: &Group) -> (Vec<u32>, Vec<Vec<Option<u32>>>) {
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
