package dev.assignor.kafka;

import java.util.AbstractSet;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * The partitions of one subtopology in an assignment the bridge returned: an unmodifiable
 * {@code Set<Integer>} over a slice of the returned {@code int[]}, which is sorted. Making one
 * costs nothing per partition (a {@code HashSet} would box and hash each of them, which was
 * most of the conversion's cost at 16384 tasks); the broker boxes partitions only as it reads
 * them.
 */
final class TaskSet extends AbstractSet<Integer> {
    private final int[] tasks;
    /** Index in {@code tasks} of the first partition; partitions sit at every second int. */
    private final int from;
    private final int size;

    TaskSet(int[] tasks, int from, int size) {
        this.tasks = tasks;
        this.from = from;
        this.size = size;
    }

    private int partition(int i) {
        return tasks[from + 2 * i];
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public boolean contains(Object o) {
        if (!(o instanceof Integer)) {
            return false;
        }
        int p = (Integer) o;
        int lo = 0;
        int hi = size - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int v = partition(mid);
            if (v < p) {
                lo = mid + 1;
            } else if (v > p) {
                hi = mid - 1;
            } else {
                return true;
            }
        }
        return false;
    }

    @Override
    public Iterator<Integer> iterator() {
        return new Iterator<Integer>() {
            private int i;

            @Override
            public boolean hasNext() {
                return i < size;
            }

            @Override
            public Integer next() {
                if (i >= size) {
                    throw new NoSuchElementException();
                }
                return partition(i++);
            }
        };
    }

    @Override
    public int hashCode() {
        // AbstractSet's contract: the sum of the elements' hash codes, an Integer's being itself.
        int h = 0;
        for (int i = 0; i < size; i++) {
            h += partition(i);
        }
        return h;
    }

    @Override
    public Object[] toArray() {
        Object[] out = new Object[size];
        Arrays.setAll(out, this::partition);
        return out;
    }
}
