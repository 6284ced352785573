//! An etcd cluster for tests: N members as child processes on free loopback ports, with their
//! data in a temporary directory; SIGKILLed (and the directory removed) on drop.
//!
//! The server is Debian's `etcd-server` (3.4). When `etcd` is missing and this runs as root
//! with apt-get, it is installed (without starting the package's own service); otherwise
//! starting fails naming the package.

use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a member (or the whole cluster) may take to become healthy.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between two health checks.
const POLL: Duration = Duration::from_millis(50);

/// One member: its ports and, while it runs, its process.
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A running etcd cluster of child processes.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    members: Vec<Member>,
    initial_cluster: String,
}

/// Makes sure an `etcd` binary is on the PATH, installing Debian's `etcd-server` if root.
fn ensure_etcd() -> Result<(), String> {
    // Tests run in parallel: one installs, the others wait for it.
    static INSTALL: Mutex<()> = Mutex::new(());
    let _guard = INSTALL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let found = || {
        Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if found() {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if !root {
        return Err(
            "etcd is not installed: install Debian's etcd-server package (apt-get install \
             etcd-server) to run the etcd tests"
                .into(),
        );
    }
    // The package starts its own etcd on the default ports unless the service policy says no:
    // a policy script that denies every start (POLICYRCD is read by invoke-rc.d).
    let policy = std::env::temp_dir().join(format!("assignor-policy-rc-{}", std::process::id()));
    fs::write(&policy, "#!/bin/sh\nexit 101\n").map_err(|e| format!("write {policy:?}: {e}"))?;
    let made_executable = Command::new("chmod").arg("+x").arg(&policy).status();
    let install = || -> Result<(), String> {
        made_executable
            .map_err(|e| e.to_string())?
            .success()
            .then_some(())
            .ok_or("chmod failed")?;
        for args in [
            &["-o", "DPkg::Lock::Timeout=300", "update", "-qq"][..],
            &[
                "-o",
                "DPkg::Lock::Timeout=300",
                "install",
                "-y",
                "-qq",
                "etcd-server",
            ],
        ] {
            let status = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .env("POLICYRCD", &policy)
                .stdout(Stdio::null())
                .status()
                .map_err(|e| format!("cannot run apt-get: {e}"))?;
            if !status.success() {
                return Err(format!("apt-get {} failed ({status})", args.join(" ")));
            }
        }
        Ok(())
    };
    let installed = install();
    let _ = fs::remove_file(&policy);
    installed.map_err(|e| {
        format!("etcd is not installed and installing Debian's etcd-server failed: {e}")
    })?;
    if found() {
        Ok(())
    } else {
        Err("etcd-server was installed but `etcd --version` still fails".into())
    }
}

/// A loopback port nobody listens on now.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

impl Cluster {
    /// Starts `members` members (1 to 7) and waits until each reports itself healthy (a
    /// leader elected), at most 20 s.
    pub fn start(members: usize) -> Result<Self, String> {
        assert!((1..=7).contains(&members), "1 to 7 members");
        ensure_etcd()?;
        let dir = std::env::temp_dir().join(format!(
            "assignor-etcd-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        fs::create_dir_all(&dir).map_err(|e| format!("create {dir:?}: {e}"))?;
        let members = (0..members)
            .map(|i| {
                Ok(Member {
                    name: format!("m{i}"),
                    client_port: free_port()?,
                    peer_port: free_port()?,
                    child: None,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Self {
            dir,
            members,
            initial_cluster,
        };
        for i in 0..cluster.members.len() {
            cluster.spawn(i)?;
        }
        for i in 0..cluster.members.len() {
            cluster.wait_healthy(i)?;
        }
        Ok(cluster)
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let member = &self.members[i];
        let data = self.dir.join(&member.name);
        let log = File::create(self.dir.join(format!("{}.log", member.name)))
            .map_err(|e| format!("create the log of {}: {e}", member.name))?;
        let client = format!("http://127.0.0.1:{}", member.client_port);
        let peer = format!("http://127.0.0.1:{}", member.peer_port);
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "assignor-test"])
            // Fast elections, so a killed leader is replaced within a second.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--auto-compaction-mode", "revision"])
            .args(["--auto-compaction-retention", "1000"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start etcd member {}: {e}", member.name))?;
        self.members[i].child = Some(child);
        Ok(())
    }

    /// Waits until member `i` answers its `/health` with `true` (it has a leader).
    fn wait_healthy(&mut self, i: usize) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if let Some(child) = self.members[i].child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "etcd member {} exited ({status}): {}",
                    self.members[i].name,
                    self.log_tail(i)
                ));
            }
            if healthy(self.members[i].client_port) {
                return Ok(());
            }
            std::thread::sleep(POLL);
        }
        Err(format!(
            "etcd member {} was not healthy within {START_TIMEOUT:?}: {}",
            self.members[i].name,
            self.log_tail(i)
        ))
    }

    fn log_tail(&self, i: usize) -> String {
        let text = fs::read_to_string(self.dir.join(format!("{}.log", self.members[i].name)))
            .unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        text[text.ceil_char_boundary(start)..].to_owned()
    }

    /// The client endpoints, `http://127.0.0.1:PORT`, one per member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("http://127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// The cluster as `assignor serve --store` takes it: `etcd://127.0.0.1:PORT,…`.
    pub fn url(&self) -> String {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect();
        format!("etcd://{}", members.join(","))
    }

    /// SIGKILLs member `i` and reaps it: no shutdown, nothing flushed that was not.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts killed member `i` again on its data directory, where it rejoins the cluster;
    /// does not wait for it (without a quorum it cannot become healthy alone): see
    /// [`wait_member`](Self::wait_member).
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.kill(i);
        self.spawn(i)
    }

    /// Waits (at most 20 s) until member `i` is healthy: running, with a leader.
    pub fn wait_member(&mut self, i: usize) -> Result<(), String> {
        self.wait_healthy(i)
    }

    /// The directory holding the members' data and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Each key under `prefix` with its version, how many times it was written since it was
    /// created: the write history tests check (e.g. one target commit per group epoch).
    /// Bounded by 10 s.
    pub fn versions(&self, prefix: &str) -> Result<Vec<(String, i64)>, String> {
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_keys_only();
        let response =
            self.with_client(async |mut client| client.get(prefix, Some(options)).await)?;
        Ok(response
            .kvs()
            .iter()
            .map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), kv.version()))
            .collect())
    }

    /// Writes `value` under the etcd key `key` as is, past any store: what a test makes a
    /// damaged record with. Bounded by 10 s.
    pub fn put(&self, key: &str, value: &[u8]) -> Result<(), String> {
        self.with_client(async |mut client| client.put(key, value, None).await.map(drop))
    }

    /// Compacts the cluster's history up to its current revision, so that a watch from an
    /// older revision is refused. Bounded by 10 s.
    pub fn compact(&self) -> Result<(), String> {
        self.with_client(async |mut client| {
            let revision = client
                .get("compact-probe", None)
                .await?
                .header()
                .map_or(0, |h| h.revision());
            let options = etcd_client::CompactionOptions::new().with_physical();
            client.compact(revision, Some(options)).await.map(drop)
        })
    }

    /// Runs `request` with a client of the cluster on a runtime of its own, within 10 s.
    fn with_client<T>(
        &self,
        request: impl AsyncFnOnce(etcd_client::Client) -> Result<T, etcd_client::Error>,
    ) -> Result<T, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let endpoints = self.endpoints();
        let done = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), async {
                let client = etcd_client::Client::connect(endpoints, None).await?;
                request(client).await
            })
            .await
        });
        done.map_err(|_| "the cluster did not answer within 10 s".to_owned())?
            .map_err(|e| format!("the cluster refused the request: {e}"))
    }
}

/// `GET /health` on a member's client port answers `"health":"true"`.
fn healthy(port: u16) -> bool {
    let Ok(mut stream) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let request = format!("GET /health HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.take(4096).read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).contains("\"health\":\"true\"")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
