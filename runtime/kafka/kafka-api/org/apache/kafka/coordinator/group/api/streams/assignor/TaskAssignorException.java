// Compile-only copy of the KIP-1357 published signature
// (https://cwiki.apache.org/confluence/display/KAFKA/KIP-1357, "Public Interfaces"), for
// compiling and testing the plugin without a Maven repository. Not packaged in the plugin jar:
// in a broker, Kafka's own group-coordinator-api jar provides this type. The KIP's
// @InterfaceAudience/@InterfaceStability annotations are left out: they change no signature.
package org.apache.kafka.coordinator.group.api.streams.assignor;

import org.apache.kafka.common.errors.ApiException;

public class TaskAssignorException extends ApiException {
    private static final long serialVersionUID = 1L;

    public TaskAssignorException(String message) {
        super(message);
    }

    public TaskAssignorException(String message, Throwable cause) {
        super(message, cause);
    }
}
