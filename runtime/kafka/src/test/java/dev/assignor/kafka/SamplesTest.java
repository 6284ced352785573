package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SamplesTest {
    /** Each sample assigns the standard 10- and 100-member groups validly through the plugin, cold and then from its own previous assignment. */
    @ParameterizedTest
    @ValueSource(strings = {"sample-balanced", "sample-sticky", "rack-aware"})
    void samplesAssignValidly(String sample) {
        try (WasmTaskAssignor plugin = Components.plugin(sample)) {
            assertEquals(sample, plugin.name());
            for (TestGroup group : new TestGroup[] {TestGroup.cold(10, 5, 4, 32, 1), TestGroup.cold(100, 50, 8, 256, 1)}) {
                GroupAssignment cold = plugin.assign(group, group);
                assertNull(group.problem(cold), sample);
                group.adopt(cold);
                GroupAssignment next = plugin.assign(group, group);
                assertNull(group.problem(next), sample);
            }
        }
    }

    /** Standbys are assigned when asked for: each stateful task gets one, on another member. */
    @ParameterizedTest
    @ValueSource(strings = {"sample-balanced", "sample-sticky", "rack-aware"})
    void samplesPlaceStandbys(String sample) {
        try (WasmTaskAssignor plugin = Components.plugin(sample)) {
            TestGroup group = TestGroup.cold(10, 5, 4, 32, 1);
            GroupAssignment a = plugin.assign(group, group);
            long standbys = a.members().values().stream()
                .flatMap(m -> m.standbyTasks().values().stream())
                .mapToLong(java.util.Set::size)
                .sum();
            assertEquals(4 * 32, standbys, sample);
        }
    }
}
