package dev.assignor.kafka;

import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A tenant's upload of one assignor on an {@code assignor serve} service, polled for new
 * versions: {@code GET /v1/assignors/{name}} with the tenant's token, {@code If-None-Match}
 * the version last seen, so an unchanged upload answers 304 without a body.
 *
 * <p>Every answer is hostile until checked: the whole exchange (connect, headers, body) ends
 * within {@code timeout} however the server trickles; a declared {@code Content-Length} over
 * the limit is refused before a byte of the body is read, and a body without one is cut off as
 * soon as it passes the limit; the body's SHA-256 must be the {@code ETag} the service sent (the
 * upload's hash) and the answer must name the configured tenant. The token goes into the
 * {@code Authorization} header and nowhere else: never into a message, a log line or
 * {@link #toString}.
 */
final class ServiceSource {
    /** The header naming the tenant whose upload answered (the service's {@code TENANT_HEADER}). */
    static final String TENANT_HEADER = "x-assignor-tenant";

    final String tenant;
    final String assignor;
    /** The upload's URL, for logs: the configured base URL, which holds no credentials. */
    final URI uri;
    private final String token;
    private final Duration timeout;
    private final HttpClient client;

    /** A new version: the component's bytes and their SHA-256 (hex), checked against the ETag. */
    static final class Version {
        final byte[] component;
        final String sha256;

        Version(byte[] component, String sha256) {
            this.component = component;
            this.sha256 = sha256;
        }
    }

    /**
     * Why a poll brought no version: the message says what to fix, without the token. The
     * problem is what the plugin logs once until it changes: the sort of a failure to get an
     * answer ({@code unreachable}, {@code timeout}, the HTTP status), so that a service down for
     * an hour is logged once however its connections fail meanwhile; for a refused answer, the
     * message itself (each different bad answer is logged, the same one not at every poll).
     */
    static final class PullFailure extends Exception {
        private static final long serialVersionUID = 1L;
        final String problem;

        PullFailure(String problem, String message) {
            super(message);
            this.problem = problem;
        }

        PullFailure(String problem, String message, Throwable cause) {
            super(message, cause);
            this.problem = problem;
        }

        /** A refused answer. */
        static PullFailure answer(String message) {
            return new PullFailure(message, message);
        }
    }

    /**
     * The upload {@code assignor} of {@code tenant} at the service {@code baseUrl}
     * ({@code http://host:port} or {@code https://…}, no user info: the token is its own key).
     *
     * @throws IllegalArgumentException naming the key when the URL is not such a URL
     */
    ServiceSource(String baseUrl, String urlKey, String tenant, String token, String assignor, Duration timeout) {
        URI base;
        try {
            base = new URI(baseUrl.trim());
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException(urlKey + " is not a URL: " + e.getMessage(), e);
        }
        String scheme = base.getScheme() == null ? "" : base.getScheme().toLowerCase(Locale.ROOT);
        if (!scheme.equals("http") && !scheme.equals("https") || base.getHost() == null) {
            throw new IllegalArgumentException(urlKey + "=" + baseUrl + ": expected http://HOST:PORT or https://HOST:PORT");
        }
        if (base.getRawUserInfo() != null) {
            // Refused without echoing the URL: the user info may be a credential.
            throw new IllegalArgumentException(urlKey + " holds user info; put the token in the token key instead");
        }
        if (token.isEmpty() || !token.chars().allMatch(c -> c > 0x20 && c < 0x7f)) {
            // Refused without echoing it: a header carries visible ASCII only.
            throw new IllegalArgumentException("the token holds characters an HTTP header cannot carry");
        }
        String path = base.getRawPath() == null ? "" : base.getRawPath().replaceAll("/+$", "");
        this.uri = URI.create(scheme + "://" + base.getRawAuthority() + path + "/v1/assignors/"
            + URLEncoder.encode(assignor, StandardCharsets.UTF_8).replace("+", "%20"));
        this.tenant = tenant;
        this.token = token;
        this.assignor = assignor;
        this.timeout = timeout;
        this.client = HttpClient.newBuilder()
            .connectTimeout(timeout)
            .followRedirects(HttpClient.Redirect.NEVER)
            .build();
    }

    /** The upload, as logs name it: assignor, tenant and URL, never the token. */
    @Override
    public String toString() {
        return "upload `" + assignor + "` of tenant `" + tenant + "` at " + uri;
    }

    /**
     * Asks for the upload unless it is still {@code knownSha256}.
     *
     * @return the new version, or empty when the upload is still {@code knownSha256}
     * @throws PullFailure when the service cannot be reached in time, refuses the token, has no
     *     such upload, or answers anything but a well-formed version within the limits
     */
    Optional<Version> poll(String knownSha256, long maxBytes) throws PullFailure {
        HttpRequest request = HttpRequest.newBuilder(uri)
            .timeout(timeout)
            .header("Authorization", "Bearer " + token)
            .header("If-None-Match", "\"" + knownSha256 + "\"")
            .GET()
            .build();
        CompletableFuture<HttpResponse<byte[]>> exchange = client.sendAsync(request,
            info -> new LimitedBody(info.statusCode() == 200 ? maxBytes : 0,
                info.headers().firstValueAsLong("content-length")));
        HttpResponse<byte[]> response;
        try {
            // The request timeout ends the wait for the headers only; this one bounds the body too.
            response = exchange.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            exchange.cancel(true);
            throw new PullFailure("timeout", "no complete answer within " + timeout.toMillis() + " ms");
        } catch (InterruptedException e) {
            exchange.cancel(true);
            Thread.currentThread().interrupt();
            throw new PullFailure("interrupted", "interrupted");
        } catch (ExecutionException | CancellationException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            if (cause instanceof PullFailure) {
                throw (PullFailure) cause;
            }
            throw new PullFailure("unreachable", "unreachable: " + cause, cause);
        }
        int status = response.statusCode();
        switch (status) {
            case 304:
                return Optional.empty();
            case 200:
                break;
            case 401:
                throw new PullFailure("401", "the service refuses the token (401): set the tenant's token");
            case 404:
                throw new PullFailure("404", "the tenant has no upload of that name (404)");
            default:
                throw new PullFailure(Integer.toString(status), "the service answered " + status);
        }
        String answered = response.headers().firstValue(TENANT_HEADER).orElse("");
        if (!answered.equals(tenant)) {
            throw PullFailure.answer("the answer is tenant `" + cut(answered) + "`'s, not `" + tenant
                + "`'s: the token belongs to another tenant");
        }
        String etag = response.headers().firstValue("etag").orElse("");
        byte[] body = response.body();
        String sha256 = sha256(body);
        if (!etag.equals("\"" + sha256 + "\"")) {
            throw PullFailure.answer("the body (" + body.length + " bytes, SHA-256 " + sha256
                + ") does not match the upload's hash (ETag " + cut(etag) + ")");
        }
        return Optional.of(new Version(body, sha256));
    }

    /** At most 80 chars of a server-sent value, for a message. */
    private static String cut(String s) {
        return s.length() <= 80 ? s : s.substring(0, 80) + "…";
    }

    static String sha256(byte[] bytes) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(bytes);
            StringBuilder hex = new StringBuilder(64);
            for (byte b : digest) {
                hex.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
            }
            return hex.toString();
        } catch (NoSuchAlgorithmException e) {
            // Every Java platform must provide SHA-256 (MessageDigest's documentation).
            throw new IllegalStateException(e);
        }
    }

    /**
     * A body of at most {@code limit} bytes: one declared larger is refused before it is read, one
     * that grows past the limit is cut off there. A limit of 0 reads nothing (an answer whose
     * status already says everything) and completes with an empty body.
     */
    private static final class LimitedBody implements HttpResponse.BodySubscriber<byte[]> {
        private final CompletableFuture<byte[]> result = new CompletableFuture<>();
        private final long limit;
        private final OptionalLong declared;
        private ByteArrayOutputStream bytes;
        private Flow.Subscription subscription;

        LimitedBody(long limit, OptionalLong declared) {
            this.limit = limit;
            this.declared = declared;
        }

        @Override
        public CompletionStage<byte[]> getBody() {
            return result;
        }

        @Override
        public void onSubscribe(Flow.Subscription s) {
            subscription = s;
            if (limit == 0) {
                s.cancel();
                result.complete(new byte[0]);
            } else if (declared.isPresent() && declared.getAsLong() > limit) {
                s.cancel();
                result.completeExceptionally(PullFailure.answer("the component is " + declared.getAsLong()
                    + " bytes (Content-Length), over the limit of " + limit + " (max.component.bytes)"));
            } else {
                // What was declared, up to 1 MiB at first: a declared size may be a lie.
                bytes = new ByteArrayOutputStream((int) Math.min(declared.orElse(64 << 10), 1 << 20));
                s.request(Long.MAX_VALUE);
            }
        }

        @Override
        public void onNext(List<ByteBuffer> buffers) {
            if (result.isDone()) {
                return;
            }
            for (ByteBuffer b : buffers) {
                if ((long) bytes.size() + b.remaining() > limit) {
                    subscription.cancel();
                    result.completeExceptionally(PullFailure.answer("the component passed " + limit
                        + " bytes, the limit (max.component.bytes), and was cut off"));
                    return;
                }
                byte[] chunk = new byte[b.remaining()];
                b.get(chunk);
                bytes.write(chunk, 0, chunk.length);
            }
        }

        @Override
        public void onError(Throwable t) {
            result.completeExceptionally(t);
        }

        @Override
        public void onComplete() {
            if (!result.isDone()) {
                result.complete(bytes.toByteArray());
            }
        }
    }
}
