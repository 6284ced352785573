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
//! in flat arrays updated in place, so a step allocates nothing.

/// A member's or process's place in the queue, packed so that smaller is better. Members: room
/// below their standby target first, then the least loaded (actives plus standbys), then by
/// rank. Processes: room first, then the tightest, then by index (within a class its order
/// decides); without room, by their best member's load, then by index.
type Key = u64;

const NO_ROOM: Key = 1 << 63;
/// Tightness is stored inverted below this (the tighter, the smaller the key).
const FIELD: Key = (1 << 31) - 1;

/// Standby counts and loads with the queue over them.
pub(crate) struct Loads {
    /// Members, by rank: actives plus standbys.
    pub load: Vec<u32>,
    /// Members, by rank: standbys.
    pub standbys: Vec<u32>,
    /// Members, by rank: the standby count to aim for.
    pub target: Vec<u32>,
    process: Vec<u32>,
    /// Members grouped by process; each process's run `start[p]..start[p + 1]` is a binary
    /// min-heap of its members by key, updated in place (no allocation, no stale entries).
    members: Vec<u32>,
    /// Per process: where its run of `members` starts (one more entry for the end).
    start: Vec<u32>,
    /// Members, by rank: their index in `members`.
    at: Vec<u32>,
    /// Members, by rank: their current key.
    keys: Vec<Key>,
    /// Per process: the standbys its members still lack of their targets.
    room: Vec<u32>,
    /// Per process: the tasks still to fill that it cannot take.
    blocked: Vec<u32>,
    /// Per class: its processes by tightness.
    classes: Vec<Sorted>,
    class_of: Vec<u32>,
    /// Per process: its index in its class's `order`.
    at_order: Vec<u32>,
}

/// One class's processes, tightest first; processes out of room form the last run.
struct Sorted {
    /// The processes, in runs of falling tightness.
    order: Vec<u32>,
    /// Per tightness `k`: where its run starts in `order` (runs end where the next lower
    /// tightness starts; tightness 0, out of room, runs to the end).
    run: Vec<u32>,
}

impl Loads {
    /// Loads for members on `process` (by rank), processes grouped by `class_of`, with
    /// `blocked[p]` tasks to fill that process `p` cannot take.
    pub fn new(
        load: Vec<u32>,
        standbys: Vec<u32>,
        target: Vec<u32>,
        process: Vec<u32>,
        class_of: Vec<u32>,
        blocked: Vec<u32>,
    ) -> Self {
        let classes = class_of.iter().max().map_or(0, |&c| c as usize + 1);
        let processes = class_of.len();
        let m = load.len();
        let mut start = vec![0u32; processes + 1];
        for &p in &process {
            start[p as usize + 1] += 1;
        }
        for p in 0..processes {
            start[p + 1] += start[p];
        }
        let mut room = vec![0u32; processes];
        for r in 0..m {
            room[process[r] as usize] += target[r].saturating_sub(standbys[r]);
        }
        // Out of room counts as tightness 0 (with room it is at least 1).
        let tightness: Vec<usize> = (0..processes)
            .map(|p| {
                if room[p] > 0 {
                    (room[p] + blocked[p]) as usize
                } else {
                    0
                }
            })
            .collect();
        let mut of_class: Vec<Vec<u32>> = vec![Vec::new(); classes];
        for p in 0..processes as u32 {
            of_class[class_of[p as usize] as usize].push(p);
        }
        let mut at_order = vec![0u32; processes];
        let classes = of_class
            .into_iter()
            .map(|mut order| {
                order.sort_by_key(|&p| (std::cmp::Reverse(tightness[p as usize]), p));
                let top = order.first().map_or(0, |&p| tightness[p as usize]);
                let mut run = vec![order.len() as u32; top + 1];
                for (i, &p) in order.iter().enumerate().rev() {
                    at_order[p as usize] = i as u32;
                    run[tightness[p as usize]] = i as u32;
                }
                // An empty run starts (and ends) where the next lower one starts.
                for k in 1..=top {
                    if run[k] == order.len() as u32 {
                        run[k] = run[k - 1];
                    }
                }
                Sorted { order, run }
            })
            .collect();
        let mut loads = Self {
            load,
            standbys,
            target,
            members: vec![0; m],
            at: vec![0; m],
            keys: vec![0; m],
            start,
            room,
            blocked,
            classes,
            process,
            class_of,
            at_order,
        };
        let mut next = loads.start.clone();
        for r in 0..m as u32 {
            loads.keys[r as usize] = loads.key(r);
            let p = loads.process[r as usize] as usize;
            let i = next[p];
            next[p] += 1;
            loads.members[i as usize] = r;
            loads.at[r as usize] = i;
            loads.member_sift_up(p, i as usize);
        }
        loads
    }

    /// Whether member `r` is below its standby target.
    #[inline]
    pub fn has_room(&self, r: u32) -> bool {
        self.standbys[r as usize] < self.target[r as usize]
    }

    #[inline]
    fn key(&self, r: u32) -> Key {
        let room = if self.has_room(r) { 0 } else { NO_ROOM };
        room | (Key::from(self.load[r as usize]) << 32) | Key::from(r)
    }

    /// Process `p`'s tightness fell by one: it swaps with the last of its run and joins the
    /// next lower run. Out of room, it keeps falling to the bottom run.
    #[inline]
    fn lower(&mut self, p: u32) {
        let (room, blocked) = (self.room[p as usize], self.blocked[p as usize]);
        let sorted = &mut self.classes[self.class_of[p as usize] as usize];
        let mut i = self.at_order[p as usize] as usize;
        let mut k = (room + blocked) as usize;
        loop {
            // `p` leaves run `k + 1`: it swaps with the run's last and run `k` starts there.
            let start = &mut sorted.run[k];
            *start -= 1;
            let last = *start as usize;
            let q = sorted.order[last];
            sorted.order[i] = q;
            sorted.order[last] = p;
            self.at_order[q as usize] = i as u32;
            i = last;
            if room > 0 || k == 0 {
                break;
            }
            k -= 1;
        }
        self.at_order[p as usize] = i as u32;
    }

    /// Moves the member at index `i` of `members` up to its place in process `p`'s heap.
    fn member_sift_up(&mut self, p: usize, i: usize) {
        let base = self.start[p] as usize;
        let r = self.members[i];
        let key = self.keys[r as usize];
        let mut i = i - base;
        while i > 0 {
            let parent = (i - 1) / 2;
            let q = self.members[base + parent];
            if self.keys[q as usize] <= key {
                break;
            }
            self.members[base + i] = q;
            self.at[q as usize] = (base + i) as u32;
            i = parent;
        }
        self.members[base + i] = r;
        self.at[r as usize] = (base + i) as u32;
    }

    /// Moves the member at index `i` of `members` down to its place in process `p`'s heap.
    #[inline]
    fn member_sift_down(&mut self, p: usize, i: usize) {
        let (base, end) = (self.start[p] as usize, self.start[p + 1] as usize);
        let heap = &mut self.members[base..end];
        let keys = &self.keys;
        let r = heap[i - base];
        let key = keys[r as usize];
        let mut i = i - base;
        loop {
            let mut child = 2 * i + 1;
            let Some(&c) = heap.get(child) else { break };
            let (mut q, mut ck) = (c, keys[c as usize]);
            if let Some(&d) = heap.get(child + 1)
                && keys[d as usize] < ck
            {
                (q, ck, child) = (d, keys[d as usize], child + 1);
            }
            if key <= ck {
                break;
            }
            heap[i] = q;
            self.at[q as usize] = (base + i) as u32;
            i = child;
        }
        heap[i] = r;
        self.at[r as usize] = (base + i) as u32;
    }

    /// Member `r` took one more standby.
    #[inline]
    pub fn add(&mut self, r: u32) {
        let p = self.process[r as usize];
        let had_room = self.has_room(r);
        self.standbys[r as usize] += 1;
        self.load[r as usize] += 1;
        self.keys[r as usize] = self.key(r);
        self.member_sift_down(p as usize, self.at[r as usize] as usize);
        if had_room {
            self.room[p as usize] -= 1;
            self.lower(p);
        }
    }

    /// A task process `p` could not take has been filled: one fewer blocked task.
    #[inline]
    pub fn pass(&mut self, p: u32) {
        self.blocked[p as usize] -= 1;
        if self.room[p as usize] > 0 {
            self.lower(p);
        }
    }

    /// The number of tag classes.
    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    /// The best process of `class` for which `holds` is false, as its key and best member:
    /// the tightest with room, else (all with room hold the task) the one whose best member
    /// is least loaded.
    #[inline]
    pub fn best(&self, class: usize, holds: impl Fn(u32) -> bool) -> Option<(Key, u32)> {
        let sorted = &self.classes[class];
        let with_room = &sorted.order[..sorted.run[0] as usize];
        match with_room.iter().find(|&&p| !holds(p)) {
            Some(&p) => {
                let tight = Key::from(self.room[p as usize] + self.blocked[p as usize]);
                Some(((FIELD - tight) << 32 | Key::from(p), self.first(p)))
            }
            None => self.best_without_room(class, holds),
        }
    }

    /// [`Loads::best`] when every process of `class` with room holds the task.
    #[inline(never)]
    fn best_without_room(&self, class: usize, holds: impl Fn(u32) -> bool) -> Option<(Key, u32)> {
        let sorted = &self.classes[class];
        sorted.order[sorted.run[0] as usize..]
            .iter()
            .filter(|&&p| self.start[p as usize] < self.start[p as usize + 1] && !holds(p))
            .map(|&p| {
                let r = self.first(p);
                let key = NO_ROOM | Key::from(self.load[r as usize]) << 32 | Key::from(p);
                (key, r)
            })
            .min()
    }

    /// Process `p`'s best member.
    fn first(&self, p: u32) -> u32 {
        self.members[self.start[p as usize] as usize]
    }
}
