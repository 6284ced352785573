//! [`Loads`]: members' standby counts and loads, and the queue that finds where the next
//! standby goes in O(1) amortised per step.
//!
//! Two levels. Per process, its members in a binary min-heap by key (room below their
//! standby target first, then the least loaded), so a process hands its standbys to the
//! members that need them. Per tag class (processes with the same rack-aware tag values; a
//! single class without tags), its processes with room in buckets by *tightness*: room plus
//! the tasks still to fill that it cannot take (active there, or a copy already there). The
//! tightest goes first; that order is what makes the fill meet every target whenever the
//! per-process counts fit (see `standby`): a process whose room equals the tasks still able
//! to use it must take every one of them, and it is always among the first tried.
//!
//! Tightness only ever falls (room is used up, blocked tasks are passed), so a process moves
//! one bucket down per change and the search starts from a top that only moves down; a bitmap
//! of non-empty buckets skips empty runs when the top processes all hold the task. Everything
//! lives in flat arrays updated in place, so a step allocates nothing.

/// A member's or process's place in the queue, packed so that smaller is better. Members: room
/// below their standby target first, then the least loaded (actives plus standbys), then by
/// rank. Processes: room first, then the tightest, then bucket order; without room, by their
/// best member's load, then by index.
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
    /// Per class: its buckets.
    classes: Vec<Buckets>,
    class_of: Vec<u32>,
    /// Per process: the next and previous process in its bucket ([`NONE`] at the ends).
    next: Vec<u32>,
    prev: Vec<u32>,
}

const NONE: u32 = u32::MAX;

/// One class's processes with room, by tightness.
struct Buckets {
    /// Per tightness: the first process, or [`NONE`].
    head: Vec<u32>,
    /// One bit per tightness: whether its bucket has a process.
    filled: Vec<u64>,
    /// No bucket above this one has a process.
    top: usize,
    /// The class's processes, for the search among those without room.
    processes: Vec<u32>,
}

impl Buckets {
    #[inline]
    fn unlink(&mut self, next: &mut [u32], prev: &mut [u32], p: u32, k: usize) {
        let (n, q) = (next[p as usize], prev[p as usize]);
        if q == NONE {
            self.head[k] = n;
            if n == NONE {
                self.filled[k / 64] &= !(1 << (k % 64));
            }
        } else {
            next[q as usize] = n;
        }
        if n != NONE {
            prev[n as usize] = q;
        }
    }

    #[inline]
    fn link(&mut self, next: &mut [u32], prev: &mut [u32], p: u32, k: usize) {
        let n = self.head[k];
        next[p as usize] = n;
        prev[p as usize] = NONE;
        if n != NONE {
            prev[n as usize] = p;
        }
        self.head[k] = p;
        self.filled[k / 64] |= 1 << (k % 64);
    }

    /// The highest non-empty bucket at or below `k`.
    #[inline]
    fn below(&self, k: usize) -> Option<usize> {
        let mut w = k / 64;
        let mut bits = self.filled[w] & (u64::MAX >> (63 - k % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + 63 - bits.leading_zeros() as usize);
            }
            if w == 0 {
                return None;
            }
            w -= 1;
            bits = self.filled[w];
        }
    }
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
        let mut tightest = vec![0usize; classes];
        let mut of_class: Vec<Vec<u32>> = vec![Vec::new(); classes];
        for p in 0..processes {
            let c = class_of[p] as usize;
            tightest[c] = tightest[c].max((room[p] + blocked[p]) as usize);
            of_class[c].push(p as u32);
        }
        let classes = tightest
            .iter()
            .zip(of_class)
            .map(|(&k, processes)| Buckets {
                head: vec![NONE; k + 1],
                filled: vec![0; k / 64 + 1],
                top: k,
                processes,
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
            next: vec![NONE; processes],
            prev: vec![NONE; processes],
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
        // Linked in reverse, so each bucket starts in process order.
        for p in (0..processes as u32).rev() {
            if loads.room[p as usize] > 0 {
                let k = loads.tightness(p);
                let c = loads.class_of[p as usize] as usize;
                loads.classes[c].link(&mut loads.next, &mut loads.prev, p, k);
            }
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

    #[inline]
    fn tightness(&self, p: u32) -> usize {
        (self.room[p as usize] + self.blocked[p as usize]) as usize
    }

    /// Process `p`'s tightness falls by one (or it runs out of room): one bucket down (or out).
    #[inline]
    fn lower(&mut self, p: u32) {
        let k = self.tightness(p) + 1;
        let buckets = &mut self.classes[self.class_of[p as usize] as usize];
        buckets.unlink(&mut self.next, &mut self.prev, p, k);
        if self.room[p as usize] > 0 {
            buckets.link(&mut self.next, &mut self.prev, p, k - 1);
        }
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
    fn member_sift_down(&mut self, p: usize, i: usize) {
        let base = self.start[p] as usize;
        let len = self.start[p + 1] as usize - base;
        let r = self.members[i];
        let key = self.keys[r as usize];
        let mut i = i - base;
        loop {
            let mut child = 2 * i + 1;
            if child >= len {
                break;
            }
            let mut ck = self.keys[self.members[base + child] as usize];
            if child + 1 < len {
                let rk = self.keys[self.members[base + child + 1] as usize];
                if rk < ck {
                    child += 1;
                    ck = rk;
                }
            }
            if key <= ck {
                break;
            }
            let q = self.members[base + child];
            self.members[base + i] = q;
            self.at[q as usize] = (base + i) as u32;
            i = child;
        }
        self.members[base + i] = r;
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
    pub fn best(&mut self, class: usize, holds: impl Fn(u32) -> bool) -> Option<(Key, u32)> {
        let buckets = &mut self.classes[class];
        let mut k = buckets.below(buckets.top);
        if let Some(top) = k {
            buckets.top = top;
        }
        let first = |p: u32| self.members[self.start[p as usize] as usize];
        while let Some(at) = k {
            let mut p = buckets.head[at];
            while p != NONE {
                if !holds(p) {
                    return Some(((FIELD - at as Key) << 32 | Key::from(p), first(p)));
                }
                p = self.next[p as usize];
            }
            k = at.checked_sub(1).and_then(|k| buckets.below(k));
        }
        buckets
            .processes
            .iter()
            .filter(|&&p| self.start[p as usize] < self.start[p as usize + 1] && !holds(p))
            .map(|&p| {
                let r = first(p);
                (
                    NO_ROOM | Key::from(self.load[r as usize]) << 32 | Key::from(p),
                    r,
                )
            })
            .min()
    }
}
