package dev.assignor.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.BiConsumer;
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
        this(Arrays.copyOf(e.bytes, e.byteCount), Arrays.copyOf(e.ends, e.stringCount),
            Arrays.copyOf(e.ints, e.intCount), Arrays.copyOf(e.longs, e.longCount), memberIds, subtopologies, index);
    }

    /** A flat group as given: {@link #encode} makes well-formed ones; the tests also send malformed ones. */
    FlatGroup(byte[] strings, int[] ends, int[] ints, long[] longs, List<String> memberIds, List<String> subtopologies,
              Map<String, Integer> index) {
        this.strings = strings;
        this.ends = ends;
        this.ints = ints;
        this.longs = longs;
        this.memberIds = memberIds;
        this.subtopologies = subtopologies;
        this.index = index;
    }

    /** Number of members. */
    int members() {
        return memberIds.size();
    }

    /** Names a string of the group in an input-limit message, as the sandbox names it. */
    private interface Field {
        String name(int index);
    }

    private static final Field SUBTOPOLOGY_ID = i -> "topology.subtopologies[" + i + "].id";
    private static final Field TAG = i -> "configs.rackAwareAssignmentTags[" + i + "]";
    private static final Field MEMBER_ID = i -> "members[" + i + "].memberId";
    private static final Field PROCESS_ID = i -> "members[" + i + "].processId";
    private static final Field INSTANCE_ID = i -> "members[" + i + "].instanceId";
    private static final Field RACK_ID = i -> "members[" + i + "].rackId";
    private static final Field CLIENT_TAG = i -> "members[" + i + "].clientTags";

    /**
     * The flat form of a group, checked against {@code limits} before any work sized by it:
     * the member, subtopology, partition and task counts first (a group over them is refused
     * before a single member is read), each string's length before it is hashed or copied,
     * and the flat form's size as it grows (so the arrays never outgrow twice
     * {@code max.input.bytes}).
     *
     * @throws InputLimitException when the group is over one of the limits
     */
    static FlatGroup encode(GroupSpec group, TopologyDescriber topology, InputLimits limits) {
        Collection<String> groupMembers = group.memberIds();
        if (groupMembers.size() > limits.maxMembers) {
            throw new InputLimitException("members", groupMembers.size(), limits.maxMembers, "max.members");
        }
        List<String> topologySubtopologies = topology.subtopologies();
        if (topologySubtopologies.size() > limits.maxSubtopologies) {
            throw new InputLimitException("topology.subtopologies", topologySubtopologies.size(),
                limits.maxSubtopologies, "max.subtopologies");
        }
        List<String> subtopologies = new ArrayList<>(topologySubtopologies);
        int[] partitions = new int[subtopologies.size()];
        long tasks = 0;
        for (int i = 0; i < partitions.length; i++) {
            int p = topology.maxNumInputPartitions(subtopologies.get(i));
            if (p < 0) {
                throw new IllegalArgumentException("topology.subtopologies[" + i + "].maxNumInputPartitions is " + p);
            }
            if (p > limits.maxPartitions) {
                throw new InputLimitException("topology.subtopologies[" + i + "].maxNumInputPartitions", p,
                    limits.maxPartitions, "max.partitions");
            }
            partitions[i] = p;
            tasks += p;
        }
        if (tasks > limits.maxTasks) {
            throw new InputLimitException("topology (tasks over all subtopologies)", tasks, limits.maxTasks,
                "max.tasks");
        }
        Encoder e = new Encoder(limits);
        Map<String, Integer> index = new HashMap<>(subtopologies.size() * 2);
        e.add(subtopologies.size());
        for (int i = 0; i < subtopologies.size(); i++) {
            String id = subtopologies.get(i);
            index.put(id, i);
            e.add(e.string(id, SUBTOPOLOGY_ID, i));
            e.add(partitions[i]);
            e.add(topology.isStateful(id) ? 1 : 0);
        }
        AssignmentConfigs configs = group.configs();
        int standbys = configs.numStandbyReplicas();
        if (standbys < 0) {
            // Kafka's input, not a fault of the flat form: refused here, before a member is read.
            throw new IllegalArgumentException("configs.numStandbyReplicas is " + standbys);
        }
        e.add(standbys);
        List<String> tags = configs.rackAwareAssignmentTags();
        e.add(tags.size());
        for (int i = 0; i < tags.size(); i++) {
            e.add(e.string(tags.get(i), TAG, i));
        }
        List<String> memberIds = new ArrayList<>(groupMembers);
        e.add(memberIds.size());
        for (int i = 0; i < memberIds.size(); i++) {
            String memberId = memberIds.get(i);
            MemberAssignmentMetadata metadata = group.memberMetadata(memberId);
            MemberAssignmentState state = group.memberAssignmentState(memberId);
            e.add(e.unique(memberId, MEMBER_ID, i));
            e.add(e.string(metadata.processId(), PROCESS_ID, i));
            e.add(e.optional(metadata.instanceId(), INSTANCE_ID, i));
            e.add(e.optional(metadata.rackId(), RACK_ID, i));
            Map<String, String> clientTags = metadata.clientTags();
            e.add(clientTags.size());
            for (Map.Entry<String, String> tag : clientTags.entrySet()) {
                e.add(e.string(tag.getKey(), CLIENT_TAG, i));
                e.add(e.string(tag.getValue(), CLIENT_TAG, i));
            }
            e.tasks(state.activeTasks(), index, partitions);
            e.tasks(state.standbyTasks(), index, partitions);
            e.tasks(state.warmupTasks(), index, partitions);
            e.offsets(state.taskOffsets(), index, partitions);
            e.offsets(state.taskEndOffsets(), index, partitions);
        }
        e.checkSize(0);
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
        private final InputLimits limits;
        byte[] bytes = new byte[4096];
        int byteCount;
        int[] ends = new int[256];
        int stringCount;
        int[] ints = new int[1024];
        int intCount;
        long[] longs = new long[64];
        int longCount;
        private final Map<String, Integer> seen = new HashMap<>();

        Encoder(InputLimits limits) {
            this.limits = limits;
        }

        /**
         * Refuses a flat form that would be over {@code max.input.bytes} with {@code more}
         * bytes added. Called whenever an array grows (and once at the end), so the arrays
         * stop growing at about twice the limit, whatever the group holds.
         */
        void checkSize(long more) {
            long size = byteCount + 4L * (stringCount + intCount) + 8L * longCount + more;
            if (size > limits.maxInputBytes) {
                throw new InputLimitException("the flat group (bytes, so far)", size, limits.maxInputBytes,
                    "max.input.bytes");
            }
        }

        void add(int v) {
            reserve(1);
            ints[intCount++] = v;
        }

        /** Room for {@code n} more ints, so that a loop can write them without checking. */
        void reserve(int n) {
            if (intCount + n > ints.length) {
                checkSize(4L * n);
                ints = Arrays.copyOf(ints, Math.max(ints.length * 2, intCount + n));
            }
        }

        void addLong(long v) {
            if (longCount == longs.length) {
                checkSize(8);
                longs = Arrays.copyOf(longs, longs.length * 2);
            }
            longs[longCount++] = v;
        }

        /**
         * Refuses a string longer than {@code max.id.bytes} before it is hashed or copied; its
         * UTF-8 length is measured (never encoded) only when its length in chars is over.
         */
        void checkId(String s, Field field, int index) {
            if (s.length() > limits.maxIdBytes) {
                throw new InputLimitException(field.name(index) + " (bytes)", utf8Length(s), limits.maxIdBytes,
                    "max.id.bytes");
            }
        }

        /** The index of {@code s} in the table, added once however often it is used. */
        int string(String s, Field field, int index) {
            checkId(s, field, index);
            Integer known = seen.get(s);
            if (known != null) {
                return known;
            }
            int i = unique(s, field, index);
            seen.put(s, i);
            return i;
        }

        /** Adds {@code s} without looking for it: for strings used once (member ids). */
        int unique(String s, Field field, int index) {
            checkId(s, field, index);
            int len = s.length();
            if (byteCount + len > bytes.length) {
                checkSize(len);
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
                if (utf8.length > limits.maxIdBytes) {
                    throw new InputLimitException(field.name(index) + " (bytes)", utf8.length, limits.maxIdBytes,
                        "max.id.bytes");
                }
                if (byteCount + utf8.length > bytes.length) {
                    checkSize(utf8.length);
                    bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, byteCount + utf8.length));
                }
                System.arraycopy(utf8, 0, bytes, byteCount, utf8.length);
                at = byteCount + utf8.length;
            }
            byteCount = at;
            if (stringCount == ends.length) {
                checkSize(4);
                ends = Arrays.copyOf(ends, ends.length * 2);
            }
            ends[stringCount] = byteCount;
            return stringCount++;
        }

        int optional(Optional<String> s, Field field, int index) {
            return s.isPresent() ? string(s.get(), field, index) : -1;
        }

        /** The UTF-8 length of {@code s}, without encoding it. */
        private static long utf8Length(String s) {
            long n = 0;
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c < 0x80) {
                    n += 1;
                } else if (c < 0x800) {
                    n += 2;
                } else if (Character.isHighSurrogate(c) && i + 1 < s.length()
                    && Character.isLowSurrogate(s.charAt(i + 1))) {
                    n += 4;
                    i++;
                } else {
                    n += 3;
                }
            }
            return n;
        }

        /**
         * Writes one member's tasks of one kind: the count, then each task of the topology.
         * A previous assignment is tens of thousands of small sets (a 1000-member group's is
         * 32768 of one or two partitions), so the per-set cost is what counts: the map is
         * walked with {@code forEach} and each set copied into one reused array with
         * {@code toArray(T[])}, which {@code HashSet} and Kafka's unmodifiable views do in a
         * loop over their table, where an iterator per set (escape analysis does not remove
         * them here) was 2.8 MB of garbage per 1000-member encode.
         */
        void tasks(Map<String, Set<Integer>> tasks, Map<String, Integer> index, int[] partitions) {
            int countAt = intCount;
            add(0);
            taskWriter.start(index, partitions);
            tasks.forEach(taskWriter);
            ints[countAt] = taskWriter.count;
        }

        private final TaskWriter taskWriter = new TaskWriter();

        /** The {@code forEach} callback of {@link #tasks}, one object for every map of a group. */
        private final class TaskWriter implements BiConsumer<String, Set<Integer>> {
            private Map<String, Integer> index;
            private int[] partitions;
            /** The partitions of one set, reused; grown to the largest set seen. */
            private Integer[] buffer = new Integer[64];
            int count;

            void start(Map<String, Integer> index, int[] partitions) {
                this.index = index;
                this.partitions = partitions;
                this.count = 0;
            }

            @Override
            public void accept(String id, Set<Integer> set) {
                Integer s = index.get(id);
                if (s == null) {
                    return;
                }
                int subtopology = s;
                int limit = partitions[subtopology];
                int size = set.size();
                if (size > buffer.length) {
                    buffer = new Integer[Math.max(size, 2 * buffer.length)];
                }
                // A larger array than the set gets a null after its elements; a set that
                // changed size meanwhile could give another array, hence `filled`.
                Integer[] filled = set.toArray(buffer);
                for (int i = 0; i < filled.length; i++) {
                    Integer partition = filled[i];
                    if (partition == null) {
                        break;
                    }
                    int p = partition;
                    if (p >= 0 && p < limit) {
                        reserve(2);
                        ints[intCount++] = subtopology;
                        ints[intCount++] = p;
                        count++;
                    }
                }
            }
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
