//! Each hostile guest fails with the right kind and a message naming assignor and cause, and
//! the runtime serves a good assignor on the very next call. The guests of issue 14's corpus
//! (see `corpus`) are also held to bounds on the host: the time the failing step takes and
//! the host's peak memory, each in a process of its own.

use std::time::{Duration, Instant};

use assignor_sandbox::{DEFAULT_TIMEOUT, ErrorKind, Limits, TaskAssignorError};
use assignor_tests::guests;

use crate::common::{example, load, next_call_succeeds, runtime};
use crate::corpus::{self, through_library};

/// Runs `guest` on the example group under `limits`, expecting failure of `kind`.
fn fails(guest: &str, limits: Limits, kind: ErrorKind) -> (TaskAssignorError, Duration) {
    let runtime = runtime(limits);
    let assignor = load(&runtime, guest, &[]);
    let (group, topology) = example();
    let start = Instant::now();
    let error = assignor
        .assign(&group, &topology)
        .expect_err("a hostile guest must fail");
    let elapsed = start.elapsed();
    assert_eq!(error.kind, kind, "{error}");
    assert_eq!(
        error.assignor,
        assignor.name(),
        "the error names the assignor"
    );
    next_call_succeeds(&runtime);
    (error, elapsed)
}

/// An endless loop runs out of fuel under default limits, long before the wall-clock deadline.
#[test]
fn endless_loop_is_stopped_by_fuel() {
    stopped_by_fuel(guests::ENDLESS_LOOP);
}

/// Runs `guest` under default limits: it must run out of fuel, before the deadline.
fn stopped_by_fuel(guest: &str) {
    let (error, elapsed) = fails(guest, Limits::default(), ErrorKind::OutOfFuel);
    assert!(error.message.contains("ran out of fuel"), "{error}");
    assert!(
        elapsed < DEFAULT_TIMEOUT,
        "fuel, not the {DEFAULT_TIMEOUT:?} deadline, must stop it (took {elapsed:?})"
    );
}

/// With fuel disabled, the wall-clock deadline stops an endless loop on time: fuel is still
/// counted, and the yields it makes every `YIELD_FUEL` units check the deadline.
#[test]
fn endless_loop_without_fuel_hits_the_deadline() {
    stopped_on_time(guests::ENDLESS_LOOP);
}

/// Bulk copies of 16 MiB, each one wasm instruction, run out of fuel fast under default
/// limits: wasmtime charges them a unit of fuel per byte.
#[test]
fn bulk_copies_are_charged_per_byte() {
    stopped_by_fuel(guests::COPY_FLOOD);
}

/// With fuel disabled, bulk copies of 16 MiB (one wasm instruction each, milliseconds long)
/// are stopped at the deadline too: their per-byte fuel makes the yields that check it.
#[test]
fn bulk_copies_without_fuel_hit_the_deadline() {
    stopped_on_time(guests::COPY_FLOOD);
}

/// Runs `guest` without a fuel limit under a 200 ms deadline: it must fail as `timeout`, in
/// wasm code (not waiting in a host call), after the deadline and well within a second of it.
fn stopped_on_time(guest: &str) {
    let timeout = Duration::from_millis(200);
    let limits = Limits::default().fuel(None).timeout(timeout);
    let (error, elapsed) = fails(guest, limits, ErrorKind::Timeout);
    assert!(
        error.message.contains("wall-clock deadline of 200ms"),
        "{error}"
    );
    assert!(!error.message.contains("host call"), "{error}");
    assert!(
        elapsed >= timeout,
        "stopped after {elapsed:?}, before the deadline"
    );
    assert!(
        elapsed < timeout + Duration::from_secs(1),
        "stopped {elapsed:?} after its start, long past the deadline"
    );
}

/// Unbounded allocation hits the memory limit and is reported as such, not as a bare trap.
#[test]
fn unbounded_allocation_hits_the_memory_limit() {
    let limits = Limits::default().memory_bytes(32 << 20);
    let (error, _) = fails(guests::UNBOUNDED_ALLOC, limits, ErrorKind::MemoryLimit);
    corpus::names_bytes(&error.message, 32 << 20);
}

/// Unbounded recursion overflows the wasm stack.
#[test]
fn deep_recursion_overflows_the_stack() {
    let (error, _) = fails(
        guests::DEEP_RECURSION,
        Limits::default(),
        ErrorKind::StackOverflow,
    );
    assert!(error.message.contains("wasm stack"), "{error}");
}

/// A panic is a trap whose message carries the panic message and its source location.
#[test]
fn panic_message_and_location_reach_the_error() {
    let (error, _) = fails(guests::PANICS, Limits::default(), ErrorKind::Trap);
    assert!(
        error.message.contains("assignor exploded on purpose"),
        "{error}"
    );
    assert!(
        error.message.contains("examples/panics.rs:"),
        "location missing: {error}"
    );
}

/// A trap keeps wasmtime's error as its `source`, whose chain names the trap, while the
/// message says it in the author's terms; equality ignores the source.
#[test]
fn a_trap_keeps_wasmtimes_error_as_its_source() {
    let (error, _) = fails(guests::PANICS, Limits::default(), ErrorKind::Trap);
    let source = std::error::Error::source(&error).expect("wasmtime's error is kept");
    let mut chain = vec![source.to_string()];
    let mut next = source.source();
    while let Some(cause) = next {
        chain.push(cause.to_string());
        next = cause.source();
    }
    assert!(
        chain.iter().any(|c| c.contains("unreachable")),
        "the chain names the trap: {chain:?}"
    );
    let plain = TaskAssignorError::new(&error.assignor, error.kind, error.message.clone())
        .with_fuel(error.fuel);
    assert_eq!(plain, error, "the source is not part of equality");
}

/// An error returned by the guest is a guest-error carrying its message verbatim.
#[test]
fn guest_error_is_reported_verbatim() {
    let (error, _) = fails(
        guests::GUEST_ERROR,
        Limits::default(),
        ErrorKind::GuestError,
    );
    assert_eq!(
        error.message,
        "cannot assign: the group has no stateful subtopologies I understand"
    );
}

/// An assignment over the output limit is rejected as invalid output.
#[test]
fn oversized_output_is_rejected() {
    let (error, _) = fails(
        guests::OVERSIZED_OUTPUT,
        Limits::default(),
        ErrorKind::InvalidOutput,
    );
    assert!(error.message.contains("output too large"), "{error}");
}

/// Slow but legal work that fits the limits succeeds, and its usage is reported.
#[test]
fn slow_but_legal_work_succeeds() {
    let runtime = runtime(Limits::default());
    let assignor = load(&runtime, guests::SLOW_LEGAL, &[]);
    let (group, topology) = example();
    let (_, usage) = assignor.assign(&group, &topology).expect("fits the limits");
    assert!(usage.fuel.expect("sandboxed calls report fuel") > 10_000_000);
    assert!(usage.peak_memory_bytes.expect("and memory") > 0);
}

/// A guest flooding stderr is not failed for it; only the tail of its output is kept.
#[test]
fn chatty_guest_keeps_working_and_output_is_bounded() {
    let runtime = runtime(Limits::default().max_stderr_bytes(1024));
    let assignor = load(&runtime, guests::CHATTY, &[]);
    let (group, topology) = example();
    assignor
        .assign(&group, &topology)
        .expect("chatter is not an error");
}

/// A call beyond the runtime's concurrency limit fails at once with a clear message, and the
/// runtime serves calls again once the slot is free.
#[test]
fn calls_beyond_the_concurrency_limit_fail_fast() {
    let limits = Limits::default()
        .max_concurrent_calls(1)
        .fuel(None)
        .timeout(Duration::from_millis(1500));
    let runtime = runtime(limits);
    let looping = std::sync::Arc::new(load(&runtime, guests::ENDLESS_LOOP, &[]));
    let good = load(&runtime, guests::BALANCED, &[]);
    let (group, topology) = example();
    let busy = std::thread::scope(|scope| {
        // The occupant retries while the other thread's call holds the only slot: it must end
        // up running, and then its deadline stops it.
        let occupant = scope.spawn(|| {
            loop {
                match looping.assign(&group, &topology) {
                    Err(e) if e.message.contains("concurrent calls") => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    outcome => break outcome,
                }
            }
        });
        let start = Instant::now();
        // The occupant may not have started yet: call until the slot is seen taken.
        let busy = loop {
            match good.assign(&group, &topology) {
                Err(e) => break Some(e),
                Ok(_) if start.elapsed() < Duration::from_secs(1) => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(_) => break None,
            }
        };
        let occupant = occupant.join().expect("the occupant thread returns");
        assert_eq!(occupant.expect_err("endless").kind, ErrorKind::Timeout);
        busy
    });
    let busy = busy.expect("a second call while the only slot is taken must fail");
    assert!(
        busy.message.contains("maximum of 1 concurrent calls"),
        "{busy}"
    );
    good.assign(&group, &topology)
        .expect("the slot is free again");
}

/// A guest sleeping through `wasi:clocks`/`poll` (blocked in a host function, where fuel does
/// not reach) ends as `timeout` within its deadline plus 1 s.
#[test]
fn sleeping_guest_is_stopped_at_the_deadline() {
    through_library(&corpus::SLEEPER);
}

/// A guest polling an instant that never comes ends as `timeout` within its deadline plus
/// 1 s.
#[test]
fn polling_guest_is_stopped_at_the_deadline() {
    through_library(&corpus::POLL_FOREVER);
}

/// A guest asking for 64 MiB of randomness per host call fails fast on the per-call cap or
/// the fuel its host bytes cost, naming the limit, in bounded host time and memory.
#[test]
fn random_flood_fails_fast() {
    through_library(&corpus::RANDOM_FLOOD);
}

/// A guest writing to stdout forever runs out of fuel (host bytes are charged), well before
/// its deadline and in bounded memory.
#[test]
fn stdout_flood_runs_out_of_fuel() {
    through_library(&corpus::STDOUT_FLOOD);
}

/// A guest polling 4,000 ready pollables in a loop runs out of fuel (pollables are charged
/// before the host polls them), well before its deadline and in bounded memory.
#[test]
fn poll_flood_runs_out_of_fuel() {
    through_library(&corpus::POLL_FLOOD);
}

/// A host call passed more than the 64 KiB of arguments the host lifts for one call (20,000
/// pollables to `poll`) fails as a trap naming that cap, not as an oversized output.
#[test]
fn host_call_arguments_over_the_cap_name_the_cap() {
    let runtime = runtime(Limits::default());
    let assignor = load(&runtime, guests::POLL_FLOOD, &[("pollables", "20000")]);
    let (group, topology) = example();
    let error = assignor
        .assign(&group, &topology)
        .expect_err("the call's arguments are over the cap");
    assert_eq!(error.kind, ErrorKind::Trap, "{error}");
    assert!(
        error
            .message
            .contains("passed more than 64 KiB to one host call"),
        "{error}"
    );
    next_call_succeeds(&runtime);
}

/// 200,000 output entries alternating between two members are rejected as invalid in under
/// a second: lifting and validation are linear in the output.
#[test]
fn output_flood_is_rejected_in_linear_time() {
    through_library(&corpus::OUTPUT_FLOOD);
}

/// A 40 MiB `name()` is refused at load, quickly, in a message under 1 KiB.
#[test]
fn huge_name_is_refused_at_load() {
    through_library(&corpus::HUGE_NAME);
}

/// A 100 MiB guest error is cut to the message limit, with a note of the bytes dropped, and
/// never held by the host whole.
#[test]
fn huge_error_is_cut_to_the_message_limit() {
    through_library(&corpus::HUGE_ERROR);
}

/// A guest error within what the host lifts (here the output limit raised over its 100 MiB)
/// is a `guest-error` whose message is cut to the message limit, with the rest counted.
#[test]
fn error_within_the_output_limit_is_cut_to_the_message_limit() {
    let limits = Limits::default().max_output_bytes(128 << 20);
    let (error, _) = fails(guests::HUGE_ERROR, limits, ErrorKind::GuestError);
    corpus::cut_to_the_message_limit(&error.message, corpus::HUGE_ERROR_BYTES);
}

/// A guest overflowing its own stack in linear memory (large frames) is a `stack-overflow`,
/// not a bare trap.
#[test]
fn shadow_stack_overflow_is_a_stack_overflow() {
    through_library(&corpus::SHADOW_STACK);
}

/// A standby on another member of its active's process is invalid output naming the rule.
#[test]
fn standby_on_the_active_process_is_invalid() {
    through_library(&corpus::SAME_PROCESS_STANDBY);
}
