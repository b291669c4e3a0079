package org.apache.pulsar.broker.service;

import brokerspec.jvm.Scenario;
import brokerspec.jvm.Scheduler;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The lock scope of Key_Shared (brokerspec's {@code keyshared --config locks}) on a user's
 * {@code DrainingHashesTracker} and {@code PendingAcksMap}: the dispatcher thread and consumer 1's connection
 * thread run the configuration's scripts through upstream's public API, in the order upstream's callers use it
 * ({@code PersistentStickyKeyDispatcherMultipleConsumers} 0063cdd8: the REMOVE and ADD parts of
 * {@code registerDrainingHashes}, lines 169-188, {@code removeConsumer} 197-206, the dispatch's
 * {@code shouldBlockStickyKeyHash} 532; an ack is {@code PendingAcksMap.remove}), as
 * {@code reference_impl/keyshared/lock_level.py}'s {@code StickyKeyDispatcher} does on the Python scheduler.
 *
 * <p>Its {@code threads} variable is each thread's point as the lock model labels it ({@link #label}), which
 * {@code verify --jvm} compares with the model's at every step (a granularity divergence when they differ).
 *
 * <p>Its ledger judges, from what it observes: LK-1 (a mapped entry's ref count below 0), LK-4 (a thread about to
 * update stats or call the unblocking handler holds the tracker's monitor or write lock), LK-5 (a
 * {@code NullPointerException} escaped a thread) and LK-6 (a lost wake-up: once every thread is done, a dispatch
 * that was blocked and was followed by no unblocking call, neither its hash nor -1, while no consumer left after it
 * and the tracker no longer drains the hash: nothing will ever dispatch the blocked message again).
 *
 * <p>The consumers are made in {@link #newConsumer} without running a constructor, as the mocks of upstream's unit
 * tests are (Objenesis, under Mockito, allocates the same way): upstream's {@code Consumer} is built from a
 * connection and a subscription, and the tracker and the map use a consumer only by identity (and its id and name
 * in log lines). The adapter knows each consumer's id from its own table, so nothing here calls an API only the
 * stand-in has.
 */
public class BrokerspecKeySharedLocks implements Scenario {
    private static final long LEDGER = 1;

    private final Map<Integer, List<Integer>> prefer = new TreeMap<>();
    private final Map<Integer, Integer> owners = new TreeMap<>();
    private final TreeSet<Integer> connected = new TreeSet<>();
    private final Map<Integer, Consumer> consumers = new TreeMap<>();
    private final Map<Integer, PendingAcksMap> maps = new TreeMap<>();
    private final List<Object> unblocked = new ArrayList<>();
    private final List<Object> blocks = new ArrayList<>();
    private final List<Object> replay = new ArrayList<>();
    private final List<int[]> dispatches = new ArrayList<>(); // {hash, blocked, calls before, leaves before}
    private final TreeSet<String> broken = new TreeSet<>();
    private int leaves;
    private DrainingHashesTracker tracker;

    private final Map<Consumer, Integer> ids = new java.util.IdentityHashMap<>();

    private Consumer newConsumer(int id) {
        try {
            Field field = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
            field.setAccessible(true);
            Object unsafe = field.get(null);
            Consumer consumer = (Consumer) unsafe.getClass().getMethod("allocateInstance", Class.class)
                    .invoke(unsafe, Consumer.class);
            ids.put(consumer, id);
            return consumer;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot allocate a Consumer without its constructor", e);
        }
    }

    @Override
    @SuppressWarnings("unchecked")
    public void start(Map<String, Object> config) {
        for (String unsupported : new String[] {"membership", "acker2", "pending2"}) {
            Object value = config.get(unsupported);
            if (value instanceof List<?> list && !list.isEmpty()) {
                throw new IllegalArgumentException("the JVM adapter runs the dispatcher and acker threads only: "
                        + unsupported + " must be empty");
            }
        }
        List<Object> hashes = (List<Object>) config.get("hashes");
        for (int h = 1; h <= hashes.size(); h++) {
            List<Integer> order = new ArrayList<>();
            for (Object c : (List<Object>) hashes.get(h - 1)) {
                order.add(((Long) c).intValue());
            }
            prefer.put(h, order);
        }
        tracker = new DrainingHashesTracker("brokerspec", hash -> {
            Scheduler.mark("dispatcher", "stickyKeyHashUnblocked"); // upstream reschedules a read: a submission
            unblocked.add(hash);
        });
        Object refCount = field(DrainingHashesTracker.DrainingHashEntry.class, "REF_COUNT_UPDATER");
        Object blockedCount = field(DrainingHashesTracker.DrainingHashEntry.class, "BLOCKED_COUNT_UPDATER");
        if (refCount != null && blockedCount != null) {
            Scheduler.name(refCount, "entry.refCount");
            Scheduler.name(blockedCount, "entry.blockedCount");
        }
        Scheduler.name(tracker, "tracker");
        PendingAcksMap.PendingAcksRemoveHandler handler = new PendingAcksMap.PendingAcksRemoveHandler() {
            @Override
            public void handleRemoving(Consumer consumer, long ledgerId, long entryId, int hash, boolean closing) {
                tracker.reduceRefCount(consumer, hash, closing);
            }

            @Override
            public void startBatch() {
                tracker.startBatch();
            }

            @Override
            public void endBatch() {
                tracker.endBatch();
            }
        };
        Object lock = field(tracker, "lock");
        if (lock instanceof java.util.concurrent.locks.ReentrantReadWriteLock rw) {
            Scheduler.name(rw.readLock(), "tracker.readLock");
            Scheduler.name(rw.writeLock(), "tracker.writeLock");
        }
        for (List<Integer> order : prefer.values()) {
            for (int c : order) {
                if (!consumers.containsKey(c)) {
                    join(c, handler, false);
                }
            }
        }
        for (Object c : (List<Object>) config.get("present")) {
            connected.add(((Long) c).intValue());
        }
        for (int h : prefer.keySet()) {
            owners.put(h, choice(h));
        }
        Object pending = config.get("pending");
        List<Integer> held = new ArrayList<>();
        if (pending instanceof Long count) {
            for (int i = 0; i < count; i++) {
                held.add(1);
            }
        } else {
            for (Object h : (List<Object>) pending) {
                held.add(((Long) h).intValue());
            }
        }
        for (int e = 0; e < held.size(); e++) {
            maps.get(1).addPendingAckIfAllowed(LEDGER, e, 1, held.get(e));
        }
        List<String> dispatcher = strings(config.get("dispatcher"));
        List<String> acker = strings(config.get("acker"));
        Scheduler.spawn("dispatcher", () -> guarded(() -> {
            for (String op : dispatcher) {
                dispatcherOp(op, handler);
            }
        }));
        Scheduler.spawn("acker", () -> guarded(() -> {
            for (String op : acker) {
                String[] words = op.split(" ");
                if (!words[0].equals("ack")) {
                    throw new IllegalArgumentException("the JVM adapter's acker runs 'ack N' only, not " + op);
                }
                maps.get(1).remove(LEDGER, Long.parseLong(words[1]));
            }
        }));
    }

    private static List<String> strings(Object list) {
        List<String> out = new ArrayList<>();
        for (Object op : (List<?>) list) {
            out.add((String) op);
        }
        return out;
    }

    private void guarded(Runnable body) {
        try {
            body.run();
        } catch (NullPointerException e) {
            broken.add("LK-5");
            throw e;
        }
    }

    private int choice(int hash) {
        for (int c : prefer.get(hash)) {
            if (connected.contains(c)) {
                return c;
            }
        }
        throw new IllegalStateException("no connected consumer for hash " + hash);
    }

    private void join(int id, PendingAcksMap.PendingAcksRemoveHandler handler, boolean connect) {
        Consumer consumer = newConsumer(id);
        PendingAcksMap map = new PendingAcksMap(consumer, () -> null, () -> handler);
        consumers.put(id, consumer);
        maps.put(id, map);
        Scheduler.name(consumer, "consumer" + id);
        for (String name : new String[] {"readLock", "writeLock"}) {
            Object lock = field(map, name);
            if (lock != null) {
                Scheduler.name(lock, "map[" + id + "]." + name);
            }
        }
        if (!connect) {
            return;
        }
        connected.add(id);
        Map<Integer, TreeSet<Integer>> lost = new TreeMap<>();
        for (Map.Entry<Integer, Integer> owner : owners.entrySet()) {
            int h = owner.getKey();
            if (choice(h) != owner.getValue()) {
                lost.computeIfAbsent(owner.getValue(), k -> new TreeSet<>()).add(h);
                owner.setValue(id);
            }
        }
        for (Map.Entry<Integer, TreeSet<Integer>> loser : lost.entrySet()) {
            registerDrainingHashes(loser.getKey(), loser.getValue(), false);
        }
    }

    private void registerDrainingHashes(int impacted, TreeSet<Integer> hashes, boolean adding) {
        Consumer consumer = consumers.get(impacted);
        maps.get(impacted).forEach((ledgerId, entryId, batchSize, hash) -> {
            if (!hashes.contains(hash)) {
                return;
            }
            if (adding) {
                DrainingHashesTracker.DrainingHashEntry entry = tracker.getEntry(hash);
                if (entry != null && entry.getConsumer() == consumer) {
                    tracker.reduceRefCount(consumer, hash, false);
                }
            } else {
                tracker.addEntry(consumer, hash);
            }
        });
    }

    private void dispatcherOp(String op, PendingAcksMap.PendingAcksRemoveHandler handler) {
        String[] words = op.split(" ");
        switch (words[0]) {
            case "join" -> join(Integer.parseInt(words[1]), handler, true);
            case "leave" -> leave(Integer.parseInt(words[1]));
            case "block" -> {
                int h = words.length > 1 ? Integer.parseInt(words[1]) : 1;
                int[] dispatch = {h, 0, unblocked.size(), leaves};
                boolean blocked = tracker.shouldBlockStickyKeyHash(consumers.get(owners.get(h)), h);
                dispatch[1] = blocked ? 1 : 0;
                dispatches.add(dispatch);
                blocks.add(blocked);
            }
            default -> throw new IllegalArgumentException("unknown dispatcher operation " + op);
        }
    }

    private void leave(int id) {
        leaves++;
        connected.remove(id);
        Map<Integer, TreeSet<Integer>> gained = new TreeMap<>();
        for (Map.Entry<Integer, Integer> owner : owners.entrySet()) {
            if (owner.getValue() == id) {
                owner.setValue(choice(owner.getKey()));
                gained.computeIfAbsent(owner.getValue(), k -> new TreeSet<>()).add(owner.getKey());
            }
        }
        maps.get(id).forEachAndClose((ledgerId, entryId, batchSize, hash) -> replay.add(entryId));
        for (Map.Entry<Integer, TreeSet<Integer>> heir : gained.entrySet()) {
            registerDrainingHashes(heir.getKey(), heir.getValue(), true);
        }
        tracker.consumerRemoved(consumers.get(id));
    }

    /** A field's value by reflection (a static one when {@code owner} is a Class), or null when there is none. */
    private static Object field(Object owner, String name) {
        Class<?> start = owner instanceof Class<?> type ? type : owner.getClass();
        for (Class<?> c = start; c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(owner instanceof Class<?> ? null : owner);
            } catch (NoSuchFieldException e) {
                // a superclass may declare it
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null;
            }
        }
        return null;
    }

    /** The tracker's map, read between steps (nothing runs): hash to entry. */
    private Map<Integer, DrainingHashesTracker.DrainingHashEntry> draining() {
        Map<Integer, DrainingHashesTracker.DrainingHashEntry> out = new TreeMap<>();
        if (field(tracker, "drainingHashes") instanceof Map<?, ?> map) {
            for (Map.Entry<?, ?> e : map.entrySet()) {
                out.put(((Number) e.getKey()).intValue(), (DrainingHashesTracker.DrainingHashEntry) e.getValue());
            }
        }
        return out;
    }

    /** Names each consumer's stats locks ({@code stats[c].writeLock}) once the tracker has made them. */
    private void nameStats() {
        if (!(field(tracker, "consumerDrainingHashesStatsMap") instanceof Map<?, ?> stats)) {
            return;
        }
        for (Map.Entry<?, ?> e : stats.entrySet()) {
            Object key = e.getKey() instanceof Consumer ? e.getKey() : field(e.getKey(), "consumer");
            Integer id = key instanceof Consumer consumer ? ids.get(consumer) : null;
            if (id == null) {
                continue;
            }
            if (field(e.getValue(), "statsLock") instanceof java.util.concurrent.locks.ReentrantReadWriteLock lock) {
                Scheduler.name(lock.writeLock(), "stats[" + id + "].writeLock");
                Scheduler.name(lock.readLock(), "stats[" + id + "].readLock");
            } else { // before #23854 the stats were synchronized on themselves: the model labels it the write lock
                Scheduler.name(e.getValue(), "stats[" + id + "].writeLock");
            }
        }
    }

    /** The consumer id of a map the adapter made (identity), or 0 for one it did not. */
    private int mapId(PendingAcksMap map) {
        for (Map.Entry<Integer, PendingAcksMap> e : maps.entrySet()) {
            if (e.getValue() == map) {
                return e.getKey();
            }
        }
        return 0;
    }

    private static String component(String frame) {
        String type = frame.substring(0, frame.lastIndexOf('.'));
        String simple = type.substring(type.lastIndexOf('.') + 1);
        int nested = simple.indexOf('$');
        return nested < 0 ? simple : simple.substring(0, nested);
    }

    private static String method(String frame) {
        return frame.substring(frame.lastIndexOf('.') + 1);
    }

    /**
     * A thread's point as the lock model labels it ({@code models/keyshared/lock_program.py}): the outermost method
     * of the innermost upstream class on its stack (the tracker with its entry and stats, or the map: so a
     * {@code getEntry} inside {@code reduceRefCount} is {@code reduceRefCount}'s), then what the point does to what
     * ({@code tracker.writeLock.lock}, {@code entry.refCount.decrementAndGet}, {@code entry.blockedCount.get}).
     */
    private String label(Scheduler.Managed m) {
        if (m.done()) {
            return "done";
        }
        brokerspec.jvm.Site site = m.site();
        if (site == null) {
            return "not started";
        }
        List<String> frames = m.frames();
        int i = 0;
        while (i < frames.size() && component(frames.get(i)).equals("BrokerspecKeySharedLocks")) {
            i++;
        }
        if (i == frames.size()) {
            return site.op;
        }
        String owner = component(frames.get(i));
        String outer = method(frames.get(i));
        for (int j = i; j < frames.size() && component(frames.get(j)).equals(owner); j++) {
            if (!method(frames.get(j)).startsWith("lambda$")) {
                outer = method(frames.get(j));
            }
        }
        String verb = site.kind == brokerspec.jvm.Site.Kind.MONITOR ? "lock"
                : site.op.substring(site.op.lastIndexOf('.') + 1);
        String what;
        if (m.via() != null) {
            what = Scheduler.nameOf(m.via()) + "." + verb;
        } else if (site.op.startsWith("volatile ")) {
            // a volatile field of a consumer's map (its size, #26019) or of a tracker entry
            String holder = m.object() instanceof PendingAcksMap map ? "map[" + mapId(map) + "]" : "entry";
            what = holder + "." + verb + (site.op.startsWith("volatile read ") ? ".get" : ".set");
        } else if (m.object() == null) {
            what = site.op;
        } else {
            what = Scheduler.nameOf(m.object()) + "." + verb;
        }
        return outer + ": " + what;
    }

    /** LK-4 (the #23854 rule): a thread about to update stats or call the unblocking handler holds the tracker's
     * monitor (before #23854) or its write lock. */
    private void judgeHolds() {
        Object writeLock = field(tracker, "lock") instanceof java.util.concurrent.locks.ReentrantReadWriteLock rw
                ? rw.writeLock() : null;
        for (Scheduler.Managed m : Scheduler.threads()) {
            String label = label(m);
            boolean sideEffect = label.endsWith(": stickyKeyHashUnblocked") || label.contains(": stats[");
            if (sideEffect && (Scheduler.holds(m, tracker) || (writeLock != null && Scheduler.holds(m, writeLock)))) {
                broken.add("LK-4");
            }
        }
    }

    @Override
    public Map<String, Object> vars() {
        nameStats();
        judgeHolds();
        Map<Integer, DrainingHashesTracker.DrainingHashEntry> draining = draining();
        List<Object> entries = new ArrayList<>();
        for (Map.Entry<Integer, DrainingHashesTracker.DrainingHashEntry> e : draining.entrySet()) {
            DrainingHashesTracker.DrainingHashEntry entry = e.getValue();
            entries.add(List.of((long) e.getKey(), (long) ids.getOrDefault(entry.getConsumer(), 0),
                    (long) entry.getRefCount(), (long) entry.getBlockedCount()));
            if (entry.getRefCount() < 0) {
                broken.add("LK-1");
            }
        }
        if (Scheduler.allDone()) {
            for (int[] d : dispatches) {
                boolean called = unblocked.subList(d[2], unblocked.size()).stream()
                        .anyMatch(h -> (Integer) h == d[0] || (Integer) h == -1);
                if (d[1] == 1 && !called && leaves == d[3] && !draining.containsKey(d[0])) {
                    broken.add("LK-6");
                }
            }
        }
        List<Object> ownerList = new ArrayList<>();
        owners.forEach((h, c) -> ownerList.add(List.of((long) h, (long) c)));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("owners", ownerList);
        out.put("draining", entries);
        out.put("unblocked", longs(unblocked));
        out.put("blocks", new ArrayList<>(blocks));
        out.put("replay", longs(replay));
        out.put("broken", new ArrayList<>(broken));
        List<Object> threads = new ArrayList<>();
        for (Scheduler.Managed m : Scheduler.threads()) {
            threads.add(List.of(m.name, label(m)));
        }
        out.put("threads", threads);
        return out;
    }

    private static List<Object> longs(List<Object> values) {
        List<Object> out = new ArrayList<>();
        for (Object v : values) {
            out.add(((Number) v).longValue());
        }
        return out;
    }
}
