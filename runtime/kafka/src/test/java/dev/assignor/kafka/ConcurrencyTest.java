package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.junit.jupiter.api.Test;

class ConcurrencyTest {
    /** One instance, as the broker shares it between all groups: 16 threads calling at once all get the answer a lone call gets. */
    @Test
    void concurrentCallsOnOneInstanceAgree() throws Exception {
        try (WasmTaskAssignor plugin = Components.plugin("sample-sticky")) {
            TestGroup small = TestGroup.cold(10, 5, 4, 32, 1);
            TestGroup large = TestGroup.cold(100, 50, 8, 256, 1);
            GroupAssignment smallAnswer = plugin.assign(small, small);
            GroupAssignment largeAnswer = plugin.assign(large, large);
            ExecutorService pool = Executors.newFixedThreadPool(16);
            try {
                List<Future<Boolean>> calls = new ArrayList<>();
                for (int t = 0; t < 16; t++) {
                    int thread = t;
                    calls.add(pool.submit(() -> {
                        for (int i = 0; i < 25; i++) {
                            TestGroup g = (thread + i) % 4 == 0 ? large : small;
                            GroupAssignment expected = g == large ? largeAnswer : smallAnswer;
                            if (!plugin.assign(g, g).equals(expected)) {
                                return false;
                            }
                        }
                        return true;
                    }));
                }
                for (Future<Boolean> call : calls) {
                    assertEquals(true, call.get());
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }
}
