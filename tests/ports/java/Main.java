import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A brokerspec port: reads one JSON message per line on stdin, answers one per line on stdout.
 * Implements topiclist at the "semaphore" scope; {@code -Dbug=barging} switches on a FIFO bug.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        boolean barging = "barging".equals(System.getProperty("bug"));
        AsyncSemaphore semaphore = null;
        String line;
        while ((line = in.readLine()) != null) {
            @SuppressWarnings("unchecked")
            Map<String, Object> message = (Map<String, Object>) Json.parse(line);
            Map<String, Object> reply = new LinkedHashMap<>();
            Object seq = message.get("seq");
            try {
                if ("hello".equals(message.get("type"))) {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> config = (Map<String, Object>) message.get("config");
                    if (!"topiclist".equals(message.get("mechanism")) || !"semaphore".equals(config.get("scope"))) {
                        throw new IllegalArgumentException("this port implements topiclist, scope semaphore only");
                    }
                    semaphore = new AsyncSemaphore(config, barging);
                    reply.put("type", "ready");
                    reply.put("vars", semaphore.vars());
                } else {
                    if (semaphore == null) {
                        throw new IllegalStateException("step before hello");
                    }
                    @SuppressWarnings("unchecked")
                    Map<String, Object> params = (Map<String, Object>) message.get("params");
                    Map<String, Object> observation = semaphore.apply((String) message.get("action"), params);
                    reply.put("type", "reply");
                    reply.put("seq", seq);
                    reply.put("observation", observation);
                    reply.put("vars", semaphore.vars());
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
