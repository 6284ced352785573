package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.junit.jupiter.api.Test;

class StressTest {
    /** Calls the stress test makes in all, over its threads. */
    private static final int CALLS = 4000;

    /**
     * Many threads calling well-behaved and hostile components (every trap kind) at once,
     * while another thread churns the heap and forces collections, and plugin instances are
     * created and dropped unclosed (their native side freed by the Cleaner): every call ends
     * as it must (the right answer, or a TaskAssignorException of the right kind), and after
     * it all the JVM is healthy and the answers still right. build.sh runs the suite under
     * -Xcheck:jni, which checks each JNI call of the bridge.
     */
    @Test
    void threadsHostileComponentsAndGcPressure() throws Exception {
        // The endless loop on small fuel and the sleeper on a short deadline, so that thousands
        // of calls take seconds; every other one ends on its own limit first, and gets a
        // deadline that a machine loaded by eight calling threads (and other builds) meets.
        String[] fast = {"group.streams.assignor.fuel", "20000000", "group.streams.assignor.timeout.ms", "10000"};
        String[] sleepy = {"group.streams.assignor.timeout.ms", "30"};
        String[] slow = {"group.streams.assignor.timeout.ms", "10000"};
        Map<String, String> expect = Components.expectations();
        List<String> hostile = new ArrayList<>();
        for (Map.Entry<String, String> e : expect.entrySet()) {
            if (!e.getValue().equals("ok") && !e.getValue().equals("load") && !e.getValue().equals("reserved")) {
                hostile.add(e.getKey());
            }
        }
        Map<String, WasmTaskAssignor> plugins = new ConcurrentHashMap<>();
        for (String name : hostile) {
            String[] limits = name.equals("endless-loop") ? fast : name.equals("sleeper") ? sleepy : slow;
            plugins.put(name, Components.plugin(name, limits));
        }
        WasmTaskAssignor good = Components.plugin("sample-balanced");
        TestGroup group = TestGroup.cold(10, 5, 4, 32, 1);
        GroupAssignment expected = good.assign(group, group);

        AtomicBoolean stop = new AtomicBoolean();
        Thread churn = new Thread(() -> {
            List<byte[]> keep = new ArrayList<>();
            int i = 0;
            while (!stop.get()) {
                keep.add(new byte[64 << 10]);
                if (keep.size() > 256) {
                    keep.clear();
                }
                if (++i % 500 == 0) {
                    System.gc();
                }
            }
        }, "gc-churn");
        churn.start();
        AtomicInteger made = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<String>> workers = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                int thread = t;
                workers.add(pool.submit(() -> {
                    for (int i = 0; i < CALLS / 8; i++) {
                        if (i % 40 == 39) {
                            // An instance dropped without close(): the Cleaner frees it.
                            WasmTaskAssignor dropped = Components.plugin("guest-error", fast);
                            made.incrementAndGet();
                            if (!dropped.name().equals("guest-error")) {
                                return "a dropped instance is named " + dropped.name();
                            }
                        } else if ((thread + i) % 5 < 3) {
                            if (!good.assign(group, group).equals(expected)) {
                                return "a wrong answer at call " + i;
                            }
                        } else {
                            String name = hostile.get((thread * 7 + i) % hostile.size());
                            String kind = expect.get(name);
                            try {
                                plugins.get(name).assign(group, group);
                                return name + " did not fail";
                            } catch (TaskAssignorException x) {
                                if (!x.getMessage().startsWith(kind + ": ")) {
                                    return name + ": " + x.getMessage();
                                }
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<String> w : workers) {
                assertEquals(null, w.get());
            }
        } finally {
            pool.shutdownNow();
            stop.set(true);
            churn.join();
        }
        System.gc();
        assertTrue(made.get() > 0);
        for (int i = 0; i < 20; i++) {
            assertEquals(expected, good.assign(group, group));
        }
        TestGroup large = TestGroup.cold(100, 50, 8, 256, 1);
        assertEquals(null, large.problem(good.assign(large, large)));
        good.close();
        plugins.values().forEach(WasmTaskAssignor::close);
    }
}
