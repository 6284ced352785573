//! [`Loads`]: members' standby counts and loads, and the queue that finds where the next
//! standby goes in O(1) amortised per step.
//!
//! Two levels. Per process, its members in a binary min-heap by key (room below their
//! standby target first, then the least loaded), so a process hands its standbys to the
//! members that need them. Per tag class (processes with the same rack-aware tag values; a
//! single class without tags), its processes with room ordered by *tightness*: room plus
//! the tasks still to fill that it cannot take (active there, or a copy already there). The
//! tightest goes first; that order is what makes the fill meet every target whenever the
//! per-process counts fit (see `standby`): a process whose room equals the tasks still able
//! to use it must take every one of them, and it is always among the first tried.
//!
//! Tightness only ever falls by one (room is used up, blocked tasks are passed), so each class
//! keeps its processes in one array sorted tightest first, in runs of equal tightness: a
//! process whose tightness falls swaps with the last of its run and the run boundary moves
//! past it, O(1). A process out of room sinks to the bottom run the same way, one run per
//! step, which costs no more than its tightness falling to zero. The search reads the array
//! from the front, skipping the at most `R + 1` processes holding the task. Everything lives
//! in flat arrays updated in place, so a step allocates nothing: all classes share one array
//! of processes (each class a stretch of it) and one of run starts, and a process's fields sit
//! together, so a step touches few cache lines and pays few bounds checks (the same code runs
//! compiled to wasm, where every check is an instruction too).
//!
//! Only a process's best member is ever given a standby (the fill takes the best process's
//! best member), so a heap changes only at its top, and a member's key, which ends in its
//! rank, is all the heap needs to hold: no index from members to heap places.

use crate::group::NONE;

/// A member's or process's place in the queue, packed so that smaller is better. Members: room
/// below their standby target first, then the least loaded (actives plus standbys), then by
/// rank. Processes: room first, then the tightest, then by index (within a class its order
/// decides); without room, by their best member's load, then by index.
type Key = u64;

const NO_ROOM: Key = 1 << 63;
/// Tightness is stored inverted below this (the tighter, the smaller the key).
const FIELD: Key = (1 << 31) - 1;
/// One more task on a member's load, as a key (the load sits above the rank's 32 bits).
const ONE_MORE: Key = 1 << 32;

/// Standby counts and loads with the queue over them.
pub(crate) struct Loads {
    /// Members, by rank: standbys now and the count to aim for.
    members: Vec<Member>,
    /// Per process, its members' keys as a binary min-heap in `heap[start..end]`, updated in
    /// place (no allocation, no stale entries).
    heap: Vec<Key>,
    procs: Vec<Process>,
    /// Every class's processes, a stretch per class, each in runs of falling tightness;
    /// processes out of room form a class's last run.
    order: Vec<u32>,
    /// Per class and tightness `k`: where its run starts in `order` (runs end where the next
    /// lower tightness starts; tightness 0, out of room, runs to the class's end). A class's
    /// runs start at its `runs`.
    run: Vec<u32>,
    classes: Vec<Class>,
}

/// A member's counts.
#[derive(Clone, Copy)]
struct Member {
    standbys: u32,
    target: u32,
}

/// A process's fields, together. Natively aligned to 32 bytes, so that a process's place in
/// `procs` is its index shifted (the fields make 28 bytes, and multiplying by 28 costs three
/// instructions at every look-up) and no process spans two cache lines. Not in wasm: there a
/// multiply is one instruction, and an over-aligned allocation takes the allocator's slower
/// path (measured: 600 more fuel on a 10-member call, none saved at 1000).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_family = "wasm"), repr(align(32)))]
struct Process {
    /// The standbys its members still lack of their targets.
    room: u32,
    /// While it has room, its run: its class's `runs` plus its tightness (room plus the tasks
    /// still to fill that it cannot take), kept as one number so that a step finds the run
    /// without adding three. Out of room it is in the bottom run for good, and this is left.
    tight: u32,
    /// Its index in `order`.
    at: u32,
    /// Where its class's runs start in `run`.
    runs: u32,
    /// Its members' heap: `heap[start..end]`.
    start: u32,
    end: u32,
    /// The last task found on it (see [`Loads::best`]): kept here, beside the fields `pass`
    /// and `take` update anyway, so marking it costs no look-up of its own.
    holds: u32,
}

/// A class's stretch of `order` and of `run`.
#[derive(Clone, Copy)]
struct Class {
    start: u32,
    end: u32,
    runs: u32,
}

impl Loads {
    /// Loads for members (by rank) with `active` tasks and `standbys` on `process`, aiming
    /// at `target` standbys; processes grouped by `class_of`, with `blocked[p]` tasks to
    /// fill that process `p` cannot take.
    pub fn new(
        active: &[u32],
        standbys: &[u32],
        target: &[u32],
        process: &[u32],
        class_of: &[u32],
        blocked: &[u32],
    ) -> Self {
        let m = active.len();
        let mut procs = vec![
            Process {
                room: 0,
                tight: 0,
                at: 0,
                runs: 0,
                start: 0,
                end: 0,
                holds: NONE,
            };
            class_of.len()
        ];
        for (&p, (&s, &t)) in process.iter().zip(standbys.iter().zip(target)) {
            let p = &mut procs[p as usize];
            p.end += 1;
            p.room += t.saturating_sub(s);
        }
        // Heaps laid out in process order; each starts sorted, which is a valid heap.
        let mut start = 0;
        for p in &mut procs {
            p.start = start;
            start += p.end;
            p.end = p.start;
        }
        let mut heap = vec![0; m];
        let mut members = Vec::with_capacity(m);
        for r in 0..m {
            let member = Member {
                standbys: standbys[r],
                target: target[r],
            };
            members.push(member);
            let p = &mut procs[process[r] as usize];
            heap[p.end as usize] = member.key(active[r] + standbys[r], r as u32);
            p.end += 1;
        }
        for p in &procs {
            // Most processes run one or two members: no call into the sort for those.
            match &mut heap[p.start as usize..p.end as usize] {
                [a, b] if *a > *b => std::mem::swap(a, b),
                [] | [_] | [_, _] => {}
                more => more.sort_unstable(),
            }
        }

        // Out of room counts as tightness 0 (with room it is at least 1).
        let tightness = |p: &Process, b: u32| if p.room > 0 { p.room + b } else { 0 };
        let class_count = class_of.iter().max().map_or(0, |&c| c as usize + 1);
        let mut classes = vec![
            Class {
                start: 0,
                end: 0,
                runs: 0
            };
            class_count
        ];
        // Per class its top tightness (as `runs`, for now) and size (as `end`); per process
        // its tightness (as `tight`, for now).
        for ((p, &b), &c) in procs.iter_mut().zip(blocked).zip(class_of) {
            p.tight = tightness(p, b);
            let class = &mut classes[c as usize];
            class.runs = class.runs.max(p.tight);
            class.end += 1;
        }
        let (mut at, mut runs) = (0, 0);
        for class in &mut classes {
            let (top, size) = (class.runs, class.end);
            (class.start, class.end, class.runs) = (at, at + size, runs);
            at += size;
            runs += top + 1;
        }
        // A counting sort: per class, how many processes of each tightness, then each run's
        // end, tightest first; processes placed from the back in falling index order, which
        // leaves them in index order, as a sort by (tightness falling, index) would, and each
        // run's end moved back to its start (no second array of places).
        let mut run = vec![0u32; runs as usize];
        for (p, &c) in procs.iter_mut().zip(class_of) {
            p.runs = classes[c as usize].runs;
            p.tight += p.runs;
            run[p.tight as usize] += 1;
        }
        for (c, class) in classes.iter().enumerate() {
            let top = classes
                .get(c + 1)
                .map_or(runs, |next| next.runs)
                .saturating_sub(1);
            let mut next = class.start;
            for k in (class.runs..=top).rev() {
                next += run[k as usize];
                run[k as usize] = next;
            }
        }
        let mut order = vec![0u32; procs.len()];
        for (i, p) in procs.iter_mut().enumerate().rev() {
            let slot = &mut run[p.tight as usize];
            *slot -= 1;
            p.at = *slot;
            order[*slot as usize] = i as u32;
        }
        Self {
            members,
            heap,
            procs,
            order,
            run,
            classes,
        }
    }

    /// The queue's arrays as slices, for a loop of many steps (see [`Steps`]).
    pub fn steps(&mut self) -> Steps<'_> {
        Steps {
            members: &mut self.members,
            heap: &mut self.heap,
            procs: &mut self.procs,
            order: &mut self.order,
            run: &mut self.run,
        }
    }

    /// Process `p`'s best member takes one more standby, of task `t`; returns that member.
    pub fn take(&mut self, p: u32, t: u32) -> u32 {
        self.steps().take(p, t)
    }

    /// Task `t`, which process `p` could not take (it runs the task or holds a copy), is being
    /// filled: one fewer blocked task, and [`Loads::best`] passes over `p` for `t`.
    pub fn pass(&mut self, p: u32, t: u32) {
        self.steps().pass(p, t);
    }

    /// The number of tag classes.
    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    /// Member `r`'s standby count.
    pub fn standbys(&self, r: u32) -> u32 {
        self.members[r as usize].standbys
    }

    /// Member `r`'s standby target.
    pub fn target(&self, r: u32) -> u32 {
        self.members[r as usize].target
    }

    /// Every member's standby count, by rank.
    pub fn into_standbys(self) -> Vec<u32> {
        self.members.iter().map(|m| m.standbys).collect()
    }

    /// The best process of `class` not holding task `t` (not passed or taken for `t` since it
    /// last was): the tightest with room, else (all with room hold the task) the one whose best
    /// member is least loaded.
    pub fn best(&self, class: usize, t: u32) -> Option<u32> {
        let class = self.classes[class];
        let free = |p: u32| self.procs[p as usize].holds != t;
        best(&self.procs, &self.heap, &self.order, &self.run, class, free)
    }

    /// Process `p`'s place among the bests of several classes (smaller is better): with room,
    /// the tightest first; without, the one whose best member is least loaded; then by index.
    pub fn key(&self, p: u32) -> Key {
        key(&self.procs, &self.heap, p)
    }

    /// Process `p`'s best member.
    pub fn first(&self, p: u32) -> u32 {
        self.heap[self.procs[p as usize].start as usize] as u32
    }
}

/// [`Loads`] borrowed as slices, for a loop that steps the queue many times: the loop holds
/// them in locals, where through `&mut Loads` every step loaded each vector's pointer and
/// length from memory again, and `take` could be inlined only at that cost (so it was called
/// out of line). Stepped through this, with `take` inlined, a cold 1000-member fill costs 8 %
/// fewer instructions and 5.5 % less fuel for the whole call.
pub(crate) struct Steps<'a> {
    members: &'a mut [Member],
    heap: &'a mut [Key],
    procs: &'a mut [Process],
    order: &'a mut [u32],
    run: &'a mut [u32],
}

impl Steps<'_> {
    /// Process `p`'s tightness fell by one: it swaps with the last of its run and joins the
    /// next lower run. Out of room, it keeps falling to the bottom run.
    ///
    /// Always inlined, and so is [`Steps::pass`]: left to the compiler, `pass` called it out
    /// of line for every task the fill visits, paying the call and the queue's fields reloaded
    /// around it (inlined: 1.3 % fewer instructions, 1.4 % less fuel, on a cold 1000-member
    /// call).
    #[inline(always)]
    fn lower(&mut self, p: u32) {
        let Process {
            room,
            tight,
            at,
            runs,
            ..
        } = self.procs[p as usize];
        let mut i = at;
        let mut k = tight;
        loop {
            // `p` leaves run `k + 1`: it swaps with the run's last and run `k` starts there.
            let start = &mut self.run[k as usize];
            *start -= 1;
            let last = *start;
            let q = self.order[last as usize];
            self.order[i as usize] = q;
            self.order[last as usize] = p;
            self.procs[q as usize].at = i;
            i = last;
            if room > 0 || k == runs {
                break;
            }
            k -= 1;
        }
        self.procs[p as usize].at = i;
    }

    /// [`Loads::take`].
    #[inline(always)]
    pub fn take(&mut self, p: u32, t: u32) -> u32 {
        self.procs[p as usize].holds = t;
        self.take_last(p)
    }

    /// [`Loads::take`] for a task's last copy: nothing is filled for the task after it, so
    /// `p` need not be marked as holding it.
    #[inline(always)]
    pub fn take_last(&mut self, p: u32) -> u32 {
        let Process { start, end, .. } = self.procs[p as usize];
        let heap = &mut self.heap[start as usize..end as usize];
        let top = heap[0];
        let r = top as u32;
        let member = &mut self.members[r as usize];
        member.standbys += 1;
        let key = (top + ONE_MORE) | member.room();
        // Whether the member had room is the top key's room bit: no counts kept for it.
        let had_room = top < NO_ROOM;
        // The key only grew: sift it down from the top. Most processes run one or two
        // members, which need no loop.
        match heap {
            [only] => *only = key,
            [first, second] => (*first, *second) = (key.min(*second), key.max(*second)),
            _ => sift_down(heap, key),
        }
        if had_room {
            let process = &mut self.procs[p as usize];
            process.room -= 1;
            process.tight -= 1;
            self.lower(p);
        }
        r
    }

    /// [`Loads::pass`].
    #[inline(always)]
    pub fn pass(&mut self, p: u32, t: u32) {
        self.procs[p as usize].holds = t;
        self.block(p);
    }

    /// [`Loads::pass`] without the mark: process `p` has one fewer blocked task.
    #[inline(always)]
    pub fn block(&mut self, p: u32) {
        let process = &mut self.procs[p as usize];
        if process.room > 0 {
            process.tight -= 1;
            self.lower(p);
        }
    }

    /// [`Loads::best`] when every process is of one class (no tags).
    #[inline(always)]
    pub fn best_of_all(&self, t: u32) -> Option<u32> {
        self.best_of_all_where(|p| self.procs[p as usize].holds != t)
    }

    /// [`Steps::best_of_all`] for a task only process `a` holds (it runs the task, and it is
    /// filled with one copy): processes compared with `a`, no marks read (nor left by
    /// [`Steps::block`]). A process is in `order` once, so the first with room other than `a`
    /// is the first or, when that is `a`, the second: two reads, not a search loop (its setup
    /// and test per process were 1.7 % of a cold 1000-member call's fuel). With no other
    /// process with room, the general search ends among those without.
    #[inline(always)]
    pub fn best_of_all_but(&self, a: u32) -> Option<u32> {
        match self.order[..self.run[0] as usize] {
            [p, ..] if p != a => Some(p),
            [_, p, ..] => Some(p),
            _ => self.best_of_all_where(|p| p != a),
        }
    }

    /// The best process of the only class for which `free`: its stretch of `order` is all of
    /// it and its runs start `run`, so no class is looked up per task.
    #[inline(always)]
    fn best_of_all_where(&self, free: impl Fn(u32) -> bool + Copy) -> Option<u32> {
        let all = Class {
            start: 0,
            end: self.order.len() as u32,
            runs: 0,
        };
        best(self.procs, self.heap, self.order, self.run, all, free)
    }
}

/// [`Loads::best`] over the queue's arrays, among the processes for which `free`.
#[inline(always)]
fn best(
    procs: &[Process],
    heap: &[Key],
    order: &[u32],
    run: &[u32],
    class: Class,
    free: impl Fn(u32) -> bool + Copy,
) -> Option<u32> {
    let Class { start, end, runs } = class;
    let out_of_room = run[runs as usize];
    let with_room = &order[start as usize..out_of_room as usize];
    match with_room.iter().find(|&&p| free(p)) {
        Some(&p) => Some(p),
        None => best_without_room(
            procs,
            heap,
            &order[out_of_room as usize..end as usize],
            free,
        ),
    }
}

/// [`Loads::best`] when every process of a class with room holds the task: the best of the
/// rest of the class's processes, `rest`, for which `free`.
#[inline(never)]
fn best_without_room(
    procs: &[Process],
    heap: &[Key],
    rest: &[u32],
    free: impl Fn(u32) -> bool,
) -> Option<u32> {
    rest.iter()
        .copied()
        .filter(|&p| free(p))
        .min_by_key(|&p| key(procs, heap, p))
}

/// [`Loads::key`].
fn key(procs: &[Process], heap: &[Key], p: u32) -> Key {
    let Process {
        room,
        tight,
        runs,
        start,
        ..
    } = procs[p as usize];
    if room > 0 {
        (FIELD - Key::from(tight - runs)) << 32 | Key::from(p)
    } else {
        let load = heap[start as usize] >> 32 & FIELD;
        NO_ROOM | load << 32 | Key::from(p)
    }
}

/// Puts `key` in place of `heap`'s top, which it replaces, and sifts it down.
fn sift_down(heap: &mut [Key], key: Key) {
    let mut i = 0;
    loop {
        let mut child = 2 * i + 1;
        let Some(&c) = heap.get(child) else { break };
        let mut ck = c;
        if let Some(&d) = heap.get(child + 1)
            && d < ck
        {
            (ck, child) = (d, child + 1);
        }
        if key <= ck {
            break;
        }
        heap[i] = ck;
        i = child;
    }
    heap[i] = key;
}

impl Member {
    /// The member's key with `load` tasks, as rank `r`.
    fn key(self, load: u32, r: u32) -> Key {
        self.room() | Key::from(load) << 32 | Key::from(r)
    }

    /// The room part of the member's key: 0 while below its target, else [`NO_ROOM`].
    fn room(self) -> Key {
        if self.standbys < self.target {
            0
        } else {
            NO_ROOM
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (splitmix64).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u32) -> u32 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % u64::from(n)) as u32
        }
    }

    /// On random queues (processes of one to six members, so heaps of one, two and more, in
    /// up to three classes), every step agrees with a brute-force reading of the counts:
    /// `take` gives the standby to the process's member with room, then least loaded, then
    /// lowest rank; `best` returns a process with room of the highest tightness not holding
    /// the task, or, when every one with room holds it, the one whose best member is least
    /// loaded; `key` ranks those the same way.
    #[test]
    fn steps_agree_with_brute_force() {
        for seed in 0..300 {
            let mut rng = Rng(seed);
            let processes = 1 + rng.below(12);
            let class_of: Vec<u32> = (0..processes).map(|p| rng.below(3).min(p)).collect();
            let classes = class_of.iter().max().map_or(0, |&c| c + 1);
            let mut process: Vec<u32> = (0..processes).collect();
            for _ in 0..rng.below(3 * processes) {
                process.push(rng.below(processes));
            }
            let m = process.len();
            let active: Vec<u32> = (0..m).map(|_| rng.below(5)).collect();
            let mut standbys: Vec<u32> = (0..m).map(|_| rng.below(3)).collect();
            let target: Vec<u32> = (0..m).map(|_| rng.below(6)).collect();
            let mut blocked: Vec<u32> = (0..processes).map(|_| rng.below(8)).collect();
            let mut loads = Loads::new(&active, &standbys, &target, &process, &class_of, &blocked);
            let room = |standbys: &[u32], p: u32| -> u32 {
                (0..m)
                    .filter(|&r| process[r] == p)
                    .map(|r| target[r].saturating_sub(standbys[r]))
                    .sum()
            };
            // The brute-force best member of `p`: room first, then the least loaded, by rank.
            let best_member = |standbys: &[u32], p: u32| -> u32 {
                (0..m as u32)
                    .filter(|&r| process[r as usize] == p)
                    .min_by_key(|&r| {
                        let r = r as usize;
                        (standbys[r] >= target[r], active[r] + standbys[r], r)
                    })
                    .expect("every process has a member")
            };
            // Each step a task of its own, so a step's marks do not carry over.
            for t in 0..60 {
                let p = rng.below(processes);
                if rng.below(3) == 0 && blocked[p as usize] > 0 {
                    blocked[p as usize] -= 1;
                    loads.pass(p, t);
                    continue;
                }
                let held: Vec<u32> = (0..processes).filter(|_| rng.below(4) == 0).collect();
                for &q in &held {
                    loads.procs[q as usize].holds = t;
                }
                let class = rng.below(classes);
                let holds = |q: u32| held.contains(&q);
                let of_class: Vec<u32> = (0..processes)
                    .filter(|&q| class_of[q as usize] == class && !holds(q))
                    .collect();
                let Some(best) = loads.best(class as usize, t) else {
                    assert!(
                        of_class.is_empty(),
                        "seed {seed}: a free process was missed"
                    );
                    continue;
                };
                assert!(of_class.contains(&best), "seed {seed}: {best} is not free");
                let tightness = |q: u32| room(&standbys, q) + blocked[q as usize];
                let with_room: Vec<u32> = of_class
                    .iter()
                    .copied()
                    .filter(|&q| room(&standbys, q) > 0)
                    .collect();
                if with_room.is_empty() {
                    let load = |q: u32| {
                        let r = best_member(&standbys, q) as usize;
                        (active[r] + standbys[r], q)
                    };
                    let least = of_class.iter().copied().min_by_key(|&q| load(q));
                    assert_eq!(Some(best), least, "seed {seed}: not the least loaded");
                } else {
                    let most = with_room.iter().map(|&q| tightness(q)).max();
                    assert!(
                        room(&standbys, best) > 0 && Some(tightness(best)) == most,
                        "seed {seed}: {best} is not among the tightest"
                    );
                }
                let by_key = of_class.iter().copied().min_by_key(|&q| loads.key(q));
                let by_counts = of_class.iter().copied().min_by_key(|&q| {
                    if room(&standbys, q) > 0 {
                        (0, u32::MAX - tightness(q), 0, q)
                    } else {
                        let r = best_member(&standbys, q) as usize;
                        (1, 0, active[r] + standbys[r], q)
                    }
                });
                assert_eq!(by_key, by_counts, "seed {seed}: keys rank differently");
                let expected = best_member(&standbys, best);
                assert_eq!(loads.take(best, t), expected, "seed {seed}: wrong member");
                standbys[expected as usize] += 1;
                let next = best_member(&standbys, best);
                assert_eq!(loads.first(best), next, "seed {seed}: wrong heap top");
            }
            assert_eq!(loads.into_standbys(), standbys, "seed {seed}: counts");
        }
    }
}
