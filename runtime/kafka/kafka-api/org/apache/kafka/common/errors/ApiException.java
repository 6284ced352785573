// Compile-only copy of the signature of this kafka-clients type, which the KIP-1357
// interfaces use, for compiling and testing the plugin without a Maven repository. Not
// packaged in the plugin jar: in a broker, Kafka's own kafka-clients jar provides it.
package org.apache.kafka.common.errors;

import org.apache.kafka.common.KafkaException;

public class ApiException extends KafkaException {
    private static final long serialVersionUID = 1L;

    public ApiException(String message, Throwable cause) {
        super(message, cause);
    }

    public ApiException(String message) {
        super(message);
    }

    public ApiException(Throwable cause) {
        super(cause);
    }

    public ApiException() {
        super();
    }
}
