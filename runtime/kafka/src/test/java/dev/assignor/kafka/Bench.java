package dev.assignor.kafka;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;

/**
 * The timing harness: the plugin's call ({@code assign} as the broker makes it) against the
 * same component called from Rust (the sandbox call inside the bridge, as a Rust embedder makes
 * it, measured by the bridge), on gen.py's standard inputs with one standby, cold,
 * {@code --previous} and {@code --churn}. Prints medians after a warm-up, and the bridge's
 * share: JNI and conversion (Java encode, native decode and encode, Java decode) over the
 * whole plugin call. {@code j-read} is the floor under the Java encode: a loop that only reads
 * what the encoder must read of Kafka's input (every member's task maps, each set's partitions,
 * summed and thrown away), timed after each call; no encoder of this API can read less.
 *
 * <p>Arguments: {@code GEN_PY SIGNALS_BASED_TRAPS COMPONENT...}; run by {@code build.sh bench}.
 * {@code -Dbench.members=N} runs one size only.
 */
public final class Bench {
    private static final String[][] SIZES = {
        {"10", "5", "4", "32"},
        {"100", "50", "8", "256"},
        {"1000", "500", "16", "1024"},
        {"10000", "5000", "16", "4096"},
    };
    private static final String[] MODES = {"cold", "--previous", "--churn"};

    private Bench() {
    }

    public static void main(String[] args) throws Exception {
        String gen = args[0];
        String signals = args[1];
        Path dir = Files.createTempDirectory("assignor-bench");
        System.out.printf(Locale.ROOT, "signals.based.traps=%s; medians in ms; bridge = JNI + conversion%n", signals);
        System.out.printf(Locale.ROOT, "%-10s %-7s %-10s %5s %9s %9s %9s %7s | %9s %9s %9s %9s%n", "component",
            "members", "input", "calls", "plugin", "rust", "bridge", "share", "j-encode", "n-convert", "jni+j-dec", "j-read");
        for (int c = 2; c < args.length; c++) {
            String component = args[c];
            try (WasmTaskAssignor plugin = Components.plugin(component,
                "group.streams.assignor.fuel", "none",
                "group.streams.assignor.timeout.ms", "120000",
                "group.streams.assignor.memory.bytes", Long.toString(1L << 30),
                "group.streams.assignor.wasm.signals.based.traps", signals)) {
                for (String[] size : SIZES) {
                    if (!System.getProperty("bench.members", size[0]).equals(size[0])) {
                        continue;
                    }
                    for (String mode : MODES) {
                        TestGroup group = TestGroup.fromJson(generate(gen, dir, size, mode));
                        run(plugin, component, size[0], mode, group);
                    }
                }
            }
        }
    }

    private static String generate(String gen, Path dir, String[] size, String mode) throws Exception {
        Path out = dir.resolve(String.join("-", size) + mode + ".json");
        List<String> cmd = new ArrayList<>(List.of("python3", gen));
        cmd.addAll(Arrays.asList(size));
        cmd.addAll(List.of("1", "7"));
        if (!mode.equals("cold")) {
            cmd.add(mode);
        }
        cmd.addAll(List.of("-o", out.toString()));
        Process p = new ProcessBuilder(cmd).inheritIO().start();
        if (p.waitFor() != 0) {
            throw new IllegalStateException("gen.py failed: " + cmd);
        }
        return Files.readString(out, StandardCharsets.UTF_8);
    }

    private static void run(WasmTaskAssignor plugin, String component, String members, String mode, TestGroup group) {
        // Warm-up: JIT the Java side, fault in the instance pool's pages.
        long warmEnd = System.nanoTime() + 2_000_000_000L;
        int warm = 0;
        while (warm < 5 || (warm < 50 && System.nanoTime() < warmEnd)) {
            plugin.call(group, group);
            warm++;
        }
        List<long[]> samples = new ArrayList<>();
        long end = System.nanoTime() + 5_000_000_000L;
        while (samples.size() < 11 || (samples.size() < 200 && System.nanoTime() < end)) {
            WasmTaskAssignor.Timed t = plugin.call(group, group);
            String problem = group.problem(t.assignment);
            if (problem != null) {
                throw new IllegalStateException(component + " " + members + " " + mode + ": " + problem);
            }
            long readStart = System.nanoTime();
            sink += read(group);
            long read = System.nanoTime() - readStart;
            samples.add(new long[] {t.totalNanos, t.result.sandboxNanos, t.totalNanos - t.result.sandboxNanos,
                t.encodeNanos, t.result.nativeNanos - t.result.sandboxNanos,
                t.totalNanos - t.encodeNanos - t.result.nativeNanos, read});
        }
        long plugin_ = median(samples, 0);
        long rust = median(samples, 1);
        long bridge = median(samples, 2);
        System.out.printf(Locale.ROOT, "%-10s %-7s %-10s %5d %9.3f %9.3f %9.3f %6.1f%% | %9.3f %9.3f %9.3f %9.3f%n",
            component, members, mode, samples.size(), plugin_ / 1e6, rust / 1e6, bridge / 1e6, 100.0 * bridge / plugin_,
            median(samples, 3) / 1e6, median(samples, 4) / 1e6, median(samples, 5) / 1e6, median(samples, 6) / 1e6);
    }

    /** Where {@link #read}'s sums go: a static field the JIT cannot prove unread, so the loop stays. */
    private static long sink;

    /** Reads every member's tasks as the encoder must, and nothing more: the floor under the Java encode. */
    private static long read(TestGroup group) {
        long sum = 0;
        for (String memberId : group.memberIds()) {
            MemberAssignmentState state = group.memberAssignmentState(memberId);
            for (Map<String, Set<Integer>> tasks : List.of(state.activeTasks(), state.standbyTasks(),
                state.warmupTasks())) {
                for (Map.Entry<String, Set<Integer>> e : tasks.entrySet()) {
                    sum += e.getKey().length();
                    for (Integer partition : e.getValue()) {
                        sum += partition;
                    }
                }
            }
        }
        return sum;
    }

    private static long median(List<long[]> samples, int column) {
        long[] v = samples.stream().mapToLong(s -> s[column]).sorted().toArray();
        return v[v.length / 2];
    }
}
