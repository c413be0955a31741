package dev.caerus.conformance;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import dev.caerus.dls.v1.AbortTransactionRequest;
import dev.caerus.dls.v1.AbortTransactionResponse;
import dev.caerus.dls.v1.AcquireLockRequest;
import dev.caerus.dls.v1.AcquireLockResponse;
import dev.caerus.dls.v1.AcquireLocksRequest;
import dev.caerus.dls.v1.AcquireLocksResponse;
import dev.caerus.dls.v1.AdminServiceGrpc;
import dev.caerus.dls.v1.BeginTransactionRequest;
import dev.caerus.dls.v1.BeginTransactionResponse;
import dev.caerus.dls.v1.DowngradeLockRequest;
import dev.caerus.dls.v1.DowngradeLockResponse;
import dev.caerus.dls.v1.EndTransactionRequest;
import dev.caerus.dls.v1.EndTransactionResponse;
import dev.caerus.dls.v1.GetTransactionStatusRequest;
import dev.caerus.dls.v1.GetTransactionStatusResponse;
import dev.caerus.dls.v1.Granted;
import dev.caerus.dls.v1.HeartbeatRequest;
import dev.caerus.dls.v1.HeartbeatResponse;
import dev.caerus.dls.v1.HeldLock;
import dev.caerus.dls.v1.KeyChange;
import dev.caerus.dls.v1.KeyChangeKind;
import dev.caerus.dls.v1.KeyHolder;
import dev.caerus.dls.v1.KeyHolders;
import dev.caerus.dls.v1.KeyLocks;
import dev.caerus.dls.v1.ListLockDelaysRequest;
import dev.caerus.dls.v1.ListLockDelaysResponse;
import dev.caerus.dls.v1.ListLocksRequest;
import dev.caerus.dls.v1.ListLocksResponse;
import dev.caerus.dls.v1.LockDelayRule;
import dev.caerus.dls.v1.LockStreamLost;
import dev.caerus.dls.v1.LockMode;
import dev.caerus.dls.v1.LockRequest;
import dev.caerus.dls.v1.LockServiceGrpc;
import dev.caerus.dls.v1.LocksGranted;
import dev.caerus.dls.v1.Queued;
import dev.caerus.dls.v1.ReleaseLockRequest;
import dev.caerus.dls.v1.ReleaseLockResponse;
import dev.caerus.dls.v1.SetLockDelayRequest;
import dev.caerus.dls.v1.SetLockDelayResponse;
import dev.caerus.dls.v1.TransactionState;
import dev.caerus.dls.v1.VerifyFencingTokenRequest;
import dev.caerus.dls.v1.VerifyFencingTokenResponse;
import dev.caerus.dls.v1.WatchKeyRequest;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * Conformance runner for the raw grpc-java client generated from proto/ by sdks/java.
 *
 * <p>Interprets conformance/scenarios.json (format: conformance/README.md) against a running
 * Caerus DLS server and prints one line per scenario. Exit status 1 if any scenario failed.
 */
public final class Runner {
    /** How long a step may wait for the server: a guard against a hang, not a timing assertion. */
    static final long PATIENCE_MS = 30_000;

    /** The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry). */
    static final List<String> GRANT_CHECKS = List.of("mode", "token_equals", "token_greater_than", "save_token");

    /**
     * What this runner can express of the scenarios' {@code needs} (README "Capabilities"): a raw
     * client sends every field, so it has every capability the file names.
     */
    static final Set<String> CAPABILITIES = Set.of("permits");

    static final Metadata.Key<String> ERROR_KIND = Metadata.Key.of("x-dls-error", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> LEADER = Metadata.Key.of("x-dls-leader-addr", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    static final String USAGE = String.join("\n",
            "Runs the Caerus DLS conformance scenarios through the raw grpc-java client (sdks/java).",
            "",
            "usage: Runner [--endpoint HOST:PORT] [--api-key KEY] [--scenarios FILE] [--only NAME]...",
            "  --endpoint HOST:PORT  any node; leader redirects are followed (default 127.0.0.1:7070)",
            "  --api-key KEY         sent as authorization: Bearer KEY (default: $CAERUS_API_KEY)",
            "  --scenarios FILE      the scenario file (default: conformance/scenarios.json or ../scenarios.json)",
            "  --only NAME           run only this scenario (repeatable)");

    public static void main(String[] argv) throws IOException {
        String endpoint = "127.0.0.1:7070";
        String apiKey = System.getenv("CAERUS_API_KEY");
        String file = null;
        Set<String> only = new HashSet<>();
        for (int i = 0; i < argv.length; i++) {
            String arg = argv[i];
            if (arg.equals("-h") || arg.equals("--help")) {
                System.out.println(USAGE);
                return;
            }
            if (i + 1 >= argv.length) {
                usageError(arg + " needs a value");
            }
            String value = argv[++i];
            switch (arg) {
                case "--endpoint" -> endpoint = value;
                case "--api-key" -> apiKey = value;
                case "--scenarios" -> file = value;
                case "--only" -> only.add(value);
                default -> usageError("unknown argument " + arg);
            }
        }
        if (file == null) {
            file = Files.exists(Path.of("conformance/scenarios.json")) ? "conformance/scenarios.json" : "../scenarios.json";
        }
        JsonObject spec = JsonParser.parseString(Files.readString(Path.of(file), StandardCharsets.UTF_8)).getAsJsonObject();

        Connection conn = new Connection(endpoint, apiKey);
        String run = "cf-java-" + UUID.randomUUID().toString().substring(0, 6);
        int passed = 0;
        int failed = 0;
        int skipped = 0;
        JsonArray scenarios = spec.getAsJsonArray("scenarios");
        for (int index = 0; index < scenarios.size(); index++) {
            JsonObject scenario = scenarios.get(index).getAsJsonObject();
            String name = scenario.get("name").getAsString();
            if (!only.isEmpty() && !only.contains(name)) {
                continue;
            }
            List<String> lacking = new ArrayList<>();
            if (scenario.has("needs")) {
                for (JsonElement n : scenario.getAsJsonArray("needs")) {
                    if (!CAPABILITIES.contains(n.getAsString())) {
                        lacking.add(n.getAsString());
                    }
                }
            }
            if (!lacking.isEmpty()) {
                skipped++;
                System.out.println("SKIP " + name + " (needs " + String.join(", ", lacking) + ": not implemented by this runner)");
                continue;
            }
            String error = new Scenario(conn, scenario, String.format("%s-%02d", run, index)).run();
            if (error == null) {
                passed++;
                System.out.println("PASS " + name);
            } else {
                failed++;
                System.out.println("FAIL " + name + ": " + error);
            }
            System.out.flush();
        }
        System.out.printf("java raw grpc-java runner: %d passed, %d failed, %d skipped (%s)%n", passed, failed, skipped, endpoint);
        System.out.flush();
        conn.close();
        // Abandoned background acquires may still be blocked on their streams.
        System.exit(failed > 0 ? 1 : 0);
    }

    static void usageError(String message) {
        System.err.println("conformance: " + message + "\n\n" + USAGE);
        System.exit(2);
    }

    /** A step that did not go as the scenario expects. */
    static final class StepFailed extends Exception {
        StepFailed(String message) {
            super(message);
        }
    }

    /** What a call ended with: a value, or a gRPC status code name and x-dls-error kind. */
    record Outcome(Object value, String code, String kind, String message) {
        static Outcome ok(Object value) {
            return new Outcome(value, null, null, "");
        }

        static Outcome error(StatusRuntimeException e) {
            Metadata trailers = Status.trailersFromThrowable(e);
            String kind = trailers == null ? null : trailers.get(ERROR_KIND);
            return new Outcome(null, e.getStatus().getCode().name(), kind, e.getStatus().getDescription());
        }

        boolean isOk() {
            return code == null;
        }

        String describe() {
            return isOk() ? "ok" : "error " + code + "/" + (kind == null ? "-" : kind) + " (" + message + ")";
        }
    }

    /** One channel to the node currently believed to lead; follows x-dls-leader-addr. */
    static final class Connection {
        private final Metadata headers = new Metadata();
        private String endpoint;
        private ManagedChannel channel;
        private LockServiceGrpc.LockServiceBlockingStub stub;
        private AdminServiceGrpc.AdminServiceBlockingStub admin;
        private final List<ManagedChannel> old = new ArrayList<>();

        Connection(String endpoint, String apiKey) {
            if (apiKey != null && !apiKey.isEmpty()) {
                headers.put(AUTHORIZATION, "Bearer " + apiKey);
            }
            connect(endpoint);
        }

        synchronized void connect(String target) {
            if (target.equals(endpoint)) {
                return;
            }
            if (channel != null) {
                // Background acquires may still be reading from it; closed at the end.
                old.add(channel);
            }
            endpoint = target;
            channel = ManagedChannelBuilder.forTarget(target).usePlaintext().build();
            stub = LockServiceGrpc.newBlockingStub(channel)
                    .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
            admin = AdminServiceGrpc.newBlockingStub(channel)
                    .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
        }

        synchronized LockServiceGrpc.LockServiceBlockingStub stub() {
            return stub;
        }

        synchronized AdminServiceGrpc.AdminServiceBlockingStub admin() {
            return admin;
        }

        synchronized void close() {
            channel.shutdownNow();
            old.forEach(ManagedChannel::shutdownNow);
        }

        /** UNAVAILABLE means not the leader (follow the hint) or no leader yet (back off). */
        boolean shouldRetry(StatusRuntimeException e, long deadline) {
            if (e.getStatus().getCode() != Status.Code.UNAVAILABLE || System.currentTimeMillis() > deadline) {
                return false;
            }
            Metadata trailers = Status.trailersFromThrowable(e);
            String leader = trailers == null ? null : trailers.get(LEADER);
            if (leader != null && !leader.isEmpty()) {
                connect(leader);
            } else {
                sleep(100);
            }
            return true;
        }

        <T> Outcome unary(Function<LockServiceGrpc.LockServiceBlockingStub, T> call) {
            return unaryOn(this::stub, call);
        }

        /** An AdminService call (the operator calls), as {@link #unary}. */
        <T> Outcome adminUnary(Function<AdminServiceGrpc.AdminServiceBlockingStub, T> call) {
            return unaryOn(this::admin, call);
        }

        <S extends AbstractStub<S>, T> Outcome unaryOn(Supplier<S> stub, Function<S, T> call) {
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            while (true) {
                try {
                    return Outcome.ok(call.apply(stub.get().withDeadlineAfter(PATIENCE_MS, TimeUnit.MILLISECONDS)));
                } catch (StatusRuntimeException e) {
                    if (!shouldRetry(e, deadline)) {
                        return Outcome.error(e);
                    }
                }
            }
        }

        /**
         * Follows the AcquireLock stream to its grant (a Granted) or final status; a stay_open
         * stream is handed to {@code onStayOpen} after its grant.
         */
        Outcome acquire(AcquireLockRequest request, Consumer<Queued> onQueued, Consumer<StayOpen> onStayOpen) {
            return follow(request.getTimeoutMs(), stub -> stub.acquireLock(request), (AcquireLockResponse msg) ->
                    switch (msg.getEventCase()) {
                        case QUEUED -> msg.getQueued();
                        case GRANTED -> msg.getGranted();
                        case LOST -> msg.getLost();
                        default -> null;
                    }, onQueued, request.getStayOpen() ? onStayOpen : null);
        }

        /** Follows the AcquireLocks stream to its grants (a LocksGranted) or final status. */
        Outcome acquireAll(AcquireLocksRequest request, Consumer<Queued> onQueued, Consumer<StayOpen> onStayOpen) {
            return follow(request.getTimeoutMs(), stub -> stub.acquireLocks(request), (AcquireLocksResponse msg) ->
                    switch (msg.getEventCase()) {
                        case QUEUED -> msg.getQueued();
                        case GRANTED -> msg.getGranted();
                        case LOST -> msg.getLost();
                        default -> null;
                    }, onQueued, request.getStayOpen() ? onStayOpen : null);
        }

        /**
         * Follows an acquire stream (opened by {@code open}; {@code read} turns each message into
         * its Queued, or the grant that ends the stream) to its grant or final status,
         * re-attaching with the same request (same request_id) when the serving node stops leading.
         */
        <M> Outcome follow(long timeoutMs, Function<LockServiceGrpc.LockServiceBlockingStub, Iterator<M>> open,
                Function<M, Object> read, Consumer<Queued> onQueued, Consumer<StayOpen> onStayOpen) {
            long deadline = System.currentTimeMillis() + timeoutMs + PATIENCE_MS;
            while (true) {
                Context.CancellableContext call = Context.current().withCancellation();
                try {
                    Context previous = call.attach();
                    Iterator<M> stream;
                    try {
                        stream = open.apply(stub());
                    } finally {
                        call.detach(previous);
                    }
                    while (stream.hasNext()) {
                        Object event = read.apply(stream.next());
                        if (event instanceof Queued q) {
                            onQueued.accept(q);
                        } else if (event != null && !(event instanceof LockStreamLost)) {
                            if (onStayOpen != null) {
                                onStayOpen.accept(new StayOpen(stream, read, call));
                            } else {
                                call.cancel(null);
                            }
                            return Outcome.ok(event);
                        }
                    }
                    return new Outcome(null, "UNKNOWN", null, "stream ended without a grant or a status");
                } catch (StatusRuntimeException e) {
                    if (!shouldRetry(e, deadline)) {
                        return Outcome.error(e);
                    }
                }
            }
        }
    }

    /**
     * A granted stay_open acquire stream, read on by a thread until it ends: the `lost` message
     * if one came, and the status it ended with ("OK" or the error).
     */
    static final class StayOpen {
        LockStreamLost lost;
        String ended;
        int extra;
        private final Context.CancellableContext call;

        <M> StayOpen(Iterator<M> stream, Function<M, Object> read, Context.CancellableContext call) {
            this.call = call;
            Thread thread = new Thread(() -> {
                String end = "OK";
                try {
                    while (stream.hasNext()) {
                        Object event = read.apply(stream.next());
                        synchronized (this) {
                            if (event instanceof LockStreamLost l) {
                                lost = l;
                            } else {
                                extra++;
                            }
                        }
                    }
                } catch (StatusRuntimeException e) {
                    end = Outcome.error(e).describe();
                }
                synchronized (this) {
                    ended = end;
                }
            }, "stay-open");
            thread.setDaemon(true);
            thread.start();
        }

        synchronized LockStreamLost lost() {
            return lost;
        }

        synchronized String ended() {
            return ended;
        }

        synchronized int extra() {
            return extra;
        }

        void cancel() {
            call.cancel(null);
        }
    }

    /** A WatchKey stream read by a thread: its messages in order, and how it ended. */
    static final class Watch {
        private final List<KeyHolders> messages = new ArrayList<>();
        private int consumed;
        private String ended;
        private final Context.CancellableContext call = Context.current().withCancellation();

        Watch(Connection conn, WatchKeyRequest request) {
            Thread thread = new Thread(() -> {
                long deadline = System.currentTimeMillis() + PATIENCE_MS;
                String end;
                while (true) {
                    try {
                        Context previous = call.attach();
                        Iterator<KeyHolders> stream;
                        try {
                            stream = conn.stub().watchKey(request);
                        } finally {
                            call.detach(previous);
                        }
                        while (stream.hasNext()) {
                            KeyHolders m = stream.next();
                            synchronized (this) {
                                messages.add(m);
                                notifyAll();
                            }
                        }
                        end = "the watch ended (OK)";
                    } catch (StatusRuntimeException e) {
                        boolean none;
                        synchronized (this) {
                            none = messages.isEmpty();
                        }
                        if (none && conn.shouldRetry(e, deadline)) {
                            continue;
                        }
                        end = "the watch ended: " + Outcome.error(e).describe();
                    }
                    break;
                }
                synchronized (this) {
                    ended = end;
                    notifyAll();
                }
            }, "watch");
            thread.setDaemon(true);
            thread.start();
        }

        /** The next message not yet consumed (waits for it). */
        synchronized KeyHolders next() throws StepFailed {
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            while (consumed >= messages.size()) {
                if (ended != null) {
                    throw new StepFailed(ended);
                }
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new StepFailed("no key watch message within " + PATIENCE_MS / 1000 + "s");
                }
                try {
                    wait(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted", e);
                }
            }
            return messages.get(consumed++);
        }

        synchronized String ended() {
            return ended;
        }

        void cancel() {
            call.cancel(null);
        }
    }

    /**
     * A background AcquireLock or AcquireLocks (the step's op: acquire or acquire_all): its
     * queued messages and, once over, its outcome.
     */
    static final class Background {
        final String op;
        private final List<Queued> queued = new ArrayList<>();
        private int consumed;
        private Outcome outcome;

        /** Runs {@code acquire} (a stream follower given the queued-message sink) on a thread. */
        Background(String op, String handle, Function<Consumer<Queued>, Outcome> acquire) {
            this.op = op;
            Thread thread = new Thread(() -> {
                Outcome result = acquire.apply(q -> {
                    synchronized (this) {
                        queued.add(q);
                        notifyAll();
                    }
                });
                synchronized (this) {
                    outcome = result;
                    notifyAll();
                }
            }, "acquire-" + handle);
            thread.setDaemon(true);
            thread.start();
        }

        synchronized Queued waitQueued(int position) throws StepFailed {
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            while (true) {
                while (consumed < queued.size()) {
                    Queued q = queued.get(consumed++);
                    if (q.getPosition() == position) {
                        return q;
                    }
                }
                if (outcome != null) {
                    throw new StepFailed("acquire ended (" + outcome.describe() + ") before queued position "
                            + position + "; positions seen " + positions());
                }
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new StepFailed("no queued position " + position + " within " + PATIENCE_MS / 1000
                            + "s; positions seen " + positions());
                }
                waitFor(left);
            }
        }

        synchronized Outcome waitOutcome() throws StepFailed {
            // The acquire's own timeout bounds it; this is only a hang guard past that.
            long deadline = System.currentTimeMillis() + PATIENCE_MS + 3_700_000;
            while (outcome == null) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new StepFailed("background acquire did not finish");
                }
                waitFor(left);
            }
            return outcome;
        }

        private List<Integer> positions() {
            return queued.stream().map(Queued::getPosition).toList();
        }

        private void waitFor(long ms) {
            try {
                wait(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        }
    }

    /** One lock as `status` shows it: [namespace, key, mode name] and the token (null: any). */
    record LockView(String namespace, String key, String mode, Long token) {
        boolean matches(LockView want) {
            return namespace.equals(want.namespace) && key.equals(want.key) && mode.equals(want.mode)
                    && (want.token == null || Objects.equals(token, want.token));
        }

        @Override
        public String toString() {
            return key + ":" + mode + (token == null ? "" : "#" + Long.toUnsignedString(token));
        }
    }

    static final class Scenario {
        private final Connection conn;
        private final JsonObject spec;
        private final String ns;
        private final Map<String, Long> txns = new LinkedHashMap<>();
        private final Map<String, Long> tokens = new HashMap<>();
        private final Map<String, Background> handles = new HashMap<>();
        private final Map<String, Watch> watches = new HashMap<>();
        private final Map<String, String> cursors = new HashMap<>();
        /** Transactions begun with lost_stream: their acquires stay open. */
        private final Set<String> lostStream = new HashSet<>();
        /** Each transaction's granted stay_open streams (background acquires add to it). */
        private final Map<String, List<StayOpen>> streams = new HashMap<>();

        Scenario(Connection conn, JsonObject spec, String ns) {
            this.conn = conn;
            this.spec = spec;
            this.ns = ns;
        }

        // ---- values ------------------------------------------------------------------------
        String text(JsonElement value) {
            if (value.isJsonObject()) {
                JsonObject o = value.getAsJsonObject();
                return text(o.get("repeat")).repeat(o.get("times").getAsInt());
            }
            return value.getAsString().replace("${ns}", ns);
        }

        String field(JsonObject step, String name, String fallback) {
            return step.has(name) ? text(step.get(name)) : fallback.replace("${ns}", ns);
        }

        long txnId(JsonObject step) throws StepFailed {
            if (step.has("txn_id")) {
                return step.get("txn_id").getAsLong();
            }
            String name = step.get("txn").getAsString();
            Long id = txns.get(name);
            if (id == null) {
                throw new StepFailed("transaction '" + name + "' was not begun");
            }
            return id;
        }

        /** A raw client picks an id itself so that its own retries stay safe. */
        String requestId(JsonObject step) {
            return step.has("request_id") ? text(step.get("request_id")) : UUID.randomUUID().toString();
        }

        long token(String name) throws StepFailed {
            Long t = tokens.get(name);
            if (t == null) {
                throw new StepFailed("no saved token '" + name + "'");
            }
            return t;
        }

        static String modeName(int number) {
            LockMode m = LockMode.forNumber(number);
            return m == null ? Integer.toString(number) : m.name();
        }

        // ---- checks ------------------------------------------------------------------------
        /** Compares success/failure with `expect`; returns the ok checks, or null for an expected error. */
        JsonObject checkOutcome(JsonObject step, Outcome outcome) throws StepFailed {
            JsonObject expect = step.has("expect") ? step.getAsJsonObject("expect") : null;
            if (expect != null && expect.has("error")) {
                JsonObject want = expect.getAsJsonObject("error");
                String code = want.get("code").getAsString();
                String kind = want.get("kind").getAsString();
                if (outcome.isOk()) {
                    throw new StepFailed("expected error " + code + "/" + kind + ", got ok");
                }
                if (!code.equals(outcome.code()) || !kind.equals(outcome.kind())) {
                    throw new StepFailed("expected error " + code + "/" + kind + ", got " + outcome.describe());
                }
                if (want.has("message_contains")) {
                    String words = want.get("message_contains").getAsString();
                    if (outcome.message() == null || !outcome.message().contains(words)) {
                        throw new StepFailed("expected error " + code + "/" + kind + " saying \"" + words + "\", got "
                                + outcome.describe());
                    }
                }
                return null;
            }
            if (!outcome.isOk()) {
                throw new StepFailed("expected ok, got " + outcome.describe());
            }
            return expect != null && expect.has("ok") ? expect.getAsJsonObject("ok") : new JsonObject();
        }

        static void eq(String what, Object got, Object want) throws StepFailed {
            if (!Objects.equals(got, want)) {
                throw new StepFailed(what + ": expected " + want + ", got " + got);
            }
        }

        /** The ok checks of an acquire (op "acquire": a Granted) or acquire_all (a LocksGranted). */
        void checkAcquired(String op, JsonObject checks, Object value) throws StepFailed {
            if (op.equals("acquire_all")) {
                checkGrants(checks, (LocksGranted) value);
            } else {
                checkGrant(checks, (Granted) value);
            }
        }

        /**
         * acquire_all's `locks` check against the grants in the order asked; each entry's saved
         * token is stored before the next entry is checked.
         */
        void checkGrants(JsonObject checks, LocksGranted granted) throws StepFailed {
            if (!checks.has("locks")) {
                return;
            }
            JsonArray want = checks.getAsJsonArray("locks");
            List<String> got = granted.getLocksList().stream()
                    .map(g -> g.getKey() + ":" + modeName(g.getModeValue()) + "#" + Long.toUnsignedString(g.getFencingToken()))
                    .toList();
            if (want.size() != granted.getLocksCount()) {
                throw new StepFailed("locks: expected " + want.size() + " grants, got " + got);
            }
            for (int i = 0; i < want.size(); i++) {
                JsonObject w = want.get(i).getAsJsonObject();
                Granted g = granted.getLocks(i);
                eq("locks[" + i + "] lock", g.getNamespace() + "/" + g.getKey(), field(w, "namespace", "${ns}") + "/" + text(w.get("key")));
                try {
                    checkGrant(w, g);
                } catch (StepFailed e) {
                    throw new StepFailed("locks[" + i + "]: " + e.getMessage());
                }
            }
        }

        /** One holder or waiter entry of list_key: its transaction and mode (and a holder's token). */
        void checkListedEntry(String what, JsonObject w, long id, int mode, Long token) throws StepFailed {
            if (w.has("txn")) {
                eq(what + " transaction (want " + w.get("txn").getAsString() + ")", id, txnId(w));
            }
            if (w.has("mode")) {
                eq(what + " mode", modeName(mode), w.get("mode").getAsString());
            }
            if (w.has("token")) {
                if (token == null) {
                    throw new StepFailed(what + ": a waiter has no fencing token");
                }
                eq(what + " fencing token (want " + w.get("token").getAsString() + ")", token, token(w.get("token").getAsString()));
            }
        }

        /**
         * list_key's checks on the key's ListLocks entry (null: the key is not listed, so it has
         * no holders, waiters or delay).
         */
        void checkListed(JsonObject checks, KeyLocks k) throws StepFailed {
            if (checks.has("listed")) {
                eq("listed", k != null, checks.get("listed").getAsBoolean());
            }
            KeyLocks key = k == null ? KeyLocks.getDefaultInstance() : k;
            if (checks.has("holders")) {
                JsonArray want = checks.getAsJsonArray("holders");
                List<String> shown = key.getHoldersList().stream()
                        .map(h -> "txn " + h.getTransactionId() + " " + modeName(h.getModeValue())).toList();
                if (want.size() != key.getHoldersCount()) {
                    throw new StepFailed("number of holders: expected " + want.size() + ", got " + shown);
                }
                for (int i = 0; i < want.size(); i++) {
                    var h = key.getHolders(i);
                    checkListedEntry("holders[" + i + "]", want.get(i).getAsJsonObject(), h.getTransactionId(),
                            h.getModeValue(), h.getFencingToken());
                }
            }
            if (checks.has("waiters")) {
                JsonArray want = checks.getAsJsonArray("waiters");
                List<String> shown = key.getWaitersList().stream()
                        .map(w -> "txn " + w.getTransactionId() + " " + modeName(w.getModeValue())).toList();
                if (want.size() != key.getWaitersCount()) {
                    throw new StepFailed("number of waiters: expected " + want.size() + ", got " + shown);
                }
                for (int i = 0; i < want.size(); i++) {
                    var w = key.getWaiters(i);
                    checkListedEntry("waiters[" + i + "]", want.get(i).getAsJsonObject(), w.getTransactionId(),
                            w.getModeValue(), null);
                }
            }
            if (checks.has("delay")) {
                String cause = key.getDelayCause().name().replaceFirst("^END_CAUSE_", "");
                String shown = "until " + key.getDelayedUntilMs() + " ms by txn " + key.getDelayedByTransactionId() + " (" + cause + ")";
                JsonElement want = checks.get("delay");
                if (want.isJsonNull()) {
                    if (key.getDelayedUntilMs() != 0 || key.getDelayedByTransactionId() != 0) {
                        throw new StepFailed("expected no delay, got " + shown);
                    }
                } else if (key.getDelayedUntilMs() <= 0) {
                    throw new StepFailed("expected a delay, got " + shown);
                } else {
                    JsonObject w = want.getAsJsonObject();
                    if (w.has("txn")) {
                        eq("delay transaction (want " + w.get("txn").getAsString() + ")", key.getDelayedByTransactionId(), txnId(w));
                    }
                    if (w.has("cause")) {
                        eq("delay cause", cause, w.get("cause").getAsString());
                    }
                }
            }
        }

        void checkDowngrade(JsonObject checks, DowngradeLockResponse d) throws StepFailed {
            if (checks.has("held")) {
                eq("held", d.getHeld(), checks.get("held").getAsBoolean());
            }
            if (d.getHeld()) {
                checkGrant(checks, d.getLock());
            } else if (GRANT_CHECKS.stream().anyMatch(checks::has)) {
                throw new StepFailed("grant checks on a lock that is not held (held=false)");
            }
        }

        void checkVerify(JsonObject checks, VerifyFencingTokenResponse v) throws StepFailed {
            if (checks.has("current")) {
                eq("current", v.getCurrent(), checks.get("current").getAsBoolean());
            }
            if (checks.has("current_tokens")) {
                // Sorted, so the holders compare as a set (tokens are below 2^63 in practice).
                List<Long> want = new ArrayList<>();
                for (JsonElement name : checks.getAsJsonArray("current_tokens")) {
                    want.add(token(name.getAsString()));
                }
                want.sort(Long::compareUnsigned);
                List<Long> got = new ArrayList<>(v.getCurrentTokensList());
                got.sort(Long::compareUnsigned);
                eq("current_tokens", got, want);
            }
        }

        void checkGrant(JsonObject checks, Granted g) throws StepFailed {
            if (checks.has("mode")) {
                eq("mode", modeName(g.getModeValue()), checks.get("mode").getAsString());
            }
            if (checks.has("token_equals")) {
                eq("fencing token", Long.toUnsignedString(g.getFencingToken()),
                        Long.toUnsignedString(token(checks.get("token_equals").getAsString())));
            }
            if (checks.has("token_greater_than")) {
                String name = checks.get("token_greater_than").getAsString();
                long floor = token(name);
                if (Long.compareUnsigned(g.getFencingToken(), floor) <= 0) {
                    throw new StepFailed("fencing token " + Long.toUnsignedString(g.getFencingToken())
                            + " is not greater than " + name + "=" + Long.toUnsignedString(floor));
                }
            }
            if (checks.has("save_token")) {
                tokens.put(checks.get("save_token").getAsString(), g.getFencingToken());
            }
        }

        void checkStatus(JsonObject checks, GetTransactionStatusResponse s) throws StepFailed {
            if (checks.has("state")) {
                eq("state", s.getState().name(), checks.get("state").getAsString());
            }
            if (checks.has("name")) {
                eq("name", s.getName(), text(checks.get("name")));
            }
            if (checks.has("priority")) {
                eq("priority", (long) s.getPriority(), checks.get("priority").getAsLong());
            }
            if (checks.has("lease_timeout_ms")) {
                eq("lease_timeout_ms", s.getLeaseTimeoutMs(), checks.get("lease_timeout_ms").getAsLong());
            }
            if (checks.has("end_cause")) {
                eq("end_cause", s.getEndCause().name().replaceFirst("^END_CAUSE_", ""), checks.get("end_cause").getAsString());
            }
            if (checks.has("locks")) {
                List<LockView> got = new ArrayList<>();
                for (HeldLock h : s.getLocksList()) {
                    got.add(new LockView(h.getNamespace(), h.getKey(), modeName(h.getModeValue()), h.getFencingToken()));
                }
                List<LockView> want = new ArrayList<>();
                for (JsonElement e : checks.getAsJsonArray("locks")) {
                    JsonObject w = e.getAsJsonObject();
                    Long token = w.has("token") ? token(w.get("token").getAsString()) : null;
                    want.add(new LockView(field(w, "namespace", "${ns}"), text(w.get("key")), w.get("mode").getAsString(), token));
                }
                List<LockView> unmatched = new ArrayList<>(got);
                for (LockView w : want) {
                    LockView hit = unmatched.stream().filter(g -> g.matches(w)).findFirst().orElse(null);
                    if (hit == null) {
                        throw new StepFailed("locks: expected " + want + ", got " + got);
                    }
                    unmatched.remove(hit);
                }
                if (!unmatched.isEmpty()) {
                    throw new StepFailed("locks: expected " + want + ", got " + got);
                }
            }
            if (checks.has("waiting")) {
                JsonElement w = checks.get("waiting");
                if (w.isJsonNull()) {
                    if (s.hasWaiting()) {
                        throw new StepFailed("expected no pending wait, got " + s.getWaiting().getKey() + " at "
                                + s.getWaiting().getPosition());
                    }
                } else {
                    JsonObject wo = w.getAsJsonObject();
                    if (!s.hasWaiting()) {
                        throw new StepFailed("expected a pending wait, got none");
                    }
                    eq("waiting.key", s.getWaiting().getKey(), text(wo.get("key")));
                    eq("waiting.namespace", s.getWaiting().getNamespace(), field(wo, "namespace", "${ns}"));
                    if (wo.has("mode")) {
                        eq("waiting.mode", modeName(s.getWaiting().getModeValue()), wo.get("mode").getAsString());
                    }
                    if (wo.has("position")) {
                        eq("waiting.position", (long) s.getWaiting().getPosition(), wo.get("position").getAsLong());
                    }
                }
            }
        }

        // ---- steps -------------------------------------------------------------------------
        /** The wire value of `mode` [EXCLUSIVE]: a LockMode name or a raw number. */
        static int modeValue(JsonObject step) {
            JsonElement mode = step.get("mode");
            if (mode == null) {
                return LockMode.EXCLUSIVE_VALUE;
            }
            return mode.getAsJsonPrimitive().isNumber() ? mode.getAsInt() : LockMode.valueOf(mode.getAsString()).getNumber();
        }

        boolean staysOpen(JsonObject step) {
            return step.has("txn") && lostStream.contains(step.get("txn").getAsString());
        }

        /** Where a granted stay_open stream of the step's transaction is kept. */
        Consumer<StayOpen> onStayOpen(JsonObject step) {
            String name = step.has("txn") ? step.get("txn").getAsString() : "";
            return so -> {
                synchronized (streams) {
                    streams.computeIfAbsent(name, k -> new ArrayList<>()).add(so);
                }
            };
        }

        List<StayOpen> txnStreams(JsonObject step) {
            synchronized (streams) {
                return new ArrayList<>(streams.getOrDefault(step.get("txn").getAsString(), List.of()));
            }
        }

        // ---- key watches and lost streams ---------------------------------------------------
        static String kindName(KeyChangeKind k) {
            return k.name().replaceFirst("^KEY_CHANGE_KIND_", "");
        }

        static String showHolder(KeyHolder h) {
            return "txn " + h.getTransactionId() + " '" + h.getTransactionName() + "' " + modeName(h.getModeValue())
                    + "#" + Long.toUnsignedString(h.getFencingToken());
        }

        void checkHolder(String what, JsonObject w, KeyHolder h) throws StepFailed {
            if (w.has("txn")) {
                String n = w.get("txn").getAsString();
                Long id = txns.get(n);
                if (id == null) {
                    throw new StepFailed("no transaction '" + n + "'");
                }
                eq(what + " transaction (want " + n + ")", h.getTransactionId(), (long) id);
            }
            if (w.has("name")) {
                eq(what + " transaction_name", h.getTransactionName(), text(w.get("name")));
            }
            if (w.has("mode")) {
                eq(what + " mode", modeName(h.getModeValue()), w.get("mode").getAsString());
            }
            if (w.has("token")) {
                String t = w.get("token").getAsString();
                eq(what + " fencing token (want " + t + ")", Long.toUnsignedString(h.getFencingToken()),
                        Long.toUnsignedString(token(t)));
            }
        }

        void checkWatch(JsonObject checks, List<KeyHolder> holders, List<KeyChange> changes, String cursor) throws StepFailed {
            try {
                if (checks.has("holders")) {
                    JsonArray want = checks.getAsJsonArray("holders");
                    if (want.size() != holders.size()) {
                        throw new StepFailed("holders: expected " + want.size());
                    }
                    for (int i = 0; i < want.size(); i++) {
                        checkHolder("holders[" + i + "]", want.get(i).getAsJsonObject(), holders.get(i));
                    }
                }
                if (checks.has("changes")) {
                    JsonArray want = checks.getAsJsonArray("changes");
                    if (want.size() != changes.size()) {
                        throw new StepFailed("changes: expected " + want.size());
                    }
                    for (int i = 0; i < want.size(); i++) {
                        JsonObject w = want.get(i).getAsJsonObject();
                        KeyChange c = changes.get(i);
                        if (w.has("kind")) {
                            eq("changes[" + i + "] kind", kindName(c.getKind()), w.get("kind").getAsString());
                        }
                        if (w.has("end_cause")) {
                            eq("changes[" + i + "] end_cause", c.getEndCause().name().replaceFirst("^END_CAUSE_", ""),
                                    w.get("end_cause").getAsString());
                        }
                        checkHolder("changes[" + i + "]", w, c.getHolder());
                    }
                }
            } catch (StepFailed e) {
                throw new StepFailed(e.getMessage() + "; holders " + holders.stream().map(Scenario::showHolder).toList()
                        + ", changes " + changes.stream().map(c -> kindName(c.getKind()) + " " + showHolder(c.getHolder())
                                + " (" + c.getEndCause().name() + ")").toList());
            }
            if (checks.has("save_cursor")) {
                cursors.put(checks.get("save_cursor").getAsString(), cursor);
            }
        }

        Watch watch(JsonObject step) throws StepFailed {
            Watch w = watches.get(step.get("handle").getAsString());
            if (w == null) {
                throw new StepFailed("no watch '" + step.get("handle").getAsString() + "'");
            }
            return w;
        }

        /**
         * Polls GetTransactionStatus until the step's ok checks hold, heartbeating first when
         * the step says so; an ended transaction no longer changes, so a mismatch then fails.
         */
        void awaitStatus(JsonObject step) throws StepFailed {
            long id = txnId(step);
            JsonObject expect = step.has("expect") ? step.getAsJsonObject("expect") : new JsonObject();
            JsonObject checks = expect.has("ok") ? expect.getAsJsonObject("ok") : new JsonObject();
            boolean heartbeat = step.has("heartbeat") && step.get("heartbeat").getAsBoolean();
            long within = step.has("within_ms") ? step.get("within_ms").getAsLong() : PATIENCE_MS;
            long deadline = System.currentTimeMillis() + within;
            while (true) {
                if (heartbeat) {
                    conn.unary(stub -> stub.heartbeat(HeartbeatRequest.newBuilder().setTransactionId(id).build()));
                }
                Outcome out = conn.unary(stub -> stub.getTransactionStatus(
                        GetTransactionStatusRequest.newBuilder().setTransactionId(id).build()));
                if (!out.isOk()) {
                    throw new StepFailed("status: " + out.describe());
                }
                GetTransactionStatusResponse status = (GetTransactionStatusResponse) out.value();
                try {
                    checkStatus(checks, status);
                    return;
                } catch (StepFailed e) {
                    if (status.getState() != TransactionState.ACTIVE || System.currentTimeMillis() > deadline) {
                        throw new StepFailed(e.getMessage() + " (state " + status.getState() + ")");
                    }
                }
                sleep(50);
            }
        }

        void expectLost(JsonObject step) throws StepFailed {
            long within = step.has("within_ms") ? step.get("within_ms").getAsLong() : PATIENCE_MS;
            long deadline = System.currentTimeMillis() + within;
            LockStreamLost lost = null;
            while (lost == null) {
                List<StayOpen> all = txnStreams(step);
                if (all.isEmpty()) {
                    throw new StepFailed("the transaction has no granted stay_open stream");
                }
                boolean allEnded = true;
                List<String> endings = new ArrayList<>();
                for (StayOpen so : all) {
                    if (so.lost() != null) {
                        lost = so.lost();
                    }
                    allEnded &= so.ended() != null;
                    endings.add(so.ended());
                }
                if (lost != null) {
                    break;
                }
                if (allEnded) {
                    throw new StepFailed("every stay_open stream ended without lost: " + endings);
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new StepFailed("no lost message within " + within + " ms");
                }
                sleep(10);
            }
            JsonObject checks = checkOutcome(step, Outcome.ok(lost));
            eq("lost.transaction_id", lost.getTransactionId(), txnId(step));
            if (checks != null && checks.has("end_cause")) {
                eq("lost.end_cause", lost.getEndCause().name().replaceFirst("^END_CAUSE_", ""), checks.get("end_cause").getAsString());
            }
        }

        void expectStreamsClosed(JsonObject step) throws StepFailed {
            List<StayOpen> all = txnStreams(step);
            if (all.isEmpty()) {
                throw new StepFailed("the transaction has no granted stay_open stream");
            }
            long deadline = System.currentTimeMillis() + PATIENCE_MS;
            for (int i = 0; i < all.size(); i++) {
                StayOpen so = all.get(i);
                while (so.ended() == null) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new StepFailed("stay_open stream " + i + " is still open after " + PATIENCE_MS / 1000 + "s");
                    }
                    sleep(10);
                }
                if (so.lost() != null) {
                    throw new StepFailed("stay_open stream " + i + " sent lost (" + so.lost().getEndCause().name() + ")");
                }
                if (so.extra() > 0) {
                    throw new StepFailed("stay_open stream " + i + " sent " + so.extra() + " other messages after its grant");
                }
                if (!so.ended().equals("OK")) {
                    throw new StepFailed("stay_open stream " + i + " ended with " + so.ended());
                }
            }
        }

        AcquireLockRequest acquireRequest(JsonObject step) throws StepFailed {
            return AcquireLockRequest.newBuilder()
                    .setStayOpen(staysOpen(step))
                    .setTransactionId(txnId(step))
                    .setNamespace(field(step, "namespace", "${ns}"))
                    .setKey(field(step, "key", ""))
                    .setModeValue(modeValue(step))
                    .setTimeoutMs(step.has("timeout_ms") ? step.get("timeout_ms").getAsLong() : 10_000)
                    .setRequestId(requestId(step))
                    .setPermits(step.has("permits") ? step.get("permits").getAsInt() : 0)
                    .build();
        }

        AcquireLocksRequest acquireAllRequest(JsonObject step) throws StepFailed {
            AcquireLocksRequest.Builder b = AcquireLocksRequest.newBuilder()
                    .setStayOpen(staysOpen(step))
                    .setTransactionId(txnId(step))
                    .setTimeoutMs(step.has("timeout_ms") ? step.get("timeout_ms").getAsLong() : 10_000)
                    .setRequestId(requestId(step));
            for (JsonElement e : step.getAsJsonArray("locks")) {
                JsonObject w = e.getAsJsonObject();
                b.addLocks(LockRequest.newBuilder()
                        .setNamespace(field(w, "namespace", "${ns}"))
                        .setKey(field(w, "key", ""))
                        .setModeValue(modeValue(w)));
            }
            return b.build();
        }

        Background handle(JsonObject step) throws StepFailed {
            Background bg = handles.get(step.get("handle").getAsString());
            if (bg == null) {
                throw new StepFailed("no background acquire '" + step.get("handle").getAsString() + "'");
            }
            return bg;
        }

        void runStep(JsonObject step) throws StepFailed {
            String op = step.get("op").getAsString();
            switch (op) {
                case "begin" -> {
                    BeginTransactionRequest req = BeginTransactionRequest.newBuilder()
                            .setTimeoutMs(step.has("timeout_ms") ? step.get("timeout_ms").getAsLong() : 15_000)
                            .setPriority(step.has("priority") ? step.get("priority").getAsInt() : 0)
                            .setName(field(step, "name", ""))
                            .setRequestId(requestId(step))
                            .setMaxDurationMs(step.has("max_duration_ms") ? step.get("max_duration_ms").getAsLong() : 0)
                            .build();
                    Outcome out = conn.unary(stub -> stub.beginTransaction(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        BeginTransactionResponse r = (BeginTransactionResponse) out.value();
                        txns.put(step.get("txn").getAsString(), r.getTransactionId());
                        if (step.has("lost_stream") && step.get("lost_stream").getAsBoolean()) {
                            lostStream.add(step.get("txn").getAsString());
                        }
                        if (checks.has("lease_timeout_ms")) {
                            eq("lease_timeout_ms", r.getLeaseTimeoutMs(), checks.get("lease_timeout_ms").getAsLong());
                        }
                        if (checks.has("same_txn_as")) {
                            eq("transaction id", r.getTransactionId(), txns.get(checks.get("same_txn_as").getAsString()));
                        }
                    }
                }
                case "acquire", "acquire_all" -> {
                    Function<Consumer<Queued>, Outcome> acquire;
                    if (op.equals("acquire")) {
                        AcquireLockRequest req = acquireRequest(step);
                        acquire = q -> conn.acquire(req, q, onStayOpen(step));
                    } else {
                        AcquireLocksRequest req = acquireAllRequest(step);
                        acquire = q -> conn.acquireAll(req, q, onStayOpen(step));
                    }
                    if (step.has("wait") && !step.get("wait").getAsBoolean()) {
                        String handle = step.get("handle").getAsString();
                        handles.put(handle, new Background(op, handle, acquire));
                        return;
                    }
                    Outcome out = acquire.apply(q -> { });
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        checkAcquired(op, checks, out.value());
                    }
                }
                case "expect_queued" -> {
                    Queued q = handle(step).waitQueued(step.get("position").getAsInt());
                    if (step.has("blocked_by")) {
                        for (JsonElement name : step.getAsJsonArray("blocked_by")) {
                            Long id = txns.get(name.getAsString());
                            if (id == null || !q.getBlockingTransactionIdsList().contains(id)) {
                                throw new StepFailed("queued at " + q.getPosition() + " but not blocked by "
                                        + name.getAsString() + " (" + id + "); blockers " + q.getBlockingTransactionIdsList());
                            }
                        }
                    }
                }
                case "await" -> {
                    Background bg = handle(step);
                    Outcome out = bg.waitOutcome();
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        checkAcquired(bg.op, checks, out.value());
                    }
                }
                case "release" -> {
                    ReleaseLockRequest req = ReleaseLockRequest.newBuilder()
                            .setTransactionId(txnId(step))
                            .setNamespace(field(step, "namespace", "${ns}"))
                            .setKey(field(step, "key", ""))
                            .setRequestId(requestId(step))
                            .build();
                    Outcome out = conn.unary(stub -> stub.releaseLock(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null && checks.has("released")) {
                        eq("released", ((ReleaseLockResponse) out.value()).getReleased(), checks.get("released").getAsBoolean());
                    }
                }
                case "downgrade" -> {
                    DowngradeLockRequest req = DowngradeLockRequest.newBuilder()
                            .setTransactionId(txnId(step))
                            .setNamespace(field(step, "namespace", "${ns}"))
                            .setKey(field(step, "key", ""))
                            .setRequestId(requestId(step))
                            .build();
                    Outcome out = conn.unary(stub -> stub.downgradeLock(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        checkDowngrade(checks, (DowngradeLockResponse) out.value());
                    }
                }
                case "verify_token" -> {
                    JsonPrimitive token = step.getAsJsonPrimitive("token");
                    VerifyFencingTokenRequest req = VerifyFencingTokenRequest.newBuilder()
                            .setNamespace(field(step, "namespace", "${ns}"))
                            .setKey(field(step, "key", ""))
                            .setFencingToken(token.isNumber() ? token.getAsLong() : token(token.getAsString()))
                            .build();
                    Outcome out = conn.unary(stub -> stub.verifyFencingToken(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        checkVerify(checks, (VerifyFencingTokenResponse) out.value());
                    }
                }
                case "status" -> {
                    GetTransactionStatusRequest req = GetTransactionStatusRequest.newBuilder().setTransactionId(txnId(step)).build();
                    Outcome out = conn.unary(stub -> stub.getTransactionStatus(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        checkStatus(checks, (GetTransactionStatusResponse) out.value());
                    }
                }
                case "heartbeat" -> {
                    HeartbeatRequest req = HeartbeatRequest.newBuilder().setTransactionId(txnId(step)).build();
                    Outcome out = conn.unary(stub -> stub.heartbeat(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null && checks.has("lease_remaining_positive") && checks.get("lease_remaining_positive").getAsBoolean()) {
                        long left = ((HeartbeatResponse) out.value()).getLeaseRemainingMs();
                        if (left <= 0) {
                            throw new StepFailed("lease_remaining_ms is " + left);
                        }
                    }
                }
                case "end" -> {
                    EndTransactionRequest req = EndTransactionRequest.newBuilder()
                            .setTransactionId(txnId(step))
                            .setCommit(!step.has("commit") || step.get("commit").getAsBoolean())
                            .setRequestId(requestId(step))
                            .build();
                    Outcome out = conn.unary(stub -> stub.endTransaction(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        EndTransactionResponse r = (EndTransactionResponse) out.value();
                        if (checks.has("state")) {
                            eq("state", r.getState().name(), checks.get("state").getAsString());
                        }
                        if (checks.has("released_locks")) {
                            eq("released_locks", (long) r.getReleasedLocks(), checks.get("released_locks").getAsLong());
                        }
                    }
                }
                case "await_status" -> awaitStatus(step);
                case "sleep_ms" -> sleep(step.get("ms").getAsLong());
                case "set_lock_delay" -> {
                    SetLockDelayRequest req = SetLockDelayRequest.newBuilder()
                            .setNamespacePrefix(field(step, "namespace_prefix", "${ns}"))
                            .setDelayMs(step.has("delay_ms") ? step.get("delay_ms").getAsLong() : 0)
                            .build();
                    Outcome out = conn.adminUnary(stub -> stub.setLockDelay(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null && checks.has("previous_delay_ms")) {
                        eq("previous_delay_ms", ((SetLockDelayResponse) out.value()).getPreviousDelayMs(),
                                checks.get("previous_delay_ms").getAsLong());
                    }
                }
                case "lock_delays" -> {
                    Outcome out = conn.adminUnary(stub -> stub.listLockDelays(ListLockDelaysRequest.getDefaultInstance()));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null && checks.has("rules")) {
                        // Only this scenario's rules: other runs may share the server.
                        List<String> got = new ArrayList<>();
                        for (LockDelayRule r : ((ListLockDelaysResponse) out.value()).getRulesList()) {
                            if (r.getNamespacePrefix().startsWith(ns)) {
                                got.add(r.getNamespacePrefix() + "=" + r.getDelayMs());
                            }
                        }
                        List<String> want = new ArrayList<>();
                        for (JsonElement e : checks.getAsJsonArray("rules")) {
                            JsonObject w = e.getAsJsonObject();
                            want.add(field(w, "namespace_prefix", "") + "=" + (w.has("delay_ms") ? w.get("delay_ms").getAsLong() : 0));
                        }
                        eq("rules", got, want);
                    }
                }
                case "operator_abort" -> {
                    AbortTransactionRequest req = AbortTransactionRequest.newBuilder()
                            .setTransactionId(txnId(step))
                            .setReason(field(step, "reason", ""))
                            .setRequestId(requestId(step))
                            .build();
                    Outcome out = conn.adminUnary(stub -> stub.abortTransaction(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null && checks.has("state")) {
                        eq("state", ((AbortTransactionResponse) out.value()).getState().name(), checks.get("state").getAsString());
                    }
                }
                case "list_key" -> {
                    String namespace = field(step, "namespace", "${ns}");
                    String key = field(step, "key", "");
                    ListLocksRequest req = ListLocksRequest.newBuilder().setNamespacePrefix(namespace).build();
                    Outcome out = conn.adminUnary(stub -> stub.listLocks(req));
                    JsonObject checks = checkOutcome(step, out);
                    if (checks != null) {
                        KeyLocks listed = null;
                        for (KeyLocks k : ((ListLocksResponse) out.value()).getLocksList()) {
                            if (k.getNamespace().equals(namespace) && k.getKey().equals(key)) {
                                listed = k;
                            }
                        }
                        checkListed(checks, listed);
                    }
                }
                case "watch" -> {
                    WatchKeyRequest.Builder req = WatchKeyRequest.newBuilder()
                            .setNamespace(field(step, "namespace", "${ns}"))
                            .setKey(field(step, "key", ""));
                    if (step.has("resume")) {
                        String c = cursors.get(step.get("resume").getAsString());
                        if (c == null) {
                            throw new StepFailed("no saved cursor '" + step.get("resume").getAsString() + "'");
                        }
                        req.setCursor(c);
                    }
                    Watch w = new Watch(conn, req.build());
                    watches.put(step.get("handle").getAsString(), w);
                    Outcome first;
                    try {
                        first = Outcome.ok(w.next());
                    } catch (StepFailed e) {
                        if (w.ended() == null) {
                            throw e;
                        }
                        first = new Outcome(null, "WATCH", null, w.ended());
                    }
                    JsonObject checks = checkOutcome(step, first);
                    if (checks != null) {
                        KeyHolders m = (KeyHolders) first.value();
                        if (checks.has("initial")) {
                            eq("initial", m.getInitial(), checks.get("initial").getAsBoolean());
                        }
                        checkWatch(checks, m.getHoldersList(), m.getChangesList(), m.getCursor());
                    }
                }
                case "expect_watch" -> {
                    Watch w = watch(step);
                    JsonObject expect = step.has("expect") ? step.getAsJsonObject("expect") : new JsonObject();
                    JsonObject checks = expect.has("ok") ? expect.getAsJsonObject("ok") : new JsonObject();
                    int want = checks.has("changes") ? checks.getAsJsonArray("changes").size() : 0;
                    List<KeyChange> changes = new ArrayList<>();
                    KeyHolders m;
                    do {
                        m = w.next();
                        changes.addAll(m.getChangesList());
                    } while (changes.size() < want);
                    checkWatch(checks, m.getHoldersList(), changes, m.getCursor());
                }
                case "unwatch" -> {
                    watch(step).cancel();
                    watches.remove(step.get("handle").getAsString());
                }
                case "expect_lost" -> expectLost(step);
                case "expect_streams_closed" -> expectStreamsClosed(step);
                default -> throw new StepFailed("unknown op '" + op + "'");
            }
        }

        /** Null if every step went as expected, else what failed first. */
        String run() {
            JsonArray steps = spec.getAsJsonArray("steps");
            try {
                for (int i = 0; i < steps.size(); i++) {
                    JsonObject step = steps.get(i).getAsJsonObject();
                    String op = step.has("op") ? step.get("op").getAsString() : null;
                    try {
                        runStep(step);
                    } catch (StepFailed e) {
                        return "step " + (i + 1) + " (" + op + "): " + e.getMessage();
                    } catch (RuntimeException e) { // a malformed step
                        return "step " + (i + 1) + " (" + op + "): bad step: " + e;
                    }
                }
                return null;
            } finally {
                cleanup();
            }
        }

        /** Ends whatever the scenario left open, so a failure does not hold locks. */
        void cleanup() {
            for (long txn : txns.values()) {
                EndTransactionRequest req = EndTransactionRequest.newBuilder().setTransactionId(txn).setCommit(false).build();
                conn.unary(stub -> stub.endTransaction(req));
            }
            watches.values().forEach(Watch::cancel);
            synchronized (streams) {
                streams.values().forEach(l -> l.forEach(StayOpen::cancel));
            }
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    private Runner() {
    }
}
