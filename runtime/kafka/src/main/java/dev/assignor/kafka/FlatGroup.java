package dev.assignor.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.coordinator.group.api.streams.assignor.AssignmentConfigs;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/**
 * A group and its topology in the flat form they cross JNI in: one string table (UTF-8 bytes
 * and end offsets), one {@code int[]} and one {@code long[]}; the layout is documented once, in
 * the bridge's {@code flat.rs}. The assignment comes back as one {@code int[]} that
 * {@link #assignment} turns into Kafka's {@link GroupAssignment}, as views of the array.
 *
 * <p>Subtopologies are referred to by their index in {@link TopologyDescriber#subtopologies()}.
 * A task in a member's state whose subtopology is not in the topology, or whose partition is
 * out of its range (state reported against an older topology), is left out: it cannot be
 * assigned, and the sandbox would refuse the group for it.
 */
final class FlatGroup {
    final byte[] strings;
    final int[] ends;
    final int[] ints;
    final long[] longs;
    /** Member ids in the order of the flat form (and of the assignment). */
    final List<String> memberIds;
    /** Subtopology ids by index. */
    final List<String> subtopologies;
    /** Subtopology indices by id. */
    private final Map<String, Integer> index;

    private FlatGroup(Encoder e, List<String> memberIds, List<String> subtopologies, Map<String, Integer> index) {
        this.strings = Arrays.copyOf(e.bytes, e.byteCount);
        this.ends = Arrays.copyOf(e.ends, e.stringCount);
        this.ints = Arrays.copyOf(e.ints, e.intCount);
        this.longs = Arrays.copyOf(e.longs, e.longCount);
        this.memberIds = memberIds;
        this.subtopologies = subtopologies;
        this.index = index;
    }

    /** Number of members. */
    int members() {
        return memberIds.size();
    }

    static FlatGroup encode(GroupSpec group, TopologyDescriber topology) {
        Encoder e = new Encoder();
        List<String> subtopologies = new ArrayList<>(topology.subtopologies());
        Map<String, Integer> index = new HashMap<>(subtopologies.size() * 2);
        int[] partitions = new int[subtopologies.size()];
        e.add(subtopologies.size());
        for (int i = 0; i < subtopologies.size(); i++) {
            String id = subtopologies.get(i);
            index.put(id, i);
            partitions[i] = topology.maxNumInputPartitions(id);
            e.add(e.string(id));
            e.add(partitions[i]);
            e.add(topology.isStateful(id) ? 1 : 0);
        }
        AssignmentConfigs configs = group.configs();
        e.add(configs.numStandbyReplicas());
        List<String> tags = configs.rackAwareAssignmentTags();
        e.add(tags.size());
        for (String tag : tags) {
            e.add(e.string(tag));
        }
        List<String> memberIds = new ArrayList<>(group.memberIds());
        e.add(memberIds.size());
        for (String memberId : memberIds) {
            MemberAssignmentMetadata metadata = group.memberMetadata(memberId);
            MemberAssignmentState state = group.memberAssignmentState(memberId);
            e.add(e.unique(memberId));
            e.add(e.string(metadata.processId()));
            e.add(e.optional(metadata.instanceId()));
            e.add(e.optional(metadata.rackId()));
            Map<String, String> clientTags = metadata.clientTags();
            e.add(clientTags.size());
            for (Map.Entry<String, String> tag : clientTags.entrySet()) {
                e.add(e.string(tag.getKey()));
                e.add(e.string(tag.getValue()));
            }
            e.tasks(state.activeTasks(), index, partitions);
            e.tasks(state.standbyTasks(), index, partitions);
            e.tasks(state.warmupTasks(), index, partitions);
            e.offsets(state.taskOffsets(), index, partitions);
            e.offsets(state.taskEndOffsets(), index, partitions);
        }
        return new FlatGroup(e, memberIds, subtopologies, index);
    }

    /**
     * Kafka's assignment from the flat one the bridge returned for this group: each member's
     * tasks are {@link TaskMap} views of {@code out}, unmodifiable.
     */
    GroupAssignment assignment(int[] out) {
        Map<String, MemberAssignment> members = new HashMap<>(memberIds.size() * 2);
        int pos = 0;
        for (String memberId : memberIds) {
            int active = out[pos++];
            TaskMap activeTasks = new TaskMap(out, pos, active, subtopologies, index);
            pos += 2 * active;
            int standby = out[pos++];
            TaskMap standbyTasks = new TaskMap(out, pos, standby, subtopologies, index);
            pos += 2 * standby;
            members.put(memberId, new MemberAssignment(activeTasks, standbyTasks));
        }
        if (pos != out.length) {
            throw new IllegalStateException("the bridge returned " + (out.length - pos) + " ints too many");
        }
        return new GroupAssignment(members);
    }

    /** Growable primitive arrays and the string table, deduplicated (process ids, tag keys repeat). */
    private static final class Encoder {
        byte[] bytes = new byte[4096];
        int byteCount;
        int[] ends = new int[256];
        int stringCount;
        int[] ints = new int[1024];
        int intCount;
        long[] longs = new long[64];
        int longCount;
        private final Map<String, Integer> seen = new HashMap<>();

        void add(int v) {
            reserve(1);
            ints[intCount++] = v;
        }

        /** Room for {@code n} more ints, so that a loop can write them without checking. */
        void reserve(int n) {
            if (intCount + n > ints.length) {
                ints = Arrays.copyOf(ints, Math.max(ints.length * 2, intCount + n));
            }
        }

        void addLong(long v) {
            if (longCount == longs.length) {
                longs = Arrays.copyOf(longs, longs.length * 2);
            }
            longs[longCount++] = v;
        }

        /** The index of {@code s} in the table, added once however often it is used. */
        int string(String s) {
            Integer known = seen.get(s);
            if (known != null) {
                return known;
            }
            int i = unique(s);
            seen.put(s, i);
            return i;
        }

        /** Adds {@code s} without looking for it: for strings used once (member ids). */
        int unique(String s) {
            int len = s.length();
            if (byteCount + len > bytes.length) {
                bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, byteCount + len));
            }
            // Kafka's ids are ASCII: copied char by char without an intermediate array; any
            // other string is encoded as UTF-8 in full.
            int at = byteCount;
            for (int i = 0; i < len; i++) {
                char c = s.charAt(i);
                if (c >= 0x80) {
                    at = -1;
                    break;
                }
                bytes[at++] = (byte) c;
            }
            if (at < 0) {
                byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
                if (byteCount + utf8.length > bytes.length) {
                    bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, byteCount + utf8.length));
                }
                System.arraycopy(utf8, 0, bytes, byteCount, utf8.length);
                at = byteCount + utf8.length;
            }
            byteCount = at;
            if (stringCount == ends.length) {
                ends = Arrays.copyOf(ends, ends.length * 2);
            }
            ends[stringCount] = byteCount;
            return stringCount++;
        }

        int optional(Optional<String> s) {
            return s.isPresent() ? string(s.get()) : -1;
        }

        void tasks(Map<String, Set<Integer>> tasks, Map<String, Integer> index, int[] partitions) {
            int countAt = intCount;
            add(0);
            int n = 0;
            for (Map.Entry<String, Set<Integer>> entry : tasks.entrySet()) {
                Integer subtopology = index.get(entry.getKey());
                if (subtopology == null) {
                    continue;
                }
                Set<Integer> set = entry.getValue();
                reserve(2 * set.size());
                int limit = partitions[subtopology];
                for (int partition : set) {
                    if (partition >= 0 && partition < limit) {
                        ints[intCount++] = subtopology;
                        ints[intCount++] = partition;
                        n++;
                    }
                }
            }
            ints[countAt] = n;
        }

        void offsets(Map<String, Map<Integer, Long>> offsets, Map<String, Integer> index, int[] partitions) {
            int countAt = intCount;
            add(0);
            int n = 0;
            for (Map.Entry<String, Map<Integer, Long>> entry : offsets.entrySet()) {
                Integer subtopology = index.get(entry.getKey());
                if (subtopology == null) {
                    continue;
                }
                for (Map.Entry<Integer, Long> offset : entry.getValue().entrySet()) {
                    int partition = offset.getKey();
                    if (partition >= 0 && partition < partitions[subtopology]) {
                        add(subtopology);
                        add(partition);
                        addLong(offset.getValue());
                        n++;
                    }
                }
            }
            ints[countAt] = n;
        }
    }
}
