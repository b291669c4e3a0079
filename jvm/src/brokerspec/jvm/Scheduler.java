package brokerspec.jvm;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Lock;

/**
 * Lets exactly one managed Java thread run at a time and switches only when the controller says so.
 *
 * <p>The agent rewrites every scheduling point of the named classes into a call here <em>before</em> the
 * operation (as {@code reference_impl/concurrent/executors.py} suspends a thread before a lock acquisition or an
 * atomic access; a release is no point). A managed thread (one made by {@link #spawn}) that reaches a point
 * records it and parks; {@link #run} lets it perform that operation and go on to its next point, or to its end,
 * and returns once it got there. Any other thread (the driver's, while a scenario builds its objects) passes
 * every point at once. A monitor the controller gives only to a thread that can take it at once (this class
 * keeps the owner of every monitor taken at a point); a {@link Lock} it gives only when the parked thread's own
 * {@code tryLock} would succeed (the thread probes and releases at once: with no thread ever really waiting, a
 * non-fair lock is left as it was); a future's join only once it is done. So no managed thread ever blocks inside
 * the JVM, and a thread that does (code outside the rewritten classes waiting on something) is reported as a hang
 * after {@link #timeoutMillis}.
 */
public final class Scheduler {
    private Scheduler() {
    }

    private static final Object MON = new Object();
    private static final Map<String, Managed> THREADS = new LinkedHashMap<>();
    private static final ThreadLocal<Managed> CURRENT = new ThreadLocal<>();
    private static final Map<Object, String> NAMES = new IdentityHashMap<>();
    private static final Map<String, Integer> SEEN = new LinkedHashMap<>();
    private static final Map<Object, Managed> MONITOR_OWNER = new IdentityHashMap<>();
    private static final Map<Object, Integer> MONITOR_DEPTH = new IdentityHashMap<>();
    private static boolean controllerTurn;
    /** How long {@link #run} waits for a thread to reach its next point before it calls the thread hung. */
    public static long timeoutMillis = 10_000;

    /** A thread's state between steps. */
    public enum State { NEW, POINT, RUNNING, DONE }

    private enum Command { RUN, PROBE, ABANDON }

    /** Thrown inside a managed thread the controller abandons (a reset): unwinds it, running its finally blocks. */
    static final class Abandoned extends Error {
        Abandoned() {
            super("abandoned by the brokerspec controller", null, false, false);
        }
    }

    /** A managed thread: its name, where it is parked, what it holds. */
    public static final class Managed {
        public final String name;
        Thread thread;
        State state = State.NEW;
        Site site;
        Object object;
        Object via;
        List<String> frames = List.of();
        Command command;
        boolean probed;
        boolean abandoned;
        String uncaught;
        final List<Object> holds = new ArrayList<>();

        Managed(String name) {
            this.name = name;
        }

        /** Whether it has ended. */
        public boolean done() {
            return state == State.DONE;
        }

        /** Its point's site (null unless parked at a point). */
        public Site site() {
            return state == State.POINT ? site : null;
        }

        /** The object its point's operation is on. */
        public Object object() {
            return object;
        }

        /** The field updater its point's operation goes through, or null. */
        public Object via() {
            return via;
        }

        /** The rewritten frames on its stack at its point, innermost first, as {@code binaryClassName.method}. */
        public List<String> frames() {
            return frames;
        }
    }

    /** A controller-side failure: an unknown thread, one that may not run, or one that never came back. */
    public static final class ControlError extends Exception {
        public ControlError(String message) {
            super(message);
        }
    }

    // -- what the rewritten code calls --------------------------------------------------------------------------

    /** Before a scheduling point's operation on {@code object} (site {@code id}): park until told to run. */
    public static void point(Object object, int id) {
        pointVia(null, object, id);
    }

    /** A point whose operation goes through {@code via} (a field updater) to {@code object} (its target). */
    public static void pointVia(Object via, Object object, int id) {
        Managed m = CURRENT.get();
        if (m == null) {
            return;
        }
        if (m.abandoned) {
            throw new Abandoned();
        }
        Site site = Site.get(id);
        List<String> frames = StackWalker.getInstance().walk(stream -> stream
                .filter(f -> Site.isRewritten(f.getClassName()))
                .map(f -> f.getClassName() + "." + f.getMethodName()).toList());
        synchronized (MON) {
            m.site = site;
            m.object = object;
            m.via = via;
            m.frames = frames;
            m.state = State.POINT;
            controllerTurn = true;
            MON.notifyAll();
            while (true) {
                Command command = await(m);
                if (command == Command.PROBE) {
                    m.probed = tryLock(object);
                    controllerTurn = true;
                    MON.notifyAll();
                    continue;
                }
                if (command == Command.ABANDON) {
                    m.abandoned = true;
                    throw new Abandoned();
                }
                break;
            }
            m.state = State.RUNNING;
        }
    }

    /**
     * For code the agent does not rewrite (a harness's executor): a point that waits, like a rewritten
     * {@code join}, until {@code future} is done, reported as {@code where}'s {@code op}; then the join.
     */
    public static void awaitDone(CompletableFuture<?> future, String where, String op) {
        int id;
        synchronized (RUNTIME_SITES) {
            id = RUNTIME_SITES.computeIfAbsent(where + " " + op + " await", k -> Site.register(where, "await", 0, op,
                    Site.Kind.JOIN));
        }
        point(future, id);
        future.join();
    }

    private static final Map<String, Integer> RUNTIME_SITES = new LinkedHashMap<>();

    /** An explicit point in code the agent does not see as one (a scenario's stand-in for upstream's side effect,
     * e.g. the rescheduled read of an unblocking handler), reported as {@code where}'s {@code op}. */
    public static void mark(String where, String op) {
        int id;
        synchronized (RUNTIME_SITES) {
            id = RUNTIME_SITES.computeIfAbsent(where + " " + op + " mark", k -> Site.register(where, "mark", 0, op,
                    Site.Kind.ACCESS));
        }
        point(null, id);
    }

    /** Whether the caller runs on a managed thread (else it is the driver's, whose code runs at once). */
    public static boolean managed() {
        return CURRENT.get() != null;
    }

    /** A monitor enter: the point, then the scheduler's record of the owner (the real monitorenter follows). */
    public static void monitorEnter(Object monitor, int id) {
        point(monitor, id);
        Managed m = CURRENT.get();
        if (m != null) {
            synchronized (MON) {
                MONITOR_OWNER.put(monitor, m);
                MONITOR_DEPTH.merge(monitor, 1, Integer::sum);
                m.holds.add(monitor);
            }
        }
    }

    /** After a monitor exit (not a point: a release only lets a waiter in). */
    public static void monitorExit(Object monitor) {
        Managed m = CURRENT.get();
        if (m != null) {
            synchronized (MON) {
                if (MONITOR_DEPTH.merge(monitor, -1, Integer::sum) <= 0) {
                    MONITOR_DEPTH.remove(monitor);
                    MONITOR_OWNER.remove(monitor);
                }
                m.holds.remove(monitor);
            }
        }
    }

    /** After a Lock's lock() returned: the thread holds it (for the report). */
    public static void locked(Object lock) {
        Managed m = CURRENT.get();
        if (m != null) {
            synchronized (MON) {
                m.holds.add(lock);
            }
        }
    }

    /** After a Lock's unlock(): not a point. */
    public static void unlocked(Object lock) {
        Managed m = CURRENT.get();
        if (m != null) {
            synchronized (MON) {
                m.holds.remove(lock);
            }
        }
    }

    private static boolean tryLock(Object lock) {
        Lock l = (Lock) lock;
        if (!l.tryLock()) {
            return false;
        }
        l.unlock();
        return true;
    }

    private static Command await(Managed m) {
        while (m.command == null) {
            try {
                MON.wait();
            } catch (InterruptedException e) {
                // a managed thread waits for the controller only; an interrupt does not stand for it
            }
        }
        Command command = m.command;
        m.command = null;
        return command;
    }

    // -- what the controller calls ------------------------------------------------------------------------------

    /** A managed thread that runs {@code body} once the controller first runs it (see {@link #prime}). */
    public static void spawn(String name, Runnable body) {
        Managed m = new Managed(name);
        synchronized (MON) {
            if (THREADS.containsKey(name)) {
                throw new IllegalArgumentException("a thread named " + name + " already exists");
            }
            THREADS.put(name, m);
        }
        Thread thread = new Thread(() -> {
            CURRENT.set(m);
            try {
                synchronized (MON) {
                    if (await(m) == Command.ABANDON) {
                        return;
                    }
                    m.state = State.RUNNING;
                }
                body.run();
            } catch (Abandoned e) {
                // a reset unwound it
            } catch (Throwable e) {
                m.uncaught = e.getClass().getName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
            } finally {
                synchronized (MON) {
                    m.state = State.DONE;
                    m.site = null;
                    m.object = null;
                    controllerTurn = true;
                    MON.notifyAll();
                }
            }
        }, "brokerspec-" + name);
        thread.setDaemon(true);
        m.thread = thread;
        thread.start();
    }

    /** Gives {@code object} the name the report shows for it (else its class's simple name and a number). */
    public static void name(Object object, String name) {
        synchronized (MON) {
            NAMES.put(object, name);
        }
    }

    /** The report's name of {@code object}: the one given, else {@code SimpleName@n} in order of first sight. */
    public static String nameOf(Object object) {
        if (object == null) {
            return null;
        }
        synchronized (MON) {
            String known = NAMES.get(object);
            if (known == null) {
                String simple = object instanceof Class<?> c ? c.getSimpleName() + ".class" : object.getClass().getSimpleName();
                int n = SEEN.merge(simple, 1, Integer::sum);
                known = simple + "@" + n;
                NAMES.put(object, known);
            }
            return known;
        }
    }

    /** Runs every thread spawned and not yet started to its first point (or its end), in spawn order. */
    public static void prime() throws ControlError {
        for (Managed m : threads()) {
            if (m.state == State.NEW) {
                handOver(m, Command.RUN);
            }
        }
    }

    /** Runs thread {@code name} from its point to its next point or its end. */
    public static void run(String name) throws ControlError {
        Managed m;
        synchronized (MON) {
            m = THREADS.get(name);
        }
        if (m == null) {
            throw new ControlError("no thread named " + name);
        }
        if (m.state != State.POINT) {
            throw new ControlError("thread " + name + " is " + m.state.name().toLowerCase() + ", not at a point");
        }
        if (!enabled(m)) {
            throw new ControlError("thread " + name + " is blocked at " + describe(m));
        }
        handOver(m, Command.RUN);
    }

    /** Whether a parked thread may run: what its point waits for is free (a lock: its own tryLock says so). */
    public static boolean enabled(Managed m) throws ControlError {
        if (m.state != State.POINT) {
            return false;
        }
        switch (m.site.kind) {
            case MONITOR:
                synchronized (MON) {
                    Managed owner = MONITOR_OWNER.get(m.object);
                    return owner == null || owner == m;
                }
            case JOIN:
                return ((CompletableFuture<?>) m.object).isDone();
            case LOCK:
                handOver(m, Command.PROBE);
                return m.probed;
            default:
                return true;
        }
    }

    /** Whether thread {@code m} holds {@code lock} (a monitor or a Lock it took at a point). */
    public static boolean holds(Managed m, Object lock) {
        synchronized (MON) {
            return m.holds.stream().anyMatch(held -> held == lock);
        }
    }

    /** Whether every managed thread has ended (a scenario judges what only the end shows then). */
    public static boolean allDone() {
        synchronized (MON) {
            return THREADS.values().stream().allMatch(m -> m.state == State.DONE);
        }
    }

    /** Every managed thread, in spawn order. */
    public static List<Managed> threads() {
        synchronized (MON) {
            return new ArrayList<>(THREADS.values());
        }
    }

    /** One thread as the lock-level protocol reports it (see docs/ports.md, "Lock-level ports"). */
    public static Map<String, Object> report(Managed m) throws ControlError {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", m.name);
        out.put("state", m.state == State.DONE ? "done" : enabled(m) ? "enabled" : "blocked");
        if (m.state == State.POINT) {
            Map<String, Object> point = new LinkedHashMap<>();
            point.put("class", m.site.className);
            point.put("method", m.site.method);
            point.put("line", (long) m.site.line);
            point.put("op", m.site.op);
            point.put("object", nameOf(m.object));
            if (m.via != null) {
                point.put("via", nameOf(m.via));
            }
            out.put("point", point);
        } else {
            out.put("point", null);
        }
        List<Object> holds = new ArrayList<>();
        synchronized (MON) {
            for (Object held : m.holds) {
                holds.add(nameOf(held));
            }
        }
        out.put("holds", holds);
        if (m.uncaught != null) {
            out.put("uncaught", m.uncaught);
        }
        return out;
    }

    /** Unwinds every thread still parked (their finally blocks run, one at a time) and forgets all of them. */
    public static void abandonAll() throws ControlError {
        for (Managed m : threads()) {
            if (m.state == State.POINT || m.state == State.NEW) {
                handOver(m, Command.ABANDON);
            }
        }
        synchronized (MON) {
            THREADS.clear();
            NAMES.clear();
            SEEN.clear();
            MONITOR_OWNER.clear();
            MONITOR_DEPTH.clear();
        }
    }

    private static void handOver(Managed m, Command command) throws ControlError {
        long deadline = System.currentTimeMillis() + timeoutMillis;
        synchronized (MON) {
            controllerTurn = false;
            m.command = command;
            MON.notifyAll();
            while (!controllerTurn) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new ControlError("thread " + m.name + " did not reach its next point within " + timeoutMillis
                            + " ms: it waits outside the scheduler, at " + stackTop(m.thread));
                }
                try {
                    MON.wait(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new ControlError("the controller was interrupted");
                }
            }
        }
    }

    private static String describe(Managed m) {
        return m.site.className + "." + m.site.method + ":" + m.site.line + " " + m.site.op + " " + nameOf(m.object);
    }

    /** Where a thread waits: its innermost frame, and the innermost frame outside the JDK (the code that waits). */
    private static String stackTop(Thread thread) {
        StackTraceElement[] stack = thread.getStackTrace();
        if (stack.length == 0) {
            return "(no stack)";
        }
        for (StackTraceElement frame : stack) {
            String name = frame.getClassName();
            if (!name.startsWith("java.") && !name.startsWith("jdk.") && !name.startsWith("sun.")) {
                return stack[0] + " in " + frame;
            }
        }
        return stack[0].toString();
    }
}
