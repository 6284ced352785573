package dev.assignor.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The test components (built from source by {@code runtime/kafka/test-components}) and the
 * outcome each must end in, from the file named by the {@code assignor.components} system
 * property, and plugin instances configured for them.
 */
final class Components {
    private static final Properties FILE = read();

    private Components() {
    }

    private static Properties read() {
        String file = System.getProperty("assignor.components");
        if (file == null) {
            throw new IllegalStateException("run the tests with -Dassignor.components=FILE (runtime/kafka/build.sh does)");
        }
        Properties p = new Properties();
        try (InputStream in = Files.newInputStream(Paths.get(file))) {
            p.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return p;
    }

    static String path(String name) {
        String path = FILE.getProperty("component." + name);
        if (path == null) {
            throw new IllegalArgumentException("no test component " + name);
        }
        return path;
    }

    /** Every component name with its expected outcome: {@code ok} or an error kind. */
    static Map<String, String> expectations() {
        Map<String, String> out = new TreeMap<>();
        for (String key : FILE.stringPropertyNames()) {
            if (key.startsWith("expect.")) {
                out.put(key.substring("expect.".length()), FILE.getProperty(key));
            }
        }
        return out;
    }

    /**
     * Broker originals for the base plugin class loading {@code name}: limits that end the
     * hostile guests fast (a 2 s deadline, 64 MiB of memory), no watcher, plus {@code extra}
     * key/value pairs.
     */
    static Map<String, Object> config(String name, String... extra) {
        Map<String, Object> c = new HashMap<>();
        c.put("group.streams.assignor.wasm.path", path(name));
        c.put("group.streams.assignor.wasm.watch.ms", "0");
        c.put("group.streams.assignor.timeout.ms", "2000");
        c.put("group.streams.assignor.memory.bytes", Integer.toString(64 << 20));
        c.put("group.streams.assignor.wasm.config.invalid", "missing-task");
        // Keys a real broker has, which the component must not be bothered by.
        c.put("broker.id", 1);
        c.put("ssl.keystore.password", "secret");
        for (int i = 0; i < extra.length; i += 2) {
            c.put(extra[i], extra[i + 1]);
        }
        return c;
    }

    /** A configured base plugin instance for {@code name}. */
    static WasmTaskAssignor plugin(String name, String... extra) {
        WasmTaskAssignor a = new WasmTaskAssignor();
        a.configure(config(name, extra));
        return a;
    }
}
