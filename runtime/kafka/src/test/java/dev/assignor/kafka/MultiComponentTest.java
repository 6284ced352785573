package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignor;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.junit.jupiter.api.Test;

class MultiComponentTest {
    /** An operator's own subclass, as the README shows: its keys are group.streams.assignor.wasm.billing.*. */
    public static class Billing extends WasmTaskAssignor {
    }

    /** Class names derive their prefixes: the base class, the shipped numbered slots and any subclass. */
    @Test
    void prefixesComeFromClassNames() {
        assertEquals("group.streams.assignor.wasm.", WasmTaskAssignor.prefix(WasmTaskAssignor.class));
        assertEquals("group.streams.assignor.wasm.2.", WasmTaskAssignor.prefix(WasmTaskAssignor2.class));
        assertEquals("group.streams.assignor.wasm.4.", WasmTaskAssignor.prefix(WasmTaskAssignor4.class));
        assertEquals("group.streams.assignor.wasm.billing.", WasmTaskAssignor.prefix(Billing.class));
    }

    /** One broker config loads three components through three classes, each under its own keys and limits, as the broker would (one configure per class, the same originals). */
    @Test
    void severalComponentsShareOneBrokerConfig() {
        Map<String, Object> originals = Components.config("sample-balanced",
            "group.streams.assignor.wasm.2.path", Components.path("rack-aware"),
            "group.streams.assignor.wasm.2.watch.ms", "0",
            "group.streams.assignor.wasm.billing.path", Components.path("endless-loop"),
            "group.streams.assignor.wasm.billing.watch.ms", "0",
            // The endless loop alone gets little fuel: it fails fast without lowering the others'.
            "group.streams.assignor.wasm.billing.fuel", "2000000");
        List<WasmTaskAssignor> entries = List.of(new WasmTaskAssignor(), new WasmTaskAssignor2(), new Billing());
        try {
            for (WasmTaskAssignor a : entries) {
                a.configure(originals);
            }
            assertEquals(List.of("sample-balanced", "rack-aware", "endless-loop"),
                entries.stream().map(TaskAssignor::name).collect(java.util.stream.Collectors.toList()));
            TestGroup group = TestGroup.cold(10, 5, 4, 32, 1);
            assertNull(group.problem(entries.get(0).assign(group, group)));
            assertNull(group.problem(entries.get(1).assign(group, group)));
            long start = System.nanoTime();
            TaskAssignorException x = assertThrows(TaskAssignorException.class, () -> entries.get(2).assign(group, group));
            assertTrue(x.getMessage().startsWith("out-of-fuel: task assignor `endless-loop`"), x.getMessage());
            assertTrue(System.nanoTime() - start < 200_000_000L, "2M fuel is spent in well under 200 ms");
        } finally {
            entries.forEach(WasmTaskAssignor::close);
        }
    }
}
