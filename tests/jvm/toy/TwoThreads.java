package toy;

import brokerspec.jvm.Scenario;
import brokerspec.jvm.Scheduler;
import java.util.LinkedHashMap;
import java.util.Map;

/** Two threads on one Counter; config "mode" ("racy", "locked", "monitor" or "throwing") picks what they run. */
public class TwoThreads implements Scenario {
    private Counter counter;

    @Override
    public void start(Map<String, Object> config) {
        counter = new Counter();
        Scheduler.name(counter, "counter");
        String mode = String.valueOf(config.getOrDefault("mode", "racy"));
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
