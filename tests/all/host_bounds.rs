//! The host bounds itself, not only the guest (issue 14): uploads and groups that used to
//! make the host compile for half a minute, read a gigabyte or allocate for billions of tasks
//! are refused before that work, through the library, in bounded time and memory, and the
//! runtime serves the next call. (The hostile guests' rows are in `hostile`; the same rows
//! through the command in `hostile_cli`.)

use std::collections::BTreeMap;

use assignor_sandbox::{
    DEFAULT_MAX_CODE_BYTES, DEFAULT_MAX_FUNCTION_BYTES, Limits, MAX_CORE_INSTANCES,
};

use crate::common::runtime;
use crate::corpus::{self, through_library};

/// A component whose code is expensive to compile (24 MiB of straight-line code, under the
/// size limit) is refused at load before compiling, within a couple of seconds.
#[test]
fn expensive_compile_is_refused_before_compiling() {
    through_library(&corpus::EXPENSIVE_COMPILE);
}

/// A component at the code limits (16 functions of just under 256 KiB, 4 MiB of code) fits
/// the default compiled-code limit: it is refused only for not being an assignor.
#[test]
fn code_at_the_code_limits_fits_the_compiled_limit() {
    let bytes = corpus::straight_line_component(
        DEFAULT_MAX_CODE_BYTES / DEFAULT_MAX_FUNCTION_BYTES,
        DEFAULT_MAX_FUNCTION_BYTES - 64,
    );
    let error = runtime(Limits::default())
        .load(&bytes, "limits.wasm", &BTreeMap::new())
        .expect_err("it exports nothing");
    assert!(
        error.message.contains("not an assignor"),
        "compiled within the limits, refused for its exports only: {error}"
    );
}

/// A component that instantiates one more core module than a call's budget in the instance
/// pool is refused at load, naming the budget (the pool could never run it: every call would
/// be refused for capacity); one at the budget passes that check.
#[test]
fn more_core_instances_than_a_call_may_have_are_refused() {
    use wasm_encoder::{Component, InstanceSection, Module, ModuleArg, ModuleSection};
    let instantiating = |count: u32| {
        let mut instances = InstanceSection::new();
        for _ in 0..count {
            instances.instantiate(0, std::iter::empty::<(&str, ModuleArg)>());
        }
        let mut component = Component::new();
        component.section(&ModuleSection(&Module::new()));
        component.section(&instances);
        component.finish()
    };
    let runtime = runtime(Limits::default());
    let over = runtime
        .load(
            &instantiating(MAX_CORE_INSTANCES + 1),
            "many.wasm",
            &BTreeMap::new(),
        )
        .expect_err("over the budget");
    assert!(
        over.message
            .contains(&format!("more than {MAX_CORE_INSTANCES} core modules")),
        "{over}"
    );
    let at = runtime
        .load(
            &instantiating(MAX_CORE_INSTANCES),
            "many.wasm",
            &BTreeMap::new(),
        )
        .expect_err("it exports nothing");
    assert!(at.message.contains("not an assignor"), "{at}");
}

/// A 1 GiB file given as a component is refused by its size, naming the limit, without
/// being read.
#[test]
fn huge_component_file_is_refused_unread() {
    through_library(&corpus::HUGE_FILE);
}

/// A group of 100 subtopologies of 4294967295 partitions is refused by a component's call as
/// over an input limit, naming the field and the limit, before anything is sized from it.
#[test]
fn huge_partition_counts_are_refused_for_a_component() {
    through_library(&corpus::HUGE_PARTITIONS);
}

/// The same group is refused by a built-in's call alike: native code is not sized from it
/// either.
#[test]
fn huge_partition_counts_are_refused_for_a_builtin() {
    through_library(&corpus::HUGE_PARTITIONS_BUILTIN);
}

/// A 10 MiB member id is refused by a component's call in a short message naming the field
/// and the limit.
#[test]
fn huge_member_id_is_refused_for_a_component() {
    through_library(&corpus::HUGE_MEMBER_ID);
}

/// A 10 MiB member id is refused by a built-in's call alike.
#[test]
fn huge_member_id_is_refused_for_a_builtin() {
    through_library(&corpus::HUGE_MEMBER_ID_BUILTIN);
}
