//! [`TaskSet`]: a set of tasks stored as one sorted vector.
//!
//! A member holds a handful to a few dozen tasks, and whole sets are built, compared and moved
//! across the sandbox boundary far more often than single tasks are inserted. A sorted vector
//! does all of that in one allocation and with contiguous copies; a `BTreeSet` allocated a node
//! per few tasks and spent about a third of a 1000-member boundary crossing building and
//! dropping them.

use std::fmt;

use crate::TaskId;

/// A set of tasks, iterated in [`TaskId`] order.
///
/// Lookups are binary searches, and an insertion or removal shifts the tasks after it, which
/// is cheap for a member's assignment. The API follows `BTreeSet`'s.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "Vec<TaskId>", into = "Vec<TaskId>")
)]
pub struct TaskSet {
    /// Strictly increasing.
    tasks: Vec<TaskId>,
}

impl TaskSet {
    /// An empty set.
    pub const fn new() -> Self {
        Self { tasks: Vec::new() }
    }

    /// An empty set with room for `capacity` tasks.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            tasks: Vec::with_capacity(capacity),
        }
    }

    /// The set of `tasks`, which must not repeat a task; `Err` names a task given twice.
    ///
    /// Takes `tasks` over without copying when they are already in order.
    pub fn from_unique(mut tasks: Vec<TaskId>) -> Result<Self, TaskId> {
        // Callers mostly hand over sorted lists: strictly increasing is sorted and free of
        // repeats at once, one pass instead of a sortedness pass and a repeats pass.
        if increasing(&tasks) {
            return Ok(Self { tasks });
        }
        tasks.sort_unstable();
        match tasks.windows(2).find(|w| w[0] == w[1]) {
            Some(w) => Err(w[0]),
            None => Ok(Self { tasks }),
        }
    }

    /// The set of `tasks`, which the caller has checked to be strictly increasing.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn from_increasing(tasks: Vec<TaskId>) -> Self {
        debug_assert!(increasing(&tasks));
        Self { tasks }
    }

    /// The number of tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the set has no tasks.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Whether `task` is in the set.
    pub fn contains(&self, task: &TaskId) -> bool {
        self.tasks.binary_search(task).is_ok()
    }

    /// Adds `task`; returns whether it was new.
    pub fn insert(&mut self, task: TaskId) -> bool {
        match self.tasks.binary_search(&task) {
            Ok(_) => false,
            Err(at) => {
                self.tasks.insert(at, task);
                true
            }
        }
    }

    /// Removes `task`; returns whether it was present.
    pub fn remove(&mut self, task: &TaskId) -> bool {
        match self.tasks.binary_search(task) {
            Ok(at) => {
                self.tasks.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Keeps only the tasks for which `keep` returns true.
    pub fn retain(&mut self, keep: impl FnMut(&TaskId) -> bool) {
        self.tasks.retain(keep);
    }

    /// Removes every task.
    pub fn clear(&mut self) {
        self.tasks.clear();
    }

    /// The smallest task.
    pub fn first(&self) -> Option<&TaskId> {
        self.tasks.first()
    }

    /// The largest task.
    pub fn last(&self) -> Option<&TaskId> {
        self.tasks.last()
    }

    /// The tasks in order.
    pub fn iter(&self) -> std::slice::Iter<'_, TaskId> {
        self.tasks.iter()
    }

    /// The tasks in order, as a slice.
    pub fn as_slice(&self) -> &[TaskId] {
        &self.tasks
    }

    /// Restores the invariant after tasks were appended in any order.
    fn normalize(&mut self) {
        if !increasing(&self.tasks) {
            self.tasks.sort_unstable();
            self.tasks.dedup();
        }
    }
}

/// Whether `tasks` is strictly increasing: every set of every assignment is checked so, and
/// sets run to thousands of tasks. Natively [`by_blocks`], which the compiler vectorises; in
/// wasm, which has no vectors for it, [`by_carried_keys`]: the sticky sample's `from_unique`
/// calls on 1000 members took 0.86M instructions so instead of the block-wise loop's 1.01M.
fn increasing(tasks: &[TaskId]) -> bool {
    if cfg!(target_arch = "wasm32") {
        by_carried_keys(tasks)
    } else {
        by_blocks(tasks)
    }
}

/// [`increasing`], pairs compared a block at a time with no exit per pair.
fn by_blocks(tasks: &[TaskId]) -> bool {
    const BLOCK: usize = 64;
    let Some(last) = tasks.len().checked_sub(1) else {
        return true;
    };
    let (earlier, later) = (&tasks[..last], &tasks[1..]);
    earlier
        .chunks(BLOCK)
        .zip(later.chunks(BLOCK))
        .all(|(a, b)| {
            a.iter()
                .zip(b)
                .fold(true, |ok, (x, y)| ok & (x.key() < y.key()))
        })
}

/// [`increasing`], each task's key made once and carried to the next comparison, with no exit
/// per pair.
fn by_carried_keys(tasks: &[TaskId]) -> bool {
    let Some((first, rest)) = tasks.split_first() else {
        return true;
    };
    let mut last = first.key();
    rest.iter().fold(true, |ok, t| {
        let key = t.key();
        let ok = ok & (last < key);
        last = key;
        ok
    })
}

impl fmt::Debug for TaskSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(&self.tasks).finish()
    }
}

impl FromIterator<TaskId> for TaskSet {
    fn from_iter<I: IntoIterator<Item = TaskId>>(iter: I) -> Self {
        let mut set = Self {
            tasks: iter.into_iter().collect(),
        };
        set.normalize();
        set
    }
}

impl Extend<TaskId> for TaskSet {
    fn extend<I: IntoIterator<Item = TaskId>>(&mut self, iter: I) {
        self.tasks.extend(iter);
        self.normalize();
    }
}

impl<'a> Extend<&'a TaskId> for TaskSet {
    fn extend<I: IntoIterator<Item = &'a TaskId>>(&mut self, iter: I) {
        self.extend(iter.into_iter().copied());
    }
}

impl<const N: usize> From<[TaskId; N]> for TaskSet {
    fn from(tasks: [TaskId; N]) -> Self {
        tasks.into_iter().collect()
    }
}

/// Fails, naming the task, when a task is listed twice.
impl TryFrom<Vec<TaskId>> for TaskSet {
    type Error = String;

    fn try_from(tasks: Vec<TaskId>) -> Result<Self, String> {
        Self::from_unique(tasks).map_err(|t| format!("task {t} is listed twice"))
    }
}

impl From<TaskSet> for Vec<TaskId> {
    fn from(set: TaskSet) -> Self {
        set.tasks
    }
}

impl IntoIterator for TaskSet {
    type Item = TaskId;
    type IntoIter = std::vec::IntoIter<TaskId>;

    fn into_iter(self) -> Self::IntoIter {
        self.tasks.into_iter()
    }
}

impl<'a> IntoIterator for &'a TaskSet {
    type Item = &'a TaskId;
    type IntoIter = std::slice::Iter<'a, TaskId>;

    fn into_iter(self) -> Self::IntoIter {
        self.tasks.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(p: u32) -> TaskId {
        TaskId::new(0, p)
    }

    /// Collecting, extending and inserting keep the tasks sorted and unique.
    #[test]
    fn stays_sorted_and_unique() {
        let mut set: TaskSet = [t(3), t(1), t(3)].into();
        assert_eq!(set.as_slice(), [t(1), t(3)]);
        assert!(set.insert(t(2)));
        assert!(!set.insert(t(2)));
        set.extend([t(0), t(3)]);
        assert_eq!(set.as_slice(), [t(0), t(1), t(2), t(3)]);
        assert!(set.remove(&t(1)));
        assert!(!set.remove(&t(1)));
        assert!(set.contains(&t(2)) && !set.contains(&t(1)));
        assert_eq!(
            (set.first(), set.last(), set.len()),
            (Some(&t(0)), Some(&t(3)), 3)
        );
        assert_eq!(
            format!("{set:?}"),
            "{TaskId { subtopology: 0, partition: 0 }, TaskId { subtopology: 0, partition: 2 }, TaskId { subtopology: 0, partition: 3 }}"
        );
    }

    /// Both order checks (the native block-wise one and wasm's carried-key one) find a repeat
    /// or a fall at every position, across block edges too, and take empty, single and
    /// increasing lists.
    #[test]
    fn increasing_checks_every_pair() {
        for increasing in [by_blocks, by_carried_keys] {
            assert!(increasing(&[]) && increasing(&[t(5)]));
            let sorted: Vec<TaskId> = (0..200).map(t).collect();
            assert!(increasing(&sorted));
            for at in 1..sorted.len() {
                let mut repeat = sorted.clone();
                repeat[at] = repeat[at - 1];
                assert!(!increasing(&repeat), "repeat at {at}");
                let mut fall = sorted.clone();
                fall.swap(at - 1, at);
                assert!(!increasing(&fall), "fall at {at}");
            }
            assert!(!increasing(&[TaskId::new(1, 0), TaskId::new(0, 9)]));
        }
    }

    /// `from_unique` sorts what is out of order and names a task given twice, in sorted
    /// input too; sorted means by subtopology, then partition.
    #[test]
    fn from_unique_names_a_repeat() {
        let set = TaskSet::from_unique(vec![t(2), t(0)]).expect("unique");
        assert_eq!(set.as_slice(), [t(0), t(2)]);
        assert_eq!(TaskSet::from_unique(vec![t(2), t(0), t(2)]), Err(t(2)));
        assert_eq!(TaskSet::from_unique(vec![t(0), t(1), t(1)]), Err(t(1)));
        assert_eq!(TaskSet::from_unique(Vec::new()), Ok(TaskSet::new()));
        let across = [TaskId::new(0, 7), TaskId::new(1, 0), TaskId::new(1, 3)];
        let set = TaskSet::from_unique(vec![across[2], across[0], across[1]]).expect("unique");
        assert_eq!(set.as_slice(), across);
        assert_eq!(
            TaskSet::from_unique(across.to_vec())
                .expect("unique")
                .as_slice(),
            across
        );
    }
}
