package dev.assignor.kafka;

import java.lang.ref.Cleaner;
import java.util.Map;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One loaded component version in the native sandbox, behind a handle.
 *
 * <p>Lifecycle: {@link #load} creates the native component; {@link #close} frees it, once
 * every call in flight on it has returned (calls hold the read lock, {@code close} takes the
 * write lock). A version that is never closed is freed by a {@link Cleaner} when it becomes
 * unreachable, so no native memory outlives its Java object. After {@code close},
 * {@link #assign} returns {@code null} and the caller takes the current version instead.
 */
final class NativeComponent implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    static {
        NativeLibrary.ensureLoaded();
    }

    /** The native side, apart from this object so that the cleaner does not keep it alive. */
    private static final class Handle implements Runnable {
        private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
        private long handle;

        Handle(long handle) {
            this.handle = handle;
        }

        @Override
        public void run() {
            lock.writeLock().lock();
            try {
                if (handle != 0) {
                    free(handle);
                    handle = 0;
                }
            } finally {
                lock.writeLock().unlock();
            }
        }
    }

    /** One call's answer: the flat assignment and what the native side measured. */
    static final class Result {
        final int[] assignment;
        final long fuel;
        final long peakMemoryBytes;
        /** The sandbox call, as a Rust embedder calling the component sees it. */
        final long sandboxNanos;
        /** The whole native side: decoding, the sandbox call, encoding. */
        final long nativeNanos;

        Result(int[] assignment, long[] usage) {
            this.assignment = assignment;
            this.fuel = usage[0];
            this.peakMemoryBytes = usage[1];
            this.sandboxNanos = usage[2];
            this.nativeNanos = usage[3];
        }
    }

    final String name;
    /** Where this version came from: the file, or the upload it was pulled from. */
    final String origin;
    /** SHA-256 (hex) of the component's bytes. */
    final String sha256;
    /** The input limits a group is checked against before it is encoded for this version. */
    final InputLimits limits;
    private final Handle handle;
    private final Cleaner.Cleanable cleanable;

    private NativeComponent(long handle, String origin) throws SandboxFailure {
        this.handle = new Handle(handle);
        this.cleanable = CLEANER.register(this, this.handle);
        this.origin = origin;
        try {
            this.name = name(handle);
            this.sha256 = sha256(handle);
            this.limits = new InputLimits(inputLimits(handle));
        } catch (SandboxFailure e) {
            cleanable.clean();
            throw e;
        }
    }

    /**
     * Loads the component at {@code path} for the plugin entry whose keys start with
     * {@code prefix}, under the limits {@code properties} give it.
     */
    static NativeComponent load(String path, Map<String, String> properties, String prefix,
                                boolean signalsBasedTraps) throws SandboxFailure {
        String[] keys = properties.keySet().toArray(new String[0]);
        return new NativeComponent(load(path, keys, values(properties, keys), prefix, signalsBasedTraps), path);
    }

    /**
     * Loads a component from its bytes (a version pulled from a service), {@code origin}
     * naming it until its own name is known; otherwise as {@link #load(String, Map, String, boolean)}.
     */
    static NativeComponent load(byte[] component, String origin, Map<String, String> properties, String prefix,
                                boolean signalsBasedTraps) throws SandboxFailure {
        String[] keys = properties.keySet().toArray(new String[0]);
        return new NativeComponent(loadBytes(component, origin, keys, values(properties, keys), prefix,
            signalsBasedTraps), origin);
    }

    private static String[] values(Map<String, String> properties, String[] keys) {
        String[] values = new String[keys.length];
        for (int i = 0; i < keys.length; i++) {
            values[i] = properties.get(keys[i]);
        }
        return values;
    }

    /** One call on the flat group; {@code null} when this version was closed meanwhile. */
    Result assign(FlatGroup group) throws SandboxFailure {
        handle.lock.readLock().lock();
        try {
            if (handle.handle == 0) {
                return null;
            }
            long[] usage = new long[4];
            int[] out = assign(handle.handle, group.strings, group.ends, group.ints, group.longs, usage);
            return new Result(out, usage);
        } finally {
            handle.lock.readLock().unlock();
        }
    }

    @Override
    public void close() {
        cleanable.clean();
    }

    private static native long load(String path, String[] keys, String[] values, String prefix,
                                    boolean signalsBasedTraps) throws SandboxFailure;

    private static native long loadBytes(byte[] component, String origin, String[] keys, String[] values,
                                         String prefix, boolean signalsBasedTraps) throws SandboxFailure;

    private static native String name(long handle) throws SandboxFailure;

    private static native String sha256(long handle) throws SandboxFailure;

    private static native long[] inputLimits(long handle) throws SandboxFailure;

    private static native int[] assign(long handle, byte[] strings, int[] ends, int[] ints, long[] longs,
                                       long[] usage) throws SandboxFailure;

    private static native void free(long handle);
}
