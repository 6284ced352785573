//! [`Loads`]: members' standby counts and loads, and the queue that finds where the next
//! standby goes in O(log P) per step.
//!
//! Two levels. Per process, its members in a binary min-heap by key (room below their
//! standby target first, then the least loaded), so a process hands its standbys to the
//! members that need them. Per tag class (processes with the same rack-aware tag values; a
//! single class without tags), its processes in a flat tournament tree (every inner node holds
//! the smaller key of its two children), ordered *tightest first*: a process with room whose
//! room plus the tasks still to fill that it cannot take (active there, or a copy already
//! there) is largest. That order is what makes the fill meet every target whenever the
//! per-process counts fit (see `standby`): a process whose room equals the tasks still able
//! to use it must take every one of them, and it is always among the first tried. Both levels
//! live in flat arrays updated in place, so a step allocates nothing.

/// A member's or process's place in the queue, packed so that smaller is better. Members: room
/// below their standby target first, then the least loaded (actives plus standbys), then by
/// rank. Processes: room first, then the tightest, then by index; without room, by their best
/// member's load.
type Key = u64;

const NO_ROOM: Key = 1 << 63;
/// Tightness and loads are stored below this, inverted for tightness (larger is better).
const FIELD: Key = (1 << 31) - 1;
const LOW: Key = 0xffff_ffff;

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
    /// Per class: a tournament tree over its processes' keys; node 1 is the root, the leaves
    /// start at half the length (a power of two), unused leaves hold `Key::MAX`.
    trees: Vec<Vec<Key>>,
    class_of: Vec<u32>,
    /// Per process: its leaf in its class's tree.
    leaf: Vec<u32>,
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
        let mut per_class = vec![0u32; classes];
        let leaf = class_of
            .iter()
            .map(|&c| {
                per_class[c as usize] += 1;
                per_class[c as usize] - 1
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
            room: vec![0; processes],
            blocked,
            trees: per_class
                .iter()
                .map(|&n| vec![Key::MAX; 2 * (n as usize).next_power_of_two()])
                .collect(),
            process,
            class_of,
            leaf,
        };
        let mut next = loads.start.clone();
        for r in 0..m as u32 {
            loads.keys[r as usize] = loads.key(r);
            let p = loads.process[r as usize] as usize;
            loads.room[p] += loads.target[r as usize].saturating_sub(loads.standbys[r as usize]);
            let i = next[p];
            next[p] += 1;
            loads.members[i as usize] = r;
            loads.at[r as usize] = i;
            loads.member_sift_up(p, i as usize);
        }
        for p in 0..processes {
            let c = loads.class_of[p] as usize;
            let half = loads.trees[c].len() / 2;
            loads.trees[c][half + loads.leaf[p] as usize] = loads.process_key(p);
        }
        for tree in &mut loads.trees {
            for i in (1..tree.len() / 2).rev() {
                tree[i] = tree[2 * i].min(tree[2 * i + 1]);
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

    /// Process `p`'s key (see [`Key`]); `Key::MAX` for a process without members.
    fn process_key(&self, p: usize) -> Key {
        let (from, to) = (self.start[p], self.start[p + 1]);
        if from == to {
            return Key::MAX;
        }
        if self.room[p] > 0 {
            let tight = Key::from(self.room[p] + self.blocked[p]).min(FIELD);
            (FIELD - tight) << 32 | p as Key
        } else {
            let best = self.members[from as usize] as usize;
            NO_ROOM | Key::from(self.load[best]).min(FIELD) << 32 | p as Key
        }
    }

    /// Process `p`'s key changed: replay its leaf's matches up to the root.
    fn update(&mut self, p: usize) {
        let key = self.process_key(p);
        let tree = &mut self.trees[self.class_of[p] as usize];
        let mut i = tree.len() / 2 + self.leaf[p] as usize;
        tree[i] = key;
        while i > 1 {
            let parent = i / 2;
            let winner = tree[i].min(tree[i ^ 1]);
            if tree[parent] == winner {
                break;
            }
            tree[parent] = winner;
            i = parent;
        }
    }

    /// Member `r`'s key changed: move it in its process's heap, and its process in the tree.
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
        self.update(p);
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
    pub fn add(&mut self, r: u32) {
        let p = self.process[r as usize] as usize;
        self.room[p] -= u32::from(self.has_room(r));
        self.standbys[r as usize] += 1;
        self.load[r as usize] += 1;
        self.push(r);
    }

    /// A task process `p` could not take has been filled: one fewer blocked task.
    pub fn pass(&mut self, p: u32) {
        self.blocked[p as usize] -= 1;
        if self.room[p as usize] > 0 {
            self.update(p as usize);
        }
    }

    /// The number of tag classes.
    pub fn classes(&self) -> usize {
        self.trees.len()
    }

    /// The best process of `class` for which `holds` is false, as its key and best member.
    /// The tree is searched from the root; a subtree is entered only when its winner is a
    /// process holding the task, so the search costs a few paths per holding process.
    pub fn best(&self, class: usize, holds: impl Fn(u32) -> bool) -> Option<(Key, u32)> {
        let tree = &self.trees[class];
        let key = best_in(tree, 1, &holds);
        (key != Key::MAX).then(|| {
            let p = (key & LOW) as usize;
            (key, self.members[self.start[p] as usize])
        })
    }
}

/// The smallest key under node `i` of `tree` whose process `holds` rejects.
fn best_in(tree: &[Key], i: usize, holds: &impl Fn(u32) -> bool) -> Key {
    let key = tree[i];
    if key == Key::MAX || !holds((key & LOW) as u32) {
        return key;
    }
    if i >= tree.len() / 2 {
        return Key::MAX;
    }
    best_in(tree, 2 * i, holds).min(best_in(tree, 2 * i + 1, holds))
}
