//! The group coordinator: group configs (`INVALID_CONFIG`), assignor selection and fallback,
//! describe, failures that keep the previous target assignment, backoff, restarts and
//! SIGKILL.

use std::io::{BufRead as _, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use assignor_coordinator::Registry;
use assignor_coordinator::capture;
use assignor_coordinator::config::BrokerConfig;
use assignor_coordinator::store::{MemoryStore, RedbStore, Store, StoreError, SyncToken};
use assignor_coordinator::{
    ASSIGNOR_NAME, ConfigOp, Coordinator, CoordinatorError, ErrorCode, NUM_STANDBY_REPLICAS,
    RACK_AWARE_ASSIGNMENT_TAGS,
};
use assignor_sandbox::{ErrorKind, Limits};
use assignor_sdk::capture::Capture;
use assignor_sdk::{Member, Topology};
use assignor_tests::guests;

use crate::common::{example, runtime};

const GROUP: &str = "orders-app";

/// A coordinator over `entries` and `store`, on a clock the test moves.
fn coordinator(
    entries: &[&str],
    extra: &[&str],
    store: Arc<dyn Store>,
) -> (Coordinator, Arc<AtomicU64>) {
    let mut overrides = vec![format!("group.streams.assignors={}", entries.join(","))];
    overrides.extend(extra.iter().map(|s| s.to_string()));
    let config = BrokerConfig::load(None, &overrides).expect("valid config");
    let registry = Registry::build(&runtime(Limits::default()), &config).expect("registry");
    let seconds = Arc::new(AtomicU64::new(1_000_000));
    let clock = seconds.clone();
    let coordinator = Coordinator::open(registry, &config, store)
        .expect("opens")
        .with_clock(move || {
            SystemTime::UNIX_EPOCH + Duration::from_secs(clock.load(Ordering::SeqCst))
        });
    (coordinator, seconds)
}

fn members_and_topology() -> (Vec<Member>, Topology) {
    let (group, topology) = example();
    (group.members, topology)
}

/// Joins the example group's members and topology to `GROUP`.
fn populate(c: &mut Coordinator) {
    let (members, topology) = members_and_topology();
    c.set_topology(GROUP, topology).expect("topology");
    for m in members {
        c.upsert_member(GROUP, m).expect("join");
    }
}

fn set(c: &mut Coordinator, key: &str, value: &str) -> Result<(), CoordinatorError> {
    c.alter_config(GROUP, &[(key, ConfigOp::Set(value.into()))])
        .map(drop)
}

/// Records `tracing` output for assertions.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture<R>(&self, f: impl FnOnce() -> R) -> R {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("logs")).into_owned()
    }
}

/// Setting an unregistered assignor, a bad standby count or an unknown key is
/// `INVALID_CONFIG` and stores nothing — not even the valid changes of the same request.
#[test]
fn invalid_config_stores_nothing() {
    let store = Arc::new(MemoryStore::new());
    let (mut c, _) = coordinator(&["sticky", "balanced"], &[], store.clone());
    let e = set(&mut c, ASSIGNOR_NAME, "nope").expect_err("unknown assignor");
    assert_eq!(e.code(), ErrorCode::InvalidConfig);
    assert_eq!(
        e.to_string(),
        "INVALID_CONFIG: group `orders-app`: streams.assignor.name: no assignor named `nope` \
         is registered (available: sticky, balanced)"
    );
    assert!(store.load_all().expect("load").is_empty(), "nothing stored");
    assert!(matches!(
        c.describe(GROUP),
        Err(CoordinatorError::UnknownGroup(_))
    ));

    set(&mut c, ASSIGNOR_NAME, "balanced").expect("valid");
    let stored = store.load_all().expect("load");
    let mixed = c.alter_config(
        GROUP,
        &[
            (ASSIGNOR_NAME, ConfigOp::Delete),
            (NUM_STANDBY_REPLICAS, ConfigOp::Set("two".into())),
        ],
    );
    assert_eq!(
        mixed.expect_err("bad count").code(),
        ErrorCode::InvalidConfig
    );
    let unknown = set(&mut c, "streams.assignor.nmae", "sticky").expect_err("typo");
    assert!(
        unknown.to_string().contains("unknown group config"),
        "{unknown}"
    );
    assert_eq!(store.load_all().expect("load"), stored, "unchanged");
    assert_eq!(
        c.describe(GROUP)
            .expect("exists")
            .configured_assignor
            .as_deref(),
        Some("balanced")
    );
}

/// Without `streams.assignor.name` the first registered assignor computes the target; with
/// it, the named one does. Changing it does not trigger a computation (KIP-1357), but
/// describe reports it at once as the next assignor.
#[test]
fn selection_and_describe() {
    let (mut c, _) = coordinator(&["sticky", "balanced"], &[], Arc::new(MemoryStore::new()));
    populate(&mut c);
    let target = c.compute_target(GROUP).expect("computes").expect("target");
    assert_eq!(target.assignor, "sticky");
    let epoch = target.epoch;
    let d = c.describe(GROUP).expect("describe");
    assert_eq!(
        (d.assignor_name.as_str(), d.target_assignment_epoch),
        ("sticky", Some(epoch))
    );
    assert_eq!(d.group_epoch, epoch);

    set(&mut c, ASSIGNOR_NAME, "balanced").expect("valid");
    assert_eq!(
        c.describe(GROUP).expect("describe").assignor_name,
        "balanced"
    );
    c.compute_target(GROUP).expect("nothing to do");
    assert_eq!(
        c.target(GROUP).expect("target").assignor,
        "sticky",
        "no rebalance"
    );

    let (members, _) = members_and_topology();
    c.remove_member(GROUP, &members[0].member_id)
        .expect("leave");
    let target = c.compute_target(GROUP).expect("computes").expect("target");
    assert_eq!(
        (target.assignor.as_str(), target.epoch),
        ("balanced", epoch + 1)
    );
    assert!(!target.members.contains_key(&members[0].member_id));
    let d = c.describe(GROUP).expect("describe");
    assert_eq!(d.target_assignor.as_deref(), Some("balanced"));
    assert!(d.target_usage.is_some() && d.last_failure.is_none());
}

/// Broker `AssignmentConfigs` apply unless the group overrides them; the override reaches the
/// assignor (no standbys computed with `streams.num.standby.replicas=0`).
#[test]
fn assignment_configs_resolve() {
    let (mut c, _) = coordinator(
        &["sticky"],
        &[
            "group.streams.num.standby.replicas=1",
            "group.streams.rack.aware.assignment.tags=zone",
        ],
        Arc::new(MemoryStore::new()),
    );
    populate(&mut c);
    let d = c.describe(GROUP).expect("describe");
    assert_eq!(d.configs.num_standby_replicas, 1);
    assert_eq!(d.configs.rack_aware_assignment_tags, ["zone"]);
    let target = c.compute_target(GROUP).expect("ok").expect("target");
    assert!(target.members.values().any(|m| !m.standby_tasks.is_empty()));

    c.alter_config(
        GROUP,
        &[
            (NUM_STANDBY_REPLICAS, ConfigOp::Set("0".into())),
            (RACK_AWARE_ASSIGNMENT_TAGS, ConfigOp::Set(String::new())),
        ],
    )
    .expect("valid");
    let d = c.describe(GROUP).expect("describe");
    assert_eq!(d.configs.num_standby_replicas, 0);
    assert!(d.configs.rack_aware_assignment_tags.is_empty());
    let (members, _) = members_and_topology();
    c.remove_member(GROUP, &members[0].member_id)
        .expect("leave");
    let target = c.compute_target(GROUP).expect("ok").expect("target");
    assert!(target.members.values().all(|m| m.standby_tasks.is_empty()));
}

/// A group asks for at most `group.streams.max.standby.replicas` standbys (Kafka's bound,
/// default 2): a larger count is refused naming the bound, with nothing stored, and a count
/// stored before the operator lowered the bound reaches the assignor clamped to it.
#[test]
fn standby_count_is_bounded_by_the_broker() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (mut c, _) = coordinator(&["sticky"], &[], store.clone());
    populate(&mut c);
    let stored = store.load_all().expect("load");
    for count in ["3", &u32::MAX.to_string()] {
        let e = set(&mut c, NUM_STANDBY_REPLICAS, count).expect_err("above the bound");
        assert_eq!(e.code(), ErrorCode::InvalidConfig);
        assert!(
            e.to_string().contains(&format!(
                "streams.num.standby.replicas: {count} is above the broker's \
                 group.streams.max.standby.replicas (2)"
            )),
            "{e}"
        );
    }
    assert_eq!(store.load_all().expect("load"), stored, "unchanged");
    set(&mut c, NUM_STANDBY_REPLICAS, "2").expect("at the bound");
    drop(c);

    let (c, _) = coordinator(
        &["sticky"],
        &["group.streams.max.standby.replicas=1"],
        store,
    );
    let d = c.describe(GROUP).expect("describe");
    assert_eq!(
        d.configs.num_standby_replicas, 1,
        "clamped to the new bound"
    );
}

/// A persisted assignor name that is no longer registered falls back to the default, with a
/// warning naming the group and the assignor; the group keeps working.
#[test]
fn unregistered_name_falls_back_with_a_warning() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (mut c, _) = coordinator(&["sticky", "balanced"], &[], store.clone());
    populate(&mut c);
    set(&mut c, ASSIGNOR_NAME, "balanced").expect("valid");
    drop(c);

    let (mut c, _) = coordinator(&["sticky"], &[], store);
    let d = c.describe(GROUP).expect("describe");
    assert_eq!(d.assignor_name, "sticky");
    assert_eq!(d.configured_assignor.as_deref(), Some("balanced"));
    let logs = Logs::default();
    let target = logs
        .capture(|| c.compute_target(GROUP).map(|t| t.cloned()))
        .expect("computes")
        .expect("target");
    assert_eq!(target.assignor, "sticky");
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("falling back to the default assignor"))
        .unwrap_or_else(|| panic!("no fallback warning in:\n{text}"));
    assert!(
        line.contains("WARN")
            && line.contains("group=orders-app")
            && line.contains("assignor=balanced")
            && line.contains("default=sticky"),
        "{line}"
    );
}

/// Several rebalances with a good assignor, then each hostile assignor in turn: every failure
/// is `UNKNOWN_SERVER_ERROR` with the kind, leaves the target and its epoch untouched, is
/// recorded on the group, is backed off rather than re-run on the next trigger, and the group
/// recovers as soon as it is switched back.
#[test]
fn failures_keep_the_previous_target() {
    let hostile = [
        (guests::ENDLESS_LOOP, "endless-loop", ErrorKind::OutOfFuel),
        (
            guests::UNBOUNDED_ALLOC,
            "unbounded-alloc",
            ErrorKind::MemoryLimit,
        ),
        (
            guests::DEEP_RECURSION,
            "deep-recursion",
            ErrorKind::StackOverflow,
        ),
        (guests::PANICS, "panics", ErrorKind::Trap),
        (guests::GUEST_ERROR, "guest-error", ErrorKind::GuestError),
        (
            guests::INVALID_OUTPUT,
            "invalid-output",
            ErrorKind::InvalidOutput,
        ),
        (
            guests::OVERSIZED_OUTPUT,
            "oversized-output",
            ErrorKind::InvalidOutput,
        ),
    ];
    let mut entries = vec!["sticky"];
    entries.extend(hostile.iter().map(|h| h.0));
    let (mut c, clock) = coordinator(
        &entries,
        &["invalid=duplicate-active"],
        Arc::new(MemoryStore::new()),
    );
    populate(&mut c);
    let (members, _) = members_and_topology();
    let mut spare = members[0].clone();
    for round in 0..3 {
        spare.member_id = format!("extra-{round}");
        c.upsert_member(GROUP, spare.clone()).expect("join");
        let t = c
            .compute_target(GROUP)
            .expect("good assignor")
            .cloned()
            .expect("target");
        assert_eq!(t.epoch, c.describe(GROUP).expect("d").group_epoch);
    }

    for (i, (_, name, kind)) in hostile.iter().enumerate() {
        set(&mut c, ASSIGNOR_NAME, name).expect("registered");
        spare.member_id = format!("hostile-{i}");
        c.upsert_member(GROUP, spare.clone())
            .expect("join triggers a rebalance");
        let before = c.target(GROUP).cloned().expect("previous target");

        let e = c.compute_target(GROUP).expect_err("hostile assignor fails");
        assert_eq!(e.code(), ErrorCode::UnknownServerError);
        let CoordinatorError::AssignmentFailed {
            error, backed_off, ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(
            (error.kind, error.assignor.as_str(), *backed_off),
            (*kind, *name, false)
        );
        assert!(
            e.to_string()
                .starts_with("UNKNOWN_SERVER_ERROR: group `orders-app`: task assignor")
        );
        assert_eq!(
            c.target(GROUP),
            Some(&before),
            "{name}: target and epoch kept"
        );

        let d = c.describe(GROUP).expect("describe");
        let failure = d.last_failure.expect("failure recorded");
        assert_eq!((failure.error.kind, failure.consecutive), (*kind, 1));
        assert!(failure.retry_at > failure.at);

        let again = c.compute_target(GROUP).expect_err("still failing");
        assert!(
            matches!(
                again,
                CoordinatorError::AssignmentFailed {
                    backed_off: true,
                    ..
                }
            ),
            "{name}: the next trigger is backed off, not re-run: {again}"
        );
        clock.fetch_add(2, Ordering::SeqCst);
        let retried = c.compute_target(GROUP).expect_err("retried and failed");
        assert!(matches!(
            retried,
            CoordinatorError::AssignmentFailed {
                backed_off: false,
                ..
            }
        ));
        let d = c.describe(GROUP).expect("describe");
        let failure = d.last_failure.expect("failure");
        assert_eq!(failure.consecutive, 2);
        assert_eq!(
            failure.retry_at.duration_since(failure.at).expect("later"),
            Duration::from_secs(2),
            "the backoff doubles"
        );
        assert_eq!(c.target(GROUP), Some(&before));

        c.alter_config(GROUP, &[(ASSIGNOR_NAME, ConfigOp::Delete)])
            .expect("back to the default");
        let t = c
            .compute_target(GROUP)
            .expect("recovers at once")
            .cloned()
            .expect("target");
        assert_eq!(t.assignor, "sticky");
        assert_eq!(t.epoch, c.describe(GROUP).expect("d").group_epoch);
        assert!(c.describe(GROUP).expect("d").last_failure.is_none());
    }
}

/// Configs and target assignments survive dropping the coordinator and reopening its data
/// directory; tasks follow their subtopology by id when the topology's order changes.
#[test]
fn state_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || -> Arc<dyn Store> {
        Arc::new(RedbStore::open(dir.path().join("store.redb")).expect("store"))
    };
    let (mut c, _) = coordinator(&["sticky", "balanced"], &[], open());
    populate(&mut c);
    set(&mut c, ASSIGNOR_NAME, "balanced").expect("valid");
    let target = c
        .compute_target(GROUP)
        .expect("ok")
        .cloned()
        .expect("target");
    let description = c.describe(GROUP).expect("describe");
    drop(c);

    let (mut c, _) = coordinator(&["sticky", "balanced"], &[], open());
    assert_eq!(c.target(GROUP), Some(&target));
    assert_eq!(c.describe(GROUP).expect("describe"), description);

    let mut reordered = c.topology(GROUP).cloned().expect("topology");
    reordered.subtopologies.reverse();
    c.set_topology(GROUP, reordered.clone()).expect("topology");
    let moved = c.target(GROUP).expect("target");
    for (member, a) in &target.members {
        let names = |t: &Topology, s: &assignor_sdk::TaskSet| {
            s.iter().map(|&x| t.task_name(x)).collect::<Vec<_>>()
        };
        let (_, old_topology) = members_and_topology();
        let mut before = names(&old_topology, &a.active_tasks);
        let mut after = names(&reordered, &moved.members[member].active_tasks);
        before.sort();
        after.sort();
        assert_eq!(before, after, "{member} keeps its tasks by subtopology id");
    }
}

/// A process driving the coordinator on a data directory, SIGKILLed at random points ten
/// times (mostly in the middle of its writes), restarts with every acknowledged config and
/// target assignment intact and readable: both epochs at least the last acknowledged, the
/// config that of the last acknowledged step or of the one in flight, and the target a
/// complete assignment of the stored topology.
#[test]
fn sigkill_keeps_acknowledged_configs_and_targets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut random = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as u64
        | 1;
    eprintln!("coordinator crash test seed {random}");
    let mut next = move || {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        random
    };
    // The last acknowledged (group epoch, target epoch), over all rounds.
    let mut acked = (0u32, 0u32);
    for round in 0..10 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_coordinator-writer"))
            .arg(dir.path().join("store.redb"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn coordinator-writer");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut line = || lines.next().map(|l| l.expect("read writer output"));
        assert_eq!(line().as_deref(), Some("start"), "round {round}");
        // The step acknowledged last in this round (the writer counts from 1 each run).
        let mut step = 0u64;
        let mut ack = |l: String| {
            let words: Vec<u64> = l
                .strip_prefix("committed ")
                .unwrap_or_else(|| panic!("unexpected writer output {l:?}"))
                .split(' ')
                .map(|w| w.parse().expect("a number"))
                .collect();
            step = words[0];
            acked = (words[1] as u32, words[2] as u32);
        };
        for _ in 0..1 + next() % 12 {
            ack(line().expect("writer died"));
        }
        std::thread::sleep(Duration::from_micros(next() % 4_000));
        // SIGKILL on Unix: no destructors, no flush.
        child.kill().expect("kill");
        child.wait().expect("reap");
        while let Some(l) = line() {
            ack(l);
        }

        let (c, _) = coordinator(
            &["sticky", "balanced"],
            &[],
            Arc::new(RedbStore::open(dir.path().join("store.redb")).expect("reopen after SIGKILL")),
        );
        let d = c.describe("g").expect("the group survived");
        assert!(
            d.group_epoch >= acked.0 && d.target_assignment_epoch >= Some(acked.1),
            "round {round}: stored epochs {} / {:?} behind acknowledged {acked:?}",
            d.group_epoch,
            d.target_assignment_epoch
        );
        let standbys = u64::from(d.configs.num_standby_replicas);
        assert!(
            standbys == step % 3 || standbys == (step + 1) % 3,
            "round {round}: standbys {standbys} after acknowledged step {step}"
        );
        let topology = c.topology("g").expect("topology");
        let target = c.target("g").expect("target");
        let mut actives: Vec<_> = target
            .members
            .values()
            .flat_map(|m| m.active_tasks.iter().copied())
            .collect();
        actives.sort();
        assert_eq!(
            actives,
            topology.tasks().collect::<Vec<_>>(),
            "round {round}: every task active exactly once"
        );
    }
}

/// A failed computation is captured with the exact input, configuration, limits, error and
/// fuel; the capture survives a restart and replays to the same error and the same fuel.
#[test]
fn failures_are_captured_and_replay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let failing = [
        (guests::ENDLESS_LOOP, "endless-loop"),
        (guests::PANICS, "panics"),
        (guests::INVALID_OUTPUT, "invalid-output"),
    ];
    let mut entries = vec!["sticky"];
    entries.extend(failing.iter().map(|f| f.0));
    let extra = ["invalid=duplicate-active"];
    let store = || {
        Arc::new(RedbStore::open(dir.path().join("store.redb")).expect("store")) as Arc<dyn Store>
    };
    let mut errors = Vec::new();
    {
        let (mut c, _) = coordinator(&entries, &extra, store());
        populate(&mut c);
        assert!(c.last_capture(GROUP).is_none(), "nothing failed yet");
        for (path, name) in failing {
            set(&mut c, ASSIGNOR_NAME, name).expect("registered");
            let Err(CoordinatorError::AssignmentFailed { error, .. }) = c.compute_target(GROUP)
            else {
                panic!("{name} must fail");
            };
            let capture =
                Capture::from_bytes(c.last_capture(GROUP).expect("captured")).expect("decodes");
            let failure = capture.failure.clone().expect("a failure");
            assert_eq!(
                (failure.kind.as_str(), &failure.message, failure.fuel),
                (error.kind.as_str(), &error.message, error.fuel),
                "{name}"
            );
            assert!(error.fuel.is_some_and(|f| f > 0), "{name}: fuel measured");
            assert_eq!(
                capture.config.get("invalid").map(String::as_str),
                Some("duplicate-active")
            );
            assert_eq!(capture.group.members.len(), 3);

            // Replay: a fresh runtime with the captured limits, the component configured as
            // captured.
            let rt = runtime(capture::limits_for(&capture));
            let component = rt.load_file(path, &capture.config).expect("loads");
            let outcome = component.assign(&capture.group, &capture.topology);
            assert!(
                capture::reproduces(&capture, &outcome),
                "{name}: {outcome:?}"
            );
            errors.push(c.last_capture(GROUP).expect("captured").to_vec());
        }
    }
    let (c, _) = coordinator(&entries, &extra, store());
    assert_eq!(
        c.last_capture(GROUP),
        errors.last().map(Vec::as_slice),
        "the last capture survives a restart"
    );
}

/// A store whose writes and flushes fail while `failing` is set (a full or broken disk).
#[derive(Debug, Default)]
struct BrokenDisk {
    inner: MemoryStore,
    writes_fail: AtomicBool,
    flushes_fail: AtomicBool,
}

impl BrokenDisk {
    fn refuse(what: &str) -> StoreError {
        StoreError::Backend {
            backend: "broken disk".into(),
            source: format!("{what} refused").into(),
        }
    }
}

impl Store for BrokenDisk {
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.load_all()
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let token = self.put_unsynced(key, value)?;
        self.sync(token)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key)
    }

    fn put_unsynced(&self, key: &str, value: &[u8]) -> Result<SyncToken, StoreError> {
        if self.writes_fail.load(Ordering::SeqCst) {
            return Err(Self::refuse("write"));
        }
        self.inner.put(key, value).map(|()| SyncToken::new(1))
    }

    fn sync(&self, _: SyncToken) -> Result<(), StoreError> {
        if self.flushes_fail.load(Ordering::SeqCst) {
            return Err(Self::refuse("flush"));
        }
        Ok(())
    }
}

/// A commit whose write fails keeps the previous target, epoch and state in memory and in
/// the store; one whose flush fails reports the store's error instead of acknowledging.
#[test]
fn a_failed_store_write_keeps_the_previous_target() {
    let disk = Arc::new(BrokenDisk::default());
    let (mut c, _) = coordinator(&["balanced"], &[], disk.clone());
    populate(&mut c);
    let first = c.compute_target(GROUP).expect("computes").cloned();
    let (members, _) = members_and_topology();
    let mut joining = members[0].clone();
    joining.member_id = "member-new".into();
    c.upsert_member(GROUP, joining).expect("join");
    let before = c.describe(GROUP).expect("describe");
    let stored = disk.load_all().expect("load");

    disk.writes_fail.store(true, Ordering::SeqCst);
    let job = c.plan(GROUP).expect("plans").expect("the target is behind");
    let e = c.commit_unsynced(job.run()).expect_err("the write fails");
    assert!(matches!(e, CoordinatorError::Store(_)), "{e}");
    assert_eq!(c.target(GROUP), first.as_ref(), "previous target kept");
    assert_eq!(c.describe(GROUP).expect("describe"), before);
    assert_eq!(disk.load_all().expect("load"), stored, "nothing written");

    disk.writes_fail.store(false, Ordering::SeqCst);
    disk.flushes_fail.store(true, Ordering::SeqCst);
    let job = c.plan(GROUP).expect("plans").expect("the target is behind");
    let pending = c.commit_unsynced(job.run()).expect("written");
    let e = pending.wait().expect_err("the flush fails");
    assert!(e.to_string().contains("flush refused"), "{e}");
}
