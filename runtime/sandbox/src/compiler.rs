//! Compiling a component in a child process, so that a compilation over its time limit can be
//! stopped: Cranelift offers no way to interrupt a compilation, and a thread cannot be killed,
//! so a compile on a thread of the host's own keeps its cores busy until it is done (390 s for
//! 4 MiB of `call_indirect`, well within the code limits). A child is killed at the limit and
//! its cores are free at once.
//!
//! The parent ([`compile`]) runs the compiler program (the `assignor` binary's hidden
//! [`COMPILE_COMMAND`]) with the limits its engine is configured from as its one argument, so
//! that the child's engine is configured exactly as the parent's; wasmtime's own check when
//! the parent deserializes the answer refuses anything compiled otherwise. Over the child's
//! stdin go the component's length (8 bytes, little-endian) and its bytes; its stdout answers
//! [`MAGIC`] and wasmtime's serialized artifact. The parent reads at most
//! `max.compiled.bytes` of it, keeps the first [`MAX_STDERR_BYTES`] of the child's stderr, and
//! kills the child (its whole process group, so a shell named as the compiler takes its own
//! children with it) and reaps it before it answers, whatever the outcome; a drop guard does
//! the same if the parent unwinds.
//!
//! A child must not outlive its parent. The parent keeps its end of the stdin socket open
//! until the child is reaped, and the child, once it has read the component, watches its
//! stdin: end of file means the parent is gone (exited, killed or crashed; the kernel closes
//! its descriptors in every case), and the child exits at once. This was chosen over
//! `PR_SET_PDEATHSIG`, which is Linux-only, fires when the *thread* that spawned the child
//! ends (a worker of a thread pool, not the process), and misses a parent that died before the
//! child set it; the stdin watch has none of these gaps. Stdin is a socket, not a pipe, so that
//! the parent writes with `MSG_NOSIGNAL`: the `assignor` command restores the default
//! `SIGPIPE` action, under which a write to a child that died early would kill the parent.

use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::limits::{self, Limits};
use crate::runtime::{Refusal, engine_config};

/// The `assignor` binary's hidden subcommand that compiles a component for its parent: its
/// one argument is the limits of [`spec`], and it runs [`child_main`].
#[doc(hidden)]
pub const COMPILE_COMMAND: &str = "compile-component";

/// What the child's answer starts with, so that a program that is not a compiler (one that
/// echoes its input, writes a usage text) is told apart before anything is deserialized.
const MAGIC: &[u8; 8] = b"asgcomp1";

/// How much of the child's stderr a refusal quotes; the rest is read and dropped, so that a
/// child writing without end neither blocks nor grows the parent.
const MAX_STDERR_BYTES: usize = 4 << 10;

/// How often the parent looks whether a child that has closed its stdout has exited: it does
/// so right after closing it, so this is a short wait, not a busy one.
const EXIT_POLL: Duration = Duration::from_millis(1);

/// The child's exit code when the component does not compile (its stderr is the compiler's
/// message); any other failure exits with [`CHILD_FAILED`].
const NOT_COMPILABLE: u8 = 1;
/// The child's exit code when it could not do its work (a bad argument, a short stdin).
const CHILD_FAILED: u8 = 2;

/// The keys of [`spec`], in order: the limits the engine is configured from, and the bound
/// on what the child reads.
const SPEC_KEYS: [&str; 4] = [
    "wasm-stack-bytes",
    "memory-bytes",
    "max-concurrent-calls",
    "max-component-bytes",
];

/// The child's argument: every limit [`engine_config`] reads, and the component size limit
/// its stdin is read under, as `key=value` pairs separated by commas.
fn spec(limits: &Limits) -> String {
    let values = [
        limits.get_wasm_stack_bytes() as u64,
        limits.get_memory_bytes() as u64,
        u64::from(limits.get_max_concurrent_calls()),
        limits.get_max_component_bytes() as u64,
    ];
    SPEC_KEYS
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The limits of a [`spec`]; every key must be there, once, in order, and nothing else.
fn parse_spec(spec: &str) -> Result<Limits, String> {
    let pairs: Vec<&str> = spec.split(',').collect();
    if pairs.len() != SPEC_KEYS.len() {
        return Err(format!(
            "expected {} limits ({}), got {spec:?}",
            SPEC_KEYS.len(),
            SPEC_KEYS.join(", ")
        ));
    }
    let mut values = [0u64; SPEC_KEYS.len()];
    for ((pair, key), value) in pairs.iter().zip(SPEC_KEYS).zip(&mut values) {
        *value = pair
            .strip_prefix(key)
            .and_then(|v| v.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("expected {key}=<number>, got {pair:?}"))?;
    }
    let [stack, memory, calls, component] = values;
    let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Ok(Limits::default()
        .wasm_stack_bytes(size(stack))
        .memory_bytes(size(memory))
        .max_concurrent_calls(u32::try_from(calls).unwrap_or(u32::MAX))
        .max_component_bytes(size(component)))
}

/// The child's side, behind the `assignor` binary's [`COMPILE_COMMAND`]: reads a component
/// from stdin, compiles it with an engine configured from `spec`, and writes [`MAGIC`] and
/// the serialized artifact to stdout. Not for anything but a [`compile`] parent.
#[doc(hidden)]
pub fn child_main(spec: &str) -> ExitCode {
    match run_child(spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("{message}");
            ExitCode::from(code)
        }
    }
}

fn run_child(spec: &str) -> Result<(), (u8, String)> {
    let failed = |message: String| (CHILD_FAILED, message);
    let limits = parse_spec(spec).map_err(|e| failed(format!("bad limits argument: {e}")))?;
    let mut stdin = io::stdin().lock();
    let mut len = [0u8; 8];
    stdin
        .read_exact(&mut len)
        .map_err(|e| failed(format!("reading the component's length: {e}")))?;
    let len = u64::from_le_bytes(len);
    let max = limits.get_max_component_bytes();
    if len > max as u64 {
        return Err(failed(format!(
            "the component is {len} bytes, over the {max}-byte limit"
        )));
    }
    let mut bytes = vec![0; len as usize];
    stdin
        .read_exact(&mut bytes)
        .map_err(|e| failed(format!("reading the component: {e}")))?;
    drop(stdin);
    // Whatever the read returns (end of file, an error, a stray byte), the parent is no longer
    // waiting for this compile, or is gone: stop at once rather than compile for no one.
    thread::spawn(|| {
        let _ = io::stdin().read(&mut [0u8; 1]);
        std::process::exit(i32::from(CHILD_FAILED));
    });
    let engine = Engine::new(&engine_config(&limits))
        .map_err(|e| failed(format!("configuring the engine: {e:#}")))?;
    let compiled = engine
        .precompile_component(&bytes)
        .map_err(|e| (NOT_COMPILABLE, format!("{e:#}")))?;
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(MAGIC)
        .and_then(|()| stdout.write_all(&compiled))
        .and_then(|()| stdout.flush())
        .map_err(|e| failed(format!("writing the compiled code: {e}")))
}

/// Compiles `bytes` in a child process running `program` (see the module docs), within
/// `limits`' compile time limit and compiled-code limit, and deserializes the answer on
/// `engine`. A component that does not compile fails with the compiler's message; a compile
/// over a limit, or a compiler that fails or answers anything but compiled code, fails with a
/// [`Refusal`]. The child is gone (killed if need be, and reaped) when this returns.
pub(crate) fn compile(
    program: &Path,
    limits: &Limits,
    engine: &Engine,
    bytes: &[u8],
) -> wasmtime::Result<Component> {
    let timeout = limits.get_compile_timeout();
    let max_compiled = limits.get_max_compiled_bytes();
    let start = Instant::now();
    let deadline = start + timeout;
    let refuse = |message: String| wasmtime::Error::new(Refusal(message));
    let (parent_end, child_end) =
        UnixStream::pair().map_err(|e| refuse(format!("cannot start the compiler: {e}")))?;
    let mut command = Command::new(program);
    command
        .arg(COMPILE_COMMAND)
        .arg(spec(limits))
        .stdin(Stdio::from(OwnedFd::from(child_end)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that killing it kills whatever it started too.
        .process_group(0);
    let child = command.spawn().map_err(|e| {
        refuse(format!(
            "cannot start the compiler {}: {e}",
            program.display()
        ))
    })?;
    // Closes this process's copy of the child's end of stdin: only the child holds it now.
    drop(command);
    let mut child = Compiling::new(child);
    let pid = child.id();
    let stdout = child.child.stdout.take().expect("stdout is piped");
    let stderr = child.child.stderr.take().expect("stderr is piped");
    let most = MAGIC.len() + max_compiled;
    let (outcome, status, stderr) = thread::scope(|scope| {
        let stdin = &parent_end;
        // Written from a thread: a child that does not read must not block the parent past
        // the deadline. Its errors are the child's (it died, or stopped reading) and show in
        // how the child ended.
        scope.spawn(move || {
            let _ = send_all(stdin, &(bytes.len() as u64).to_le_bytes())
                .and_then(|()| send_all(stdin, bytes));
        });
        let (answered, answer) = mpsc::channel();
        scope.spawn(move || {
            let mut out = Vec::new();
            let read = stdout
                .take(most as u64 + 1)
                .read_to_end(&mut out)
                .map(|_| out);
            let _ = answered.send(read);
        });
        let errors = scope.spawn(move || read_head(stderr, MAX_STDERR_BYTES));
        let left = || deadline.saturating_duration_since(Instant::now());
        let outcome = match answer.recv_timeout(left()) {
            Ok(Ok(out)) if out.len() > most => Outcome::TooBig,
            Ok(Ok(out)) => match child.exit_by(deadline) {
                Some(_) => Outcome::Answered(out),
                None => Outcome::TimedOut,
            },
            Ok(Err(e)) => Outcome::Unreadable(e),
            Err(_) => Outcome::TimedOut,
        };
        let status = child.stop();
        (
            outcome,
            status,
            errors.join().unwrap_or_else(|_| String::new()),
        )
    });
    let elapsed = start.elapsed();
    let failed = |what: &str| {
        refuse(format!(
            "the compiler {} {what} ({status}); its stderr: {}",
            program.display(),
            if stderr.is_empty() {
                "(empty)"
            } else {
                &stderr
            }
        ))
    };
    let out = match outcome {
        Outcome::TimedOut => {
            tracing::warn!(
                pid,
                limit_ms = timeout.as_millis() as u64,
                elapsed_ms = elapsed.as_millis() as u64,
                "compile over its time limit; the compiler was killed"
            );
            return Err(refuse(format!(
                "compiling it took longer than the compile time limit of {} ms \
                 (compile.timeout.ms), so the compiler was stopped after {:.1} s; make the \
                 assignor smaller (fewer and smaller functions, fewer indirect calls), or raise \
                 the limit",
                timeout.as_millis(),
                elapsed.as_secs_f64()
            )));
        }
        Outcome::TooBig => {
            return Err(refuse(format!(
                "its compiled code is over the {} limit (max.compiled.bytes); make the \
                 assignor smaller (a release build, less generic or inlined code), or raise \
                 the limit",
                limits::bytes(max_compiled as u64)
            )));
        }
        Outcome::Unreadable(e) => return Err(failed(&format!("could not be read from: {e}"))),
        Outcome::Answered(out) => out,
    };
    if status.code() == Some(i32::from(NOT_COMPILABLE)) {
        return Err(wasmtime::Error::msg(stderr));
    }
    if !status.success() {
        return Err(failed("failed"));
    }
    let Some(artifact) = out.strip_prefix(MAGIC.as_slice()) else {
        return Err(failed(&format!(
            "answered {} that are not compiled code (no header); name the `assignor` binary \
             as the compiler",
            limits::bytes(out.len() as u64)
        )));
    };
    // SAFETY: the bytes are the answer of the compiler program, which is as trusted as the
    // runtime itself (whoever runs the runtime names it, as they chose the runtime's own
    // binary), and came whole over a pipe only it writes; wasmtime checks that they are an
    // artifact of a compatible engine, and they stay in memory, unchanged, while it maps them.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, artifact) }.map_err(|e| {
        refuse(format!(
            "the compiler {} answered compiled code this runtime cannot use ({e:#}); name a \
             compiler of this very version, the `assignor` binary",
            program.display()
        ))
    })?;
    tracing::debug!(
        pid,
        program = %program.display(),
        component_bytes = bytes.len(),
        compiled_bytes = artifact.len(),
        elapsed_ms = elapsed.as_millis() as u64,
        "compiled in a child process"
    );
    Ok(component)
}

/// How the child's answer went.
enum Outcome {
    /// It wrote this (within the bound) and exited.
    Answered(Vec<u8>),
    /// It wrote more than the compiled-code limit allows.
    TooBig,
    /// It did not exit by the deadline.
    TimedOut,
    /// Its stdout could not be read.
    Unreadable(io::Error),
}

/// A running compiler child; killed (with its process group) and reaped on drop unless
/// [`Compiling::stop`] already did, so no path leaves a zombie or a child compiling on.
struct Compiling {
    child: Child,
    status: Option<ExitStatus>,
}

impl Compiling {
    fn new(child: Child) -> Self {
        Self {
            child,
            status: None,
        }
    }

    fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the child exits, or `deadline`; its status if it exited (and is reaped).
    fn exit_by(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(EXIT_POLL);
        }
    }

    /// The child's exit status, after killing its process group if it has not been reaped
    /// (until then its pid, and so its group's id, cannot be reused).
    fn stop(&mut self) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let group = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let status = match self.child.wait() {
            Ok(status) => status,
            // Only if the child was reaped already, which only `exit_by` does.
            Err(_) => self.child.try_wait().ok().flatten().unwrap_or_default(),
        };
        self.status = Some(status);
        status
    }
}

impl Drop for Compiling {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends all of `bytes` without ever raising `SIGPIPE`.
fn send_all(socket: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::net::send(socket, bytes, rustix::net::SendFlags::NOSIGNAL) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The first `max` bytes of what `source` gives until its end (as text), with a note of how
/// many more were dropped; reads it all, keeping only those.
fn read_head(source: impl Read, max: usize) -> String {
    let mut source = source;
    let mut head = Vec::new();
    let _ = (&mut source).take(max as u64).read_to_end(&mut head);
    let dropped = io::copy(&mut source, &mut io::sink()).unwrap_or(0);
    let mut text = String::from_utf8_lossy(&head).trim_end().to_owned();
    if dropped > 0 {
        text.push_str(&format!("… ({dropped} bytes dropped)"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child's argument carries every limit the engine is configured from, and reads back
    /// to the same values; anything else is refused.
    #[test]
    fn spec_round_trips() {
        let limits = Limits::default()
            .wasm_stack_bytes(512 << 10)
            .memory_bytes(64 << 20)
            .max_concurrent_calls(3)
            .max_component_bytes(1 << 20);
        let parsed = parse_spec(&spec(&limits)).expect("our own spec");
        assert_eq!(parsed.get_wasm_stack_bytes(), 512 << 10);
        assert_eq!(parsed.get_memory_bytes(), 64 << 20);
        assert_eq!(parsed.get_max_concurrent_calls(), 3);
        assert_eq!(parsed.get_max_component_bytes(), 1 << 20);
        let good = spec(&limits);
        for bad in [
            String::new(),
            good.replace("memory-bytes", "memory"),
            good.replace(",max-component-bytes=1048576", ""),
            format!("{good},extra=1"),
            good.replace("=3", "=three"),
        ] {
            assert!(parse_spec(&bad).is_err(), "{bad}");
        }
    }

    /// A long stderr is cut to its head, saying how much was dropped.
    #[test]
    fn stderr_is_cut() {
        let text = read_head(&b"abcdef\n"[..], 3);
        assert_eq!(text, "abc… (4 bytes dropped)");
        assert_eq!(read_head(&b"ok\n"[..], 10), "ok");
    }
}
