package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

class HostileTest {
    /** Every hostile guest that loads ends its call as a TaskAssignorException whose message starts with its kind and names it, and the same instance answers the same way again. */
    @TestFactory
    List<DynamicTest> everyKindIsATaskAssignorException() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Map.Entry<String, String> e : Components.expectations().entrySet()) {
            String name = e.getKey();
            String kind = e.getValue();
            if (kind.equals("ok") || kind.equals("load") || kind.equals("reserved")) {
                continue;
            }
            tests.add(DynamicTest.dynamicTest(name + " -> " + kind, () -> {
                try (WasmTaskAssignor plugin = Components.plugin(name)) {
                    TestGroup group = TestGroup.cold(4, 2, 2, 8, 1);
                    for (int i = 0; i < 2; i++) {
                        TaskAssignorException x = assertThrows(TaskAssignorException.class,
                            () -> plugin.assign(group, group));
                        assertTrue(x.getMessage().startsWith(kind + ": task assignor `" + plugin.name() + "`"),
                            x.getMessage());
                        assertEquals(SandboxFailure.class, x.getCause().getClass());
                    }
                }
            }));
        }
        assertTrue(tests.size() >= 8, "the hostile corpus is there: " + tests.size());
        return tests;
    }

    /** A component the sandbox refuses to load fails configure, naming the plugin entry and starting the cause with `load`. */
    @TestFactory
    List<DynamicTest> refusedComponentsFailConfigure() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Map.Entry<String, String> e : Components.expectations().entrySet()) {
            if (!e.getValue().equals("load")) {
                continue;
            }
            tests.add(DynamicTest.dynamicTest(e.getKey(), () -> {
                WasmTaskAssignor plugin = new WasmTaskAssignor();
                IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
                    () -> plugin.configure(Components.config(e.getKey())));
                assertTrue(x.getMessage().startsWith("task assignor dev.assignor.kafka.WasmTaskAssignor: load: "),
                    x.getMessage());
            }));
        }
        assertTrue(tests.size() >= 2);
        return tests;
    }
}
