import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A brokerspec port: reads one JSON message per line on stdin, answers one per line on stdout.
 * Implements topiclist at the "semaphore" scope ({@code -Dbug=barging} switches on a FIFO bug) and
 * keyshared at the "tracker" scope ({@code -Dbug=post-decrement} switches on a ref-count bug). It announces
 * {@code reset} (one process serves every walk of a verify) and {@code pipeline} (it reads and answers steps in
 * order, however many are sent ahead).
 */
public final class Main {
    /** The brokerspec protocol version this port implements (docs/ports.md, "Protocol versions"). */
    private static final long PROTOCOL = 2;

    private Main() {}

    /** One mechanism scope: performs a step and projects its state onto the model's variables. */
    private interface Scope {
        Map<String, Object> apply(String action, Map<String, Object> params);

        Map<String, Object> vars();
    }

    private static Scope start(Object mechanism, Map<String, Object> config, String bug) {
        Object scope = config.get("scope");
        if ("topiclist".equals(mechanism) && "semaphore".equals(scope)) {
            AsyncSemaphore semaphore = new AsyncSemaphore(config, "barging".equals(bug));
            return new Scope() {
                @Override
                public Map<String, Object> apply(String action, Map<String, Object> params) {
                    return semaphore.apply(action, params);
                }

                @Override
                public Map<String, Object> vars() {
                    return semaphore.vars();
                }
            };
        }
        if ("keyshared".equals(mechanism) && "tracker".equals(scope)) {
            TrackerScope tracker = new TrackerScope(config, "post-decrement".equals(bug));
            return new Scope() {
                @Override
                public Map<String, Object> apply(String action, Map<String, Object> params) {
                    return tracker.apply(action, params);
                }

                @Override
                public Map<String, Object> vars() {
                    return tracker.vars();
                }
            };
        }
        throw new IllegalArgumentException("this port implements topiclist scope semaphore and keyshared scope "
                + "tracker only");
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String bug = System.getProperty("bug");
        Scope scope = null;
        Object mechanism = null;
        Map<String, Object> hello = null;
        String line;
        while ((line = in.readLine()) != null) {
            @SuppressWarnings("unchecked")
            Map<String, Object> message = (Map<String, Object>) Json.parse(line);
            Map<String, Object> reply = new LinkedHashMap<>();
            Object seq = message.get("seq");
            try {
                if ("hello".equals(message.get("type"))) {
                    if (!Long.valueOf(PROTOCOL).equals(message.get("protocol"))) { // never guess at another version
                        throw new IllegalArgumentException("this port speaks protocol " + PROTOCOL + " only, not "
                                + message.get("protocol"));
                    }
                    @SuppressWarnings("unchecked")
                    Map<String, Object> config = (Map<String, Object>) message.get("config");
                    mechanism = message.get("mechanism");
                    hello = config;
                    scope = start(mechanism, config, bug);
                    reply.put("type", "ready");
                    reply.put("vars", scope.vars());
                    reply.put("capabilities", List.of("reset", "pipeline"));
                } else if ("reset".equals(message.get("type"))) { // the configuration's initial state, anew
                    scope = start(mechanism, hello, bug);
                    reply.put("type", "ready");
                    reply.put("vars", scope.vars());
                } else {
                    if (scope == null) {
                        throw new IllegalStateException("step before hello");
                    }
                    @SuppressWarnings("unchecked")
                    Map<String, Object> params = (Map<String, Object>) message.get("params");
                    Map<String, Object> observation = scope.apply((String) message.get("action"), params);
                    reply.put("type", "reply");
                    reply.put("seq", seq);
                    reply.put("observation", observation);
                    reply.put("vars", scope.vars());
                }
            } catch (RuntimeException e) {
                reply.clear();
                reply.put("type", "error");
                reply.put("seq", seq);
                reply.put("message", e.toString());
            }
            out.println(Json.write(reply));
            out.flush();
        }
    }
}
