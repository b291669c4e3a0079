package org.apache.pulsar.common.semaphore;

import brokerspec.jvm.ManagedExecutor;
import brokerspec.jvm.Scenario;
import brokerspec.jvm.Scheduler;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.common.semaphore.AsyncSemaphore.AsyncSemaphorePermit;

/**
 * The semaphore's lock scope (brokerspec's {@code topiclist --config semaphore-locks*}) on a user's
 * {@code AsyncSemaphoreImpl}: the {@code caller} and {@code other} threads run the configuration's scripts through
 * upstream's public API ({@code acquire}, {@code update}, {@code release}, and {@code cancel} of the future the
 * previous operation returned), and the semaphore's executor is a {@link ManagedExecutor} handed to upstream's
 * public constructor, so its passes are a third managed thread, {@code executor}. Permits {@code P0, P1, ...}
 * ({@code held}) are acquired before the threads start.
 *
 * <p>Its ledger judges, from what the callers were given: a permit is held from its grant until its release
 * returns; an update that completed replaces its old permit, one that failed leaves it held. SL-1 after every step:
 * {@code 0 <= getAvailablePermits() <= max_permits}. SL-2 after every step: available plus what each held permit is
 * worth to its holder never exceeds {@code max_permits}, where a permit is worth what its grant gave (a caller whose
 * update failed still holds its old permit at the old value, whatever the grant did to the field) until its release
 * begins, then its field's value. This is stricter than the lock model's SL-2, which reads the fields only, and it
 * is what shows that the finding's first fix, giving the swapped value to the pool, hands that value out twice.
 * SL-3 once every thread is done: available plus the fields' values of the held permits equals
 * {@code max_permits} (as the model's SL-3).
 */
public class BrokerspecSemaphoreLocks implements Scenario {
    private AsyncSemaphoreImpl semaphore;
    private long maxPermits;
    private final Map<String, AsyncSemaphorePermit> held = new LinkedHashMap<>();
    private final Map<String, Long> granted = new LinkedHashMap<>(); // what each permit's grant gave
    private final TreeSet<String> releasing = new TreeSet<>();
    private final List<Object[]> grants = new ArrayList<>(); // {the permit it replaces or null, its name, future}
    private final TreeSet<String> broken = new TreeSet<>();
    private int running;
    private ManagedExecutor executor;

    @Override
    public void start(Map<String, Object> config) {
        if (Boolean.TRUE.equals(config.get("clock"))) {
            throw new IllegalArgumentException("the JVM adapter runs without a clock: clock must be false");
        }
        maxPermits = (Long) config.get("max_permits");
        executor = new ManagedExecutor("executor");
        semaphore = new AsyncSemaphoreImpl(maxPermits, ((Long) config.get("max_queue")).intValue(), 10_000, executor,
                null);
        Scheduler.name(semaphore, "semaphore");
        int index = 0;
        for (Object value : (List<?>) config.get("held")) {
            AsyncSemaphorePermit permit = semaphore.acquire((Long) value, () -> false).join();
            Scheduler.name(permit, "P" + index);
            granted.put("P" + index, (Long) value);
            held.put("P" + index++, permit);
        }
        List<String> callers = List.of("caller", "other");
        running = callers.size();
        for (String name : callers) {
            List<String> script = new ArrayList<>();
            for (Object op : (List<?>) config.get(name)) {
                script.add((String) op);
            }
            Scheduler.spawn(name, () -> {
                try {
                    run(name, script);
                } finally {
                    if (--running == 0) {
                        executor.finishWhenIdle();
                    }
                }
            });
        }
        executor.spawn();
    }

    private void run(String thread, List<String> script) {
        CompletableFuture<AsyncSemaphorePermit> last = null;
        for (int index = 0; index < script.size(); index++) {
            String op = script.get(index);
            String[] words = op.split(" ");
            switch (words[0]) {
                case "acquire" -> {
                    granted.put(thread + "." + index, Long.parseLong(words[1]));
                    last = semaphore.acquire(Long.parseLong(words[1]), () -> false);
                    grants.add(new Object[] {null, thread + "." + index, last});
                }
                case "update" -> {
                    granted.put(thread + "." + index, Long.parseLong(words[2]));
                    last = semaphore.update(permit(op, words[1]), Long.parseLong(words[2]), () -> false);
                    grants.add(new Object[] {words[1], thread + "." + index, last});
                }
                case "release" -> {
                    AsyncSemaphorePermit permit = permit(op, words[1]);
                    releasing.add(words[1]);
                    semaphore.release(permit);
                    held.remove(words[1]);
                }
                case "cancel" -> {
                    if (last == null) {
                        throw new IllegalArgumentException(thread + ": cancel needs a future before it");
                    }
                    last.cancel(false);
                }
                default -> throw new IllegalArgumentException("unknown semaphore operation " + op);
            }
        }
    }

    private AsyncSemaphorePermit permit(String op, String name) {
        AsyncSemaphorePermit permit = held.get(name);
        if (permit == null) {
            throw new IllegalArgumentException(op + ": no held permit " + name);
        }
        return permit;
    }

    @Override
    public Map<String, Object> vars() {
        long available = semaphore.getAvailablePermits();
        if (available < 0 || available > maxPermits) {
            broken.add("SL-1");
        }
        Map<String, AsyncSemaphorePermit> holding = new LinkedHashMap<>(held);
        for (Object[] grant : grants) {
            CompletableFuture<?> future = (CompletableFuture<?>) grant[2];
            if (future.isDone() && !future.isCompletedExceptionally()) {
                if (grant[0] != null) {
                    holding.remove((String) grant[0]);
                }
                holding.put((String) grant[1], (AsyncSemaphorePermit) future.join());
            }
        }
        long total = available;
        long worth = available;
        Map<String, Object> values = new LinkedHashMap<>();
        for (Map.Entry<String, AsyncSemaphorePermit> permit : holding.entrySet()) {
            long value = permit.getValue().getPermits();
            values.put(permit.getKey(), value);
            total += value;
            worth += releasing.contains(permit.getKey()) ? value : granted.get(permit.getKey());
        }
        if (worth > maxPermits) {
            broken.add("SL-2");
        }
        if (Scheduler.allDone() && total != maxPermits) {
            broken.add("SL-3");
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("available_permits", available);
        out.put("queue_size", (long) semaphore.getQueueSize());
        out.put("held", values);
        out.put("failed_tasks", (long) executor.failed());
        out.put("broken", new ArrayList<>(broken));
        return out;
    }
}
