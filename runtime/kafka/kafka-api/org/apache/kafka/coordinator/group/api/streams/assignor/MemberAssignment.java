// Compile-only copy of the KIP-1357 published signature
// (https://cwiki.apache.org/confluence/display/KAFKA/KIP-1357, "Public Interfaces"), for
// compiling and testing the plugin without a Maven repository. Not packaged in the plugin jar:
// in a broker, Kafka's own group-coordinator-api jar provides this type. The KIP's
// @InterfaceAudience/@InterfaceStability annotations are left out: they change no signature.
package org.apache.kafka.coordinator.group.api.streams.assignor;

import java.util.Map;
import java.util.Objects;
import java.util.Set;

public class MemberAssignment {
    private final Map<String, Set<Integer>> activeTasks;
    private final Map<String, Set<Integer>> standbyTasks;

    public MemberAssignment(Map<String, Set<Integer>> activeTasks, Map<String, Set<Integer>> standbyTasks) {
        this.activeTasks = Objects.requireNonNull(activeTasks);
        this.standbyTasks = Objects.requireNonNull(standbyTasks);
    }

    public Map<String, Set<Integer>> activeTasks() {
        return activeTasks;
    }

    public Map<String, Set<Integer>> standbyTasks() {
        return standbyTasks;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof MemberAssignment)) {
            return false;
        }
        MemberAssignment other = (MemberAssignment) o;
        return activeTasks.equals(other.activeTasks) && standbyTasks.equals(other.standbyTasks);
    }

    @Override
    public int hashCode() {
        return Objects.hash(activeTasks, standbyTasks);
    }

    @Override
    public String toString() {
        return "MemberAssignment(activeTasks=" + activeTasks + ", standbyTasks=" + standbyTasks + ")";
    }
}
