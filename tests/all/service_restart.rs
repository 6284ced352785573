//! The service in a process of its own, stopped mid-load by SIGKILL and by SIGTERM and
//! started again on the same data directory: every acknowledged upload, group config and
//! target assignment is there; and a SIGTERM ends the service within its deadlines even
//! while a guest sleeps or a client stalls.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use assignor_service::STOP_MARGIN;
use assignor_tests::guests;
use serde_json::{Value, json};

use crate::service::{Client, GROUP_DOC, TOKEN_A, config_keys, group_doc};

/// Client threads, each driving groups of its own.
const WORKERS: usize = 3;
/// Groups per worker.
const GROUPS: usize = 2;
/// Uploads made one after another while the workers run; each is a different guest.
const UPLOADS: &[(&str, &str)] = &[
    ("hashmap-user", guests::HASHMAP_USER),
    ("probe-echo", guests::PROBE_ECHO),
    ("loops-on-large-groups", guests::LOOPS_ON_LARGE_GROUPS),
    ("slow-legal", guests::SLOW_LEGAL),
];

/// The service process.
pub(crate) struct Process {
    child: Child,
    /// Where it listens, `http://127.0.0.1:<port>`.
    pub(crate) base: String,
}

impl Process {
    fn start(data_dir: &Path) -> Self {
        Self::start_with(data_dir, &[])
    }

    /// [`Process::start`] with `extra` keys after the tests' own (later keys win).
    pub(crate) fn start_with(data_dir: &Path, extra: &[String]) -> Self {
        let mut keys = config_keys(data_dir);
        keys.extend(extra.iter().cloned());
        Self::start_keys(keys)
    }

    /// The service with exactly `keys` (and a free port to listen on).
    pub(crate) fn start_keys(mut keys: Vec<String>) -> Self {
        keys.push("service.listen=127.0.0.1:0".into());
        let mut child = Command::new(env!("CARGO_BIN_EXE_service-runner"))
            .args(keys)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the service");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("piped"))
            .read_line(&mut line)
            .expect("the service says where it listens");
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Self {
            base: format!("http://{addr}"),
            child,
        }
    }

    pub(crate) fn client(&self) -> Client {
        Client::new(&self.base, TOKEN_A)
    }

    /// The service's process id, e.g. to read its memory from `/proc`.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn sigkill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    /// SIGTERM, then waits for the graceful exit.
    fn sigterm(self) {
        self.stop_gracefully();
    }

    /// SIGTERM, then waits for the graceful exit; returns how long it took from the signal.
    pub(crate) fn stop_gracefully(mut self) -> Duration {
        let signalled = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success());
        let mut rest = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().expect("piped"), &mut rest)
            .expect("the service's output");
        let exit = self.child.wait().expect("reaped");
        let took = signalled.elapsed();
        assert!(exit.success(), "graceful stop exits 0: {exit}");
        assert_eq!(rest.trim(), "stopped");
        took
    }
}

impl Drop for Process {
    /// Kills a service still running, e.g. when a test fails before stopping it: a service
    /// left behind would hold its port and the test's output pipe.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What one group was last acknowledged to be, and the change in flight when the load
/// stopped (unacknowledged: it may or may not have happened).
#[derive(Debug, Default, Clone)]
struct Acked {
    /// Group epoch answered by the last acknowledged PUT.
    epoch: u64,
    /// `streams.num.standby.replicas` of the last acknowledged config change, and of the one
    /// in flight.
    standbys: Option<u64>,
    standbys_in_flight: Option<u64>,
    /// The last acknowledged target: its epoch and assignment.
    target: Option<(u64, Value)>,
}

/// One worker's steps on its groups until `stop`: change the members (a new group epoch),
/// change the config, trigger; records what each acknowledged answer said. Ends at the first
/// request that fails to get an answer (the service is gone).
fn drive(client: &Client, groups: &[String], stop: &AtomicBool) -> BTreeMap<String, Acked> {
    let mut acked: BTreeMap<String, Acked> = groups
        .iter()
        .map(|g| (g.clone(), Acked::default()))
        .collect();
    'load: for n in 1u64.. {
        for group in groups {
            if stop.load(Ordering::Relaxed) {
                break 'load;
            }
            let state = acked.get_mut(group).expect("known group");
            let members = 2 + (n % 5) as usize;
            let Some((200, d)) = client.try_put(
                &format!("/v1/groups/{group}"),
                group_doc(members, 8).as_bytes(),
            ) else {
                break 'load;
            };
            state.epoch = d["groupEpoch"].as_u64().expect("epoch");
            let standbys = n % 3;
            state.standbys_in_flight = Some(standbys);
            let body = json!({"set": {"streams.num.standby.replicas": standbys}});
            let Some((200, _)) = client.try_put(
                &format!("/v1/groups/{group}/config"),
                body.to_string().as_bytes(),
            ) else {
                break 'load;
            };
            state.standbys = Some(standbys);
            let Some((200, target)) = client.try_post(&format!("/v1/groups/{group}/assign")) else {
                break 'load;
            };
            let epoch = target["targetAssignmentEpoch"].as_u64().expect("epoch");
            state.target = Some((epoch, target["assignment"].clone()));
        }
    }
    acked
}

/// Runs the workers and an uploader (uploads `round` and `round + 1`) against `process` for
/// a while, stops it with `stop` while they run, and returns what was acknowledged: per
/// group, and the uploads.
fn load(
    process: Process,
    round: usize,
    stop: impl FnOnce(Process),
) -> (BTreeMap<String, Acked>, Vec<String>) {
    let halt = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let client = process.client();
            let halt = halt.clone();
            let groups: Vec<String> = (0..GROUPS).map(|g| format!("w{w}-g{g}")).collect();
            thread::spawn(move || drive(&client, &groups, &halt))
        })
        .collect();
    let uploader = {
        let client = process.client();
        let halt = halt.clone();
        thread::spawn(move || {
            let mut acked = Vec::new();
            for (name, path) in UPLOADS.iter().skip(round).take(2) {
                if halt.load(Ordering::Relaxed) {
                    break;
                }
                let bytes = std::fs::read(path).expect("the guest is built");
                match client.try_put(&format!("/v1/assignors/{name}"), &bytes) {
                    Some((200 | 201, _)) => acked.push((*name).to_owned()),
                    Some((status, body)) => panic!("upload of {name}: {status} {body}"),
                    None => break,
                }
            }
            acked
        })
    };
    thread::sleep(Duration::from_millis(1500));
    stop(process);
    halt.store(true, Ordering::Relaxed);
    let mut acked = BTreeMap::new();
    for w in workers {
        acked.extend(w.join().expect("a worker"));
    }
    (acked, uploader.join().expect("the uploader"))
}

/// After a restart, each group is at least where its last acknowledged answers left it, and
/// at most one unacknowledged step further; every acknowledged upload is listed.
fn check(client: &Client, acked: &BTreeMap<String, Acked>, uploads: &[String], exact: bool) {
    let (status, list) = client.get("/v1/assignors");
    assert_eq!(status, 200, "{list}");
    for name in uploads {
        assert!(
            list["assignors"]
                .as_array()
                .expect("a list")
                .iter()
                .any(|a| a["name"] == name.as_str()),
            "acknowledged upload {name} lost: {list}"
        );
    }
    for (group, a) in acked {
        if a.epoch == 0 {
            continue;
        }
        let (status, d) = client.get(&format!("/v1/groups/{group}"));
        assert_eq!(status, 200, "{group}: {d}");
        let epoch = d["groupEpoch"].as_u64().expect("epoch");
        let in_flight = u64::from(!exact);
        assert!(
            (a.epoch..=a.epoch + in_flight).contains(&epoch),
            "{group}: epoch {epoch}, acknowledged {}",
            a.epoch
        );
        let standbys = d["configs"]["numStandbyReplicas"].as_u64();
        assert!(
            standbys == a.standbys || (!exact && standbys == a.standbys_in_flight),
            "{group}: {standbys:?} standbys, acknowledged {:?}",
            a.standbys
        );
        if let Some((target_epoch, assignment)) = &a.target {
            let (status, t) = client.get(&format!("/v1/groups/{group}/assignment"));
            assert_eq!(status, 200, "{group}: {t}");
            let now = t["targetAssignmentEpoch"].as_u64().expect("epoch");
            assert!(
                now >= *target_epoch,
                "{group}: target {now} < acknowledged {target_epoch}"
            );
            if now == *target_epoch {
                assert_eq!(
                    &t["assignment"], assignment,
                    "{group}: acknowledged target changed"
                );
            }
        }
    }
}

/// SIGKILLed three times mid-load (uploads, whole-group PUTs, config changes, triggers from
/// four threads), the service restarts each time with every acknowledged upload, config and
/// target, and at most the one unacknowledged step per group beyond them.
#[test]
fn sigkill_mid_load_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all_uploads = Vec::new();
    let mut steps = 0;
    for round in 0..3 {
        let (acked, uploads) = load(Process::start(dir.path()), round, Process::sigkill);
        steps += acked.values().map(|a| a.epoch).sum::<u64>();
        all_uploads.extend(uploads);
        let process = Process::start(dir.path());
        check(&process.client(), &acked, &all_uploads, false);
        process.sigkill();
    }
    assert!(steps > 0, "the load made progress");
    println!(
        "service SIGKILL test: {} uploads and {steps} group epochs acknowledged",
        all_uploads.len()
    );
}

/// On an etcd cluster (`service.store=etcd://…`, one member) instead of the embedded store:
/// SIGKILLed mid-load, the service restarts (on a new data directory: nothing of the state is
/// kept there) with every acknowledged upload, config and target.
#[test]
fn sigkill_mid_load_on_etcd_loses_nothing_acknowledged() {
    let cluster = assignor_store_etcd::testing::Cluster::start(1).expect("an etcd cluster");
    let store = [format!("service.store={}", cluster.url())];
    let first = tempfile::tempdir().expect("tempdir");
    let (acked, uploads) = load(
        Process::start_with(first.path(), &store),
        0,
        Process::sigkill,
    );
    assert!(
        acked.values().any(|a| a.epoch > 0),
        "the load made progress"
    );
    let second = tempfile::tempdir().expect("tempdir");
    let process = Process::start_with(second.path(), &store);
    check(&process.client(), &acked, &uploads, false);
    process.sigkill();
}

/// SIGTERM mid-load stops the service gracefully: requests in flight are answered, it exits
/// 0, and a restart finds exactly what was acknowledged.
#[test]
fn graceful_stop_mid_load_keeps_everything_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (acked, uploads) = load(Process::start(dir.path()), 0, Process::sigterm);
    let process = Process::start(dir.path());
    check(&process.client(), &acked, &uploads, true);
    process.sigterm();
}

/// A SIGTERM while a guest sleeps in a host function ends the service within the call's
/// deadline plus [`STOP_MARGIN`], the call answered as `timeout`; one while a client stalls in
/// the middle of its request body ends it within the longest limit of in-flight work (the
/// compile time limit plus the deadline) plus the margin, without that client's request.
#[test]
fn graceful_stop_is_bounded_by_the_deadlines() {
    const TIMEOUT: Duration = Duration::from_millis(1000);
    const COMPILE_TIMEOUT: Duration = Duration::from_millis(1000);
    let dir = tempfile::tempdir().expect("tempdir");
    // The sleeper cannot be uploaded (its trial would time out): the broker lists it. Every
    // tenant gets the short limits: a stalled request's tenant is not known, so the stop
    // waits for the longest.
    let mut keys = vec![format!(
        "group.streams.assignors=sticky,{}",
        guests::SLEEPER
    )];
    for tenant in ["a", "b", "tiny"] {
        keys.push(format!(
            "service.tenant.{tenant}.timeout.ms={}",
            TIMEOUT.as_millis()
        ));
        keys.push(format!(
            "service.tenant.{tenant}.compile.timeout.ms={}",
            COMPILE_TIMEOUT.as_millis()
        ));
    }

    let process = Process::start_with(dir.path(), &keys);
    let a = process.client();
    assert_eq!(a.put("/v1/groups/g", GROUP_DOC.as_bytes()).0, 200);
    let (status, body) = a.set_config("g", json!({"streams.assignor.name": "sleeper"}), &[]);
    assert_eq!(status, 200, "{body}");
    let call = thread::spawn(move || a.try_post("/v1/groups/g/assign"));
    thread::sleep(Duration::from_millis(300));
    let with_sleeper = process.stop_gracefully();
    assert!(
        with_sleeper < TIMEOUT + STOP_MARGIN,
        "stopped {with_sleeper:?} after the signal"
    );
    let answer = call.join().expect("the caller");
    let Some((500, body)) = answer else {
        panic!("the sleeping call is answered at its deadline: {answer:?}");
    };
    assert_eq!(body["error"]["kind"], "timeout", "{body}");

    let process = Process::start_with(dir.path(), &keys);
    let addr = process.base.strip_prefix("http://").expect("an http URL");
    let mut stalled = TcpStream::connect(addr).expect("connects");
    write!(
        stalled,
        "PUT /v1/groups/g HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN_A}\r\n\
         Content-Length: 1000\r\n\r\n{{\"topology\""
    )
    .expect("a request begun");
    thread::sleep(Duration::from_millis(300));
    let with_stalled = process.stop_gracefully();
    let grace = COMPILE_TIMEOUT + TIMEOUT + STOP_MARGIN;
    assert!(
        with_stalled < grace + STOP_MARGIN,
        "stopped {with_stalled:?} after the signal, with a client stalled mid-body"
    );
    drop(stalled);
    println!(
        "graceful stop: {with_sleeper:?} after SIGTERM with a sleeping guest (deadline \
         {TIMEOUT:?}), {with_stalled:?} with a stalled client (bound {grace:?})"
    );
}
