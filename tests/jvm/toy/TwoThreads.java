package toy;

import brokerspec.jvm.Scenario;
import brokerspec.jvm.Scheduler;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Two threads on one Counter, or three ("readers": a, b read, c writes); config "mode" ("racy", "locked", "monitor",
 * "throwing", "readers" or "hang") picks what they run.
 */
public class TwoThreads implements Scenario {
    private Counter counter;

    @Override
    public void start(Map<String, Object> config) {
        counter = new Counter();
        Scheduler.name(counter, "counter");
        String mode = String.valueOf(config.getOrDefault("mode", "racy"));
        if (mode.equals("readers")) {
            Scheduler.spawn("a", counter::read);
            Scheduler.spawn("b", counter::read);
            Scheduler.spawn("c", counter::write);
            return;
        }
        if (mode.equals("hang")) {
            Scheduler.timeoutMillis = 1_000;
            Scheduler.spawn("a", () -> {
                try {
                    counter.hang();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            return;
        }
        for (String name : new String[] {"a", "b"}) {
            Scheduler.spawn(name, () -> {
                switch (mode) {
                    case "locked" -> counter.lockedIncrement();
                    case "monitor" -> {
                        counter.bump();
                        counter.publish();
                    }
                    case "throwing" -> {
                        if (name.equals("a")) {
                            counter.fail();
                        } else {
                            counter.bump();
                        }
                    }
                    default -> counter.racyIncrement();
                }
            });
        }
    }

    @Override
    public Map<String, Object> vars() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("value", (long) counter.value());
        out.put("seen", (long) counter.seen());
        return out;
    }
}
