//! Issue 14's hostile corpus through the `assignor assign --json` command: each row ends in
//! the expected exit code and typed error (or input refusal) naming the cause and the limit,
//! within its time bound plus the command's start-up, with the command's peak RSS, its output
//! and its captures bounded (see `corpus`).

use crate::corpus::{self, through_cli};

/// `sleeper` ends as `timeout` within its deadline plus 1 s (and start-up).
#[test]
fn sleeping_guest_is_stopped_at_the_deadline() {
    through_cli(&corpus::SLEEPER);
}

/// `poll-forever` ends as `timeout` within its deadline plus 1 s (and start-up).
#[test]
fn polling_guest_is_stopped_at_the_deadline() {
    through_cli(&corpus::POLL_FOREVER);
}

/// `random-flood` fails fast on the random cap or its fuel, naming the limit.
#[test]
fn random_flood_fails_fast() {
    through_cli(&corpus::RANDOM_FLOOD);
}

/// `stdout-flood` runs out of fuel, well before its deadline.
#[test]
fn stdout_flood_runs_out_of_fuel() {
    through_cli(&corpus::STDOUT_FLOOD);
}

/// `poll-flood` runs out of fuel, charged per pollable, well before its deadline.
#[test]
fn poll_flood_runs_out_of_fuel() {
    through_cli(&corpus::POLL_FLOOD);
}

/// `output-flood` is rejected as invalid output in about a second at most.
#[test]
fn output_flood_is_rejected_in_linear_time() {
    through_cli(&corpus::OUTPUT_FLOOD);
}

/// `huge-name` is a `load` error in a message under 1 KiB, in bounded memory.
#[test]
fn huge_name_is_refused_at_load() {
    through_cli(&corpus::HUGE_NAME);
}

/// `huge-error`'s 100 MiB message reaches neither the output nor the capture: it is cut to
/// the message limit with a note of the bytes dropped.
#[test]
fn huge_error_is_cut_to_the_message_limit() {
    through_cli(&corpus::HUGE_ERROR);
}

/// `shadow-stack` is reported as `stack-overflow`.
#[test]
fn shadow_stack_overflow_is_a_stack_overflow() {
    through_cli(&corpus::SHADOW_STACK);
}

/// `same-process-standby` is invalid output naming the rule.
#[test]
fn standby_on_the_active_process_is_invalid() {
    through_cli(&corpus::SAME_PROCESS_STANDBY);
}

/// A component whose code is expensive to compile is refused before compiling.
#[test]
fn expensive_compile_is_refused_before_compiling() {
    through_cli(&corpus::EXPENSIVE_COMPILE);
}

/// A 1 GiB file given as a component is refused by its size without being read.
#[test]
fn huge_component_file_is_refused_unread() {
    through_cli(&corpus::HUGE_FILE);
}

/// 100 subtopologies of 4294967295 partitions: exit 2 naming the field and the limit, no
/// abort, for a component.
#[test]
fn huge_partition_counts_are_refused_for_a_component() {
    through_cli(&corpus::HUGE_PARTITIONS);
}

/// The same group for the built-in `sticky`: exit 2 alike.
#[test]
fn huge_partition_counts_are_refused_for_a_builtin() {
    through_cli(&corpus::HUGE_PARTITIONS_BUILTIN);
}

/// A 10 MiB member id: exit 2 in a short message naming the field and the limit, for a
/// component.
#[test]
fn huge_member_id_is_refused_for_a_component() {
    through_cli(&corpus::HUGE_MEMBER_ID);
}

/// A 10 MiB member id for the built-in `sticky`: exit 2 alike.
#[test]
fn huge_member_id_is_refused_for_a_builtin() {
    through_cli(&corpus::HUGE_MEMBER_ID_BUILTIN);
}
