// Compile-only copy of the KIP-1357 published signature
// (https://cwiki.apache.org/confluence/display/KAFKA/KIP-1357, "Public Interfaces"), for
// compiling and testing the plugin without a Maven repository. Not packaged in the plugin jar:
// in a broker, Kafka's own group-coordinator-api jar provides this type. The KIP's
// @InterfaceAudience/@InterfaceStability annotations are left out: they change no signature.
package org.apache.kafka.coordinator.group.api.streams.assignor;

public interface TaskAssignor {
    String name();

    GroupAssignment assign(
        GroupSpec groupSpec,
        TopologyDescriber topologyDescriber
    ) throws TaskAssignorException;
}
