//! Capture files (`assignor replay FILE`, `GET /v1/groups/{g}/capture`, `Capture::read` in a
//! test): arbitrary bytes never panic, hang or over-allocate the decoder; a capture that decodes
//! encodes back to bytes that decode to the same capture; and the limits it carries convert to
//! the runtime's without panicking, whatever their values.

#![no_main]

use assignor_coordinator::capture::limits_for;
use assignor_sandbox::Limits;
use assignor_sdk::CallLimits;
use assignor_sdk::capture::Capture;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(capture) = Capture::from_bytes(data) else {
        return;
    };
    assert_eq!(
        Capture::from_bytes(&capture.to_bytes()).as_ref(),
        Ok(&capture),
        "a decoded capture does not survive its own encoding"
    );
    let limits = limits_for(&capture);
    if let Some(captured) = capture.limits {
        // What replay runs under is what was captured (u64 and usize are the same here), the
        // default wasm stack where the capture has none.
        let default_stack = CallLimits::from(&Limits::default()).wasm_stack_bytes;
        let expected = CallLimits {
            wasm_stack_bytes: captured.wasm_stack_bytes.or(default_stack),
            ..captured
        };
        assert_eq!(CallLimits::from(&limits), expected);
    }
});
