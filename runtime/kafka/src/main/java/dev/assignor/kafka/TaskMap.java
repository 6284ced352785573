package dev.assignor.kafka;

import java.util.AbstractMap;
import java.util.AbstractSet;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;

/**
 * One member's active or standby tasks in an assignment the bridge returned, as Kafka's
 * {@code Map<String, Set<Integer>>} (subtopology id to partitions): an unmodifiable view of a
 * slice of the returned {@code int[]}, sorted by subtopology index, then partition. Making one
 * costs one small array of run boundaries, not a hash map entry and a set per subtopology
 * (which were most of the conversion's cost at 16384 tasks); a lookup by id is a hash lookup of
 * the index and a binary search.
 */
final class TaskMap extends AbstractMap<String, Set<Integer>> {
    private final int[] out;
    /** For each subtopology with tasks: its first int in {@code out} (the index), and its task count. */
    private final int[] runs;
    private final List<String> subtopologies;
    private final Map<String, Integer> index;

    /** The {@code n} (subtopology, partition) pairs at {@code pos} in {@code out}. */
    TaskMap(int[] out, int pos, int n, List<String> subtopologies, Map<String, Integer> index) {
        this.out = out;
        this.subtopologies = subtopologies;
        this.index = index;
        int[] r = new int[8];
        int count = 0;
        int end = pos + 2 * n;
        while (pos < end) {
            int run = pos;
            while (run < end && out[run] == out[pos]) {
                run += 2;
            }
            if (count + 2 > r.length) {
                r = Arrays.copyOf(r, r.length * 2);
            }
            r[count++] = pos;
            r[count++] = (run - pos) / 2;
            pos = run;
        }
        this.runs = Arrays.copyOf(r, count);
    }

    private TaskSet tasks(int run) {
        return new TaskSet(out, runs[2 * run] + 1, runs[2 * run + 1]);
    }

    @Override
    public int size() {
        return runs.length / 2;
    }

    @Override
    public Set<Integer> get(Object key) {
        Integer subtopology = index.get(key);
        if (subtopology == null) {
            return null;
        }
        int lo = 0;
        int hi = size() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int v = out[runs[2 * mid]];
            if (v < subtopology) {
                lo = mid + 1;
            } else if (v > subtopology) {
                hi = mid - 1;
            } else {
                return tasks(mid);
            }
        }
        return null;
    }

    @Override
    public boolean containsKey(Object key) {
        return get(key) != null;
    }

    @Override
    public Set<Map.Entry<String, Set<Integer>>> entrySet() {
        return new AbstractSet<Map.Entry<String, Set<Integer>>>() {
            @Override
            public int size() {
                return TaskMap.this.size();
            }

            @Override
            public Iterator<Map.Entry<String, Set<Integer>>> iterator() {
                return new Iterator<Map.Entry<String, Set<Integer>>>() {
                    private int run;

                    @Override
                    public boolean hasNext() {
                        return run < TaskMap.this.size();
                    }

                    @Override
                    public Map.Entry<String, Set<Integer>> next() {
                        if (!hasNext()) {
                            throw new NoSuchElementException();
                        }
                        String id = subtopologies.get(out[runs[2 * run]]);
                        return new AbstractMap.SimpleImmutableEntry<>(id, tasks(run++));
                    }
                };
            }
        };
    }
}
