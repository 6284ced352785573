//! Two service replicas (child processes) over one three-member etcd cluster (issue 17): a
//! group written on one is planned and answered by the other, with an upload made on the
//! first, which the second loads and checks itself; concurrent triggers of one group
//! on both commit exactly one target per group epoch (checked in etcd's history of the group's
//! key, not only in the answers); SIGKILL of one replica mid-load loses nothing it
//! acknowledged, and its clients carry on at the other; what one replica changes (uploads new,
//! replaced and deleted, a tenant's limits, group documents) reaches the other through the
//! store's watch, which carries on when the etcd member it was on is killed. With the
//! replicas' views held back deterministically (an upload whose trial sleeps, which each
//! replica's thread for tenant `a` runs before that tenant's later changes): writes from a
//! stale view are fenced (group deletes, uploads, limits, captures), an upload's delete and a
//! group's selection of it never both land, a document PUT is applied to the stored group,
//! and another tenant's changes are not held back.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant, UNIX_EPOCH};

use assignor_coordinator::config::BrokerConfig;
use assignor_coordinator::store::Store as _;
use assignor_coordinator::{ASSIGNOR_NAME, CaptureWrite, ConfigOp, Coordinator, StateLimits};
use assignor_store_etcd::EtcdStore;
use assignor_store_etcd::testing::Cluster;
use assignor_tests::guests;
use serde_json::{Value, json};

use crate::service::{Client, TOKEN_ADMIN, TOKEN_B, group_doc};
use crate::service_restart::Process;

/// Rounds of concurrent triggers, each on a new group epoch.
const ROUNDS: usize = 4;
/// Client threads in the SIGKILL test, each with a group of its own.
const CLIENTS: usize = 3;
/// Steps (a group PUT then a trigger) each client makes in the SIGKILL test.
const STEPS: usize = 10;
/// How long a change made on one replica may take to reach the other.
const SEEN_WITHIN: Duration = Duration::from_secs(15);

/// Waits until `seen` holds, polling, at most [`SEEN_WITHIN`]; `what` names it in the panic.
fn eventually(what: &str, mut seen: impl FnMut() -> bool) {
    let deadline = Instant::now() + SEEN_WITHIN;
    while !seen() {
        assert!(
            Instant::now() < deadline,
            "not seen within {SEEN_WITHIN:?}: {what}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// The SHA-256 of tenant `a`'s upload `name` as `client`'s replica lists it.
fn listed_sha(client: &Client, name: &str) -> Option<String> {
    let (status, body) = client.get("/v1/assignors");
    assert_eq!(status, 200, "{body}");
    body["assignors"]
        .as_array()?
        .iter()
        .find(|a| a["name"] == name)
        .and_then(|a| a["sha256"].as_str().map(str::to_owned))
}

/// A replica of the service on `cluster`, with a data directory of its own (its compiled
/// cache: the state is all in etcd).
fn replica(cluster: &Cluster, dir: &tempfile::TempDir) -> Process {
    Process::start_with(dir.path(), &[format!("service.store={}", cluster.url())])
}

/// The etcd version (writes since creation) of tenant `a`'s group `group`'s record.
fn writes_of(cluster: &Cluster, group: &str) -> i64 {
    record_writes(cluster, &format!("group/{group}"))
}

/// The computations tenant `a` ran on `replica`, from its metrics.
fn computations(replica: &Process) -> u64 {
    let (status, text) = Client::new(&replica.base, TOKEN_ADMIN).get_text("/metrics");
    assert_eq!(status, 200, "{text}");
    text.lines()
        .filter(|l| l.starts_with(r#"assignor_assignment_duration_seconds_count{tenant="a""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A group PUT on replica A is triggered on A and B at once, `ROUNDS` times (each round a new
/// member, so a new epoch): both answer the same target, of the new epoch, and etcd's history
/// of the group's key shows exactly two writes per round, the PUT and one target, although
/// both replicas computed in some rounds (the groups are large enough that both plan before
/// either commits, so the losing replica's conditional commit is exercised). Then an upload
/// made and selected on A computes the group on B.
#[test]
fn concurrent_triggers_on_two_replicas_commit_one_target_per_epoch() {
    let cluster = Cluster::start(3).expect("an etcd cluster");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (replica(&cluster, &dir_a), replica(&cluster, &dir_b));
    let (ca, cb) = (a.client(), b.client());
    for round in 0..ROUNDS {
        let doc = group_doc(200 + round, 1024);
        let (status, described) = ca.put("/v1/groups/g", doc.as_bytes());
        assert_eq!(status, 200, "{described}");
        let epoch = described["groupEpoch"].as_u64().expect("an epoch");
        // B plans from what its watch brought: it must have the new epoch (a replica behind
        // would answer the target it holds, of the epoch before).
        eventually("the group's new epoch on B", || {
            cb.get("/v1/groups/g").1["groupEpoch"].as_u64() == Some(epoch)
        });
        let barrier = Barrier::new(2);
        let (on_a, on_b) = thread::scope(|s| {
            let trigger = |c: &'static str| {
                let (barrier, c) = (&barrier, if c == "a" { &ca } else { &cb });
                move || {
                    barrier.wait();
                    c.post("/v1/groups/g/assign")
                }
            };
            let on_a = s.spawn(trigger("a"));
            let on_b = s.spawn(trigger("b"));
            (on_a.join().unwrap(), on_b.join().unwrap())
        });
        for (status, answer) in [&on_a, &on_b] {
            assert_eq!(*status, 200, "round {round}: {answer}");
            assert_eq!(
                answer["targetAssignmentEpoch"].as_u64(),
                Some(epoch),
                "{answer}"
            );
        }
        assert_eq!(
            on_a.1["assignment"], on_b.1["assignment"],
            "round {round}: the replicas answer one target"
        );
        assert_eq!(on_a.1["computedAtMs"], on_b.1["computedAtMs"]);
        assert_eq!(
            writes_of(&cluster, "g"),
            2 * (round as i64 + 1),
            "round {round}: one group write and one target write per epoch"
        );
        let (status, read) = cb.get("/v1/groups/g/assignment");
        assert_eq!(status, 200, "{read}");
        assert_eq!(read["assignment"], on_a.1["assignment"]);
    }
    // An upload made on A, selected by the group on A, is loaded and checked by B (when its
    // watch brings it, or when B computes the group), and B computes the group with it.
    let (status, report) = ca.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 201, "{report}");
    let (status, config) =
        ca.set_config("g", json!({"streams.assignor.name": "hashmap-user"}), &[]);
    assert_eq!(status, 200, "{config}");
    let (status, described) = ca.put("/v1/groups/g", group_doc(3, 16).as_bytes());
    assert_eq!(status, 200, "{described}");
    eventually("the group's new document and config on B", || {
        let (_, d) = cb.get("/v1/groups/g");
        d["groupEpoch"] == described["groupEpoch"] && d["assignorName"] == "hashmap-user"
    });
    let (status, answer) = cb.post("/v1/groups/g/assign");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["assignor"], "hashmap-user", "{answer}");
    let computed = computations(&a) + computations(&b) - 1;
    assert!(
        computed > ROUNDS as u64,
        "{computed} computations in {ROUNDS} rounds: the replicas never raced"
    );
    println!("replicas: {computed} computations, {ROUNDS} targets committed");
}

/// What a client had acknowledged for its group: the target epoch and assignment.
type Acked = Option<(u64, Value)>;

/// `STEPS` group PUTs and triggers on `clients[0]`, moving to the next client when a request
/// gets no answer (its replica is gone); counts each acknowledged step in `done`.
fn drive(clients: &[Client], group: &str, done: &AtomicUsize) -> Acked {
    let mut at = 0;
    let mut acked = None;
    let mut step = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while step < STEPS {
        assert!(Instant::now() < deadline, "{group}: no progress in 60 s");
        let doc = group_doc(2 + step % 3, 8 + step as u32);
        let answered = clients[at]
            .try_put(&format!("/v1/groups/{group}"), doc.as_bytes())
            .and_then(|(status, body)| {
                assert_eq!(status, 200, "{group}: {body}");
                clients[at].try_post(&format!("/v1/groups/{group}/assign"))
            });
        match answered {
            Some((200, body)) => {
                let epoch = body["targetAssignmentEpoch"].as_u64().expect("an epoch");
                acked = Some((epoch, body["assignment"].clone()));
                step += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            // Changed on the other replica at the same time: retried, as a client would.
            Some((503, _)) => {}
            Some((status, body)) => panic!("{group}: {status} {body}"),
            None => at = (at + 1).min(clients.len() - 1),
        }
    }
    acked
}

/// SIGKILL of replica A while three clients drive their groups through it: they carry on at
/// B, and every target A acknowledged is what B serves (or a later one).
#[test]
fn sigkill_of_a_replica_mid_load_loses_nothing_acknowledged() {
    let cluster = Cluster::start(3).expect("an etcd cluster");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (replica(&cluster, &dir_a), replica(&cluster, &dir_b));
    let done = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let pair = [a.client(), b.client()];
            let done = done.clone();
            thread::spawn(move || {
                let group = format!("g{i}");
                let acked = drive(&pair, &group, &done);
                (group, acked)
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while done.load(Ordering::Relaxed) < CLIENTS * 2 {
        assert!(Instant::now() < deadline, "no progress before the kill");
        thread::sleep(Duration::from_millis(10));
    }
    let killed_after = done.load(Ordering::Relaxed);
    a.sigkill();
    let acked: BTreeMap<String, Acked> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert!(
        done.load(Ordering::Relaxed) == CLIENTS * STEPS && killed_after < CLIENTS * STEPS,
        "the clients finished at B after the kill ({killed_after} steps before it)"
    );
    let cb = b.client();
    for (group, acked) in &acked {
        let (epoch, assignment) = acked.as_ref().expect("acknowledged targets");
        let (status, now) = cb.get(&format!("/v1/groups/{group}/assignment"));
        assert_eq!(status, 200, "{group}: {now}");
        assert_eq!(
            now["targetAssignmentEpoch"].as_u64(),
            Some(*epoch),
            "{group}"
        );
        assert_eq!(&now["assignment"], assignment, "{group}");
    }
}

/// What replica A changes reaches replica B through the store's watch, each within
/// [`SEEN_WITHIN`]: a new upload, then a version replacing it (which B loads and checks, and
/// computes with: B's target is A's for the same document), a group's document and config,
/// tenant `a`'s limits changed by the admin, the upload deleted (B stops listing and serving
/// it); a damaged record is refused by B (counted, not applied) without stopping the changes
/// after it; with each etcd member killed in turn (the one B's watch is on among them), a
/// group change still reaches B, and B counts its watch's resumption.
#[test]
fn changes_on_one_replica_reach_the_other_through_the_watch() {
    let mut cluster = Cluster::start(3).expect("an etcd cluster");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (replica(&cluster, &dir_a), replica(&cluster, &dir_b));
    let (ca, cb) = (a.client(), b.client());
    let (admin_a, admin_b) = (
        Client::new(&a.base, TOKEN_ADMIN),
        Client::new(&b.base, TOKEN_ADMIN),
    );

    let (status, v1) = ca.upload("swap", guests::SWAP_V1);
    assert_eq!(status, 201, "{v1}");
    eventually("the new upload on B", || {
        listed_sha(&cb, "swap").as_ref() == v1["sha256"].as_str().map(str::to_owned).as_ref()
    });
    let (status, v2) = ca.upload("swap", guests::SWAP_V2);
    assert_eq!(status, 200, "{v2}");
    assert_ne!(v1["sha256"], v2["sha256"]);
    eventually("the replaced upload on B", || {
        listed_sha(&cb, "swap").as_ref() == v2["sha256"].as_str().map(str::to_owned).as_ref()
    });

    for group in ["on-a", "on-b"] {
        let (status, body) = ca.put(&format!("/v1/groups/{group}"), group_doc(5, 16).as_bytes());
        assert_eq!(status, 200, "{body}");
        let (status, body) = ca.set_config(group, json!({"streams.assignor.name": "swap"}), &[]);
        assert_eq!(status, 200, "{body}");
    }
    eventually("the group document and config on B", || {
        let (status, d) = cb.get("/v1/groups/on-b");
        status == 200 && d["assignorName"] == "swap"
    });
    let (status, on_a) = ca.post("/v1/groups/on-a/assign");
    assert_eq!(status, 200, "{on_a}");
    let (status, on_b) = cb.post("/v1/groups/on-b/assign");
    assert_eq!(status, 200, "{on_b}");
    assert_eq!(on_b["assignor"], "swap");
    assert_eq!(
        on_a["assignment"], on_b["assignment"],
        "B computes with the version A serves"
    );

    let (status, body) = admin_a.put("/v1/admin/tenants/a/limits", br#"{"maxGroups": 7}"#);
    assert_eq!(status, 200, "{body}");
    eventually("the limits on B", || {
        let (status, body) = admin_b.get("/v1/admin/tenants");
        status == 200 && body["tenants"][0]["limits"]["maxGroups"] == 7
    });

    for group in ["on-a", "on-b"] {
        let (status, body) = ca.set_config(group, json!({}), &["streams.assignor.name"]);
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = ca.delete("/v1/assignors/swap");
    assert_eq!(status, 204, "{body}");
    eventually("the deleted upload gone from B", || {
        listed_sha(&cb, "swap").is_none()
    });

    // A damaged record (written past the store) is refused by B, logged and counted, and
    // the changes after it still reach B.
    cluster
        .put("assignor/v/tenant/a/group/damaged", b"not a record")
        .expect("written");
    for member in 0..3 {
        cluster.kill(member);
        let (status, body) = ca.put("/v1/groups/on-b", group_doc(2 + member, 16).as_bytes());
        assert_eq!(status, 200, "{body}");
        let epoch = body["groupEpoch"].clone();
        eventually(
            &format!("a group change on B with member {member} killed"),
            || cb.get("/v1/groups/on-b").1["groupEpoch"] == epoch,
        );
        cluster.restart(member).expect("the member restarts");
        cluster.wait_member(member).expect("the member rejoins");
    }
    let (status, metrics) = admin_b.get_text("/metrics");
    assert_eq!(status, 200, "{metrics}");
    let counted = |event: &str| -> u64 {
        let series = format!(r#"assignor_watch_events_total{{event="{event}"}}"#);
        metrics
            .lines()
            .filter(|l| l.starts_with(&series))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(counted("refused"), 1, "the damaged record:\n{metrics}");
    assert_eq!(cb.get("/v1/groups/damaged").0, 404, "not applied");
    let resumed = counted("resumed");
    assert!(
        resumed >= 1,
        "B's watch resumed after its member was killed:\n{metrics}"
    );
}

/// A coordinator of `broker`'s built-ins over its own store on `cluster` (a replica's).
fn coordinator_on(cluster: &Cluster) -> Coordinator {
    let config = BrokerConfig::load(None, &[]).expect("the default broker config");
    let runtime = crate::common::runtime(assignor_sandbox::Limits::default());
    let registry = assignor_coordinator::Registry::build(&runtime, &config).expect("the built-ins");
    let store = EtcdStore::open(&cluster.endpoints()).expect("opens");
    Coordinator::open(registry, &config, Arc::new(store)).expect("opens")
}

/// A group delete is fenced by the group's revision: a replica deleting from the state it
/// read before another replica changed the group is refused (`COORDINATOR_NOT_AVAILABLE`,
/// the change kept, the group read again), and deletes it once it holds the current state.
/// (Unconditional, the stale delete removed the other replica's change.)
#[test]
fn a_delete_from_a_stale_state_is_fenced() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let mut a = coordinator_on(&cluster);
    let (group, topology) = crate::common::example();
    a.set_topology("g", topology).expect("topology");
    let mut b = coordinator_on(&cluster);
    let joined = a
        .upsert_member("g", group.members[0].clone())
        .expect("a member joins on A");
    let error = b.delete_group("g").expect_err("B's state is stale");
    assert_eq!(
        error.code(),
        assignor_coordinator::ErrorCode::CoordinatorNotAvailable,
        "{error}"
    );
    let versions = || cluster.versions("assignor/v/group/g").expect("the history");
    assert_eq!(
        versions(),
        [("assignor/v/group/g".to_owned(), 2)],
        "A's change is kept"
    );
    assert_eq!(
        b.describe("g").expect("read again").group_epoch,
        joined,
        "B holds A's change now"
    );
    b.delete_group("g").expect("deleted from the current state");
    assert_eq!(versions(), [], "gone");
}

/// A coordinator over its own store on `cluster` (a replica's) whose assignor is the
/// `panics` guest (every computation fails and is captured), on a clock the test moves.
fn failing_coordinator_on(cluster: &Cluster, seconds: &Arc<AtomicU64>) -> Coordinator {
    let config = BrokerConfig::load(
        None,
        &[format!("group.streams.assignors={}", guests::PANICS)],
    )
    .expect("the config");
    let runtime = crate::common::runtime(assignor_sandbox::Limits::default());
    let registry = assignor_coordinator::Registry::build(&runtime, &config).expect("the guest");
    let store = EtcdStore::open(&cluster.endpoints()).expect("opens");
    let clock = seconds.clone();
    Coordinator::open(registry, &config, Arc::new(store))
        .expect("opens")
        .with_clock(move || UNIX_EPOCH + Duration::from_secs(clock.load(Ordering::SeqCst)))
}

/// Capture writes are fenced by the capture record's revision: a replica whose computation
/// fails after another replica's failure of the same group landed (its view is behind) does
/// not replace that capture but reads it again and keeps it; a replica dropping a capture
/// (its capture limit lowered) from a view older than another replica's newer capture leaves
/// that capture stored. (Unconditional, the first case wrote the capture twice and the
/// second deleted the newer capture.) Each write's outcome is observed as a service counts
/// it (`assignor_capture_writes_total`): the fenced ones `lost`.
#[test]
fn capture_writes_from_a_stale_view_are_fenced() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let seconds = Arc::new(AtomicU64::new(1_000_000));
    // Each replica's capture writes, by outcome, as its metrics count them.
    let (on_a, on_b) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let observe = |seen: &Arc<Mutex<Vec<CaptureWrite>>>| {
        let seen = seen.clone();
        move |outcome| seen.lock().unwrap().push(outcome)
    };
    let mut a = failing_coordinator_on(&cluster, &seconds).on_capture_write(observe(&on_a));
    let (group, topology) = crate::common::example();
    a.alter_config("g", &[(ASSIGNOR_NAME, ConfigOp::Set("panics".into()))])
        .expect("config");
    a.set_topology("g", topology).expect("topology");
    a.upsert_member("g", group.members[0].clone())
        .expect("a member joins");
    let mut b = failing_coordinator_on(&cluster, &seconds).on_capture_write(observe(&on_b));
    let key = "assignor/v/capture/g";
    let versions = || cluster.versions(key).expect("the history");

    // A second member joins on A, so that A's failed input (and capture) differs from the
    // one B, which has not seen it, computes from.
    a.upsert_member("g", group.members[1].clone())
        .expect("a second member joins");
    a.compute_target("g").expect_err("the guest panics on A");
    let captured_on_a = a.last_capture("g").expect("captured on A").to_vec();
    assert_eq!(versions(), [(key.to_owned(), 1)]);
    let error = b.compute_target("g").expect_err("the guest panics on B");
    assert_eq!(
        error.code(),
        assignor_coordinator::ErrorCode::CoordinatorNotAvailable,
        "B's failure record loses to A's: {error}"
    );
    assert_eq!(
        versions(),
        [(key.to_owned(), 1)],
        "A's capture is not replaced"
    );
    assert_eq!(
        b.last_capture("g"),
        Some(&captured_on_a[..]),
        "B keeps A's capture"
    );
    assert_eq!(
        *on_b.lock().unwrap(),
        [CaptureWrite::Lost],
        "B's write counted lost"
    );

    // B now holds A's failure; past its backoff B fails again and replaces the capture
    // (conditioned on A's, which it read), while A still holds its own.
    seconds.fetch_add(3600, Ordering::SeqCst);
    b.compute_target("g")
        .expect_err("the guest panics on B again");
    assert_eq!(
        versions(),
        [(key.to_owned(), 2)],
        "B's capture replaces A's"
    );
    a.set_state_limits(StateLimits::default().max_captures(0));
    assert_eq!(a.last_capture("g"), None, "dropped on A");
    assert_eq!(versions(), [(key.to_owned(), 2)], "B's newer capture stays");
    b.set_state_limits(StateLimits::default().max_captures(0));
    assert_eq!(versions(), [], "dropped by B, which holds it");
    assert_eq!(
        *on_a.lock().unwrap(),
        [CaptureWrite::Written, CaptureWrite::Lost],
        "A's capture written, its stale delete lost"
    );
    assert_eq!(
        *on_b.lock().unwrap(),
        [
            CaptureWrite::Lost,
            CaptureWrite::Written,
            CaptureWrite::Written
        ],
        "B's lost write, its capture, its delete"
    );
}

/// How long a held watch stays held (see [`hold_watches`]): tenant `a`'s call deadline on
/// the replicas of the fencing tests, far beyond what the tests take.
const HOLD: Duration = Duration::from_secs(60);

/// A replica whose watch [`hold_watches`] can hold for [`HOLD`]: tenant `a`'s calls (an
/// upload's trial among them) may take that long, with a slot to spare beside one.
fn holding_replica(cluster: &Cluster, dir: &tempfile::TempDir) -> Process {
    Process::start_with(
        dir.path(),
        &[
            format!("service.store={}", cluster.url()),
            format!("service.tenant.a.timeout.ms={}", HOLD.as_millis()),
            "service.tenant.a.max.concurrent.assignments=2".into(),
        ],
    )
}

/// Two [`holding_replica`]s, `a` and `b`, each on a data directory of its own, which goes
/// after the replica.
struct HoldingPair {
    a: Process,
    b: Process,
    _dirs: [tempfile::TempDir; 2],
}

impl HoldingPair {
    fn start(cluster: &Cluster) -> Self {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        Self {
            a: holding_replica(cluster, &dirs[0]),
            b: holding_replica(cluster, &dirs[1]),
            _dirs: dirs,
        }
    }
}

/// Holds the watches of [`holding_replica`]s: an upload of the `sleeper` guest written to
/// the store past the replicas' checks (as a replica with looser limits would store it),
/// whose trial each replica's watch runs, to its deadline, before it applies anything
/// written after it. Until [`HOLD`] has passed from the returned instant, a replica knows of
/// tenant `a`'s records only what it read at start, wrote, or read again itself: a view
/// made stale deterministically.
fn hold_watches(cluster: &Cluster) -> Instant {
    let store = EtcdStore::open(&cluster.endpoints()).expect("opens");
    let sleeper = std::fs::read(guests::SLEEPER).expect("the guest is built");
    store
        .put("tenant/a/assignor/sleeper", &sleeper)
        .expect("written");
    Instant::now()
}

/// The etcd version (writes since creation) of tenant `a`'s record `key`; 0 when absent.
fn record_writes(cluster: &Cluster, key: &str) -> i64 {
    let key = format!("assignor/v/tenant/a/{key}");
    let versions = cluster.versions(&key).expect("read the history");
    versions
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(0, |(_, v)| *v)
}

/// Asserts that `answer` is the refusal of a write that lost to another replica's.
fn assert_fenced(what: &str, (status, body): (u16, Value)) {
    assert_eq!(status, 503, "{what}: {body}");
    assert_eq!(body["error"]["code"], "COORDINATOR_NOT_AVAILABLE", "{body}");
    assert_eq!(body["error"]["retriable"], true, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("another replica"), "{message}");
}

/// Upload writes are fenced by the upload record's revision: with both replicas' watches
/// held, A deleting, then replacing, an upload B has replaced since A last saw it is refused
/// (503 `COORDINATOR_NOT_AVAILABLE`, nothing changed: the store has only B's writes), and
/// each time A reads the record again and serves B's version, so A's retry then lands.
/// (Unconditional, A's stale delete answered 204 and removed B's version.)
#[test]
fn upload_writes_from_a_stale_view_are_fenced() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let pair = HoldingPair::start(&cluster);
    let (a, b) = (&pair.a, &pair.b);
    let (ca, cb) = (a.client(), b.client());
    let sha = |report: &Value| report["sha256"].as_str().map(str::to_owned);
    let (status, v1) = ca.upload("swap", guests::SWAP_V1);
    assert_eq!(status, 201, "{v1}");
    eventually("the upload on B", || listed_sha(&cb, "swap") == sha(&v1));
    let held = hold_watches(&cluster);

    let (status, v2) = cb.upload("swap", guests::SWAP_V2);
    assert_eq!(status, 200, "{v2}");
    assert_fenced("A's delete", ca.delete("/v1/assignors/swap"));
    assert_eq!(listed_sha(&cb, "swap"), sha(&v2), "B's version stays");
    assert_eq!(listed_sha(&ca, "swap"), sha(&v2), "A read it again");

    let (status, body) = cb.upload("swap", guests::SWAP_V1);
    assert_eq!(status, 200, "{body}");
    assert_fenced("A's replacement", ca.upload("swap", guests::SWAP_V2));
    assert_eq!(listed_sha(&ca, "swap"), sha(&v1), "A read it again");
    assert_eq!(
        record_writes(&cluster, "assignor/swap"),
        3,
        "only A's first write and B's two landed"
    );

    let (status, body) = ca.upload("swap", guests::SWAP_V2);
    assert_eq!(status, 200, "A's retry: {body}");
    let (status, body) = ca.delete("/v1/assignors/swap");
    assert_eq!(status, 204, "{body}");
    assert_eq!(record_writes(&cluster, "assignor/swap"), 0, "deleted");
    assert!(held.elapsed() < HOLD, "the watches were held throughout");
}

/// The limits record's writes are fenced by its revision: with both replicas' watches
/// held, the admin's change on A after B's (which A has not seen) is refused (503
/// `COORDINATOR_NOT_AVAILABLE`, B's limits stay) and A takes B's limits, so the retry lands;
/// then B's reset, from before A's change, is refused the same way.
/// (Unconditional, A's stale change answered 200 over B's.)
#[test]
fn limits_writes_from_a_stale_view_are_fenced() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let pair = HoldingPair::start(&cluster);
    let (a, b) = (&pair.a, &pair.b);
    let (admin_a, admin_b) = (
        Client::new(&a.base, TOKEN_ADMIN),
        Client::new(&b.base, TOKEN_ADMIN),
    );
    let max_groups = |admin: &Client| {
        let (status, body) = admin.get("/v1/admin/tenants");
        assert_eq!(status, 200, "{body}");
        body["tenants"][0]["limits"]["maxGroups"].clone()
    };
    let limits = "/v1/admin/tenants/a/limits";
    let held = hold_watches(&cluster);

    let (status, body) = admin_b.put(limits, br#"{"maxGroups": 7}"#);
    assert_eq!(status, 200, "{body}");
    assert_fenced("A's change", admin_a.put(limits, br#"{"maxGroups": 9}"#));
    assert_eq!(max_groups(&admin_b), 7, "B's limits stay");
    assert_eq!(max_groups(&admin_a), 7, "A took them");
    assert_eq!(record_writes(&cluster, "limits"), 1);

    let (status, body) = admin_a.put(limits, br#"{"maxGroups": 9}"#);
    assert_eq!(status, 200, "A's retry: {body}");
    assert_fenced("B's reset", admin_b.delete(limits));
    assert_eq!(max_groups(&admin_b), 9, "B took A's limits");
    assert_eq!(record_writes(&cluster, "limits"), 2);
    let (status, body) = admin_b.delete(limits);
    assert_eq!(status, 200, "B's retry: {body}");
    assert_eq!(record_writes(&cluster, "limits"), 0, "reset");
    assert!(held.elapsed() < HOLD, "the watches were held throughout");
}

/// Uploads load off the watch's thread, one tenant's at a time: while tenant `a`'s upload
/// loads on both replicas (its trial sleeping to the tenant's deadline, [`HOLD`]), a group
/// tenant `b` writes on A reaches B within [`SEEN_WITHIN`], while a group tenant `a` writes
/// on A after the upload waits behind its load on B, in order. (With every change applied on
/// the watch's thread, tenant `b`'s group waited for tenant `a`'s load too.)
#[test]
fn a_slow_upload_does_not_hold_back_other_tenants_changes() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let pair = HoldingPair::start(&cluster);
    let (a, b) = (&pair.a, &pair.b);
    let held = hold_watches(&cluster);
    let (tenant_a_on_a, tenant_b_on_a, tenant_b_on_b) = (
        a.client(),
        Client::new(&a.base, TOKEN_B),
        Client::new(&b.base, TOKEN_B),
    );
    let (status, body) = tenant_a_on_a.put("/v1/groups/held", group_doc(3, 8).as_bytes());
    assert_eq!(status, 200, "{body}");
    let (status, body) = tenant_b_on_a.put("/v1/groups/free", group_doc(3, 8).as_bytes());
    assert_eq!(status, 200, "{body}");
    let epoch = body["groupEpoch"].clone();
    eventually("tenant b's group on B", || {
        tenant_b_on_b.get("/v1/groups/free").1["groupEpoch"] == epoch
    });
    assert_eq!(
        b.client().get("/v1/groups/held").0,
        404,
        "tenant a's group waits behind its upload's load"
    );
    assert!(
        held.elapsed() < HOLD,
        "tenant a's load was running throughout"
    );
}

/// An upload delete and a group config selecting the upload, made on two replicas from
/// views that do not hold each other's change, cannot both land (one etcd transaction's
/// compares cover both keys): with both replicas' watches held, B deletes `hashmap-user`, and
/// A, still serving it, selects it for a group: A's change loses (503, the group unchanged);
/// then B selects `swap` for the group and A, which has not seen that, deletes `swap`: A's
/// delete loses (503, the upload kept). The group never selects a deleted upload.
/// (Unguarded, A's selection answered 200 naming a deleted upload, and A's delete 204 under
/// a group selecting it.)
#[test]
fn an_upload_delete_and_a_selection_of_it_never_both_land() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let pair = HoldingPair::start(&cluster);
    let (a, b) = (&pair.a, &pair.b);
    let (ca, cb) = (a.client(), b.client());
    for (name, component) in [
        ("swap", guests::SWAP_V1),
        ("hashmap-user", guests::HASHMAP_USER),
    ] {
        let (status, report) = ca.upload(name, component);
        assert_eq!(status, 201, "{report}");
    }
    let (status, body) = ca.put("/v1/groups/g", group_doc(3, 8).as_bytes());
    assert_eq!(status, 200, "{body}");
    eventually("the uploads and the group on B", || {
        listed_sha(&cb, "swap").is_some()
            && listed_sha(&cb, "hashmap-user").is_some()
            && cb.get("/v1/groups/g").0 == 200
    });
    let held = hold_watches(&cluster);
    let selecting = |name: &str| json!({"streams.assignor.name": name});

    let (status, body) = cb.delete("/v1/assignors/hashmap-user");
    assert_eq!(status, 204, "{body}");
    assert!(
        listed_sha(&ca, "hashmap-user").is_some(),
        "A has not seen it"
    );
    assert_fenced(
        "A's selection of the deleted upload",
        ca.set_config("g", selecting("hashmap-user"), &[]),
    );
    assert_eq!(
        record_writes(&cluster, "assignor/hashmap-user"),
        0,
        "deleted"
    );
    assert_eq!(record_writes(&cluster, "group/g"), 1, "the group unchanged");

    let (status, body) = cb.set_config("g", selecting("swap"), &[]);
    assert_eq!(status, 200, "{body}");
    assert_ne!(
        ca.get("/v1/groups/g").1["assignorName"],
        "swap",
        "A has not seen it"
    );
    assert_fenced(
        "A's delete of the selected upload",
        ca.delete("/v1/assignors/swap"),
    );
    assert_eq!(
        record_writes(&cluster, "assignor/swap"),
        1,
        "the upload kept"
    );
    assert_eq!(
        record_writes(&cluster, "group/g"),
        2,
        "B's selection landed"
    );
    assert!(held.elapsed() < HOLD, "the watches were held throughout");
}

/// A group document PUT is applied from the replica's view, without reading the group from
/// etcd first, and stays correct when that view is behind: with both replicas' watches
/// held, B changes the group, then A, which has not seen it, PUTs a document: A's write
/// loses its condition, A reads the group again and applies the document to the stored
/// group (200, the epoch after B's; three writes, none lost). `GET …/assignment` on A then
/// answers A's own commit from its view.
#[test]
fn a_document_put_from_a_stale_view_is_applied_to_the_stored_group() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let pair = HoldingPair::start(&cluster);
    let (a, b) = (&pair.a, &pair.b);
    let (ca, cb) = (a.client(), b.client());
    let (status, body) = ca.put("/v1/groups/g", group_doc(3, 8).as_bytes());
    assert_eq!(status, 200, "{body}");
    let first = body["groupEpoch"].clone();
    eventually("the group on B", || {
        cb.get("/v1/groups/g").1["groupEpoch"] == first
    });
    let held = hold_watches(&cluster);

    let (status, body) = cb.put("/v1/groups/g", group_doc(4, 8).as_bytes());
    assert_eq!(status, 200, "{body}");
    let on_b = body["groupEpoch"].as_u64().expect("an epoch");
    assert_eq!(
        ca.get("/v1/groups/g").1["groupEpoch"],
        first,
        "A has not seen it"
    );
    let (status, body) = ca.put("/v1/groups/g", group_doc(5, 8).as_bytes());
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["groupEpoch"].as_u64(),
        Some(on_b + 1),
        "applied to B's group: {body}"
    );
    assert_eq!(body["members"].as_array().map(Vec::len), Some(5), "{body}");
    assert_eq!(record_writes(&cluster, "group/g"), 3, "no write lost");

    let (status, target) = ca.post("/v1/groups/g/assign");
    assert_eq!(status, 200, "{target}");
    let (status, read) = ca.get("/v1/groups/g/assignment");
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        read["targetAssignmentEpoch"],
        target["targetAssignmentEpoch"]
    );
    assert_eq!(read["assignment"], target["assignment"]);
    assert!(held.elapsed() < HOLD, "the watches were held throughout");
}
