package brokerspec.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A lock-level port: speaks the {@code threads} protocol (docs/ports.md, "Lock-level ports") on stdin/stdout for
 * the {@link Scenario} class named by its one argument.
 *
 * <pre>
 * &gt; {"type": "hello", "threads": 1, "config": {...}}      &lt; {"type": "ready", "threads": [...], "vars": {...}}
 * &gt; {"type": "run", "seq": n, "thread": "T"}             &lt; {"type": "ran", "seq": n, "threads": [...], "vars": {...}}
 * &gt; {"type": "reset"}                                    &lt; {"type": "ready", "threads": [...], "vars": {...}}
 * </pre>
 * Every other answer is {@code {"type": "error", "message"}} (with the step's {@code seq}).
 */
public final class Driver {
    /** The lock-level protocol version this driver speaks. */
    public static final long VERSION = 1;

    private final Class<?> scenarioClass;
    private Map<String, Object> config;
    private Scenario scenario;

    private Driver(Class<?> scenarioClass) {
        this.scenarioClass = scenarioClass;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java -javaagent:controller.jar=PACKAGES -cp ... brokerspec.jvm.Driver SCENARIO_CLASS");
            System.exit(64);
        }
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err); // the scenario's and the classes' prints must not reach the protocol
        Driver driver = new Driver(Class.forName(args[0]));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            out.println(Json.write(driver.answer(line)));
        }
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> answer(String line) {
        Object seq = null;
        try {
            Map<String, Object> message = (Map<String, Object>) Json.parse(line);
            seq = message.get("seq");
            String type = String.valueOf(message.get("type"));
            switch (type) {
                case "hello": {
                    Object version = message.get("threads");
                    if (!(version instanceof Long v) || v != VERSION) {
                        return error(null, "lock-level protocol version " + version + " is not " + VERSION);
                    }
                    config = message.get("config") instanceof Map<?, ?> c ? (Map<String, Object>) c : Map.of();
                    return begin();
                }
                case "reset":
                    Scheduler.abandonAll();
                    return begin();
                case "run": {
                    if (scenario == null) {
                        return error(seq, "run before hello");
                    }
                    Scheduler.run(String.valueOf(message.get("thread")));
                    Map<String, Object> vars = scenario.vars(); // first: a scenario may name objects there
                    Map<String, Object> reply = new LinkedHashMap<>();
                    reply.put("type", "ran");
                    reply.put("seq", seq);
                    reply.put("threads", threads());
                    reply.put("vars", vars);
                    return reply;
                }
                default:
                    return error(seq, "unknown message type " + type);
            }
        } catch (Scheduler.ControlError e) {
            return error(seq, e.getMessage());
        } catch (Exception e) {
            return error(seq, e.getClass().getName() + ": " + e.getMessage());
        }
    }

    private Map<String, Object> begin() throws Exception {
        scenario = (Scenario) scenarioClass.getDeclaredConstructor().newInstance();
        scenario.start(config);
        Scheduler.prime();
        Map<String, Object> vars = scenario.vars();
        Map<String, Object> ready = new LinkedHashMap<>();
        ready.put("type", "ready");
        ready.put("threads", threads());
        ready.put("vars", vars);
        return ready;
    }

    private static List<Object> threads() throws Scheduler.ControlError {
        List<Object> out = new ArrayList<>();
        for (Scheduler.Managed m : Scheduler.threads()) {
            out.add(Scheduler.report(m));
        }
        return out;
    }

    private static Map<String, Object> error(Object seq, String message) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("type", "error");
        if (seq != null) {
            out.put("seq", seq);
        }
        out.put("message", message);
        return out;
    }
}
