//! Child processes under watch: how long they ran, the peak resident memory they reached, and
//! a deadline past which they are killed, for tests that bound what the host spends on a
//! hostile guest or input (issue 14).
//!
//! Peak memory is the kernel's high-water mark of the child's resident set, `VmHWM` in
//! `/proc/<pid>/status`, sampled every [`POLL`] while the child runs. The mark only rises, so
//! a sample misses at most what the child added in its last [`POLL`] before exiting. Not
//! `wait4`'s `ru_maxrss`: a child started by `posix_spawn` (as `std::process::Command`
//! starts one) or `fork` inherits its parent's high-water mark, so a child of a large test
//! binary would report the test binary's memory rather than its own.

use std::fmt;
use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How often a watched child's memory and exit are polled.
pub const POLL: Duration = Duration::from_millis(2);

/// Bytes of each of a child's stdout and stderr kept; the rest is read and counted only, so
/// a child flooding its output cannot bloat the test.
pub const KEPT_OUTPUT_BYTES: usize = 1 << 20;

/// How a watched child ended.
#[derive(Debug)]
pub struct Watched {
    /// Its exit status; `None` when it was killed at the deadline.
    pub status: Option<ExitStatus>,
    /// The start of its stdout (lossy UTF-8, at most [`KEPT_OUTPUT_BYTES`]).
    pub stdout: String,
    /// Bytes it wrote to stdout in all.
    pub stdout_bytes: u64,
    /// The start of its stderr (lossy UTF-8, at most [`KEPT_OUTPUT_BYTES`]).
    pub stderr: String,
    /// Bytes it wrote to stderr in all.
    pub stderr_bytes: u64,
    /// From spawn to exit (or to the kill).
    pub elapsed: Duration,
    /// The highest `VmHWM` seen, in bytes.
    pub peak_rss_bytes: u64,
}

impl Watched {
    /// Its exit code; `None` when killed at the deadline or by a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

impl fmt::Display for Watched {
    /// The outcome, time and memory, then the start of both outputs (first 4 KiB each: enough
    /// to read a failure, short enough for a test report).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 4 << 10;
        let head = |text: &str| {
            let mut end = text.len().min(SHOWN);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[..end].to_owned()
        };
        match self.status {
            Some(status) => write!(f, "{status}")?,
            None => write!(f, "killed at the deadline")?,
        }
        write!(
            f,
            " after {:?}, peak RSS {} MB\n--- stdout ({} bytes)\n{}\n--- stderr ({} bytes)\n{}",
            self.elapsed,
            self.peak_rss_bytes / 1_000_000,
            self.stdout_bytes,
            head(&self.stdout),
            self.stderr_bytes,
            head(&self.stderr)
        )
    }
}

/// Runs `command` with `stdin` as its input and its outputs captured, killing it once it has
/// run for `kill_after`.
///
/// Panics if the child cannot be started or waited for.
pub fn run(command: &mut Command, stdin: &[u8], kill_after: Duration) -> Watched {
    let start = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let pid = child.id();
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    thread::scope(|scope| {
        // Fed and drained on their own threads: a child blocked writing a full pipe (or the
        // test blocked feeding a large input) must not stall the polling below.
        scope.spawn(move || {
            // A child that exits without reading all of it closes the pipe: not an error here.
            let _ = pipe.write_all(stdin);
        });
        let out = scope.spawn(move || drain(stdout));
        let err = scope.spawn(move || drain(stderr));
        let mut peak = 0;
        let status = loop {
            // Sampled before asking about the exit: once reaped, the pid may name another
            // process.
            peak = peak.max(peak_rss_bytes(pid).unwrap_or(0));
            if let Some(status) = child.try_wait().expect("waiting for the child") {
                break Some(status);
            }
            if start.elapsed() >= kill_after {
                // It may have exited since `try_wait`: then there is nothing to kill.
                let _ = child.kill();
                child.wait().expect("waiting for the killed child");
                break None;
            }
            thread::sleep(POLL);
        };
        let elapsed = start.elapsed();
        let (stdout, stdout_bytes) = out.join().expect("the stdout reader returns");
        let (stderr, stderr_bytes) = err.join().expect("the stderr reader returns");
        Watched {
            status,
            stdout,
            stdout_bytes,
            stderr,
            stderr_bytes,
            elapsed,
            peak_rss_bytes: peak,
        }
    })
}

/// Reads `pipe` to its end: the first [`KEPT_OUTPUT_BYTES`] as text, and the count of all.
fn drain(mut pipe: impl Read) -> (String, u64) {
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = vec![0; 64 << 10];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                let room = KEPT_OUTPUT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), total)
}

/// The peak resident memory of this process so far, in bytes: what a child run by
/// [`run`] can report about itself at its very end, after its last sample.
pub fn own_peak_rss_bytes() -> u64 {
    read_vm_hwm("/proc/self/status").expect("/proc/self/status has VmHWM")
}

/// The peak resident memory of process `pid` so far, in bytes; `None` once it has exited.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    read_vm_hwm(&format!("/proc/{pid}/status"))
}

/// The resident memory of process `pid` now (`VmRSS`), in bytes; `None` once it has exited:
/// the baseline a long-running child's peak is compared with.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    read_status_bytes(&format!("/proc/{pid}/status"), "VmRSS:")
}

/// The `VmHWM` line of a `/proc/…/status` file, in bytes.
fn read_vm_hwm(path: &str) -> Option<u64> {
    read_status_bytes(path, "VmHWM:")
}

/// The line of a `/proc/…/status` file starting with `field`, in bytes (the kernel counts
/// in KiB).
fn read_status_bytes(path: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix(field))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}
