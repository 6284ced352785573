//! The same input gives byte-identical output and identical fuel, and the sandboxed sample
//! matches the native built-in output for output.

use assignor_coordinator::{Assignor, json};
use assignor_sandbox::Limits;
use assignor_tests::guests;

use crate::common::{example, load, runtime};

/// Two calls of the sample on the same input: identical JSON bytes and fuel.
#[test]
fn same_input_same_output_and_fuel() {
    let runtime = runtime(Limits::default());
    let assignor = load(&runtime, guests::BALANCED, &[]);
    let (group, topology) = example();
    let (a1, u1) = assignor.assign(&group, &topology).expect("assigns");
    let (a2, u2) = assignor.assign(&group, &topology).expect("assigns");
    let j1 = serde_json::to_vec(&json::assignment_doc(&group, &topology, &a1)).expect("json");
    let j2 = serde_json::to_vec(&json::assignment_doc(&group, &topology, &a2)).expect("json");
    assert_eq!(j1, j2);
    assert_eq!(u1.fuel, u2.fuel);
}

/// A guest iterating a std `HashMap` gets the same seed in every instance and every runtime.
#[test]
fn hashmap_order_is_deterministic_across_runtimes() {
    let (group, topology) = example();
    let run = || {
        let runtime = runtime(Limits::default());
        load(&runtime, guests::HASHMAP_USER, &[])
            .assign(&group, &topology)
            .expect("assigns")
    };
    let (a1, u1) = run();
    let (a2, u2) = run();
    assert_eq!(a1, a2);
    assert_eq!(u1.fuel, u2.fuel);
}

/// The balanced sample as a component and as a native built-in give the same assignment.
#[test]
fn component_and_builtin_agree() {
    let runtime = runtime(Limits::default());
    let component = load(&runtime, guests::BALANCED, &[]);
    let native = Assignor::builtin("balanced", &Default::default()).expect("balanced is built in");
    let (group, topology) = example();
    let (sandboxed, _) = component.assign(&group, &topology).expect("assigns");
    let (direct, usage) = native.assign(&group, &topology).expect("assigns");
    assert_eq!(sandboxed, direct);
    assert_eq!(usage.fuel, None, "native calls burn no fuel");
}
