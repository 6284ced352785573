// Compile-only copy of the KIP-1357 published signature
// (https://cwiki.apache.org/confluence/display/KAFKA/KIP-1357, "Public Interfaces"), for
// compiling and testing the plugin without a Maven repository. Not packaged in the plugin jar:
// in a broker, Kafka's own group-coordinator-api jar provides this type. The KIP's
// @InterfaceAudience/@InterfaceStability annotations are left out: they change no signature.
package org.apache.kafka.coordinator.group.api.streams.assignor;

import java.util.Map;
import java.util.Objects;

public class GroupAssignment {
    private final Map<String, MemberAssignment> members;

    public GroupAssignment(Map<String, MemberAssignment> members) {
        this.members = Objects.requireNonNull(members);
    }

    public Map<String, MemberAssignment> members() {
        return members;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof GroupAssignment && members.equals(((GroupAssignment) o).members);
    }

    @Override
    public int hashCode() {
        return members.hashCode();
    }

    @Override
    public String toString() {
        return "GroupAssignment(members=" + members + ")";
    }
}
