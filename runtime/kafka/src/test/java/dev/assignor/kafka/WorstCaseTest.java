package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.junit.jupiter.api.Test;

/**
 * Hostile groups through {@code assign}, and malformed flat forms straight into the native
 * call: each ends as an exception of the right kind, after no more work than the limits allow,
 * and the same instance answers a normal group correctly afterwards.
 */
class WorstCaseTest {
    /** A second runtime's limits, small enough that the tests reach them cheaply. */
    private static final String[] SMALL_LIMITS = {
        "group.streams.assignor.max.members", "50",
        "group.streams.assignor.max.input.bytes", Integer.toString(1 << 20),
    };

    /** Bytes the calling thread allocates while {@code call} runs (HotSpot's per-thread counter). */
    private static long allocatedBy(Runnable call) {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long id = Thread.currentThread().getId();
        long before = threads.getThreadAllocatedBytes(id);
        call.run();
        return threads.getThreadAllocatedBytes(id) - before;
    }

    /**
     * Sends the group {@code hostile} makes of a small cold group: the call must fail as
     * {@code input-limit} with {@code message} after allocating at most {@code maxAllocated}
     * bytes, and the plugin must then assign the unmodified group validly.
     */
    private static void refused(WasmTaskAssignor plugin, Consumer<TestGroup> hostile, String message,
                                long maxAllocated) {
        refusedMatching(plugin, hostile, Pattern.quote(message), maxAllocated);
    }

    /** {@link #refused}, the message after the kind and assignor matching {@code regex}. */
    private static void refusedMatching(WasmTaskAssignor plugin, Consumer<TestGroup> hostile, String regex,
                                        long maxAllocated) {
        TestGroup group = TestGroup.cold(4, 2, 2, 8, 1);
        hostile.accept(group);
        TaskAssignorException[] thrown = new TaskAssignorException[1];
        long allocated = allocatedBy(() -> thrown[0] = assertThrows(TaskAssignorException.class,
            () -> plugin.assign(group, group)));
        String message = thrown[0].getMessage();
        assertTrue(message.matches(Pattern.quote("input-limit: task assignor `" + plugin.name() + "` failed: ") + regex),
            message);
        assertEquals(InputLimitException.class, thrown[0].getCause().getClass());
        assertTrue(allocated <= maxAllocated, "allocated " + allocated + " bytes, more than " + maxAllocated);
        TestGroup normal = TestGroup.cold(4, 2, 2, 8, 1);
        assertNull(normal.problem(plugin.assign(normal, normal)));
    }

    /** maxNumInputPartitions = Integer.MAX_VALUE, more tasks than the limit, more subtopologies than the limit: refused from the counts alone, before a member is read. */
    @Test
    void topologiesOverTheLimits() {
        try (WasmTaskAssignor plugin = Components.plugin("sample-balanced")) {
            refused(plugin, g -> g.partitions.put("1", Integer.MAX_VALUE),
                "topology.subtopologies[1].maxNumInputPartitions is 2147483647, over the limit of 100000 "
                    + "(max.partitions); shrink the group or raise the limit", 1 << 20);
            refused(plugin, g -> {
                for (int i = 0; i < 20; i++) {
                    g.subtopologies.add("wide-" + i);
                    g.partitions.put("wide-" + i, 100_000);
                    g.stateful.put("wide-" + i, false);
                }
            }, "topology (tasks over all subtopologies) is 2000016, over the limit of 1000000 (max.tasks); shrink the "
                + "group or raise the limit", 1 << 20);
            refused(plugin, g -> {
                for (int i = 0; i < 10_000; i++) {
                    g.subtopologies.add("many-" + i);
                    g.partitions.put("many-" + i, 1);
                    g.stateful.put("many-" + i, false);
                }
            }, "topology.subtopologies is 10002, over the limit of 10000 (max.subtopologies); shrink the group or "
                + "raise the limit", 1 << 20);
        }
    }

    /** numStandbyReplicas at both ends of its range: Integer.MAX_VALUE reaches the assignor, whose work the sandbox bounds (the sticky sample places what it can, validly); -1 is refused before a member is read, naming the field, and the plugin then answers a normal group. */
    @Test
    void standbyCountsAtTheEndsOfTheirRange() {
        try (WasmTaskAssignor plugin = Components.plugin("sample-sticky")) {
            TestGroup most = TestGroup.cold(4, 2, 2, 8, Integer.MAX_VALUE);
            assertNull(most.problem(plugin.assign(most, most)));
            TestGroup negative = TestGroup.cold(4, 2, 2, 8, -1);
            TaskAssignorException x = assertThrows(TaskAssignorException.class,
                () -> plugin.assign(negative, negative));
            assertEquals("internal: task assignor `sample-sticky` failed: cannot read the group: "
                + "java.lang.IllegalArgumentException: configs.numStandbyReplicas is -1", x.getMessage());
            TestGroup normal = TestGroup.cold(4, 2, 2, 8, 1);
            assertNull(normal.problem(plugin.assign(normal, normal)));
        }
    }

    /** A 10 MiB member id (and a long id in any other string of the group) is refused by its length, before it is hashed, copied or encoded. */
    @Test
    void longIds() {
        String huge = "m".repeat(10 << 20);
        String wide = "\u00e9".repeat(600);
        try (WasmTaskAssignor plugin = Components.plugin("sample-balanced")) {
            refused(plugin, g -> g.members.put(huge, new TestGroup.Member("process-x", Optional.empty())),
                "members[4].memberId (bytes) is 10485760, over the limit of 1024 (max.id.bytes); shrink the group or "
                    + "raise the limit", 1 << 20);
            refused(plugin, g -> g.members.put("m", new TestGroup.Member(wide, Optional.empty())),
                "members[4].processId (bytes) is 1200, over the limit of 1024 (max.id.bytes); shrink the group or "
                    + "raise the limit", 1 << 20);
            refused(plugin, g -> g.members.values().iterator().next().clientTags.put("zone", huge),
                "members[0].clientTags (bytes) is 10485760, over the limit of 1024 (max.id.bytes); shrink the group "
                    + "or raise the limit", 1 << 20);
            assertTrue(wide.getBytes(StandardCharsets.UTF_8).length > 1024 && wide.length() < 1024,
                "the second case passes the char-count check and fails the byte count");
        }
    }

    /** More members than the limit are refused from the count: with the default limit (100000), and with a configured one. */
    @Test
    void tooManyMembers() {
        try (WasmTaskAssignor plugin = Components.plugin("sample-balanced")) {
            refused(plugin, g -> {
                for (int i = 0; i < 100_000; i++) {
                    g.members.put("extra-" + i, new TestGroup.Member("process-0", Optional.empty()));
                }
            }, "members is 100004, over the limit of 100000 (max.members); shrink the group or raise the limit",
                1 << 20);
        }
        try (WasmTaskAssignor plugin = Components.plugin("sample-balanced", SMALL_LIMITS)) {
            refused(plugin, g -> {
                for (int i = 0; i < 47; i++) {
                    g.members.put("extra-" + i, new TestGroup.Member("process-0", Optional.empty()));
                }
            }, "members is 51, over the limit of 50 (max.members); shrink the group or raise the limit", 1 << 20);
        }
    }

    /** A huge string table (200000 distinct client tags) and a member holding 300000 tasks are refused once the flat form passes max.input.bytes, having allocated an amount bounded by that limit, not by the group. */
    @Test
    void flatFormOverTheInputBytes() {
        // What the encoder may allocate before it refuses: its arrays, which double, so up to
        // 4x the limit over all their growths, and its map of distinct strings, ~50 bytes per
        // string, each string taking at least 8 bytes of the flat form (an end and an int):
        // about 6x. 12x the limit, whatever the group holds (the tags alone are ~10 MB).
        long bound = 12L << 20;
        // The size so far depends on where the arrays last grew: only the form is checked.
        String overInputBytes = "the flat group \\(bytes, so far\\) is \\d+, over the limit of 1048576 "
            + "\\(max\\.input\\.bytes\\); shrink the group or raise the limit";
        try (WasmTaskAssignor plugin = Components.plugin("sample-balanced", SMALL_LIMITS)) {
            refusedMatching(plugin, g -> {
                Map<String, String> tags = g.members.values().iterator().next().clientTags;
                for (int i = 0; i < 200_000; i++) {
                    tags.put("key-" + i, "value-" + i);
                }
            }, overInputBytes, bound);
            refusedMatching(plugin, g -> {
                g.subtopologies.add("2");
                g.stateful.put("2", true);
                TestGroup.Member m = g.members.values().iterator().next();
                for (String s : List.of("0", "1", "2")) {
                    g.partitions.put(s, 100_000);
                    Set<Integer> all = new HashSet<>();
                    for (int p = 0; p < 100_000; p++) {
                        all.add(p);
                    }
                    m.active.put(s, all);
                }
            }, overInputBytes, bound);
        }
    }

    /** Malformed flat forms sent straight into the native call — counts that overrun, string ends past the bytes or out of order, negative indices, tasks outside the topology, null arrays, a form over max.input.bytes — each come back as a SandboxFailure naming the fault, never a crash, and the component answers a good form afterwards. */
    @Test
    void malformedFlatFormsAreFailures() throws Exception {
        Map<String, String> properties = new java.util.TreeMap<>();
        Components.config("sample-balanced", SMALL_LIMITS).forEach((k, v) -> properties.put(k, String.valueOf(v)));
        try (NativeComponent component = NativeComponent.load(Components.path("sample-balanced"), properties,
            WasmTaskAssignor.KEY_PREFIX, false)) {
            byte[] bytes = "s0mp".getBytes(StandardCharsets.UTF_8);
            int[] ends = {2, 3, 4};
            // One subtopology "s0" of 2 partitions, no standbys or tags, member "m" of process "p".
            int[] head = {1, 0, 2, 1, 0, 0, 1, 1, 2, -1, -1, 0};
            List<Object[]> cases = new ArrayList<>();
            cases.add(new Object[] {bytes, ends, new int[] {Integer.MAX_VALUE}, new long[0], "overruns the ints"});
            cases.add(new Object[] {bytes, ends, new int[] {-5}, new long[0], "negative offset -5"});
            cases.add(new Object[] {bytes, ends, new int[] {1, -1, 2, 1}, new long[0], "string index -1"});
            cases.add(new Object[] {bytes, new int[] {2, 3, 400}, concat(head, 0, 0, 0, 0, 0), new long[0],
                "string 2 at 3..400 of 4"});
            cases.add(new Object[] {bytes, new int[] {3, 2, 4}, concat(head, 0, 0, 0, 0, 0), new long[0],
                "string 1 at 3..2 of 4"});
            cases.add(new Object[] {bytes, new int[] {-7, 3, 4}, concat(head, 0, 0, 0, 0, 0), new long[0],
                "negative offset -7"});
            cases.add(new Object[] {bytes, ends, concat(head, 1, 0, 2, 0, 0, 0, 0), new long[0],
                "task 0_2 at"});
            cases.add(new Object[] {bytes, ends, concat(head, 1, 9, 0, 0, 0, 0, 0), new long[0], "task 9_0 at"});
            cases.add(new Object[] {bytes, ends, concat(head, 0, 0, 0, 1, 0, 0, 0), new long[0], "the longs end"});
            cases.add(new Object[] {bytes, ends, concat(head, 0, 0, 0, 0, 0), new long[3], "3 longs left over"});
            cases.add(new Object[] {null, ends, head, new long[0], "a JNI call failed"});
            cases.add(new Object[] {bytes, ends, null, new long[0], "a JNI call failed"});
            cases.add(new Object[] {bytes, ends, new int[(1 << 18) + 1], new long[0],
                "over the limit of 1048576 (max.input.bytes)"});
            for (Object[] c : cases) {
                FlatGroup flat = new FlatGroup((byte[]) c[0], (int[]) c[1], (int[]) c[2], (long[]) c[3], List.of("m"),
                    List.of("s0"), Map.of("s0", 0));
                SandboxFailure f = assertThrows(SandboxFailure.class, () -> component.assign(flat));
                String expected = (String) c[4];
                assertTrue(f.detail.contains(expected), expected + " in " + f.detail);
                assertEquals(expected.contains("max.input.bytes") ? "input-limit" : "internal", f.kind);
            }
            FlatGroup good = new FlatGroup(bytes, ends, concat(head, 1, 0, 1, 0, 0, 0, 0), new long[0], List.of("m"),
                List.of("s0"), Map.of("s0", 0));
            NativeComponent.Result result = component.assign(good);
            assertEquals(2, result.assignment[0], "both tasks active on the one member");
        }
    }

    private static int[] concat(int[] head, int... rest) {
        int[] out = java.util.Arrays.copyOf(head, head.length + rest.length);
        System.arraycopy(rest, 0, out, head.length, rest.length);
        return out;
    }
}
