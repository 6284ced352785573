package dev.assignor.kafka;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
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
 * A group and topology as the broker hands them to an assignor, built in the tests (or read
 * from the project's input JSON, see {@link #fromJson}), and the checks every valid assignment
 * passes.
 */
final class TestGroup implements GroupSpec, TopologyDescriber {
    static final class Member implements MemberAssignmentMetadata, MemberAssignmentState {
        final String processId;
        final Optional<String> rackId;
        final Map<String, String> clientTags = new HashMap<>();
        final Map<String, Set<Integer>> active = new HashMap<>();
        final Map<String, Set<Integer>> standby = new HashMap<>();
        final Map<String, Map<Integer, Long>> offsets = new HashMap<>();

        Member(String processId, Optional<String> rackId) {
            this.processId = processId;
            this.rackId = rackId;
        }

        @Override
        public Optional<String> instanceId() {
            return Optional.empty();
        }

        @Override
        public Optional<String> rackId() {
            return rackId;
        }

        @Override
        public String processId() {
            return processId;
        }

        @Override
        public Map<String, String> clientTags() {
            return clientTags;
        }

        @Override
        public Map<String, Set<Integer>> activeTasks() {
            return active;
        }

        @Override
        public Map<String, Set<Integer>> standbyTasks() {
            return standby;
        }

        @Override
        public Map<String, Set<Integer>> warmupTasks() {
            return Map.of();
        }

        @Override
        public Map<String, Map<Integer, Long>> taskOffsets() {
            return offsets;
        }

        @Override
        public Map<String, Map<Integer, Long>> taskEndOffsets() {
            return Map.of();
        }
    }

    final Map<String, Member> members = new LinkedHashMap<>();
    final List<String> subtopologies = new ArrayList<>();
    final Map<String, Integer> partitions = new HashMap<>();
    final Map<String, Boolean> stateful = new HashMap<>();
    int standbys;

    /**
     * {@code m} members on {@code p} processes (member i on process i*p/m), {@code s} stateful
     * subtopologies of {@code n} partitions, {@code r} standbys, nothing assigned before:
     * {@code gen.py}'s cold group.
     */
    static TestGroup cold(int m, int p, int s, int n, int r) {
        TestGroup g = new TestGroup();
        for (int i = 0; i < m; i++) {
            g.members.put(String.format("member-%05d", i),
                new Member(String.format("process-%05d", i * p / m), Optional.empty()));
        }
        for (int i = 0; i < s; i++) {
            g.subtopologies.add(Integer.toString(i));
            g.partitions.put(Integer.toString(i), n);
            g.stateful.put(Integer.toString(i), true);
        }
        g.standbys = r;
        return g;
    }

    /** A group in the project's input JSON ({@code shared/spec/group.example.json}, gen.py's output). */
    @SuppressWarnings("unchecked")
    static TestGroup fromJson(String json) {
        Map<String, Object> doc = (Map<String, Object>) Json.parse(json);
        TestGroup g = new TestGroup();
        Map<String, Object> topology = (Map<String, Object>) doc.get("topology");
        for (Object o : (List<Object>) topology.get("subtopologies")) {
            Map<String, Object> s = (Map<String, Object>) o;
            String id = (String) s.get("id");
            g.subtopologies.add(id);
            g.partitions.put(id, ((Number) s.get("maxNumInputPartitions")).intValue());
            g.stateful.put(id, Boolean.TRUE.equals(s.get("isStateful")));
        }
        Map<String, Object> configs = (Map<String, Object>) doc.get("configs");
        g.standbys = ((Number) configs.getOrDefault("numStandbyReplicas", 0L)).intValue();
        for (Object o : (List<Object>) doc.get("members")) {
            Map<String, Object> m = (Map<String, Object>) o;
            Member member = new Member((String) m.get("processId"), Optional.ofNullable((String) m.get("rackId")));
            tasks((Map<String, Object>) m.get("activeTasks"), member.active);
            tasks((Map<String, Object>) m.get("standbyTasks"), member.standby);
            Map<String, Object> offsets = (Map<String, Object>) m.get("taskOffsets");
            if (offsets != null) {
                for (Map.Entry<String, Object> e : offsets.entrySet()) {
                    Map<Integer, Long> byPartition = new HashMap<>();
                    for (Map.Entry<String, Object> p : ((Map<String, Object>) e.getValue()).entrySet()) {
                        byPartition.put(Integer.parseInt(p.getKey()), ((Number) p.getValue()).longValue());
                    }
                    member.offsets.put(e.getKey(), byPartition);
                }
            }
            g.members.put((String) m.get("memberId"), member);
        }
        return g;
    }

    @SuppressWarnings("unchecked")
    private static void tasks(Map<String, Object> json, Map<String, Set<Integer>> into) {
        if (json == null) {
            return;
        }
        for (Map.Entry<String, Object> e : json.entrySet()) {
            Set<Integer> set = new HashSet<>();
            for (Object p : (List<Object>) e.getValue()) {
                set.add(((Number) p).intValue());
            }
            into.put(e.getKey(), set);
        }
    }

    /** Makes {@code assignment} the group's previous target assignment (the next rebalance's input). */
    void adopt(GroupAssignment assignment) {
        for (Map.Entry<String, Member> e : members.entrySet()) {
            MemberAssignment a = assignment.members().get(e.getKey());
            e.getValue().active.clear();
            e.getValue().standby.clear();
            a.activeTasks().forEach((k, v) -> e.getValue().active.put(k, new HashSet<>(v)));
            a.standbyTasks().forEach((k, v) -> e.getValue().standby.put(k, new HashSet<>(v)));
        }
    }

    @Override
    public Collection<String> memberIds() {
        return members.keySet();
    }

    @Override
    public MemberAssignmentMetadata memberMetadata(String memberId) {
        return members.get(memberId);
    }

    @Override
    public MemberAssignmentState memberAssignmentState(String memberId) {
        return members.get(memberId);
    }

    @Override
    public AssignmentConfigs configs() {
        return new AssignmentConfigs() {
            @Override
            public int numStandbyReplicas() {
                return standbys;
            }

            @Override
            public List<String> rackAwareAssignmentTags() {
                return List.of();
            }
        };
    }

    @Override
    public List<String> subtopologies() {
        return subtopologies;
    }

    @Override
    public int maxNumInputPartitions(String subtopologyId) {
        return partitions.get(subtopologyId);
    }

    @Override
    public boolean isStateful(String subtopologyId) {
        return stateful.get(subtopologyId);
    }

    /**
     * What is wrong with {@code assignment} for this group, or {@code null}: every member has
     * an entry and no other member does; every task is active on exactly one member; no member
     * holds a task both active and standby; standbys only of stateful tasks, at most
     * {@code numStandbyReplicas} per task; no task outside the topology.
     */
    String problem(GroupAssignment assignment) {
        if (!assignment.members().keySet().equals(members.keySet())) {
            return "members " + assignment.members().keySet() + " are not the group's";
        }
        Map<String, int[]> activeCount = new HashMap<>();
        Map<String, int[]> standbyCount = new HashMap<>();
        for (String s : subtopologies) {
            activeCount.put(s, new int[partitions.get(s)]);
            standbyCount.put(s, new int[partitions.get(s)]);
        }
        for (Map.Entry<String, MemberAssignment> e : assignment.members().entrySet()) {
            String bad = count(e.getValue().activeTasks(), activeCount, e.getKey());
            if (bad == null) {
                bad = count(e.getValue().standbyTasks(), standbyCount, e.getKey());
            }
            if (bad != null) {
                return bad;
            }
            for (Map.Entry<String, Set<Integer>> s : e.getValue().standbyTasks().entrySet()) {
                if (!stateful.get(s.getKey())) {
                    return e.getKey() + " has a standby of stateless " + s.getKey();
                }
                Set<Integer> active = e.getValue().activeTasks().getOrDefault(s.getKey(), Set.of());
                for (int p : s.getValue()) {
                    if (active.contains(p)) {
                        return e.getKey() + " has " + s.getKey() + "_" + p + " active and standby";
                    }
                }
            }
        }
        for (String s : subtopologies) {
            for (int p = 0; p < partitions.get(s); p++) {
                if (activeCount.get(s)[p] != 1) {
                    return s + "_" + p + " is active on " + activeCount.get(s)[p] + " members";
                }
                if (standbyCount.get(s)[p] > standbys) {
                    return s + "_" + p + " has " + standbyCount.get(s)[p] + " standbys";
                }
            }
        }
        return null;
    }

    private String count(Map<String, Set<Integer>> tasks, Map<String, int[]> counts, String member) {
        for (Map.Entry<String, Set<Integer>> e : tasks.entrySet()) {
            int[] c = counts.get(e.getKey());
            if (c == null) {
                return member + " has tasks of unknown subtopology " + e.getKey();
            }
            for (int p : e.getValue()) {
                if (p < 0 || p >= c.length) {
                    return member + " has " + e.getKey() + "_" + p + ", out of range";
                }
                c[p]++;
            }
        }
        return null;
    }
}
