//! [`Loads`]: members' standby counts and loads, and the queue that finds the best member for
//! the next standby in O(log M) per step.
//!
//! Two levels of min-heaps, so that skipping the processes that already hold a task costs a
//! few steps per process (at most one plus the replica count), however many members they run:
//! per process, its members by key; per tag class (processes with the same rack-aware tag
//! values; a single class without tags), its processes by their best member's key. Both are
//! indexed heaps in flat arrays updated in place, so a step allocates nothing.
//! Finding the best process not holding a task walks that heap best-first without changing it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A member's place in the queue, packed so that smaller is better: members with room below
/// their standby target first, then the least loaded (actives plus standbys), then by rank.
type Key = u64;

const NO_ROOM: Key = 1 << 63;

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
    /// Per class: a binary min-heap of (best member key, process).
    classes: Vec<Vec<(Key, u32)>>,
    class_of: Vec<u32>,
    /// Per process: its index in its class's heap.
    slot: Vec<usize>,
    /// The frontier of the best-first walk, kept to reuse its allocation.
    frontier: BinaryHeap<Reverse<(Key, usize)>>,
}

/// What [`Loads::best`] found among a class's processes.
pub(crate) struct Best {
    /// The best member on a process that does not hold the task.
    pub eligible: Option<u32>,
    /// Its key, to compare candidates from several classes.
    pub key: Key,
    /// The best member with room on a process that holds the task, if better than `eligible`.
    pub blocked_with_room: Option<u32>,
}

impl Loads {
    /// Loads for members on `process` (by rank), processes grouped by `class_of`.
    pub fn new(
        load: Vec<u32>,
        standbys: Vec<u32>,
        target: Vec<u32>,
        process: Vec<u32>,
        class_of: Vec<u32>,
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
        let mut loads = Self {
            load,
            standbys,
            target,
            members: vec![0; m],
            at: vec![0; m],
            keys: vec![0; m],
            start,
            classes: vec![Vec::new(); classes],
            process,
            class_of,
            slot: vec![usize::MAX; processes],
            frontier: BinaryHeap::new(),
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
        for p in 0..processes as u32 {
            if let Some(key) = loads.process_key(p) {
                let c = loads.class_of[p as usize] as usize;
                loads.slot[p as usize] = loads.classes[c].len();
                loads.classes[c].push((key, p));
                let at = loads.classes[c].len() - 1;
                loads.sift_up(c, at);
            }
        }
        loads
    }

    /// Whether member `r` is below its standby target.
    pub fn has_room(&self, r: u32) -> bool {
        self.standbys[r as usize] < self.target[r as usize]
    }

    fn key(&self, r: u32) -> Key {
        let room = if self.has_room(r) { 0 } else { NO_ROOM };
        room | (Key::from(self.load[r as usize]) << 32) | Key::from(r)
    }

    /// Member `r`'s key changed: move it in its process's heap and its process in the class
    /// heap.
    fn push(&mut self, r: u32) {
        let p = self.process[r as usize] as usize;
        let old = self.keys[r as usize];
        let key = self.key(r);
        self.keys[r as usize] = key;
        let i = self.at[r as usize] as usize;
        if key < old {
            self.member_sift_up(p, i);
        } else {
            self.member_sift_down(p, i);
        }
        let best = self.keys[self.members[self.start[p] as usize] as usize];
        let c = self.class_of[p] as usize;
        let at = self.slot[p];
        let old = self.classes[c][at].0;
        self.classes[c][at].0 = best;
        if best < old {
            self.sift_up(c, at);
        } else if best > old {
            self.sift_down(c, at);
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

    /// Moves the entry at `i` of class `c`'s heap up to its place (a hole moves, not swaps).
    fn sift_up(&mut self, c: usize, mut i: usize) {
        let heap = &mut self.classes[c];
        let entry = heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if heap[parent].0 <= entry.0 {
                break;
            }
            heap[i] = heap[parent];
            self.slot[heap[i].1 as usize] = i;
            i = parent;
        }
        heap[i] = entry;
        self.slot[entry.1 as usize] = i;
    }

    /// Moves the entry at `i` of class `c`'s heap down to its place.
    fn sift_down(&mut self, c: usize, mut i: usize) {
        let heap = &mut self.classes[c];
        let entry = heap[i];
        let len = heap.len();
        loop {
            let mut child = 2 * i + 1;
            if child >= len {
                break;
            }
            if child + 1 < len && heap[child + 1].0 < heap[child].0 {
                child += 1;
            }
            if entry.0 <= heap[child].0 {
                break;
            }
            heap[i] = heap[child];
            self.slot[heap[i].1 as usize] = i;
            i = child;
        }
        heap[i] = entry;
        self.slot[entry.1 as usize] = i;
    }

    /// Member `r` took one more standby.
    pub fn add(&mut self, r: u32) {
        self.standbys[r as usize] += 1;
        self.load[r as usize] += 1;
        self.push(r);
    }

    /// Member `r` gave one standby up.
    pub fn remove(&mut self, r: u32) {
        self.standbys[r as usize] -= 1;
        self.load[r as usize] -= 1;
        self.push(r);
    }

    /// The key of process `p`'s best member, if it has members.
    fn process_key(&self, p: u32) -> Option<Key> {
        let (from, to) = (self.start[p as usize], self.start[p as usize + 1]);
        (from < to).then(|| self.keys[self.members[from as usize] as usize])
    }

    /// The number of tag classes.
    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    /// The best member of `class` on a process for which `holds` is false: processes are
    /// visited in key order (a heap entry's children only after it), so the walk stops after
    /// the processes holding the task that rank better.
    pub fn best(&mut self, class: usize, holds: impl Fn(u32) -> bool) -> Best {
        let mut found = Best {
            eligible: None,
            key: Key::MAX,
            blocked_with_room: None,
        };
        let heap = &self.classes[class];
        let Some(&(k, p)) = heap.first() else {
            return found;
        };
        // Most often the best process does not hold the task: no walk needed.
        if !holds(p) {
            found.eligible = Some((k & 0xffff_ffff) as u32);
            found.key = k;
            return found;
        }
        self.frontier.clear();
        self.frontier.push(Reverse((k, 0)));
        while let Some(Reverse((k, i))) = self.frontier.pop() {
            let p = heap[i].1;
            let member = (k & 0xffff_ffff) as u32;
            if !holds(p) {
                found.eligible = Some(member);
                found.key = k;
                break;
            }
            if found.blocked_with_room.is_none() && k & NO_ROOM == 0 {
                found.blocked_with_room = Some(member);
            }
            for child in [2 * i + 1, 2 * i + 2] {
                if let Some(&(ck, _)) = heap.get(child) {
                    self.frontier.push(Reverse((ck, child)));
                }
            }
        }
        found
    }
}
