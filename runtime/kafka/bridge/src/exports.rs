//! The JNI exports of `dev.assignor.kafka.NativeComponent`: move arrays in and out, and turn
//! every failure into a thrown `dev.assignor.kafka.SandboxFailure`. Each export's body runs
//! under [`std::panic::catch_unwind`]: a panic unwinding into the JVM is undefined
//! behaviour, so a panic becomes a failure of kind `internal` instead.
//!
//! A component handle is a `Box<ComponentAssignor>` turned into a `long`. The Java side owns
//! its life: `NativeComponent` calls `free` exactly once (from `close()`, or from its
//! `Cleaner` when it became unreachable unclosed) and never after or during a call (calls
//! hold a read lock that `close()` takes for writing).

// JNI needs unmangled exported symbols and a raw handle crossing as a `long`; the unsafe is
// confined to this module, each use with its reason.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use assignor_sandbox::ComponentAssignor;
use jni::JNIEnv;
use jni::objects::{
    JByteArray, JClass, JIntArray, JLongArray, JObject, JObjectArray, JString, JThrowable, JValue,
};
use jni::sys::{jboolean, jintArray, jlong, jlongArray, jstring};

use crate::call::{self, Failure, Source};
use crate::flat::Strings;

const FAILURE_CLASS: &str = "dev/assignor/kafka/SandboxFailure";
const FAILURE_CONSTRUCTOR: &str =
    "(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;JLjava/lang/Throwable;)V";

/// What stopped an export.
#[derive(Debug)]
enum Stop {
    /// The load or call failed: thrown as a `SandboxFailure`.
    Failed(Failure),
    /// A JNI call failed: thrown as a `SandboxFailure` of kind `internal`, with the Java
    /// exception it left pending (if any) as its cause.
    Jni(jni::errors::Error),
}

impl From<Failure> for Stop {
    fn from(f: Failure) -> Self {
        Self::Failed(f)
    }
}

impl From<jni::errors::Error> for Stop {
    fn from(e: jni::errors::Error) -> Self {
        Self::Jni(e)
    }
}

/// Runs `body` and turns a panic inside it into a failure of kind `internal` for
/// `assignor`: a panic unwinding into the JVM would be undefined behaviour. Apart from
/// [`guarded`] (which needs a live JVM to throw) so that `cargo test` drives it with a
/// panicking body.
fn caught<R>(assignor: &str, body: impl FnOnce() -> Result<R, Stop>) -> Result<R, Stop> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(outcome) => outcome,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned());
            Err(Failure::internal(assignor, format!("the bridge panicked: {message}")).into())
        }
    }
}

/// Runs `body` under [`caught`], returning `none` (which Java never sees: an exception is
/// pending) when it fails or panics, after throwing the failure as a `SandboxFailure`.
fn guarded<'l, R>(
    env: &mut JNIEnv<'l>,
    assignor: &str,
    none: R,
    body: impl FnOnce(&mut JNIEnv<'l>) -> Result<R, Stop>,
) -> R {
    let failure = match caught(assignor, || body(env)) {
        Ok(value) => return value,
        Err(Stop::Failed(failure)) => failure,
        Err(Stop::Jni(e)) => Failure::internal(assignor, format!("a JNI call failed: {e}")),
    };
    // A Java exception the body left pending (an array index out of bounds, an
    // OutOfMemoryError) becomes the cause: every failure reaches Java as a SandboxFailure,
    // and the JNI calls below are illegal while one is pending.
    let cause = if env.exception_check().unwrap_or(false) {
        let pending = env.exception_occurred().ok();
        let _ = env.exception_clear();
        pending
    } else {
        None
    };
    if let Err(e) = throw(env, &failure, cause) {
        tracing::error!(error = %e, kind = failure.kind, "cannot throw a SandboxFailure");
    }
    none
}

fn throw(
    env: &mut JNIEnv<'_>,
    failure: &Failure,
    cause: Option<JThrowable<'_>>,
) -> jni::errors::Result<()> {
    let kind = env.new_string(&failure.kind)?;
    let assignor = env.new_string(&failure.assignor)?;
    let message = env.new_string(&failure.message)?;
    let fuel = failure
        .fuel
        .map_or(-1, |f| i64::try_from(f).unwrap_or(i64::MAX));
    let cause = cause.unwrap_or_else(|| JThrowable::from(JObject::null()));
    let exception = env.new_object(
        FAILURE_CLASS,
        FAILURE_CONSTRUCTOR,
        &[
            JValue::Object(&kind),
            JValue::Object(&assignor),
            JValue::Object(&message),
            JValue::Long(fuel),
            JValue::Object(&cause),
        ],
    )?;
    env.throw(JThrowable::from(exception))
}

fn strings(env: &mut JNIEnv<'_>, array: &JObjectArray<'_>) -> Result<Vec<String>, Stop> {
    let len = env.get_array_length(array)?;
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    for i in 0..len {
        // A frame per element: `get_string` checks the element's class, which leaves a local
        // reference behind, and -Xcheck:jni warns past 32 of them.
        let s: String = env.with_local_frame(4, |env| -> jni::errors::Result<String> {
            let s = JString::from(env.get_object_array_element(array, i)?);
            Ok(env.get_string(&s)?.into())
        })?;
        out.push(s);
    }
    Ok(out)
}

fn ints(env: &mut JNIEnv<'_>, array: &JIntArray<'_>) -> Result<Vec<i32>, Stop> {
    let len = env.get_array_length(array)?;
    let mut out = vec![0; usize::try_from(len).unwrap_or(0)];
    env.get_int_array_region(array, 0, &mut out)?;
    Ok(out)
}

fn longs(env: &mut JNIEnv<'_>, array: &JLongArray<'_>) -> Result<Vec<i64>, Stop> {
    let len = env.get_array_length(array)?;
    let mut out = vec![0; usize::try_from(len).unwrap_or(0)];
    env.get_long_array_region(array, 0, &mut out)?;
    Ok(out)
}

/// The component behind a handle.
fn component<'h>(handle: jlong) -> Result<&'h ComponentAssignor, Stop> {
    if handle == 0 {
        return Err(Failure::internal("?", "the component was already closed").into());
    }
    // SAFETY: a non-zero handle is a `Box<ComponentAssignor>` from `load` that `free` has not
    // yet taken back: `NativeComponent` zeroes it under the write lock that `free` runs in,
    // and every call holds the read lock for as long as it uses the reference.
    Ok(unsafe { &*(handle as *const ComponentAssignor) })
}

/// What both loads take besides the component: the broker's properties (parallel arrays),
/// the entry's key prefix and the trap mode.
struct Entry {
    properties: BTreeMap<String, String>,
    prefix: String,
    signals_based_traps: bool,
}

impl Entry {
    fn read(
        env: &mut JNIEnv<'_>,
        keys: &JObjectArray<'_>,
        values: &JObjectArray<'_>,
        prefix: &JString<'_>,
        signals_based_traps: jboolean,
    ) -> Result<Self, Stop> {
        Ok(Self {
            prefix: env.get_string(prefix)?.into(),
            properties: strings(env, keys)?
                .into_iter()
                .zip(strings(env, values)?)
                .collect(),
            signals_based_traps: signals_based_traps != 0,
        })
    }

    /// Loads the component under the entry's limits; its handle.
    fn load(&self, source: Source<'_>) -> Result<jlong, Stop> {
        let assignor = call::load(
            source,
            &self.properties,
            &self.prefix,
            self.signals_based_traps,
        )?;
        Ok(Box::into_raw(Box::new(assignor)) as jlong)
    }
}

/// `static native long load(String path, String[] keys, String[] values, String prefix,
/// boolean signalsBasedTraps)`: loads the component at `path` under the entry's limits (the
/// broker's properties as parallel arrays) and returns its handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_assignor_kafka_NativeComponent_load<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
    keys: JObjectArray<'l>,
    values: JObjectArray<'l>,
    prefix: JString<'l>,
    signals_based_traps: jboolean,
) -> jlong {
    guarded(&mut env, "(loading)", 0, |env| {
        let path: String = env.get_string(&path)?.into();
        let entry = Entry::read(env, &keys, &values, &prefix, signals_based_traps)?;
        entry.load(Source::File(&path))
    })
}

/// `static native long loadBytes(byte[] component, String origin, String[] keys, String[]
/// values, String prefix, boolean signalsBasedTraps)`: as `load`, from a component's bytes
/// (pulled from `assignor serve`), `origin` naming them until the component's name is known.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_assignor_kafka_NativeComponent_loadBytes<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: JByteArray<'l>,
    origin: JString<'l>,
    keys: JObjectArray<'l>,
    values: JObjectArray<'l>,
    prefix: JString<'l>,
    signals_based_traps: jboolean,
) -> jlong {
    guarded(&mut env, "(loading)", 0, |env| {
        let bytes = env.convert_byte_array(&component)?;
        let origin: String = env.get_string(&origin)?.into();
        let entry = Entry::read(env, &keys, &values, &prefix, signals_based_traps)?;
        entry.load(Source::Bytes {
            bytes: &bytes,
            origin: &origin,
        })
    })
}

/// `static native String name(long handle)`: the component's `name()`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_assignor_kafka_NativeComponent_name<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jstring {
    guarded(&mut env, "?", std::ptr::null_mut(), |env| {
        let assignor = component(handle)?;
        Ok(env.new_string(assignor.name())?.into_raw())
    })
}

/// `static native String sha256(long handle)`: SHA-256 (hex) of the component's bytes, which
/// the plugin compares with a service's upload to tell whether that is a new version.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_assignor_kafka_NativeComponent_sha256<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jstring {
    guarded(&mut env, "?", std::ptr::null_mut(), |env| {
        let assignor = component(handle)?;
        Ok(env.new_string(assignor.sha256())?.into_raw())
    })
}

/// `static native long[] inputLimits(long handle)`: the component's input limits, for the plugin
/// to check a group against before it encodes it (so a hostile group costs no more work than
/// the limits allow): max members, subtopologies, partitions per subtopology, tasks, id bytes,
/// flat-form bytes (the sandbox's `max.input.bytes`) and component bytes (checked before a
/// version is downloaded), in that order.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_assignor_kafka_NativeComponent_inputLimits<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlongArray {
    guarded(&mut env, "?", std::ptr::null_mut(), |env| {
        let limits = call::input_limits(component(handle)?);
        let out = env.new_long_array(limits.len() as i32)?;
        env.set_long_array_region(&out, 0, &limits)?;
        Ok(out.into_raw())
    })
}

/// `static native int[] assign(long handle, byte[] strings, int[] ends, int[] ints, long[]
/// longs, long[] usage)`: one call on the flat form (see `flat`); `usage` receives the fuel,
/// the peak memory, the sandbox call's nanoseconds and the whole native side's nanoseconds.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_assignor_kafka_NativeComponent_assign<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    string_bytes: JByteArray<'l>,
    string_ends: JIntArray<'l>,
    group_ints: JIntArray<'l>,
    group_longs: JLongArray<'l>,
    usage: JLongArray<'l>,
) -> jintArray {
    guarded(&mut env, "?", std::ptr::null_mut(), |env| {
        let assignor = component(handle)?;
        let bytes = env.convert_byte_array(&string_bytes)?;
        let ends = ints(env, &string_ends)?;
        test_hook::panic_if_asked(&bytes, &ends);
        let group = ints(env, &group_ints)?;
        let offsets = longs(env, &group_longs)?;
        let strings = Strings {
            bytes: &bytes,
            ends: &ends,
        };
        let assigned = call::assign(assignor, strings, &group, &offsets)?;
        let nanos = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let report = [
            assigned
                .usage
                .fuel
                .map_or(-1, |f| i64::try_from(f).unwrap_or(i64::MAX)),
            assigned
                .usage
                .peak_memory_bytes
                .map_or(-1, |m| i64::try_from(m).unwrap_or(i64::MAX)),
            nanos(assigned.usage.wall_time),
            nanos(assigned.native_time),
        ];
        env.set_long_array_region(&usage, 0, &report)?;
        let len = i32::try_from(assigned.assignment.len()).map_err(|_| {
            Failure::internal(assignor.name(), "the assignment is too large for an int[]")
        })?;
        let out = env.new_int_array(len)?;
        env.set_int_array_region(&out, 0, &assigned.assignment)?;
        Ok(out.into_raw())
    })
}

/// `static native void free(long handle)`: drops the component; its runtime stays for the
/// next component under the same limits.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_assignor_kafka_NativeComponent_free<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    guarded(&mut env, "?", (), |_| {
        if handle != 0 {
            // SAFETY: the handle came from `Box::into_raw` in `load`, and Java calls `free`
            // once per handle, after every call on it has returned (see the module doc).
            drop(unsafe { Box::from_raw(handle as *mut ComponentAssignor) });
        }
        Ok(())
    })
}

/// A way for the Java tests to make the bridge panic inside an export, so that they can show
/// the panic reaching Kafka as a `TaskAssignorException`: nothing from outside makes a correct
/// bridge panic. Compiled only with debug assertions, that is in the dev profile the Java
/// tests run on (`runtime/kafka/build.sh`); the release build a broker runs (`build.sh
/// bench`, `cargo build --release`) has no such hook.
mod test_hook {
    /// The first string of a group (its first subtopology's id) that makes `assign` panic.
    #[cfg(debug_assertions)]
    const PANIC_ID: &[u8] = b"assignor-bridge-test-panic";

    /// Panics when the group's first string is [`PANIC_ID`].
    #[cfg(debug_assertions)]
    pub(super) fn panic_if_asked(bytes: &[u8], ends: &[i32]) {
        let first = ends
            .first()
            .and_then(|&end| usize::try_from(end).ok())
            .and_then(|end| bytes.get(..end));
        if first == Some(PANIC_ID) {
            panic!("test hook: the group's first subtopology asked for a panic");
        }
    }

    /// No hook in a release build.
    #[cfg(not(debug_assertions))]
    pub(super) fn panic_if_asked(_bytes: &[u8], _ends: &[i32]) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(stop: Stop) -> Failure {
        match stop {
            Stop::Failed(f) => f,
            Stop::Jni(e) => panic!("expected a failure, got a JNI error: {e}"),
        }
    }

    /// A panic inside an export's body, whatever its payload, becomes a failure of kind
    /// `internal` naming the assignor and the panic's message, instead of unwinding into the
    /// JVM; `guarded` throws exactly this failure as a `SandboxFailure`.
    #[test]
    fn a_panic_becomes_an_internal_failure() {
        let f =
            failure(caught("sticky-wasm", || -> Result<(), Stop> { panic!("boom") }).unwrap_err());
        assert_eq!(
            (f.kind.as_str(), f.assignor.as_str(), f.message.as_str()),
            ("internal", "sticky-wasm", "the bridge panicked: boom")
        );
        let index = 7;
        let f = failure(
            caught("a", || -> Result<(), Stop> {
                let v: Vec<i32> = Vec::new();
                std::hint::black_box(v[index]);
                Ok(())
            })
            .unwrap_err(),
        );
        assert!(
            f.message
                .starts_with("the bridge panicked: index out of bounds"),
            "{f:?}"
        );
        let f = failure(
            caught("a", || -> Result<(), Stop> { std::panic::panic_any(42_u8) }).unwrap_err(),
        );
        assert_eq!(f.message, "the bridge panicked: (no message)");
    }

    /// A body that returns, or fails, passes through untouched.
    #[test]
    fn results_pass_through() {
        assert_eq!(caught("a", || Ok::<_, Stop>(5)).unwrap(), 5);
        let f = failure(
            caught("a", || -> Result<(), Stop> {
                Err(Failure::internal("a", "malformed").into())
            })
            .unwrap_err(),
        );
        assert_eq!(f.message, "malformed");
    }
}
