package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HotSwapTest {
    @TempDir
    Path dir;

    private long version;

    /** Puts {@code component} at {@code target} with a new modification time, as a deploy would. */
    private void install(String component, Path target) throws Exception {
        Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
        Files.copy(Paths.get(Components.path(component)), tmp, StandardCopyOption.REPLACE_EXISTING);
        Files.setLastModifiedTime(tmp, FileTime.fromMillis(1_000_000_000_000L + 1000 * ++version));
        Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /** Version 1 puts every task on the first member; version 2 spreads them. */
    private static boolean isVersion1(GroupAssignment a) {
        return a.members().get("member-00001").activeTasks().isEmpty();
    }

    /** A good new version is swapped in between calls; bad ones (failing its trial run, renamed, not a component) are refused and the running version keeps answering. */
    @Test
    void goodVersionsSwapInBadOnesAreRefused() throws Exception {
        Path file = dir.resolve("swap.wasm");
        install("swap-v1", file);
        try (WasmTaskAssignor plugin = Components.plugin("swap-v1", "group.streams.assignor.wasm.path", file.toString())) {
            TestGroup group = TestGroup.cold(4, 2, 2, 8, 0);
            assertTrue(isVersion1(plugin.assign(group, group)));
            assertFalse(plugin.checkForUpdate(), "nothing changed");

            install("swap-v2", file);
            assertTrue(plugin.checkForUpdate());
            GroupAssignment v2 = plugin.assign(group, group);
            assertFalse(isVersion1(v2));
            assertEquals("swap", plugin.name());

            install("swap-broken", file);
            assertFalse(plugin.checkForUpdate(), "fails its trial run");
            assertEquals(v2, plugin.assign(group, group));

            install("sample-balanced", file);
            assertFalse(plugin.checkForUpdate(), "another name");
            assertEquals("swap", plugin.name());

            Files.writeString(file, "not a component");
            Files.setLastModifiedTime(file, FileTime.fromMillis(1_000_000_000_000L + 1000 * ++version));
            assertFalse(plugin.checkForUpdate(), "does not load");
            assertEquals(v2, plugin.assign(group, group));

            install("swap-v1", file);
            assertTrue(plugin.checkForUpdate(), "a good version after bad ones");
            assertTrue(isVersion1(plugin.assign(group, group)));
        }
    }

    /** An entry whose input limits are too small for the trial group refuses every new version (it cannot be trial-run) and keeps the running one, without the check throwing (which would end the watcher's schedule). */
    @Test
    void aVersionThatCannotBeTrialRunIsRefused() throws Exception {
        Path file = dir.resolve("small.wasm");
        install("swap-v1", file);
        try (WasmTaskAssignor plugin = Components.plugin("swap-v1", "group.streams.assignor.wasm.path", file.toString(),
            "group.streams.assignor.wasm.max.members", "2")) {
            TestGroup group = TestGroup.cold(2, 1, 1, 4, 0);
            assertTrue(plugin.assign(group, group).members().get("member-00001").activeTasks().isEmpty());
            install("swap-v2", file);
            assertFalse(plugin.checkForUpdate(), "the three-member trial group is over max.members=2");
            assertTrue(plugin.assign(group, group).members().get("member-00001").activeTasks().isEmpty(),
                "version 1 still answers");
        }
    }

    /** The watcher thread finds a new version by itself, while calls keep running from another thread, none of them failing. */
    @Test
    void watcherSwapsUnderLoad() throws Exception {
        Path file = dir.resolve("swap.wasm");
        install("swap-v1", file);
        try (WasmTaskAssignor plugin = Components.plugin("swap-v1", "group.streams.assignor.wasm.path", file.toString(),
            "group.streams.assignor.wasm.watch.ms", "50")) {
            TestGroup group = TestGroup.cold(4, 2, 2, 8, 0);
            install("swap-v2", file);
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (isVersion1(plugin.assign(group, group))) {
                assertTrue(System.nanoTime() < deadline, "swapped within 10 s");
            }
        }
    }
}
