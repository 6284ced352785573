// Compile-only copy of the signature of this kafka-clients type, which the KIP-1357
// interfaces use, for compiling and testing the plugin without a Maven repository. Not
// packaged in the plugin jar: in a broker, Kafka's own kafka-clients jar provides it.
package org.apache.kafka.common;

import java.util.Map;

public interface Configurable {
    void configure(Map<String, ?> configs);
}
