package dev.assignor.kafka;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.coordinator.group.api.streams.assignor.AssignmentConfigs;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignor;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A KIP-1357 {@link TaskAssignor} that runs a WebAssembly assignor component in the sandbox,
 * through the native bridge ({@code libassignor_kafka_bridge.so}). List it in
 * {@code group.streams.assignors}; its {@link #name()} is the component's {@code name()}.
 *
 * <p>Configuration (from the broker's originals; {@code P} is this class's prefix,
 * {@code group.streams.assignor.wasm.} for this class, see {@link #prefix(Class)} for
 * subclasses):
 * <ul>
 *   <li>{@code P + "path"} (required): the component file.</li>
 *   <li>the limit keys {@code group.streams.assignor.fuel}, {@code .memory.bytes},
 *       {@code .timeout.ms}, {@code .max.output.bytes} and the other {@code .max.*} bounds,
 *       read by the sandbox as the rest of the project reads them; {@code P + "fuel"} etc.
 *       override one for this entry only.</li>
 *   <li>{@code P + "config.<key>"}: handed to the component's {@code configure} as
 *       {@code <key>}, with the broker's {@code group.streams.*} keys.</li>
 *   <li>{@code P + "watch.ms"} (default 10000, 0 for never): how often the file is checked for
 *       a new version (hot swap).</li>
 *   <li>{@code P + "service.url"} (default unset: no pulling): an {@code assignor serve} service,
 *       {@code http(s)://HOST:PORT}, polled for new versions of the tenant's upload (hot swap
 *       pulled from the service; the file stays the version the broker starts with). With it:
 *       {@code P + "service.tenant"} (required: the answer must be this tenant's),
 *       {@code P + "service.token"} (required: the tenant's token; never logged, and never
 *       handed to any component's {@code configure}), {@code P + "service.assignor"} (default
 *       the component's name: the upload to pull), {@code P + "service.poll.ms"} (default
 *       10000) and {@code P + "service.timeout.ms"} (default 5000: the whole exchange, body
 *       included). A version over the entry's {@code max.component.bytes} is refused before
 *       it is read.</li>
 *   <li>{@code P + "signals.based.traps"} (default false): let wasmtime catch traps with
 *       signal handlers; for measurements only, never in a broker (they would sit in front of
 *       HotSpot's).</li>
 * </ul>
 *
 * <p>Thread-safe: one instance serves every group of the broker, each call in a fresh sandbox.
 * Every failure of {@link #assign} is a {@link TaskAssignorException} whose message starts
 * with the error kind and names the assignor; the broker then keeps the group's previous target
 * assignment and fails the heartbeat with {@code UNKNOWN_SERVER_ERROR}.
 *
 * <p>Several components per broker: list subclasses, one per component; each reads its own
 * keys ({@link #prefix(Class)}). {@link WasmTaskAssignor2} to {@link WasmTaskAssignor4} ship
 * with the plugin.
 */
public class WasmTaskAssignor implements TaskAssignor, Configurable, AutoCloseable {
    /** The prefix of every key of this plugin. */
    public static final String KEY_PREFIX = "group.streams.assignor.wasm.";

    /**
     * Names Kafka reserves for its built-in assignors: {@code sticky}, the one built-in of
     * KIP-1357 ("Built-in assignors"), and {@code balanced}, the built-in proposed in
     * KAFKA-20998. KIP-1357's loader fails the broker's start when a custom assignor's
     * {@code name()} collides with a built-in's; {@link #configure} refuses such a component
     * first, with a message that says so (the broker's own would only name the collision).
     */
    static final Set<String> RESERVED_NAMES = Set.of("sticky", "balanced");

    private static final long DEFAULT_WATCH_MS = 10_000;
    private static final long DEFAULT_POLL_MS = 10_000;
    private static final long DEFAULT_SERVICE_TIMEOUT_MS = 5_000;
    /** The last part of every plugin entry's token key, which no component may see. */
    private static final String TOKEN_KEY = "service.token";
    private static final Logger LOG = LoggerFactory.getLogger(WasmTaskAssignor.class);

    private final String prefix = prefix(getClass());
    private volatile NativeComponent current;
    /** The broker's properties less every plugin entry's service token: what the bridge sees. */
    private Map<String, String> properties;
    private boolean signalsBasedTraps;
    private ScheduledExecutorService watcher;
    /** The component file ({@code P + "path"}). */
    private String path;
    /** Modification time and size of the file when the running version (or the last refused one) was read. */
    private String lastSeen;
    /** The service's upload to pull new versions from, or null. */
    private ServiceSource service;
    /** SHA-256 of the last version the service gave (swapped in or refused), or the running one's. */
    private volatile String serviceSeen;
    /** The sort of the last poll's problem, logged when it changes (not every poll while the service is down). */
    private String pullProblem;

    /**
     * The key prefix of a plugin class: {@link #KEY_PREFIX} for this class; for a subclass,
     * {@link #KEY_PREFIX} followed by its simple name in lower case, less a leading
     * {@code WasmTaskAssignor}, and a dot: {@code WasmTaskAssignor2} reads
     * {@code group.streams.assignor.wasm.2.path}, a {@code com.acme.Billing} subclass
     * {@code group.streams.assignor.wasm.billing.path}.
     */
    public static String prefix(Class<? extends WasmTaskAssignor> type) {
        if (type == WasmTaskAssignor.class) {
            return KEY_PREFIX;
        }
        String name = type.getSimpleName();
        String base = WasmTaskAssignor.class.getSimpleName();
        if (name.startsWith(base) && name.length() > base.length()) {
            name = name.substring(base.length());
        }
        return KEY_PREFIX + name.toLowerCase(Locale.ROOT) + ".";
    }

    /**
     * Loads the component named by {@code P + "path"}: a file that is missing or not a valid
     * assignor component, a bad limit value, or a component whose {@code configure} fails
     * throws here, naming this entry, so the broker fails to start (KIP-1357 fail-fast).
     */
    @Override
    public synchronized void configure(Map<String, ?> configs) {
        Map<String, String> props = new TreeMap<>();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            // No entry's token reaches the bridge, hence no component's configure.
            if (e.getValue() != null && !(e.getKey().startsWith(KEY_PREFIX) && e.getKey().endsWith(TOKEN_KEY))) {
                props.put(e.getKey(), String.valueOf(e.getValue()));
            }
        }
        String file = props.get(prefix + "path");
        if (file == null || file.isBlank()) {
            throw new IllegalArgumentException(entry() + ": set " + prefix + "path to the assignor component file");
        }
        long watchMs = longKey(props, prefix + "watch.ms", DEFAULT_WATCH_MS);
        long pollMs = longKey(props, prefix + "service.poll.ms", DEFAULT_POLL_MS);
        long serviceTimeoutMs = longKey(props, prefix + "service.timeout.ms", DEFAULT_SERVICE_TIMEOUT_MS);
        String url = props.get(prefix + "service.url");
        Object token = configs.get(prefix + TOKEN_KEY);
        String tenant = props.get(prefix + "service.tenant");
        if (url != null) {
            if (tenant == null || tenant.isBlank() || token == null || String.valueOf(token).isBlank()) {
                throw new IllegalArgumentException(entry() + ": " + prefix + "service.url is set; set "
                    + prefix + "service.tenant and " + prefix + TOKEN_KEY + " too");
            }
            if (serviceTimeoutMs == 0) {
                throw new IllegalArgumentException(entry() + ": " + prefix + "service.timeout.ms must be at least 1");
            }
        }
        this.signalsBasedTraps = Boolean.parseBoolean(props.getOrDefault(prefix + "signals.based.traps", "false"));
        this.properties = props;
        String seen = fileVersion(Paths.get(file));
        NativeComponent loaded;
        try {
            loaded = NativeComponent.load(file, props, prefix, signalsBasedTraps);
        } catch (SandboxFailure e) {
            throw new IllegalArgumentException(entry() + ": " + e.getMessage(), e);
        }
        if (RESERVED_NAMES.contains(loaded.name)) {
            loaded.close();
            throw new IllegalArgumentException(entry() + ": the component " + file + " is named `" + loaded.name
                + "`, a name Kafka reserves for a built-in assignor (sticky: KIP-1357; balanced: KAFKA-20998), "
                + "and a broker refuses a custom assignor under a built-in's name; give the component another name()");
        }
        ServiceSource source = null;
        if (url != null) {
            try {
                source = new ServiceSource(url, prefix + "service.url", tenant, String.valueOf(token),
                    props.getOrDefault(prefix + "service.assignor", loaded.name), Duration.ofMillis(serviceTimeoutMs));
            } catch (IllegalArgumentException e) {
                loaded.close();
                throw new IllegalArgumentException(entry() + ": " + e.getMessage(), e);
            }
        }
        close();
        this.current = loaded;
        this.path = file;
        this.lastSeen = seen;
        this.service = source;
        this.serviceSeen = loaded.sha256;
        this.pullProblem = null;
        LOG.info("assignor={} path={} sha256={} loaded for {} (key prefix {})", loaded.name, file, loaded.sha256,
            entry(), prefix);
        boolean pulling = source != null && pollMs > 0;
        if (watchMs > 0 || pulling) {
            watcher = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "wasm-assignor-watch-" + loaded.name);
                t.setDaemon(true);
                return t;
            });
        }
        if (watchMs > 0) {
            watcher.scheduleWithFixedDelay(this::checkForUpdate, watchMs, watchMs, TimeUnit.MILLISECONDS);
        }
        if (pulling) {
            LOG.info("assignor={} tenant={} url={} pulling new versions every {} ms", loaded.name, source.tenant,
                source.uri, pollMs);
            watcher.scheduleWithFixedDelay(this::pullFromService, pollMs, pollMs, TimeUnit.MILLISECONDS);
        }
    }

    /** The component's {@code name()}. */
    @Override
    public String name() {
        return running().name;
    }

    @Override
    public GroupAssignment assign(GroupSpec groupSpec, TopologyDescriber topologyDescriber)
        throws TaskAssignorException {
        return call(groupSpec, topologyDescriber).assignment;
    }

    /** An assignment and what the call cost, for the timing harness and the logs. */
    static final class Timed {
        final GroupAssignment assignment;
        final NativeComponent.Result result;
        final long encodeNanos;
        final long totalNanos;

        Timed(GroupAssignment assignment, NativeComponent.Result result, long encodeNanos, long totalNanos) {
            this.assignment = assignment;
            this.result = result;
            this.encodeNanos = encodeNanos;
            this.totalNanos = totalNanos;
        }
    }

    Timed call(GroupSpec groupSpec, TopologyDescriber topologyDescriber) throws TaskAssignorException {
        long start = System.nanoTime();
        NativeComponent component = current;
        if (component == null) {
            // Kafka configures an assignor before any call; only a closed or misused one gets here.
            throw failure(getClass().getName(), "internal", "called before configure() or after close()", -1, start,
                null);
        }
        FlatGroup flat;
        try {
            flat = FlatGroup.encode(groupSpec, topologyDescriber, component.limits);
        } catch (InputLimitException e) {
            throw failure(component.name, "input-limit", e.getMessage(), -1, start, e);
        } catch (RuntimeException e) {
            throw failure(component.name, "internal", "cannot read the group: " + e, -1, start, e);
        }
        long encoded = System.nanoTime();
        while (true) {
            NativeComponent.Result result;
            try {
                result = component.assign(flat);
            } catch (SandboxFailure e) {
                // The version's own name: a failure of the JNI layer itself knows no assignor.
                throw failure(component.name, e.kind, e.detail, e.fuel, start, e);
            }
            if (result == null) {
                // Swapped out and closed between reading `current` and the call: the new one.
                component = current;
                if (component == null) {
                    throw failure(getClass().getName(), "internal",
                        "closed during the call", -1, start, null);
                }
                continue;
            }
            GroupAssignment assignment;
            try {
                assignment = flat.assignment(result.assignment);
            } catch (RuntimeException e) {
                throw failure(component.name, "internal", "cannot read the assignment: " + e, result.fuel, start, e);
            }
            long total = System.nanoTime() - start;
            if (LOG.isDebugEnabled()) {
                LOG.debug("assignor={} fuel={} time={}ms members={} assigned", component.name, result.fuel,
                    millis(total), flat.members());
            }
            return new Timed(assignment, result, encoded - start, total);
        }
    }

    private static TaskAssignorException failure(String assignor, String kind, String detail, long fuel,
                                                 long start, Exception cause) {
        String message = kind + ": task assignor `" + assignor + "` failed: " + detail;
        LOG.warn("assignor={} kind={} fuel={} time={}ms: {}", assignor, kind, fuel < 0 ? "-" : fuel,
            millis(System.nanoTime() - start), detail);
        return new TaskAssignorException(message, cause);
    }

    private static String millis(long nanos) {
        return String.format(Locale.ROOT, "%.3f", nanos / 1e6);
    }

    private NativeComponent running() {
        NativeComponent c = current;
        if (c == null) {
            throw new IllegalStateException(entry() + " is not configured");
        }
        return c;
    }

    /** Loads a candidate version. */
    private interface Loader {
        NativeComponent load() throws SandboxFailure;
    }

    /**
     * Hot swap from the file: when it changed since the running version (or the last refused
     * one) was read, {@link #swapIn} its new version. Runs on the watcher thread every
     * {@code P + "watch.ms"}; tests call it directly.
     *
     * @return whether a new version was swapped in
     */
    synchronized boolean checkForUpdate() {
        NativeComponent running = current;
        if (running == null) {
            return false;
        }
        String seen = fileVersion(Paths.get(path));
        if (seen.equals(lastSeen)) {
            return false;
        }
        lastSeen = seen;
        return swapIn(running, path, () -> NativeComponent.load(path, properties, prefix, signalsBasedTraps));
    }

    /**
     * Hot swap pulled from the service: asks for the upload unless it is still the version last
     * seen, and {@link #swapIn} a new one. An unreachable service, a refused token, a missing
     * upload or a bad answer keeps the running version; the problem is logged when it first
     * shows and when it changes, and the service's recovery is logged too. The request runs
     * outside the plugin's lock, so {@link #close} never waits for a slow service. Runs on the
     * watcher thread every {@code P + "service.poll.ms"}; tests call it directly.
     *
     * @return whether a new version was swapped in
     */
    boolean pullFromService() {
        NativeComponent running = current;
        ServiceSource source = service;
        if (running == null || source == null) {
            return false;
        }
        Optional<ServiceSource.Version> pulled;
        try {
            pulled = source.poll(serviceSeen, running.limits.maxComponentBytes);
        } catch (RuntimeException e) {
            // A fault of the HTTP client: logged, and not thrown, which would end the schedule.
            LOG.error("assignor={} tenant={} url={} kind=internal: polling the service failed, keeping the running one",
                running.name, source.tenant, source.uri, e);
            return false;
        } catch (ServiceSource.PullFailure e) {
            synchronized (this) {
                if (current != running) {
                    // Swapped or closed meanwhile (close interrupts a poll in flight): nothing to say.
                    return false;
                }
                if (!e.problem.equals(pullProblem)) {
                    pullProblem = e.problem;
                    LOG.warn("assignor={} tenant={} url={} kind=pull: no new version from the service, keeping the "
                        + "running one: {}", running.name, source.tenant, source.uri, e.getMessage());
                }
            }
            return false;
        }
        synchronized (this) {
            if (pullProblem != null) {
                pullProblem = null;
                LOG.info("assignor={} tenant={} url={} pulling from the service works again", running.name, source.tenant,
                    source.uri);
            }
            if (pulled.isEmpty() || current != running || service != source) {
                // Unchanged; or swapped or closed meanwhile: the next poll asks again.
                return false;
            }
            ServiceSource.Version version = pulled.get();
            serviceSeen = version.sha256;
            return swapIn(running, source + " (sha256 " + version.sha256 + ")",
                () -> NativeComponent.load(version.component, source.toString(), properties, prefix,
                    signalsBasedTraps));
        }
    }

    /**
     * Loads a new version with {@code loader}, checks that it keeps the running name, trial-runs
     * it on a small group, and only then swaps it in; calls in flight finish on the old version,
     * which is closed after them. A version that fails any step is logged with why, and the
     * running one kept.
     */
    private boolean swapIn(NativeComponent running, String origin, Loader loader) {
        long start = System.nanoTime();
        NativeComponent candidate;
        try {
            candidate = loader.load();
        } catch (SandboxFailure e) {
            LOG.error("assignor={} kind={} fuel={} time={}ms: new version of {} refused, keeping the running one: {}",
                running.name, e.kind, e.fuel < 0 ? "-" : e.fuel, millis(System.nanoTime() - start), origin,
                e.detail);
            return false;
        } catch (RuntimeException e) {
            LOG.error("assignor={} kind=internal: new version of {} refused, keeping the running one", running.name,
                origin, e);
            return false;
        }
        if (!candidate.name.equals(running.name)) {
            LOG.error("assignor={} kind=load: new version of {} refused, keeping the running one: it is named `{}`; "
                + "a new name needs a broker restart (the broker registers assignors by name at startup)",
                running.name, origin, candidate.name);
            candidate.close();
            return false;
        }
        try {
            NativeComponent.Result trial = candidate.assign(FlatGroup.encode(TrialGroup.GROUP, TrialGroup.TOPOLOGY,
                candidate.limits));
            LOG.info("assignor={} fuel={} time={}ms: new version of {} passed its trial run, swapped in",
                running.name, trial.fuel, millis(System.nanoTime() - start), origin);
        } catch (SandboxFailure e) {
            LOG.error("assignor={} kind={} fuel={} time={}ms: new version of {} failed its trial run, keeping the "
                + "running one: {}", running.name, e.kind, e.fuel < 0 ? "-" : e.fuel,
                millis(System.nanoTime() - start), origin, e.detail);
            candidate.close();
            return false;
        } catch (InputLimitException e) {
            // The trial group over the entry's input limits: the version is fine, the limits
            // too small to try it; refused all the same, since it cannot be checked.
            LOG.error("assignor={} kind=input-limit: new version of {} could not be trial-run, keeping the running "
                + "one: {}", running.name, origin, e.getMessage());
            candidate.close();
            return false;
        }
        current = candidate;
        running.close();
        return true;
    }

    /** What identifies a version of the file cheaply: its modification time and size ("" if unreadable). */
    private static String fileVersion(Path path) {
        try {
            BasicFileAttributes a = Files.readAttributes(path, BasicFileAttributes.class);
            return a.lastModifiedTime().toMillis() + "/" + a.size() + "/" + a.fileKey();
        } catch (IOException e) {
            return "";
        }
    }

    private String entry() {
        return "task assignor " + getClass().getName();
    }

    private long longKey(Map<String, String> props, String key, long dflt) {
        String v = props.get(key);
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v.trim());
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // Reported below with the key.
        }
        throw new IllegalArgumentException(entry() + ": " + key + "=" + v + ": expected a non-negative integer");
    }

    /** Stops the watcher and frees the running version (a broker never calls it; tests do). */
    @Override
    public synchronized void close() {
        if (watcher != null) {
            watcher.shutdownNow();
            watcher = null;
        }
        NativeComponent c = current;
        current = null;
        if (c != null) {
            c.close();
        }
    }

    /**
     * The hot swap's trial group: three members on two processes, a stateful subtopology of
     * four partitions and a stateless one of two, one standby, nothing assigned before. Small
     * (a trial costs well under a millisecond) and enough to catch a version that loses, doubles
     * or misplaces tasks.
     */
    static final class TrialGroup {
        static final GroupSpec GROUP = new GroupSpec() {
            private final List<String> members = Arrays.asList("trial-member-0", "trial-member-1", "trial-member-2");

            @Override
            public Collection<String> memberIds() {
                return members;
            }

            @Override
            public MemberAssignmentMetadata memberMetadata(String memberId) {
                String process = memberId.endsWith("2") ? "trial-process-1" : "trial-process-0";
                return new MemberAssignmentMetadata() {
                    @Override
                    public Optional<String> instanceId() {
                        return Optional.empty();
                    }

                    @Override
                    public Optional<String> rackId() {
                        return Optional.empty();
                    }

                    @Override
                    public String processId() {
                        return process;
                    }

                    @Override
                    public Map<String, String> clientTags() {
                        return Map.of();
                    }
                };
            }

            @Override
            public MemberAssignmentState memberAssignmentState(String memberId) {
                return new MemberAssignmentState() {
                    @Override
                    public Map<String, Set<Integer>> activeTasks() {
                        return Map.of();
                    }

                    @Override
                    public Map<String, Set<Integer>> standbyTasks() {
                        return Map.of();
                    }

                    @Override
                    public Map<String, Set<Integer>> warmupTasks() {
                        return Map.of();
                    }

                    @Override
                    public Map<String, Map<Integer, Long>> taskOffsets() {
                        return Map.of();
                    }

                    @Override
                    public Map<String, Map<Integer, Long>> taskEndOffsets() {
                        return Map.of();
                    }
                };
            }

            @Override
            public AssignmentConfigs configs() {
                return new AssignmentConfigs() {
                    @Override
                    public int numStandbyReplicas() {
                        return 1;
                    }

                    @Override
                    public List<String> rackAwareAssignmentTags() {
                        return List.of();
                    }
                };
            }
        };

        static final TopologyDescriber TOPOLOGY = new TopologyDescriber() {
            private final Map<String, Integer> partitions = new HashMap<>(Map.of("trial-stateful", 4,
                "trial-stateless", 2));

            @Override
            public List<String> subtopologies() {
                return List.of("trial-stateful", "trial-stateless");
            }

            @Override
            public int maxNumInputPartitions(String subtopologyId) {
                return partitions.get(subtopologyId);
            }

            @Override
            public boolean isStateful(String subtopologyId) {
                return subtopologyId.equals("trial-stateful");
            }
        };

        private TrialGroup() {
        }
    }
}
