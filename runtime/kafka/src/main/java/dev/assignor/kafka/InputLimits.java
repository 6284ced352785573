package dev.assignor.kafka;

/**
 * A component's input limits as the sandbox enforces them (read from the bridge once per
 * loaded version), which {@link FlatGroup#encode} checks before doing work sized by the group
 * (and {@link ServiceSource} before it downloads a new version).
 * The sandbox checks them again on the decoded group; these checks only bound the plugin's own
 * work.
 */
final class InputLimits {
    final long maxMembers;
    final long maxSubtopologies;
    final long maxPartitions;
    final long maxTasks;
    final long maxIdBytes;
    /** The largest flat form, in bytes (the sandbox's {@code max.input.bytes}). */
    final long maxInputBytes;
    /** The largest component a version pulled from a service may be (the sandbox's {@code max.component.bytes}). */
    final long maxComponentBytes;

    /** From the bridge's {@code inputLimits}: the seven limits in the order of the fields above. */
    InputLimits(long[] limits) {
        this.maxMembers = limits[0];
        this.maxSubtopologies = limits[1];
        this.maxPartitions = limits[2];
        this.maxTasks = limits[3];
        this.maxIdBytes = limits[4];
        this.maxInputBytes = limits[5];
        this.maxComponentBytes = limits[6];
    }
}
