//! The WASI a guest links against, with nothing granted, and the per-call store state.
//!
//! A Rust `wasm32-wasip2` component imports `wasi:cli`, `wasi:io`, `wasi:clocks`,
//! `wasi:random` and `wasi:filesystem` even when it only computes. We satisfy those imports
//! and grant nothing through them: no preopened directories, no environment, no arguments, no
//! network, a clock stuck at zero and a fixed random stream, so the same input gives the same
//! output and fuel. Stdout and stderr go to one bounded capture whose tail ends up in trap
//! messages (that is where a panic's message and location are).
//!
//! Host functions are bounded too. What a guest passes to one is capped at
//! [`HOST_CALL_BYTES`] (wasmtime's hostcall fuel), one `get-random-bytes` at
//! [`MAX_RANDOM_BYTES`], and every byte a host function moves for the guest (output written,
//! random bytes made) is charged to the call's fuel at [`FUEL_PER_HOST_BYTE`] when the host
//! function returns, and every pollable passed to `wasi:io/poll.poll` at [`FUEL_PER_POLLABLE`]
//! before the host polls them (our own `poll` shadows wasmtime-wasi's for that): a guest that
//! loops on host calls runs out of fuel as one that loops in wasm does, deterministically. A
//! host function that waits (a sleep, a poll) is cut off by the call's deadline, which covers
//! the whole call (see `component`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use rand_core::TryRng;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime::{CallHook, ResourceLimiter, StoreContextMut, Trap};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::bindings::io::poll::Host as _;
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{
    Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView,
    WasiView,
};

/// The import interfaces a component may have (package and interface, version stripped):
/// the types-only interface of our own WIT, and the WASI Rust's `wasm32-wasip2` std links.
/// Anything else — sockets, HTTP, custom host functions — is refused at load.
pub(crate) const ALLOWED_IMPORTS: &[&str] = &[
    "kafka:streams-assignor/types",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
];

/// Whether a component import name (e.g. `wasi:io/streams@0.2.6`) is allowed.
pub(crate) fn import_allowed(name: &str) -> bool {
    let unversioned = name.split_once('@').map_or(name, |(n, _)| n);
    ALLOWED_IMPORTS.contains(&unversioned)
}

/// Most bytes a guest may pass to one host function (a write's buffer, a poll's list): 64 KiB,
/// the write permit WASI streams hand out, so a well-behaved guest never comes near it.
pub(crate) const HOST_CALL_BYTES: usize = 64 << 10;

/// Most bytes one `get-random-bytes` or `get-insecure-random-bytes` may ask for: 64 KiB
/// (Rust's std and `getrandom` ask for a few dozen).
pub(crate) const MAX_RANDOM_BYTES: u64 = 64 << 10;

/// Fuel charged per byte a host function moves for the guest: about what the guest itself
/// would pay to touch that byte, so host work costs the same as guest work.
pub const FUEL_PER_HOST_BYTE: u64 = 4;

/// Fuel charged per pollable passed to `wasi:io/poll.poll`, before the host polls them: what
/// the host's work per pollable (a table lookup, a map entry, a boxed future polled twice, an
/// index lowered) would cost the guest in its own fuel, so a guest polling thousands of ready
/// pollables in a loop runs out of fuel in about the time an endless loop does. Measured on a
/// loaded 2-core machine: ~1 µs per pollable (4,000 at a time, 4.85 million in 5 s), and the
/// guest burns about 4 fuel per ns.
pub const FUEL_PER_POLLABLE: u64 = 4_000;

/// The `wasi:io/poll` interface wasmtime-wasi links, whose `poll` we shadow: the version of
/// its WIT (a component importing any 0.2 version is linked to it). If a wasmtime upgrade
/// moves it, ours would be a second interface beside wasmtime-wasi's, and the hostile corpus's
/// `poll-flood` row would time out instead of running out of fuel.
const POLL_INTERFACE: &str = "wasi:io/poll@0.2.12";

/// Links the WASI a guest may import: wasmtime-wasi's, with `poll` replaced by one that
/// charges the call's fuel per pollable ([`FUEL_PER_POLLABLE`]) before it polls.
///
/// `pollable.block` and `pollable.ready` are left as they are: they take one pollable, so
/// their host work per call is constant and the guest's own fuel for making the call pays
/// for it, as for any other constant-work host function.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    linker.allow_shadowing(true);
    linker.instance(POLL_INTERFACE)?.func_wrap_async(
        "poll",
        |mut cx: StoreContextMut<'_, CallState>, (pollables,): (Vec<Resource<DynPollable>>,)| {
            Box::new(async move {
                let count = pollables.len() as u64;
                charge(
                    &mut cx,
                    count.saturating_mul(FUEL_PER_POLLABLE),
                    HostWork::Pollables,
                )?;
                let ready = cx.data_mut().table.poll(pollables).await?;
                Ok((ready,))
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Host work charged to a call's fuel, named in the message when it ran the call out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostWork {
    /// Bytes written to stdout or stderr, or random bytes made.
    Bytes,
    /// Pollables passed to `wasi:io/poll.poll`.
    Pollables,
}

impl fmt::Display for HostWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bytes => write!(
                f,
                "{FUEL_PER_HOST_BYTE} fuel per byte written or made for the guest; write and ask \
                 for less"
            ),
            Self::Pollables => write!(
                f,
                "{FUEL_PER_POLLABLE} fuel per pollable passed to wasi:io/poll.poll; poll fewer \
                 pollables, or less often"
            ),
        }
    }
}

/// Takes `cost` from the call's fuel for host work, or runs the call out of fuel (recording
/// `work` as the cause) if it has less left.
fn charge(
    cx: &mut StoreContextMut<'_, CallState>,
    cost: u64,
    work: HostWork,
) -> wasmtime::Result<()> {
    let fuel = cx.get_fuel()?;
    if fuel < cost {
        cx.set_fuel(0)?;
        cx.data_mut().host_fuel_exhausted = Some(work);
        return Err(Trap::OutOfFuel.into());
    }
    cx.set_fuel(fuel - cost)?;
    Ok(())
}

/// Everything one call's `Store` holds.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    memory_limit: usize,
    /// Linear memory currently reserved by the instance, summed over its memories.
    memory: usize,
    pub(crate) peak_memory: usize,
    /// Set when the limiter refused a growth: the trap that follows is a memory-limit hit.
    pub(crate) memory_denied: bool,
    /// Bytes host functions have moved for the guest (output, randomness), shared with the
    /// capture and the generators that count them.
    host_bytes: Arc<AtomicU64>,
    /// How many of `host_bytes` have been charged to fuel.
    charged_bytes: u64,
    /// What host work ran the call out of fuel, when that is what did.
    pub(crate) host_fuel_exhausted: Option<HostWork>,
    /// Hostcall fuel for lifting what the next export call returns (see [`CallState::hook`]).
    pub(crate) result_bytes: usize,
    /// Whether the guest is inside a host function: what a call stopped at its deadline was
    /// doing.
    pub(crate) in_host_call: bool,
}

impl CallState {
    pub(crate) fn new(memory_limit: usize, capture: &Capture) -> Self {
        let host_bytes = Arc::clone(&capture.host_bytes);
        let counted = |seed: Vec<u8>| Counted {
            inner: Deterministic::new(seed),
            bytes: Arc::clone(&host_bytes),
        };
        let wasi = WasiCtxBuilder::new()
            .stdout(capture.clone())
            .stderr(capture.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(counted(vec![0x5a, 0x17, 0xc3, 0x8e]))
            .insecure_random(counted(vec![0x3c, 0x91, 0x4b, 0xe2]))
            .insecure_random_seed(0x6b61_666b_615f_7374_7265_616d_735f_3031)
            .max_random_size(MAX_RANDOM_BYTES)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            memory_limit,
            memory: 0,
            peak_memory: 0,
            memory_denied: false,
            host_bytes,
            charged_bytes: 0,
            host_fuel_exhausted: None,
            result_bytes: HOST_CALL_BYTES,
            in_host_call: false,
        }
    }

    /// The store's call hook: bounds what a guest passes to a host function and charges the
    /// bytes host functions moved to the call's fuel (pollables are charged by `poll` itself,
    /// before it works; see [`add_to_linker`]).
    ///
    /// A guest → host call lifts its arguments under the hostcall fuel set on entry; when an
    /// export returns, its results are lifted under [`result_bytes`](Self::result_bytes),
    /// which the caller set for that export. Wasmtime checks each list and string against
    /// the fuel before copying it. It also notes whether the guest is in a host function, so
    /// that a call stopped at its deadline says where it was.
    pub(crate) fn hook(mut cx: StoreContextMut<'_, Self>, hook: CallHook) -> wasmtime::Result<()> {
        match hook {
            CallHook::CallingHost => {
                cx.data_mut().in_host_call = true;
                cx.set_hostcall_fuel(HOST_CALL_BYTES);
            }
            CallHook::ReturningFromWasm => {
                let bytes = cx.data().result_bytes;
                cx.set_hostcall_fuel(bytes);
            }
            CallHook::ReturningFromHost => {
                let state = cx.data_mut();
                state.in_host_call = false;
                let moved = state.host_bytes.load(Ordering::Relaxed);
                let bytes = moved - state.charged_bytes;
                if bytes > 0 {
                    state.charged_bytes = moved;
                    let cost = bytes.saturating_mul(FUEL_PER_HOST_BYTE);
                    charge(&mut cx, cost, HostWork::Bytes)?;
                }
            }
            CallHook::CallingWasm => {}
        }
        Ok(())
    }
}

/// A deterministic generator that counts the bytes it makes, so they are charged as host work.
struct Counted {
    inner: Deterministic,
    bytes: Arc<AtomicU64>,
}

impl TryRng for Counted {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        self.bytes.fetch_add(4, Ordering::Relaxed);
        self.inner.try_next_u32()
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        self.bytes.fetch_add(8, Ordering::Relaxed);
        self.inner.try_next_u64()
    }

    fn try_fill_bytes(&mut self, buf: &mut [u8]) -> Result<(), Infallible> {
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.try_fill_bytes(buf)
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Table elements an instance may have; Rust guests need a few hundred.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for CallState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.memory - current + desired;
        if total > self.memory_limit {
            self.memory_denied = true;
            return Ok(false);
        }
        self.memory = total;
        self.peak_memory = self.peak_memory.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// A clock that always reads zero: guests cannot observe time, so output cannot depend on it.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// The guest's stdout and stderr: keeps the last `capacity` bytes and counts the rest, so a
/// chatty guest never fails on a full pipe and the end (where a panic message is) survives.
/// Every byte written counts as host work (see [`CallState::hook`]).
#[derive(Clone, Debug)]
pub(crate) struct Capture {
    tail: Arc<Mutex<Tail>>,
    host_bytes: Arc<AtomicU64>,
}

#[derive(Debug)]
struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
    dropped: usize,
}

impl Capture {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            tail: Arc::new(Mutex::new(Tail {
                bytes: VecDeque::new(),
                capacity,
                dropped: 0,
            })),
            host_bytes: Arc::new(AtomicU64::new(0)),
        }
    }

    fn push(&self, data: &[u8]) {
        self.host_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let mut tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = data.len().min(tail.capacity);
        tail.dropped += data.len() - keep;
        // Make room first, so the buffer never grows past its capacity, then copy the kept
        // bytes in as (at most two) slices.
        let excess = (tail.bytes.len() + keep).saturating_sub(tail.capacity);
        tail.bytes.drain(..excess);
        tail.dropped += excess;
        let kept = &data[data.len() - keep..];
        tail.bytes.extend(kept.iter().copied());
    }

    /// What was captured, lossily decoded, with a note when the start was cut.
    pub(crate) fn text(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = tail.bytes.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        if tail.dropped > 0 {
            format!("[{} earlier bytes dropped]\n{text}", tail.dropped)
        } else {
            text
        }
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

/// Largest write permit handed to the guest; the capture accepts any amount.
const WRITE_PERMIT: usize = 64 << 10;

#[wasmtime_wasi::async_trait]
impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The capture keeps the most recent bytes and says how many it dropped.
    #[test]
    fn capture_keeps_the_tail() {
        let capture = Capture::new(8);
        capture.push(b"hello ");
        capture.push(b"world, this is long");
        assert_eq!(capture.text(), "[17 earlier bytes dropped]\n is long");
    }

    /// Only the WASI a Rust std guest needs is importable, at any 0.2 version.
    #[test]
    fn imports_are_allowlisted() {
        assert!(import_allowed("wasi:io/streams@0.2.6"));
        assert!(import_allowed("wasi:cli/stderr@0.2.0"));
        assert!(!import_allowed("wasi:sockets/tcp@0.2.6"));
        assert!(!import_allowed("wasi:http/outgoing-handler@0.2.6"));
        assert!(!import_allowed("my:host/backdoor"));
    }
}
