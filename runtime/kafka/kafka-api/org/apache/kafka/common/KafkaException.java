// Compile-only copy of the signature of this kafka-clients type, which the KIP-1357
// interfaces use, for compiling and testing the plugin without a Maven repository. Not
// packaged in the plugin jar: in a broker, Kafka's own kafka-clients jar provides it.
package org.apache.kafka.common;

public class KafkaException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public KafkaException(String message, Throwable cause) {
        super(message, cause);
    }

    public KafkaException(String message) {
        super(message);
    }

    public KafkaException(Throwable cause) {
        super(cause);
    }

    public KafkaException() {
        super();
    }
}
