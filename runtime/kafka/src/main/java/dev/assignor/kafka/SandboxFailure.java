package dev.assignor.kafka;

/**
 * A failed load or call, thrown by the native bridge: the error kind ({@code out-of-fuel},
 * {@code invalid-output}, ..., or {@code internal} for a fault of the bridge itself), the
 * assignor it names, and the fuel used where the sandbox measured it. The plugin turns it into
 * Kafka's {@code TaskAssignorException}; it never leaves the plugin.
 */
final class SandboxFailure extends Exception {
    private static final long serialVersionUID = 1L;

    final String kind;
    final String assignor;
    final String detail;
    /** Fuel consumed before the failure, or -1 when the sandbox did not measure it. */
    final long fuel;

    /**
     * Called by the bridge (its signature is in {@code exports.rs}); {@code cause} is the Java
     * exception a failed JNI call left pending (an out-of-bounds array, an
     * {@code OutOfMemoryError}), or {@code null}.
     */
    SandboxFailure(String kind, String assignor, String detail, long fuel, Throwable cause) {
        super(kind + ": task assignor `" + assignor + "`: " + detail, cause);
        this.kind = kind;
        this.assignor = assignor;
        this.detail = detail;
        this.fuel = fuel;
    }
}
