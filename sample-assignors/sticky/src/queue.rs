//! [`Loads`]: members' standby counts and loads, and the queue that finds the best member for
//! the next standby in O(log M) per step.
//!
//! Two levels of min-heaps, so that skipping the processes that already hold a task costs one
//! step per process (at most one plus the replica count), however many members they run:
//! per process, its members by key; per tag class (processes with the same rack-aware tag
//! values; a single class without tags), its processes by their best member's key. Entries are
//! never updated in place: a change pushes a fresh entry and the stale one is dropped when it
//! surfaces.

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
    members: Vec<BinaryHeap<Reverse<Key>>>,
    classes: Vec<BinaryHeap<Reverse<(Key, u32)>>>,
    class_of: Vec<u32>,
    stash: Vec<Reverse<(Key, u32)>>,
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
        let mut loads = Self {
            load,
            standbys,
            target,
            members: vec![BinaryHeap::new(); class_of.len()],
            classes: vec![BinaryHeap::new(); classes],
            process,
            class_of,
            stash: Vec::new(),
        };
        for r in 0..loads.load.len() as u32 {
            loads.push(r);
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

    fn push(&mut self, r: u32) {
        let p = self.process[r as usize];
        let key = self.key(r);
        self.members[p as usize].push(Reverse(key));
        if let Some(best) = self.process_key(p) {
            self.classes[self.class_of[p as usize] as usize].push(Reverse((best, p)));
        }
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

    /// The key of process `p`'s best member, dropping stale entries on the way.
    fn process_key(&mut self, p: u32) -> Option<Key> {
        loop {
            let &Reverse(k) = self.members[p as usize].peek()?;
            if k == self.key((k & 0xffff_ffff) as u32) {
                return Some(k);
            }
            self.members[p as usize].pop();
        }
    }

    /// The number of tag classes.
    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    /// The best member of `class` on a process for which `holds` is false.
    pub fn best(&mut self, class: usize, holds: impl Fn(u32) -> bool) -> Best {
        let mut found = Best {
            eligible: None,
            key: Key::MAX,
            blocked_with_room: None,
        };
        while let Some(Reverse((k, p))) = self.classes[class].pop() {
            if self.process_key(p) != Some(k) {
                continue; // stale: every change of a process's best key pushed a fresh entry
            }
            if self.stash.iter().any(|&Reverse((_, q))| q == p) {
                continue; // a duplicate entry
            }
            self.stash.push(Reverse((k, p)));
            let member = (k & 0xffff_ffff) as u32;
            if !holds(p) {
                found.eligible = Some(member);
                found.key = k;
                break;
            }
            if found.blocked_with_room.is_none() && k & NO_ROOM == 0 {
                found.blocked_with_room = Some(member);
            }
        }
        self.classes[class].extend(self.stash.drain(..));
        found
    }
}
