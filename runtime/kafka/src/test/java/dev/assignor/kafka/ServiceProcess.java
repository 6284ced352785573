package dev.assignor.kafka;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An {@code assignor serve} child process in its embedded demo setup (tenant {@code demo},
 * token {@code demo-token}) on loopback, with its data in a directory of the test's, started
 * from the binary the {@code assignor.cli} system property names ({@code runtime/kafka/build.sh}
 * sets it). Stopped with SIGTERM; a restart on the same port finds the same uploads.
 */
final class ServiceProcess implements AutoCloseable {
    static final String TENANT = "demo";
    static final String TOKEN = "demo-token";
    private static final Pattern LISTENING = Pattern.compile("listening on (http://[0-9.:]+) ");

    final String url;
    private final Process process;

    private ServiceProcess(Process process, String url) {
        this.process = process;
        this.url = url;
    }

    /** Starts the service on {@code listen} (e.g. {@code 127.0.0.1:0}) with its data in {@code dataDir}. */
    static ServiceProcess start(Path dataDir, String listen) throws IOException {
        String cli = System.getProperty("assignor.cli");
        if (cli == null) {
            throw new IllegalStateException("run the tests with -Dassignor.cli=PATH (runtime/kafka/build.sh does)");
        }
        Process p = new ProcessBuilder(Paths.get(cli).toString(), "serve", "--data-dir", dataDir.toString(),
            "--listen", listen)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start();
        BufferedReader err = new BufferedReader(new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8));
        String line;
        while ((line = err.readLine()) != null) {
            Matcher m = LISTENING.matcher(line);
            if (m.find()) {
                // The rest of its stderr (the demo's hints, request logs) goes on draining.
                Thread drain = new Thread(() -> {
                    try {
                        while (err.readLine() != null) {
                            continue;
                        }
                    } catch (IOException e) {
                        // The process ended: nothing left to drain.
                    }
                }, "assignor-serve-stderr");
                drain.setDaemon(true);
                drain.start();
                return new ServiceProcess(p, m.group(1));
            }
        }
        p.destroyForcibly();
        throw new IllegalStateException("assignor serve ended without listening");
    }

    /** The host and port it listens on, to start it again there. */
    String listen() {
        return url.substring("http://".length());
    }

    /** Uploads {@code component} (a test component's name) as {@code name}; returns the status. */
    int upload(String name, String component) throws Exception {
        HttpRequest put = HttpRequest.newBuilder(URI.create(url + "/v1/assignors/" + name))
            .timeout(Duration.ofSeconds(60))
            .header("Authorization", "Bearer " + TOKEN)
            .PUT(HttpRequest.BodyPublishers.ofFile(Paths.get(Components.path(component))))
            .build();
        return HttpClient.newHttpClient().send(put, HttpResponse.BodyHandlers.discarding()).statusCode();
    }

    /** Stops it (SIGTERM: it finishes requests in flight), killing it after 10 s. */
    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor();
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
