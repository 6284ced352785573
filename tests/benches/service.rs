//! Load benchmark of `assignor serve` on loopback: assignments per second of small groups
//! (the standard `10 5 4 32` group, one standby: 10 members, 128 tasks) by the sandboxed
//! sticky assignor, uploaded by a tenant, with 1 and several concurrent clients.
//!
//! Each assignment is one `POST /v1/groups/{g}/assign` that computes a new target (every
//! group is triggered once, so nothing is answered from a current target) and commits it
//! durably before answering. The groups are created beforehand, untimed. The tenant may run
//! as many assignments at once as the machine has cores. The clients are keep-alive
//! connections driven by one thread with an async client (as wrk's are), in this process:
//! the service and its load share the machine's cores, and the CPU per assignment printed
//! counts both.
//!
//! `sticky` is the built-in's name, which an upload may not take, so the bench uploads the
//! sandboxed sticky component with its name bytes changed to `stickw` (same length, nothing
//! else changes; the algorithm is the same code).
//!
//! `cargo bench -p assignor-tests --bench service [-- ASSIGNMENTS_PER_PHASE CLIENTS…]`
//! (defaults: 3000 assignments per phase, clients 1, 4 and 16). The data directory is a
//! temporary directory under `ASSIGNOR_BENCH_DIR` if set (e.g. `/dev/shm`, where `fsync`
//! costs nothing, to see the service without its disk), else under the system's.
//!
//! `ASSIGNOR_BENCH_ETCD=MEMBERS` (1 or 3) keeps the state in an etcd cluster of that many
//! members instead (`service.store=etcd://…`), which the bench starts on loopback ports with
//! its data under the system's temporary directory (the data directory then holds only the
//! compiled cache). Each phase then also prints what etcd did: its WAL fsyncs (one per raft
//! batch it commits; on three members, every member makes its own) and their mean time, from
//! the first member's `/metrics`.
//!
//! `ASSIGNOR_BENCH_REPLICAS=2` (with `ASSIGNOR_BENCH_ETCD`) runs a second replica of the
//! service on the same cluster (in this process, with a data directory of its own), opened
//! once the upload is made (a replica loads the uploads it finds at start); the clients'
//! connections alternate between the replicas, so each serves half the triggers, of groups
//! the first replica created (which the second's watch of the store brings it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use assignor_service::Service;
use assignor_service::config::{ServiceConfig, token_sha256};
use assignor_store_etcd::testing::Cluster;
use assignor_tests::guests;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The allocator of the `assignor` binary, whose service this bench runs in-process.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TOKEN: &str = "bench-token";
const NAME: &str = "stickw";

fn sha256_hex(token: &str) -> String {
    token_sha256(token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `gen.py 10 5 4 32 1 7`, the project's small benchmark group, as the input JSON.
fn small_group() -> String {
    let script = std::env::var_os("ASSIGNOR_BENCH_GEN").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/bench/gen.py"
            ))
        },
        PathBuf::from,
    );
    let output = Command::new("python3")
        .arg(&script)
        .args(["10", "5", "4", "32", "1", "7"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    assert!(output.status.success(), "gen.py failed");
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The sandboxed sticky component, named `stickw`.
fn renamed_sticky() -> Vec<u8> {
    let mut bytes = std::fs::read(guests::STICKY).expect("the sticky component is built");
    let (from, to) = (b"sticky", NAME.as_bytes());
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    bytes
}

struct Client {
    base: String,
    agent: ureq::Agent,
}

impl Client {
    fn new(base: &str) -> Self {
        Self {
            base: base.to_owned(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        }
    }

    fn send(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {TOKEN}");
        let response = match method {
            "PUT" => self.agent.put(url).header("Authorization", auth).send(body),
            _ => self
                .agent
                .post(url)
                .header("Authorization", auth)
                .send_empty(),
        };
        let mut response = response.expect("the service answers");
        let status = response.status().as_u16();
        (
            status,
            response.body_mut().read_to_string().expect("a body"),
        )
    }
}

/// Runs `work(client, i)` for `i` in `0..n` on `threads` threads, each taking the next `i`.
fn parallel(base: &str, threads: usize, n: usize, work: impl Fn(&Client, usize) + Sync) {
    let next = AtomicUsize::new(0);
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let client = Client::new(base);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    work(&client, i);
                }
            });
        }
    });
}

/// CPU time this process (service and clients) has used, from `/proc/self/stat`: user plus
/// system time in clock ticks, which the kernel reports in `USER_HZ` (100 per second on
/// Linux). Unlike a rate, CPU per assignment hardly changes when other work shares the cores.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces:
    // utime and stime are the 12th and 13th of them.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

/// The measured load: `POST /v1/groups/p{phase}-g{i}/assign` for each `i` in `0..n` over
/// `clients` keep-alive connections, all driven by one thread with an async client (as wrk
/// does), so that the load generator takes as little of the cores as it can. Checks each
/// answer and returns the latencies.
fn trigger(addrs: &[SocketAddr], clients: usize, n: usize, phase: usize) -> Vec<Duration> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a client runtime");
    let next = Arc::new(AtomicUsize::new(0));
    let marker = format!("\"assignor\":\"{NAME}\"");
    runtime.block_on(async {
        let mut connections = tokio::task::JoinSet::new();
        for c in 0..clients {
            let (next, marker) = (next.clone(), marker.clone());
            let addr = addrs[c % addrs.len()];
            connections.spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
                stream.set_nodelay(true).expect("nodelay");
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .expect("HTTP/1.1 handshake");
                tokio::spawn(connection);
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return latencies;
                    }
                    let request = hyper::Request::post(format!("/v1/groups/p{phase}-g{i}/assign"))
                        .header(hyper::header::HOST, addr.to_string())
                        .header(hyper::header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                        .body(Empty::<Bytes>::new())
                        .expect("a request");
                    let t = Instant::now();
                    let response = sender.send_request(request).await.expect("an answer");
                    let status = response.status();
                    let body = response
                        .into_body()
                        .collect()
                        .await
                        .expect("a body")
                        .to_bytes();
                    latencies.push(t.elapsed());
                    let body = String::from_utf8_lossy(&body);
                    assert_eq!(status, 200, "{body}");
                    assert!(body.contains(&marker), "{body}");
                }
            });
        }
        let mut latencies = Vec::with_capacity(n);
        while let Some(done) = connections.join_next().await {
            latencies.extend(done.expect("a client connection"));
        }
        latencies
    })
}

/// The first etcd member's WAL fsyncs so far: their count and total seconds, from its
/// Prometheus `/metrics`.
fn wal_fsyncs(cluster: &Cluster) -> (f64, f64) {
    let url = format!("{}/metrics", cluster.endpoints()[0]);
    let text = ureq::get(&url)
        .call()
        .expect("etcd's metrics")
        .body_mut()
        .read_to_string()
        .expect("a body");
    let metric = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (
        metric("etcd_disk_wal_fsync_duration_seconds_count"),
        metric("etcd_disk_wal_fsync_duration_seconds_sum"),
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let per_phase = args.first().copied().unwrap_or(3000);
    let phases: Vec<usize> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        vec![1, 4, 16]
    };
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let dir = match std::env::var_os("ASSIGNOR_BENCH_DIR") {
        Some(parent) => tempfile::tempdir_in(parent),
        None => tempfile::tempdir(),
    }
    .expect("a temporary data directory");
    let etcd = std::env::var("ASSIGNOR_BENCH_ETCD").ok().map(|members| {
        let members = members
            .parse()
            .expect("ASSIGNOR_BENCH_ETCD=MEMBERS, e.g. 1 or 3");
        Cluster::start(members).expect("an etcd cluster")
    });
    let replicas: usize = std::env::var("ASSIGNOR_BENCH_REPLICAS")
        .ok()
        .map_or(1, |r| r.parse().expect("ASSIGNOR_BENCH_REPLICAS=1 or 2"));
    assert!(
        replicas == 1 || etcd.is_some(),
        "several replicas need a shared store: set ASSIGNOR_BENCH_ETCD too"
    );
    let store = etcd
        .as_ref()
        .map_or_else(|| "embedded".to_owned(), Cluster::url);
    let config_in = |data_dir: &std::path::Path| {
        ServiceConfig::load(
            None,
            &[
                format!("service.store={store}"),
                "group.streams.assignors=sticky".into(),
                format!("service.data.dir={}", data_dir.display()),
                "service.tenants=bench".into(),
                format!("service.tenant.bench.token.sha256={}", sha256_hex(TOKEN)),
                format!("service.tenant.bench.max.concurrent.assignments={cores}"),
                // Every phase's groups are kept: over the default `max.groups` (1000) the setup
                // would be refused (409).
                format!(
                    "service.tenant.bench.max.groups={}",
                    per_phase * phases.len()
                ),
            ],
        )
        .expect("valid config")
    };
    let serve = |data_dir: &std::path::Path| {
        let service = Service::open(&config_in(data_dir)).expect("the service opens");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("address");
        thread::spawn(move || service.run(listener));
        addr
    };
    let mut addrs = vec![serve(dir.path())];
    let base = format!("http://{}", addrs[0]);

    let setup = Client::new(&base);
    let (status, report) = setup.send("PUT", &format!("/v1/assignors/{NAME}"), &renamed_sticky());
    assert_eq!(status, 201, "upload: {report}");
    let report: Value = serde_json::from_str(&report).expect("JSON");
    println!(
        "service load bench: {cores} cores, sandboxed sticky ({NAME}) trial fuel {}, group gen.py \
         10 5 4 32 1 7, data in {}, store {store}",
        report["trial"]["fuel"],
        dir.path().display()
    );
    let second_dir = tempfile::tempdir().expect("a second data directory");
    if replicas > 1 {
        addrs.push(serve(second_dir.path()));
        println!("      a second replica on the same cluster: the clients alternate");
    }
    let doc = small_group();
    let config_body = format!(r#"{{"set": {{"streams.assignor.name": "{NAME}"}}}}"#);
    for (phase, &clients) in phases.iter().enumerate() {
        let group = |i: usize| format!("p{phase}-g{i}");
        let start = Instant::now();
        parallel(&base, 16, per_phase, |c, i| {
            let g = group(i);
            assert_eq!(
                c.send("PUT", &format!("/v1/groups/{g}"), doc.as_bytes()).0,
                200
            );
            let (status, body) = c.send(
                "PUT",
                &format!("/v1/groups/{g}/config"),
                config_body.as_bytes(),
            );
            assert_eq!(status, 200, "{body}");
        });
        let setup_time = start.elapsed();
        let load_before = load_average();
        let fsyncs_before = etcd.as_ref().map(wal_fsyncs);
        let cpu_before = cpu_seconds();
        let start = Instant::now();
        let mut latencies = trigger(&addrs, clients, per_phase, phase);
        let elapsed = start.elapsed();
        let cpu = cpu_seconds() - cpu_before;
        latencies.sort();
        let q = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize];
        println!(
            "{clients:>3} client(s): {per_phase} assignments in {:.2} s = {:>6.0}/s; CPU {:.0} µs \
             per assignment (service and clients: {:.0}/s on {cores} idle cores); latency p50 \
             {:?} p99 {:?} max {:?}; load average before {load_before}, after {} (setup of \
             {per_phase} groups: {:.1} s)",
            elapsed.as_secs_f64(),
            per_phase as f64 / elapsed.as_secs_f64(),
            cpu * 1e6 / per_phase as f64,
            per_phase as f64 * cores as f64 / cpu,
            q(0.5),
            q(0.99),
            latencies[latencies.len() - 1],
            load_average(),
            setup_time.as_secs_f64(),
        );
        if let (Some(cluster), Some((count, seconds))) = (&etcd, fsyncs_before) {
            let (count_after, seconds_after) = wal_fsyncs(cluster);
            let (fsyncs, spent) = (count_after - count, seconds_after - seconds);
            println!(
                "      etcd (first member): {fsyncs:.0} WAL fsyncs, {:.2} per assignment, mean \
                 {:.2} ms, {:.0} % of the phase's time",
                fsyncs / per_phase as f64,
                spent * 1e3 / fsyncs.max(1.0),
                spent * 100.0 / elapsed.as_secs_f64()
            );
        }
    }
    drop(dir);
}
