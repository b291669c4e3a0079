import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The topic-list limiter's AsyncSemaphore (PIP-442) at brokerspec's "semaphore" scope: a bounded
 * permit pool with a FIFO queue, timeouts and a deterministic virtual executor, driven one harness
 * action at a time. With {@code -Dbug=barging} a pass grants a later queued request that fits when
 * the head does not (breaks FIFO).
 */
final class AsyncSemaphore {
    private static final int PASS = 0;
    private static final int TIMEOUT = 1;
    private static final int DEFERRED = 2;

    private record Entry(long time, int kind, int request) {}

    private record Queued(int request, long permits, int previous) {}

    private static final class Request {
        String status;
        boolean cancelled;
        int permit = -1;

        Request(String status) {
            this.status = status;
        }

        boolean pending() {
            return status.equals("pending");
        }
    }

    private final long maxPermits;
    private final long maxQueueSize;
    private final long timeoutMs;
    private final boolean bounded;
    private final boolean barging;
    private long now;
    private long available;
    private boolean closed;
    private int grants;
    private int timeouts;
    private final List<Queued> queue = new ArrayList<>();
    private final List<Entry> executor = new ArrayList<>();
    private final List<Request> requests = new ArrayList<>();
    private final List<Long> permits = new ArrayList<>();
    private List<Object> completed = new ArrayList<>();

    AsyncSemaphore(Map<String, Object> config, boolean barging) {
        maxPermits = longOr(config, "max_permits", 4);
        maxQueueSize = longOr(config, "max_queue_size", 3);
        timeoutMs = longOr(config, "timeout_ms", 100);
        bounded = maxPermits > 0;
        available = Math.max(maxPermits, 0);
        this.barging = barging;
        if (bounded) {
            schedule(timeoutMs / 2, DEFERRED, 0);
        }
    }

    private static long longOr(Map<String, Object> config, String key, long fallback) {
        Object value = config.get(key);
        return value instanceof Long l ? l : fallback;
    }

    // -- actions ---------------------------------------------------------------------------------

    Map<String, Object> apply(String action, Map<String, Object> params) {
        completed = new ArrayList<>();
        switch (action) {
            case "acquire": return request(param(params, "permits"), -1);
            case "update": return request(param(params, "permits"), (int) param(params, "permit"));
            case "release": release((int) param(params, "permit")); break;
            case "cancel": {
                int rid = (int) param(params, "request");
                requests.get(rid).status = "caller_cancelled";
                completed.add(outcome(rid));
                break;
            }
            case "disconnect": requests.get((int) param(params, "request")).cancelled = true; break;
            case "close": close(); break;
            case "step": runEntry(); break;
            case "advance": advance(param(params, "dt")); break;
            default: throw new IllegalArgumentException("unknown action " + action);
        }
        Map<String, Object> observation = new LinkedHashMap<>();
        observation.put("completed", completed);
        return observation;
    }

    private static long param(Map<String, Object> params, String name) {
        if (!(params.get(name) instanceof Long value)) {
            throw new IllegalArgumentException("missing integer parameter " + name);
        }
        return value;
    }

    private Map<String, Object> request(long n, int previous) {
        if (n < 0 || (bounded && n > maxPermits)) {
            Map<String, Object> error = new LinkedHashMap<>();
            error.put("error", "ValueError");
            error.put("message", n < 0 ? "Invalid negative permits value: " + n
                    : "Requested permits=" + n + " is larger than maxPermits=" + maxPermits);
            return error;
        }
        int rid = requests.size();
        Request request = new Request("pending");
        requests.add(request);
        if (!bounded) {
            grant(rid, n);
        } else if (previous >= 0 && n <= permits.get(previous)) {
            long old = permits.get(previous);
            if (old != n && !closed) { // processQueue() returns at once on a closed semaphore
                schedule(0, PASS, 0);
            }
            available += old - n;
            permits.set(previous, 0L);
            grant(rid, n);
        } else if (closed) {
            request.status = "AlreadyClosed";
        } else if (maxQueueSize > 0 && queue.size() >= maxQueueSize) {
            request.status = "QueueFull";
        } else {
            queue.add(new Queued(rid, n, previous));
            schedule(timeoutMs, TIMEOUT, rid);
            schedule(0, PASS, 0);
            Map<String, Object> pending = new LinkedHashMap<>();
            pending.put("request", rid);
            pending.put("status", "pending");
            return pending;
        }
        return outcome(rid);
    }

    private void release(int pid) {
        long value = permits.get(pid);
        if (!bounded || value == 0) {
            return;
        }
        available += value;
        permits.set(pid, 0L);
        if (!closed) { // processQueue() returns at once on a closed semaphore: nothing is submitted
            schedule(0, PASS, 0);
        }
    }

    private void close() {
        closed = true;
        executor.stream().filter(e -> e.kind() == DEFERRED).findFirst().ifPresent(executor::remove);
        while (!queue.isEmpty()) {
            int rid = queue.remove(0).request();
            cancelTimeout(rid);
            if (requests.get(rid).pending()) {
                fail(rid, "AlreadyClosed");
            }
        }
    }

    // -- executor --------------------------------------------------------------------------------

    private void schedule(long delay, int kind, int rid) {
        long time = now + delay;
        int i = executor.size();
        while (i > 0 && executor.get(i - 1).time() > time) {
            i--;
        }
        executor.add(i, new Entry(time, kind, rid));
    }

    private void cancelTimeout(int rid) {
        for (int i = 0; i < executor.size(); i++) {
            Entry e = executor.get(i);
            if (e.kind() == TIMEOUT && e.request() == rid) {
                executor.remove(i);
                return;
            }
        }
    }

    private void runEntry() {
        Entry e = executor.remove(0);
        if (e.kind() == TIMEOUT) {
            runTimeout(e.request());
        } else {
            runPass();
        }
    }

    private void advance(long dt) {
        long target = now + dt;
        while (true) {
            while (!executor.isEmpty() && executor.get(0).time() <= now) {
                runEntry();
            }
            if (executor.isEmpty() || executor.get(0).time() > target) {
                now = target;
                return;
            }
            now = executor.get(0).time();
        }
    }

    private void runTimeout(int rid) {
        for (int i = 0; i < queue.size(); i++) {
            if (queue.get(i).request() == rid) {
                if (!requests.get(rid).pending()) {
                    return;
                }
                queue.remove(i);
                timeouts++;
                fail(rid, "Timeout");
                schedule(0, PASS, 0);
                return;
            }
        }
    }

    private void runPass() {
        if (closed) {
            return;
        }
        while (!queue.isEmpty() && available > 0) {
            Queued head = queue.get(0);
            Request request = requests.get(head.request());
            if (request.cancelled || !request.pending()) {
                cancelTimeout(head.request());
                queue.remove(0);
                if (request.pending()) {
                    fail(head.request(), "Cancelled");
                }
                continue;
            }
            int index = 0;
            if (need(head) > available) {
                index = barging ? firstFitting() : -1;
                if (index < 0) {
                    return;
                }
            }
            Queued chosen = queue.remove(index);
            available -= need(chosen);
            if (chosen.previous() >= 0) {
                permits.set(chosen.previous(), 0L);
            }
            cancelTimeout(chosen.request());
            grants++;
            grant(chosen.request(), chosen.permits());
        }
    }

    private long need(Queued q) {
        return q.permits() - (q.previous() >= 0 ? permits.get(q.previous()) : 0);
    }

    private int firstFitting() {
        for (int i = 1; i < queue.size(); i++) {
            Queued q = queue.get(i);
            Request r = requests.get(q.request());
            if (r.pending() && !r.cancelled && need(q) <= available) {
                return i;
            }
        }
        return -1;
    }

    private void grant(int rid, long n) {
        Request request = requests.get(rid);
        request.status = "granted";
        request.permit = permits.size();
        permits.add(n);
        completed.add(outcome(rid));
    }

    private void fail(int rid, String status) {
        requests.get(rid).status = status;
        completed.add(outcome(rid));
    }

    private Map<String, Object> outcome(int rid) {
        Request request = requests.get(rid);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("request", rid);
        out.put("status", request.status);
        if (request.permit >= 0) {
            out.put("permit", request.permit);
            out.put("permits", permits.get(request.permit));
        }
        return out;
    }

    // -- projection ------------------------------------------------------------------------------

    Map<String, Object> vars() {
        List<Object> reqs = new ArrayList<>();
        for (Request r : requests) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("status", r.status);
            d.put("cancelled", r.cancelled);
            if (r.permit >= 0) {
                d.put("permit", r.permit);
            }
            reqs.add(d);
        }
        Map<String, Object> vars = new LinkedHashMap<>();
        vars.put("now", now);
        vars.put("available_permits", bounded ? available : Long.MAX_VALUE);
        vars.put("acquired_permits", bounded ? maxPermits - available : 0L);
        vars.put("queue_size", queue.size());
        vars.put("closed", closed);
        vars.put("queue", queue.stream().map(q -> (Object) q.request()).toList());
        vars.put("requests", reqs);
        vars.put("permits", new ArrayList<Object>(permits));
        vars.put("executor", executor.stream().map(e -> (Object) e.time()).toList());
        vars.put("timeouts", timeouts);
        vars.put("waits", grants + timeouts);
        return vars;
    }
}
