//! Loading refuses anything that is not a component of our world importing only allowed WASI,
//! with an error saying what to do, and caches compiled components.

use assignor_sandbox::{ErrorKind, Limits, Runtime};
use assignor_tests::guests;

use crate::common::{runtime, try_load};

fn load_error(runtime: &Runtime, bytes: &[u8]) -> String {
    let error = runtime
        .load(bytes, "upload.wasm", &Default::default())
        .expect_err("must not load");
    assert_eq!(error.kind, ErrorKind::Load, "{error}");
    assert_eq!(
        error.assignor, "upload.wasm",
        "named by origin until it has a name"
    );
    error.message
}

/// Bytes that are not WebAssembly at all.
#[test]
fn garbage_is_not_a_component() {
    let m = load_error(&runtime(Limits::default()), b"PK\x03\x04 definitely a zip");
    assert!(m.contains("not a WebAssembly file"), "{m}");
}

/// A component whose header is right but whose contents are not is refused by wasmtime's
/// parser, whose error is kept as the `source`.
#[test]
fn a_broken_component_keeps_wasmtimes_error_as_its_source() {
    let error = runtime(Limits::default())
        .load(
            b"\0asm\x0d\0\x01\0\x01\xff\xff",
            "upload.wasm",
            &Default::default(),
        )
        .expect_err("must not load");
    assert_eq!(error.kind, ErrorKind::Load, "{error}");
    let source = std::error::Error::source(&error).expect("wasmtime's error is kept");
    assert!(
        error.message.contains(&source.to_string()),
        "the message says what the source says: {error} / {source}"
    );
}

/// A core module is told apart from a component, with how to build a component.
#[test]
fn core_module_is_not_a_component() {
    let m = load_error(&runtime(Limits::default()), b"\0asm\x01\0\0\0");
    assert!(m.contains("core WebAssembly module"), "{m}");
    assert!(m.contains("wasm32-wasip2"), "{m}");
}

/// A component of another world (a WASI command) is refused, listing what it exports.
#[test]
fn component_of_another_world_is_refused() {
    let runtime = runtime(Limits::default());
    let error = try_load(&runtime, guests::NOT_AN_ASSIGNOR, &[]).expect_err("wrong world");
    assert_eq!(error.kind, ErrorKind::Load);
    assert!(error.message.contains("does not export"), "{error}");
    assert!(error.message.contains("wasi:cli/run"), "{error}");
}

/// A component importing sockets is refused at load, naming the import.
#[test]
fn forbidden_import_is_refused() {
    let runtime = runtime(Limits::default());
    let error = try_load(&runtime, guests::FORBIDDEN_IMPORT, &[]).expect_err("sockets");
    assert_eq!(error.kind, ErrorKind::Load);
    assert!(error.message.contains("forbidden import"), "{error}");
    assert!(error.message.contains("wasi:sockets/"), "{error}");
}

/// A component over the size limit is refused before it is parsed.
#[test]
fn oversized_component_is_refused() {
    let bytes = std::fs::read(guests::BALANCED).expect("built by the build script");
    let runtime = runtime(Limits::default().max_component_bytes(bytes.len() - 1));
    let m = load_error(&runtime, &bytes);
    assert!(m.contains("over the"), "{m}");
}

/// A missing file is a load error naming the file.
#[test]
fn unreadable_file_is_a_load_error() {
    let runtime = runtime(Limits::default());
    let error = try_load(&runtime, "/nonexistent/assignor.wasm", &[]).expect_err("no file");
    assert_eq!(error.kind, ErrorKind::Load);
    assert_eq!(error.assignor, "/nonexistent/assignor.wasm");
    assert!(error.message.contains("cannot read"), "{error}");
}

/// A compiled component is cached on disk and a new runtime loads it from there.
#[test]
fn compiled_components_are_cached_on_disk() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Runtime::with_cache_dir(Limits::default(), dir.path()).expect("runtime");
    let a = try_load(&first, guests::BALANCED, &[]).expect("loads");
    let cached: Vec<_> = std::fs::read_dir(dir.path())
        .expect("cache dir exists")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(
        cached[0].starts_with(&a.sha256()),
        "{cached:?} keyed by content hash"
    );
    let second = Runtime::with_cache_dir(Limits::default(), dir.path()).expect("runtime");
    let b = try_load(&second, guests::BALANCED, &[]).expect("loads from the cache");
    assert_eq!(a.sha256(), b.sha256());
    assert_eq!(b.name(), "balanced");
}

/// Compiled code over `max.compiled.bytes` is refused at load, naming the limit, the size and
/// what to do, and is not cached; the default limit accepts every sample assignor.
#[test]
fn compiled_code_over_the_limit_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let low = Limits::default().max_compiled_bytes(64 << 10);
    let low = Runtime::with_cache_dir(low, dir.path()).expect("runtime");
    let defaults = runtime(Limits::default());
    for sample in [guests::BALANCED, guests::STICKY, guests::RACK_AWARE] {
        let error = try_load(&low, sample, &[]).expect_err("over 64 KiB of compiled code");
        assert_eq!(error.kind, ErrorKind::Load, "{error}");
        for needle in [
            "its compiled code is ",
            "over the 64 KiB limit (max.compiled.bytes)",
            "raise the limit",
        ] {
            assert!(error.message.contains(needle), "{needle:?}: {error}");
        }
        try_load(&defaults, sample, &[]).expect("the default limit accepts a sample");
    }
    let cached = std::fs::read_dir(dir.path()).expect("cache dir").count();
    assert_eq!(cached, 0, "code over the limit is never cached");
}

/// A compiled component read back from the on-disk cache is held to the compiled-code limit
/// as a fresh compilation is: a stored file is input too.
#[test]
fn cached_code_over_the_limit_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Runtime::with_cache_dir(Limits::default(), dir.path()).expect("runtime");
    try_load(&first, guests::BALANCED, &[]).expect("loads, and is cached");
    let low = Limits::default().max_compiled_bytes(64 << 10);
    let second = Runtime::with_cache_dir(low, dir.path()).expect("runtime");
    let error = try_load(&second, guests::BALANCED, &[]).expect_err("over the lower limit");
    assert_eq!(error.kind, ErrorKind::Load, "{error}");
    assert!(error.message.contains("max.compiled.bytes"), "{error}");
}

/// A `name()` that cannot be selected in a config (whitespace) is refused at load.
#[test]
fn unusable_name_is_refused() {
    let runtime = runtime(Limits::default());
    let error = try_load(&runtime, guests::BAD_NAME, &[]).expect_err("bad name");
    assert_eq!(error.kind, ErrorKind::Load);
    assert!(
        error.assignor.ends_with("bad_name.wasm"),
        "named by file: {error}"
    );
    assert!(
        error.message.contains(r#"name() returned "my assignor""#),
        "{error}"
    );
}
