package dev.assignor.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hot swap pulled from {@code assignor serve}: against the real service (a child process on
 * loopback), and against a hostile stand-in that answers whatever a test tells it.
 */
class ServicePullTest {
    private static final String WRONG_TOKEN = "not-the-demo-token-3f9a";

    @TempDir
    Path dir;

    /** Version 1 puts every task on the first member; version 2 spreads them. */
    private static boolean isVersion1(GroupAssignment a) {
        return a.members().get("member-00001").activeTasks().isEmpty();
    }

    private static boolean isVersion1(WasmTaskAssignor plugin) {
        TestGroup group = TestGroup.cold(4, 2, 2, 8, 0);
        return isVersion1(plugin.assign(group, group));
    }

    /** A plugin running swap-v1 from its file, pulling from {@code url} (no schedule: the tests poll). */
    private static WasmTaskAssignor plugin(String url, String token, String... extra) {
        String[] keys = new String[8 + extra.length];
        String[] base = {
            "group.streams.assignor.wasm.service.url", url,
            "group.streams.assignor.wasm.service.tenant", ServiceProcess.TENANT,
            "group.streams.assignor.wasm.service.token", token,
            "group.streams.assignor.wasm.service.poll.ms", "0",
        };
        System.arraycopy(base, 0, keys, 0, 8);
        System.arraycopy(extra, 0, keys, 8, extra.length);
        return Components.plugin("swap-v1", keys);
    }

    /** What slf4j-simple (on System.err) logs while {@code body} runs. */
    private static String logged(Runnable body) {
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            body.run();
        } finally {
            System.setErr(err);
        }
        String log = captured.toString(StandardCharsets.UTF_8);
        err.print(log);
        return log;
    }

    /** The real service: no upload yet (404) keeps v1; an uploaded v2 is pulled, trial-run and swapped in, then answers 304; the service down keeps v2 and says so once; back up with a new upload (v1), that is swapped in. A wrong token (401) changes nothing and is never logged. */
    @Test
    void goodSwapServiceDownThenBack() throws Exception {
        Path data = dir.resolve("data");
        ServiceProcess service = ServiceProcess.start(data, "127.0.0.1:0");
        String listen = service.listen();
        try (WasmTaskAssignor plugin = plugin(service.url, ServiceProcess.TOKEN);
             WasmTaskAssignor wrongToken = plugin(service.url, WRONG_TOKEN)) {
            String log = logged(() -> assertFalse(plugin.pullFromService(), "no upload yet"));
            assertTrue(log.contains("kind=pull") && log.contains("(404)"), log);
            assertTrue(isVersion1(plugin));

            assertEquals(201, service.upload("swap", "swap-v2"));
            assertTrue(plugin.pullFromService(), "v2 swapped in");
            assertFalse(isVersion1(plugin));
            assertFalse(plugin.pullFromService(), "unchanged (304)");

            log = logged(() -> assertFalse(wrongToken.pullFromService()));
            assertTrue(log.contains("(401)"), log);
            assertFalse(log.contains(WRONG_TOKEN), "the token is never logged");
            assertTrue(isVersion1(wrongToken));

            service.close();
            log = logged(() -> {
                assertFalse(plugin.pullFromService(), "the service is down");
                assertFalse(plugin.pullFromService(), "still down");
            });
            assertEquals(1, log.split("unreachable", -1).length - 1, "said once: " + log);
            assertFalse(isVersion1(plugin), "v2 keeps answering");

            service = ServiceProcess.start(data, listen);
            assertEquals(200, service.upload("swap", "swap-v1"), "replaces the stored v2");
            log = logged(() -> assertTrue(plugin.pullFromService(), "back, with a new version"));
            assertTrue(log.contains("pulling from the service works again"), log);
            assertTrue(isVersion1(plugin));
        } finally {
            service.close();
        }
    }

    /** A stand-in service answering whatever {@code answer} writes. */
    private static final class StandIn implements AutoCloseable {
        final HttpServer server;
        volatile Consumer<HttpExchange> answer;

        StandIn() throws IOException {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
            server.createContext("/", exchange -> {
                try {
                    answer.accept(exchange);
                } finally {
                    exchange.close();
                }
            });
            server.start();
        }

        String url() {
            return "http://127.0.0.1:" + server.getAddress().getPort();
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }

    /** Answers {@code body} as the service would: 200, the tenant, an ETag of {@code etagOf}'s hash. */
    private static Consumer<HttpExchange> serving(byte[] body, byte[] etagOf, String tenant) {
        return exchange -> {
            try {
                exchange.getResponseHeaders().add("ETag", "\"" + ServiceSource.sha256(etagOf) + "\"");
                exchange.getResponseHeaders().add(ServiceSource.TENANT_HEADER, tenant);
                exchange.sendResponseHeaders(200, body.length);
                exchange.getResponseBody().write(body);
            } catch (IOException e) {
                // The plugin hung up (a refused body): what the test wants.
            }
        };
    }

    /** Sends {@code chunk} forever (chunked, no length) until the plugin hangs up. */
    private static Consumer<HttpExchange> endless(byte[] chunk, long pauseMillis) {
        return exchange -> {
            try {
                exchange.getResponseHeaders().add(ServiceSource.TENANT_HEADER, ServiceProcess.TENANT);
                exchange.sendResponseHeaders(200, 0);
                OutputStream out = exchange.getResponseBody();
                while (true) {
                    out.write(chunk);
                    out.flush();
                    Thread.sleep(pauseMillis);
                }
            } catch (IOException | InterruptedException e) {
                // The plugin hung up: what the test wants.
            }
        };
    }

    /** Every bad answer keeps the running version, refused with its reason and within the limits: a version failing its trial run, another name, not a component, a body not matching its hash, another tenant's upload, a declared or streamed body over max.component.bytes, a body trickling past the timeout, 401 and 500; then a good version swaps in. */
    @Test
    void badVersionsAreKeptOut() throws Exception {
        byte[] v2 = Files.readAllBytes(Paths.get(Components.path("swap-v2")));
        byte[] broken = Files.readAllBytes(Paths.get(Components.path("swap-broken")));
        byte[] renamed = Files.readAllBytes(Paths.get(Components.path("sample-balanced")));
        byte[] garbage = "not a component".getBytes(StandardCharsets.UTF_8);
        long maxBytes = 4L << 20;
        try (StandIn standIn = new StandIn();
             WasmTaskAssignor plugin = plugin(standIn.url(), ServiceProcess.TOKEN,
                 "group.streams.assignor.wasm.max.component.bytes", Long.toString(maxBytes),
                 "group.streams.assignor.wasm.service.timeout.ms", "1000")) {
            Map<String, Consumer<HttpExchange>> bad = new java.util.LinkedHashMap<>();
            bad.put("failed its trial run", serving(broken, broken, ServiceProcess.TENANT));
            bad.put("it is named `sample-balanced`", serving(renamed, renamed, ServiceProcess.TENANT));
            bad.put("not a WebAssembly file", serving(garbage, garbage, ServiceProcess.TENANT));
            bad.put("does not match the upload's hash", serving(v2, garbage, ServiceProcess.TENANT));
            bad.put("the token belongs to another tenant", serving(v2, v2, "other"));
            bad.put("(Content-Length), over the limit of " + maxBytes, serving(new byte[(int) maxBytes + 1],
                new byte[0], ServiceProcess.TENANT));
            bad.put("and was cut off", endless(new byte[64 << 10], 0));
            bad.put("no complete answer within 1000 ms", endless(new byte[1], 100));
            bad.put("refuses the token (401)", exchange -> respond(exchange, 401));
            bad.put("answered 500", exchange -> respond(exchange, 500));
            for (Map.Entry<String, Consumer<HttpExchange>> e : bad.entrySet()) {
                standIn.answer = e.getValue();
                long start = System.nanoTime();
                String log = logged(() -> assertFalse(plugin.pullFromService(), e.getKey()));
                long millis = (System.nanoTime() - start) / 1_000_000;
                assertTrue(log.contains(e.getKey()), "logged why: " + e.getKey() + ": " + log);
                assertFalse(log.contains(ServiceProcess.TOKEN), "the token is never logged");
                assertTrue(millis < 5_000, e.getKey() + " took " + millis + " ms");
                assertTrue(isVersion1(plugin), "v1 still runs after: " + e.getKey());
            }
            standIn.answer = serving(v2, v2, ServiceProcess.TENANT);
            assertTrue(plugin.pullFromService(), "a good version after bad ones");
            assertFalse(isVersion1(plugin));
        }
    }

    private static void respond(HttpExchange exchange, int status) {
        try {
            exchange.sendResponseHeaders(status, -1);
        } catch (IOException e) {
            // The plugin hung up.
        }
    }

    /** Pulling needs a tenant and a token a header can carry, and a URL that carries no credentials: each refused at configure, neither the URL's user info nor the token echoed. */
    @Test
    void serviceKeysAreCheckedAtConfigure() {
        Map<String, Object> noToken = Components.config("swap-v1", "group.streams.assignor.wasm.service.url",
            "http://127.0.0.1:1", "group.streams.assignor.wasm.service.tenant", "demo");
        String message = assertThrows(IllegalArgumentException.class, () -> new WasmTaskAssignor().configure(noToken))
            .getMessage();
        assertTrue(message.contains("set group.streams.assignor.wasm.service.tenant and "
            + "group.streams.assignor.wasm.service.token too"), message);
        Map<String, Object> userInfo = Components.config("swap-v1", "group.streams.assignor.wasm.service.url",
            "http://demo:s3cret@127.0.0.1:1", "group.streams.assignor.wasm.service.tenant", "demo",
            "group.streams.assignor.wasm.service.token", "t");
        message = assertThrows(IllegalArgumentException.class, () -> new WasmTaskAssignor().configure(userInfo))
            .getMessage();
        assertTrue(message.contains("holds user info") && !message.contains("s3cret"), message);
        Map<String, Object> badToken = Components.config("swap-v1", "group.streams.assignor.wasm.service.url",
            "http://127.0.0.1:1", "group.streams.assignor.wasm.service.tenant", "demo",
            "group.streams.assignor.wasm.service.token", "line\nbreak");
        message = assertThrows(IllegalArgumentException.class, () -> new WasmTaskAssignor().configure(badToken))
            .getMessage();
        assertTrue(message.contains("the token holds characters an HTTP header cannot carry")
            && !message.contains("break"), message);
    }
}
