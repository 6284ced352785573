package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.junit.jupiter.api.Test;

/**
 * A Rust panic inside the bridge, made by its test hook (compiled into the dev-profile bridge
 * these tests load, never into a release build; see {@code exports.rs}): a group whose first
 * subtopology is {@code assignor-bridge-test-panic} makes {@code assign} panic inside the JNI
 * export.
 */
class PanicTest {
    /** A panic at the JNI boundary reaches Kafka as a TaskAssignorException of kind internal, naming the assignor and the panic, and the same instance then answers a normal group correctly. */
    @Test
    void aPanicBecomesATaskAssignorException() {
        try (WasmTaskAssignor plugin = Components.plugin("sample-balanced")) {
            TestGroup group = TestGroup.cold(4, 2, 0, 8, 1);
            group.subtopologies.add("assignor-bridge-test-panic");
            group.partitions.put("assignor-bridge-test-panic", 4);
            group.stateful.put("assignor-bridge-test-panic", true);
            for (int i = 0; i < 2; i++) {
                TaskAssignorException x = assertThrows(TaskAssignorException.class, () -> plugin.assign(group, group));
                assertEquals("internal: task assignor `sample-balanced` failed: the bridge panicked: test hook: the "
                    + "group's first subtopology asked for a panic", x.getMessage());
                assertEquals(SandboxFailure.class, x.getCause().getClass());
            }
            TestGroup normal = TestGroup.cold(4, 2, 2, 8, 1);
            assertNull(normal.problem(plugin.assign(normal, normal)));
        }
    }
}
