package brokerspec.jvm;

import java.util.Map;

/**
 * What a lock-level port runs: it builds the objects under test for a configuration and spawns the threads
 * ({@link Scheduler#spawn}) that call them; the controller then runs those threads one point at a time. A
 * scenario is made afresh (its no-argument constructor) for the hello and for every reset.
 */
public interface Scenario {
    /** Builds the objects for {@code config} and spawns the threads that will use them (they start parked). */
    void start(Map<String, Object> config) throws Exception;

    /** The state the port reports beside its threads, read between steps (nothing runs meanwhile). */
    default Map<String, Object> vars() {
        return Map.of();
    }
}
