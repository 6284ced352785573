package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

class ConfigureTest {
    private static String refusal(Map<String, Object> config) {
        return assertThrows(IllegalArgumentException.class, () -> new WasmTaskAssignor().configure(config)).getMessage();
    }

    /** Without a path, configure fails naming the entry and the key to set. */
    @Test
    void missingPathFailsFast() {
        Map<String, Object> config = Components.config("sample-balanced");
        config.remove("group.streams.assignor.wasm.path");
        assertEquals("task assignor dev.assignor.kafka.WasmTaskAssignor: set group.streams.assignor.wasm.path to the "
            + "assignor component file", refusal(config));
    }

    /** A file that is not there, or not a component, fails configure as `load`. */
    @Test
    void unreadableOrForeignFilesFailFast() throws Exception {
        String missing = refusal(Components.config("sample-balanced", "group.streams.assignor.wasm.path", "/nonexistent.wasm"));
        assertTrue(missing.contains("load: task assignor `/nonexistent.wasm`: cannot read the component file"), missing);
        java.nio.file.Path text = java.nio.file.Files.createTempFile("not-wasm", ".wasm");
        java.nio.file.Files.writeString(text, "hello");
        String foreign = refusal(Components.config("sample-balanced", "group.streams.assignor.wasm.path", text.toString()));
        assertTrue(foreign.contains("load: ") && foreign.contains("not a WebAssembly file"), foreign);
        java.nio.file.Files.delete(text);
    }

    /** A limit value the sandbox cannot take fails configure naming the key, read the way the rest of the project reads it. */
    @Test
    void badLimitsFailFast() {
        String fuel = refusal(Components.config("sample-balanced", "group.streams.assignor.fuel", "lots"));
        assertTrue(fuel.contains("group.streams.assignor.fuel=\"lots\": expected a non-negative integer"), fuel);
        String timeout = refusal(Components.config("sample-balanced", "group.streams.assignor.wasm.timeout.ms", "0"));
        assertTrue(timeout.contains("group.streams.assignor.timeout.ms=\"0\": must be at least 1"), timeout);
        String watch = refusal(Components.config("sample-balanced", "group.streams.assignor.wasm.watch.ms", "soon"));
        assertTrue(watch.contains("group.streams.assignor.wasm.watch.ms=soon"), watch);
    }

    /** A component named like one of Kafka's built-ins (the original `balanced` and `sticky` samples) fails configure, naming the entry, the file, the name and where the reservation comes from. */
    @Test
    void reservedNamesFailFast() {
        int reserved = 0;
        for (Map.Entry<String, String> e : Components.expectations().entrySet()) {
            if (!e.getValue().equals("reserved")) {
                continue;
            }
            reserved++;
            String name = e.getKey();
            String message = refusal(Components.config(name));
            assertEquals("task assignor dev.assignor.kafka.WasmTaskAssignor: the component " + Components.path(name)
                + " is named `" + name + "`, a name Kafka reserves for a built-in assignor (sticky: KIP-1357; balanced: "
                + "KAFKA-20998), and a broker refuses a custom assignor under a built-in's name; give the component "
                + "another name()", message);
        }
        assertEquals(WasmTaskAssignor.RESERVED_NAMES.size(), reserved, "a component for every reserved name");
    }

    /**
     * No plugin entry's service token reaches a component's configure, this entry's or another's: the component
     * (one that refuses every configuration, quoting it) sees the broker's group.streams.* keys and its own
     * config.* keys, and nothing else of the broker's.
     */
    @Test
    void serviceTokensNeverReachTheComponent() {
        String message = refusal(Components.config("config-echo",
            "group.streams.assignor.wasm.service.url", "http://127.0.0.1:9",
            "group.streams.assignor.wasm.service.tenant", "a",
            "group.streams.assignor.wasm.service.token", "token-of-this-entry",
            "group.streams.assignor.wasm.2.service.token", "token-of-another-entry",
            "group.streams.assignor.wasm.config.knob", "7"));
        assertTrue(message.contains("load: task assignor `config-echo`: configure rejected the configuration: received: "),
            message);
        assertTrue(message.contains("group.streams.assignor.wasm.service.tenant=a") && message.contains("; knob=7"), message);
        assertFalse(message.contains("token-of-") || message.contains("service.token"), message);
        assertFalse(message.contains("ssl.keystore.password") || message.contains("broker.id"), message);
    }

    /** A component whose configure rejects its configuration fails the plugin's configure with its reason. */
    @Test
    void componentConfigureFailureFailsFast() {
        Map<String, Object> config = Components.config("invalid-output");
        config.remove("group.streams.assignor.wasm.config.invalid");
        String message = refusal(config);
        assertTrue(message.contains("load: task assignor `invalid-output`: configure rejected the configuration: "
            + "missing configuration key `invalid`"), message);
    }

    /** Limits are the sandbox's: a fuel limit too small for a sample makes its calls fail as out-of-fuel. */
    @Test
    void limitsReachTheSandbox() {
        try (WasmTaskAssignor plugin = Components.plugin("sample-balanced", "group.streams.assignor.fuel", "1000")) {
            TestGroup group = TestGroup.cold(10, 5, 4, 32, 1);
            String message = assertThrows(RuntimeException.class, () -> plugin.assign(group, group)).getMessage();
            assertTrue(message.startsWith("out-of-fuel: task assignor `sample-balanced`"), message);
        } catch (IllegalArgumentException e) {
            // Loading itself (name() and configure()) may run out of so little fuel: also the sandbox's limit.
            assertTrue(e.getMessage().contains("out-of-fuel"), e.getMessage());
        }
    }

    /** Before configure the plugin has no name, and says so; a call before configure or after close is a TaskAssignorException, as every failed call is. */
    @Test
    void unconfiguredPluginSaysSo() {
        assertThrows(IllegalStateException.class, () -> new WasmTaskAssignor().name());
        TestGroup group = TestGroup.cold(2, 1, 1, 2, 0);
        WasmTaskAssignor closed = Components.plugin("sample-balanced");
        closed.close();
        for (WasmTaskAssignor plugin : new WasmTaskAssignor[] {new WasmTaskAssignor(), closed}) {
            String message = assertThrows(org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException.class,
                () -> plugin.assign(group, group)).getMessage();
            assertTrue(message.startsWith("internal: task assignor `dev.assignor.kafka.WasmTaskAssignor` failed: "), message);
        }
    }
}
