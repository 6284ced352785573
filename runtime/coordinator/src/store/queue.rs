//! [`GroupCommitQueue`]: the write queue between a store's callers and its one writer, which
//! commits every write waiting in one transaction (group commit). [`RedbStore`] and the etcd
//! store share it; they differ in what a transaction is and in what a failed one means, which
//! [`OnFailure`] says.
//!
//! Callers [`enqueue`](GroupCommitQueue::enqueue) a write and get its [`SyncToken`] at once
//! (or wait for room, the queue being bounded in bytes); the writer takes a batch from the
//! front ([`take_batch`](GroupCommitQueue::take_batch) or
//! [`wait_batch`](GroupCommitQueue::wait_batch)), commits it, and reports
//! [`committed`](GroupCommitQueue::committed) or [`failed`](GroupCommitQueue::failed), which
//! answers the [`sync`](GroupCommitQueue::sync) and [`sync_then`](GroupCommitQueue::sync_then)
//! callers its batch covers. Batches are taken in queue order and reported in it, so a store
//! that commits them one after the other always holds a prefix of the writes.
//!
//! [`RedbStore`]: super::RedbStore

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::{StoreError, SyncToken};

/// A [`Store::sync_then`](super::Store::sync_then) callback.
pub type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// A queued put (with its value) or delete (without).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The store's key.
    pub key: String,
    /// The new value; `None` deletes the key.
    pub value: Option<Vec<u8>>,
}

impl Write {
    /// A put of `value` under `key`.
    pub fn put(key: &str, value: &[u8]) -> Self {
        Self {
            key: key.to_owned(),
            value: Some(value.to_vec()),
        }
    }

    /// A delete of `key`.
    pub fn delete(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            value: None,
        }
    }

    /// What the write holds in memory: its key and value.
    pub fn bytes(&self) -> usize {
        self.key.len() + self.value.as_ref().map_or(0, Vec::len)
    }
}

/// What a failed commit means for the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnFailure {
    /// The store's durable state is unknown (a failed `fsync` may have dropped pages that a
    /// retry would report written): the failed batch's writes, everything queued after them
    /// and every later call fail, until the process restarts and reloads what is durable.
    /// The embedded store's policy.
    FailForGood,
    /// The backend is unavailable for now (a cluster without a quorum): the waiting writes
    /// are answered with an error (not acknowledged) but stay queued, the writer keeps
    /// retrying the failed batch, new writes are refused while it fails, and the first batch
    /// that commits ends the refusal. The etcd store's policy.
    RefuseUntilCommitted,
}

/// Which error a [`GroupCommitQueue`] needs from its store (the store words it, naming
/// itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal<'a> {
    /// [`OnFailure::FailForGood`]: a commit failed (for this reason), so every write, sync and
    /// read from then on fails.
    Failed(&'a str),
    /// [`OnFailure::RefuseUntilCommitted`]: the write's batch did not commit (for this
    /// reason): it is not acknowledged, and may still land, in order, once the backend
    /// commits again.
    Unacknowledged(&'a str),
    /// [`OnFailure::RefuseUntilCommitted`]: a new write refused, unwritten, while batches fail
    /// (for this reason).
    Outage(&'a str),
    /// A write made while the store is closing.
    Closing,
}

/// The receipt of a batch taken by the writer, to hand back to
/// [`committed`](GroupCommitQueue::committed) once it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "the batch's waiters are answered only once it is reported committed"]
pub struct Receipt {
    writes: u64,
    bytes: usize,
}

/// The queue: bounded in bytes, answered in order. See the module documentation.
pub struct GroupCommitQueue {
    state: Mutex<State>,
    /// Signalled when a write is queued or the store closes: a blocking writer may have work.
    work: Condvar,
    /// Signalled when a batch has committed or failed: room in the queue, and answers for
    /// `sync` callers.
    committed: Condvar,
    max_queued_bytes: usize,
    on_failure: OnFailure,
    /// Wakes a writer that does not block on `work` (an async task).
    wake: Option<Box<dyn Fn() + Send + Sync>>,
    /// The store's words for each refusal.
    errors: Box<dyn Fn(Refusal<'_>) -> StoreError + Send + Sync>,
}

/// The queue's writes and what the writer has done with them, behind its lock.
#[derive(Default)]
struct State {
    /// Writes not yet taken by the writer, in the order they were made.
    writes: VecDeque<Write>,
    /// The bytes of `writes` and of the batches taken but not yet committed.
    bytes: usize,
    /// The sequence number of the last write queued.
    written: u64,
    /// Writes up to this sequence number are committed.
    durable: u64,
    /// [`OnFailure::RefuseUntilCommitted`]: writes up to this sequence number were answered
    /// with an error; a later commit may still land them, which `durable` then says.
    failed: u64,
    /// [`sync_then`](GroupCommitQueue::sync_then) callers to answer: each waiter's sequence
    /// number and callback.
    waiters: Vec<(u64, Done)>,
    /// Why the last batch failed, while the failure stands (for good, or until a commit).
    failure: Option<String>,
    /// Set when the store closes: the writer commits what is queued, then exits.
    stop: bool,
}

impl GroupCommitQueue {
    /// An empty queue holding at most `max_queued_bytes` of writes (a single larger write is
    /// taken alone, once the queue is empty), failing as `on_failure` says, with `errors`
    /// wording each refusal.
    pub fn new(
        max_queued_bytes: usize,
        on_failure: OnFailure,
        errors: impl Fn(Refusal<'_>) -> StoreError + Send + Sync + 'static,
    ) -> Self {
        Self {
            state: Mutex::default(),
            work: Condvar::new(),
            committed: Condvar::new(),
            max_queued_bytes,
            on_failure,
            wake: None,
            errors: Box::new(errors),
        }
    }

    /// Calls `wake` whenever the writer may have work (a write queued, the store closing):
    /// for a writer that waits on something of its own rather than in
    /// [`wait_batch`](Self::wait_batch). It must be quick and must not block.
    pub fn waking(mut self, wake: impl Fn() + Send + Sync + 'static) -> Self {
        self.wake = Some(Box::new(wake));
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change to the state is made by statements that do not panic, so a panic
        // elsewhere cannot leave it half-updated.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, on: &Condvar, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        on.wait(state).unwrap_or_else(PoisonError::into_inner)
    }

    fn notify_writer(&self) {
        self.work.notify_one();
        if let Some(wake) = &self.wake {
            wake();
        }
    }

    /// The error for a new write now, if the queue refuses one.
    fn refusal(&self, state: &State) -> Option<StoreError> {
        match (&state.failure, self.on_failure) {
            (Some(why), OnFailure::FailForGood) => Some((self.errors)(Refusal::Failed(why))),
            (Some(why), OnFailure::RefuseUntilCommitted) => {
                Some((self.errors)(Refusal::Outage(why)))
            }
            (None, _) if state.stop => Some((self.errors)(Refusal::Closing)),
            (None, _) => None,
        }
    }

    /// Queues `write` and returns its token, after waiting for room (while a batch commits).
    /// Refused while the queue fails (see [`OnFailure`]) or the store closes.
    pub fn enqueue(&self, write: Write) -> Result<SyncToken, StoreError> {
        let size = write.bytes();
        let mut state = self.state();
        loop {
            if let Some(refused) = self.refusal(&state) {
                return Err(refused);
            }
            // An empty queue takes any write, so one larger than the bound still goes through.
            if state.bytes == 0 || state.bytes + size <= self.max_queued_bytes {
                break;
            }
            state = self.wait(&self.committed, state);
        }
        state.bytes += size;
        state.writes.push_back(write);
        state.written += 1;
        let token = SyncToken::new(state.written);
        drop(state);
        self.notify_writer();
        Ok(token)
    }

    /// The token of the last write queued: syncing it waits for everything queued so far.
    pub fn last_written(&self) -> SyncToken {
        SyncToken::new(self.state().written)
    }

    /// The bytes queued and being committed.
    pub fn queued_bytes(&self) -> usize {
        self.state().bytes
    }

    /// What `sync` of write `sequence` answers now, or `None` while it is pending.
    fn answer_for(&self, state: &State, sequence: u64) -> Option<Result<(), StoreError>> {
        match self.on_failure {
            OnFailure::FailForGood => match &state.failure {
                Some(why) => Some(Err((self.errors)(Refusal::Failed(why)))),
                None => (state.durable >= sequence).then_some(Ok(())),
            },
            OnFailure::RefuseUntilCommitted => {
                if state.durable >= sequence {
                    Some(Ok(()))
                } else if state.failed >= sequence {
                    let why = state.failure.as_deref().unwrap_or("its transaction failed");
                    Some(Err((self.errors)(Refusal::Unacknowledged(why))))
                } else {
                    None
                }
            }
        }
    }

    /// Blocks until the write behind `token`, and every write before it, is committed, or
    /// its batch failed.
    pub fn sync(&self, token: SyncToken) -> Result<(), StoreError> {
        let mut state = self.state();
        loop {
            if let Some(answer) = self.answer_for(&state, token.sequence()) {
                return answer;
            }
            state = self.wait(&self.committed, state);
        }
    }

    /// Calls `done` with what [`sync`](Self::sync) would return, at once when it is known,
    /// else from the writer's report of the batch that holds the write.
    pub fn sync_then(&self, token: SyncToken, done: Done) {
        let mut state = self.state();
        match self.answer_for(&state, token.sequence()) {
            Some(answer) => {
                drop(state);
                done(answer);
            }
            None => state.waiters.push((token.sequence(), done)),
        }
    }

    /// Takes the next batch off the front of the queue without waiting (`None` when nothing
    /// is queued: a writer that waits on its own wake-up then checks
    /// [`is_stopping`](Self::is_stopping)): the first write, and each following one while
    /// `accept` takes it (`accept` sees every write considered, the first included, so it can
    /// keep count). The batch's bytes stay counted until it is reported committed.
    pub fn take_batch(&self, accept: impl FnMut(&Write) -> bool) -> Option<(Vec<Write>, Receipt)> {
        let mut state = self.state();
        if state.writes.is_empty() {
            return None;
        }
        Some(Self::take(&mut state, accept))
    }

    fn take(state: &mut State, mut accept: impl FnMut(&Write) -> bool) -> (Vec<Write>, Receipt) {
        let mut writes = Vec::new();
        let mut bytes = 0;
        while let Some(write) = state.writes.front() {
            if !accept(write) && !writes.is_empty() {
                break;
            }
            bytes += write.bytes();
            writes.extend(state.writes.pop_front());
        }
        let receipt = Receipt {
            writes: writes.len() as u64,
            bytes,
        };
        (writes, receipt)
    }

    /// [`take_batch`](Self::take_batch) for a writer thread: blocks until a write is queued;
    /// `None` once the store is closing and nothing is left.
    pub fn wait_batch(&self, accept: impl FnMut(&Write) -> bool) -> Option<(Vec<Write>, Receipt)> {
        let mut state = self.state();
        while state.writes.is_empty() && !state.stop {
            state = self.wait(&self.work, state);
        }
        if state.writes.is_empty() {
            return None;
        }
        Some(Self::take(&mut state, accept))
    }

    /// The batch of `receipt` is committed: answers the waiters it covers and makes room.
    /// Under [`OnFailure::RefuseUntilCommitted`] it also ends a refusal.
    pub fn committed(&self, receipt: Receipt) {
        let mut state = self.state();
        state.failure = None;
        state.durable += receipt.writes;
        state.bytes -= receipt.bytes;
        let durable = state.durable;
        let (ready, waiting): (Vec<(u64, Done)>, _) = std::mem::take(&mut state.waiters)
            .into_iter()
            .partition(|(sequence, _)| *sequence <= durable);
        state.waiters = waiting;
        drop(state);
        self.committed.notify_all();
        for (_, done) in ready {
            done(Ok(()));
        }
    }

    /// The batch being committed failed, for `why`: every waiter is answered with an error, and
    /// the queue refuses writes as its [`OnFailure`] says. Under
    /// [`OnFailure::FailForGood`] what is queued is dropped; under
    /// [`OnFailure::RefuseUntilCommitted`] the writer keeps the batch and tries it again,
    /// reporting it once more when it commits.
    pub fn failed(&self, why: &str) {
        let mut state = self.state();
        state.failure = Some(why.to_owned());
        match self.on_failure {
            OnFailure::FailForGood => {
                // Nothing queued (the batch included) will be committed now; its memory is free.
                state.bytes = 0;
                state.writes.clear();
            }
            OnFailure::RefuseUntilCommitted => state.failed = state.written,
        }
        let waiters = std::mem::take(&mut state.waiters);
        drop(state);
        self.committed.notify_all();
        for (_, done) in waiters {
            done(Err(self.failure_error(why)));
        }
    }

    /// The error a waiter of a failed batch gets.
    fn failure_error(&self, why: &str) -> StoreError {
        match self.on_failure {
            OnFailure::FailForGood => (self.errors)(Refusal::Failed(why)),
            OnFailure::RefuseUntilCommitted => (self.errors)(Refusal::Unacknowledged(why)),
        }
    }

    /// The store is closing: new writes are refused, and the writer commits what is queued,
    /// then finds the queue stopped.
    pub fn stop(&self) {
        self.state().stop = true;
        self.notify_writer();
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopping(&self) -> bool {
        self.state().stop
    }
}

impl std::fmt::Debug for GroupCommitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("GroupCommitQueue")
            .field("queued", &state.writes.len())
            .field("bytes", &state.bytes)
            .field("written", &state.written)
            .field("durable", &state.durable)
            .field("on_failure", &self.on_failure)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn queue(on_failure: OnFailure) -> GroupCommitQueue {
        GroupCommitQueue::new(1 << 20, on_failure, |refusal| StoreError::Backend {
            backend: "test".into(),
            source: format!("{refusal:?}").into(),
        })
    }

    fn put(key: &str) -> Write {
        Write {
            key: key.to_owned(),
            value: Some(b"v".to_vec()),
        }
    }

    /// Whether `sync_then` of `token` answered at once, and how.
    fn answered_now(queue: &GroupCommitQueue, token: SyncToken) -> Option<String> {
        let (tx, rx) = mpsc::channel();
        queue.sync_then(
            token,
            Box::new(move |r| {
                let _ = tx.send(r.map_err(|e| e.to_string()).err().unwrap_or_default());
            }),
        );
        rx.try_recv().ok()
    }

    /// A batch is the first write and the ones `accept` takes; committing it answers its
    /// waiters (and only its), in order.
    #[test]
    fn batches_answer_their_waiters() {
        let q = queue(OnFailure::FailForGood);
        let tokens: Vec<SyncToken> = (0..4)
            .map(|i| q.enqueue(put(&format!("k{i}"))).unwrap())
            .collect();
        let (tx, rx) = mpsc::channel();
        for token in &tokens {
            let tx = tx.clone();
            let sequence = token.sequence();
            q.sync_then(
                *token,
                Box::new(move |r| tx.send((sequence, r.is_ok())).unwrap()),
            );
        }
        let mut seen = 0;
        let (batch, receipt) = q
            .take_batch(|_| {
                seen += 1;
                seen <= 2
            })
            .unwrap();
        assert_eq!(batch, [put("k0"), put("k1")]);
        q.committed(receipt);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(1, true), (2, true)]);
        let (batch, receipt) = q.take_batch(|_| false).unwrap();
        assert_eq!(
            batch,
            [put("k2")],
            "the first write is taken whatever accept says"
        );
        q.committed(receipt);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(3, true)]);
        assert_eq!(q.queued_bytes(), 3);
    }

    /// `FailForGood`: after a failed batch every waiter, every later write and every sync
    /// (even of a write committed before) fails, and the queue is emptied.
    #[test]
    fn fail_for_good_refuses_everything_after() {
        let q = queue(OnFailure::FailForGood);
        let kept = q.enqueue(put("a")).unwrap();
        let (_, receipt) = q.take_batch(|_| true).unwrap();
        q.committed(receipt);
        let lost = q.enqueue(put("b")).unwrap();
        q.enqueue(put("c")).unwrap();
        assert_eq!(answered_now(&q, lost), None, "pending");
        let (tx, rx) = mpsc::channel();
        q.sync_then(lost, Box::new(move |r| tx.send(r.is_err()).unwrap()));
        let _batch = q.take_batch(|_| false).unwrap();
        q.failed("disk on fire");
        assert_eq!(
            rx.try_recv(),
            Ok(true),
            "the waiter is answered with the error"
        );
        assert_eq!(q.queued_bytes(), 0, "the queue is emptied");
        let refused = q.enqueue(put("d")).unwrap_err().to_string();
        assert!(refused.contains("Failed(\"disk on fire\")"), "{refused}");
        assert!(q.sync(kept).is_err(), "even a durable write's sync fails");
        assert!(answered_now(&q, kept).is_some_and(|e| e.contains("Failed")));
    }

    /// `RefuseUntilCommitted`: a failed batch answers its waiters with `Unacknowledged` and
    /// refuses new writes with `Outage`; the batch, committed on a later try, lands with the
    /// writes queued before the failure, and writes are taken again.
    #[test]
    fn refuse_until_committed_recovers() {
        let q = queue(OnFailure::RefuseUntilCommitted);
        let first = q.enqueue(put("a")).unwrap();
        let second = q.enqueue(put("b")).unwrap();
        let (_, receipt) = q.take_batch(|_| false).unwrap();
        q.failed("no quorum");
        for token in [first, second] {
            let error = q.sync(token).unwrap_err().to_string();
            assert!(error.contains("Unacknowledged(\"no quorum\")"), "{error}");
        }
        let refused = q.enqueue(put("c")).unwrap_err().to_string();
        assert!(refused.contains("Outage(\"no quorum\")"), "{refused}");
        q.committed(receipt);
        q.sync(first).unwrap();
        let (batch, receipt) = q.take_batch(|_| true).unwrap();
        assert_eq!(batch, [put("b")], "queued before the failure, kept");
        q.committed(receipt);
        q.sync(second).unwrap();
        q.enqueue(put("d")).expect("writes are taken again");
    }

    /// A closing queue refuses writes, and the blocking writer gets `None` once it is drained.
    #[test]
    fn stop_drains_then_ends() {
        let q = queue(OnFailure::FailForGood);
        q.enqueue(put("a")).unwrap();
        q.stop();
        assert!(q.is_stopping());
        assert!(
            q.enqueue(put("b"))
                .unwrap_err()
                .to_string()
                .contains("Closing")
        );
        let (batch, receipt) = q.wait_batch(|_| true).unwrap();
        assert_eq!(batch, [put("a")]);
        q.committed(receipt);
        assert!(q.wait_batch(|_| true).is_none());
    }
}
