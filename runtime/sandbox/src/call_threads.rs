//! The threads async guest calls run on, in two tiers, so that a guest that computes for long,
//! or whose assignor failed its last call, cannot slow down short calls, built-ins or the
//! requests a service answers.
//!
//! A call starts on the *call threads* (one per core, normal priority), unless its assignor's
//! last call failed (see [`Start`]). A call that has run there for [`FOREGROUND_TIME`] of its
//! own work (time spent in its polls, not time waiting) moves, at its next yield, to the
//! *long-call threads* (one per core), which run under Linux's `SCHED_IDLE` policy (and at
//! [`LONG_CALL_NICE`], for kernels or sandboxes that refuse the policy): the kernel gives them
//! only the CPU that the process's other threads and the short calls leave. A long call keeps every limit (its fuel and its wall-clock
//! deadline); on a machine that is busy with other work it reaches its deadline sooner, which
//! is the point: it is the call that waits.
//!
//! Moving after [`FOREGROUND_TIME`] alone did not protect anyone from hostile tenants: their
//! guests fail within a few milliseconds of fuel each, so nearly all their work was done at
//! normal priority (a third tenant's `/health` p99 went from 0.4 to 3.9 ms beside them, with
//! or without the long-call threads: 9.5x of alone). Starting the calls of an assignor whose
//! last call failed on the long-call threads brought it to 0.7–2.5x (see
//! `tests/all/service_corpus.rs`). That left a third tenant's *assignments* at a p99 2.1–3.0x
//! of alone (its p50 unchanged): now and then a call waited about one scheduler slice (3 ms
//! on an EEVDF kernel) for a nice-19 thread to finish its slice, since a woken normal thread
//! need not preempt a running nice-19 one. A normal thread always preempts a `SCHED_IDLE`
//! one when it wakes: with the policy the same test measured 0.93–1.76x over four runs (and
//! `/health` 0.98–1.60x), on a quiet 2-core machine with the 6.18 kernel.
//!
//! A call's future is boxed, so moving it between runtimes moves a pointer; its timers
//! belong to the static runtime it was created on, which outlives it.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::Poll;
use std::time::{Duration, Instant};

/// A call's own work on the call threads before it moves to the long-call threads: longer
/// than a sandboxed call at 1,000 members takes (about 2.5 ms), so ordinary calls never move;
/// short enough that a guest spinning to its deadline holds a normal-priority core for a few
/// milliseconds only.
pub const FOREGROUND_TIME: Duration = Duration::from_millis(10);

/// The nice value of the long-call threads: the lowest priority a thread can lower itself to
/// (on Linux, a nice-19 thread gets 1.5 % of a core beside one nice-0 thread).
pub const LONG_CALL_NICE: i32 = 19;

/// A call's future, as the tiers move it.
pub(crate) type CallFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Where a call starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// On the call threads, moving to the long-call threads after [`FOREGROUND_TIME`].
    Foreground,
    /// On the long-call threads from its first instruction: for an assignor whose last call
    /// failed. Hostile guests fail every call, mostly within a few milliseconds of fuel, so
    /// [`FOREGROUND_TIME`] alone would leave nearly all their work at normal priority; a good
    /// assignor does not fail and never starts here.
    Background,
}

/// The call threads: calls start here.
static CALL_THREADS: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| threads("assignor-call", false));

/// The long-call threads: calls that ran for [`FOREGROUND_TIME`] finish here.
static LONG_CALL_THREADS: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| threads("assignor-long-call", true));

/// One tier: a thread per core, each lowered to [`LONG_CALL_NICE`] as it starts if `lowered`.
fn threads(name: &'static str, lowered: bool) -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .thread_name(name)
        .enable_all();
    if lowered {
        builder.on_thread_start(lower_priority);
    }
    builder.build().expect("starting the assignor call threads")
}

/// Lowers the calling thread's priority: `SCHED_IDLE`, and [`LONG_CALL_NICE`] beneath it in
/// case the policy is refused. On Linux both apply to the calling thread alone (`0` names
/// it; scheduling attributes and nice values are per thread there), and an unprivileged
/// thread may always switch itself to `SCHED_IDLE`. A thread that cannot be lowered still
/// runs every call correctly, only without the isolation, so it is logged, not fatal.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        if let Err(e) = rustix::process::setpriority_process(None, LONG_CALL_NICE) {
            tracing::warn!(nice = LONG_CALL_NICE, error = %e, "cannot lower the long-call threads' priority");
        }
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `sched_setscheduler` reads the one `sched_param` it is given, which lives on
        // this stack for the whole call; `0` is the calling thread. rustix offers no wrapper.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!(policy = "SCHED_IDLE", error = %e, "cannot lower the long-call threads' scheduling policy");
        }
    }
}

/// Runs `call` on the tier `start` names (from the call threads, moving to the long-call
/// threads once it has worked for [`FOREGROUND_TIME`]), and returns its output. A panic in
/// the call is resumed here.
pub(crate) async fn run<T: Send + 'static>(call: CallFuture<T>, start: Start) -> T {
    if start == Start::Background {
        return joined(LONG_CALL_THREADS.spawn(call).await);
    }
    let handle = CALL_THREADS.spawn(async move {
        let mut call = call;
        let mut worked = Duration::ZERO;
        let done = poll_fn(|cx| {
            let start = Instant::now();
            let polled = call.as_mut().poll(cx);
            worked += start.elapsed();
            match polled {
                Poll::Ready(output) => Poll::Ready(Some(output)),
                Poll::Pending if worked >= FOREGROUND_TIME => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await;
        match done {
            Some(output) => output,
            None => {
                tracing::debug!(
                    worked_us = worked.as_micros() as u64,
                    "call moved to the long-call threads"
                );
                joined(LONG_CALL_THREADS.spawn(call).await)
            }
        }
    });
    joined(handle.await)
}

/// A joined call's output. The threads live as long as the process, so a join error is the
/// call's panic: the host's bug, passed on to the caller as a blocking call would.
fn joined<T>(joined: Result<T, tokio::task::JoinError>) -> T {
    joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or_default().to_owned()
    }

    /// The calling thread's nice value.
    fn nice() -> i32 {
        #[cfg(target_os = "linux")]
        return rustix::process::getpriority_process(None).expect("own priority");
        #[cfg(not(target_os = "linux"))]
        LONG_CALL_NICE
    }

    /// Whether the calling thread runs under `SCHED_IDLE`.
    fn idle_policy() -> bool {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: no arguments but the calling thread's id, `0`.
            #[allow(unsafe_code)]
            let policy = unsafe { libc::sched_getscheduler(0) };
            policy == libc::SCHED_IDLE
        }
        #[cfg(not(target_os = "linux"))]
        true
    }

    /// A call that yields without working stays on the call threads; one that works past
    /// `FOREGROUND_TIME` between yields finishes on the long-call threads, at the lowered nice;
    /// both return their output.
    #[test]
    fn long_calls_move_to_the_lowered_threads() {
        let short = Box::pin(async {
            tokio::task::yield_now().await;
            thread_name()
        });
        let long = Box::pin(async {
            std::thread::sleep(FOREGROUND_TIME);
            tokio::task::yield_now().await;
            assert_eq!(nice(), LONG_CALL_NICE);
            assert!(idle_policy(), "the long-call threads run under SCHED_IDLE");
            thread_name()
        });
        let (short, long) = wasmtime_wasi::runtime::in_tokio(async {
            (
                run(short, Start::Foreground).await,
                run(long, Start::Foreground).await,
            )
        });
        assert_eq!(short, "assignor-call");
        assert_eq!(long, "assignor-long-call");
    }

    /// A call started in the background runs on the long-call threads from its first poll.
    #[test]
    fn background_calls_start_lowered() {
        let call = Box::pin(async {
            assert_eq!(nice(), LONG_CALL_NICE);
            assert!(idle_policy(), "the long-call threads run under SCHED_IDLE");
            thread_name()
        });
        let name = wasmtime_wasi::runtime::in_tokio(run(call, Start::Background));
        assert_eq!(name, "assignor-long-call");
    }

    /// A panic in a call reaches the caller of `run`.
    #[test]
    #[should_panic(expected = "the call's panic")]
    fn a_panic_reaches_the_caller() {
        wasmtime_wasi::runtime::in_tokio(run::<()>(
            Box::pin(async { panic!("the call's panic") }),
            Start::Foreground,
        ));
    }
}
