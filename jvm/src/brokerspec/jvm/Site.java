package brokerspec.jvm;

import java.util.ArrayList;
import java.util.List;

/**
 * A scheduling point in the rewritten bytecode: where it is (class, method, line) and what it does next. The
 * agent registers one per rewritten instruction while it transforms a class and compiles its index into the
 * call, so the running code passes an int, not strings.
 */
public final class Site {
    /** What the thread is about to do, which decides when it may go on. */
    public enum Kind {
        /** a monitor enter (a synchronized block or method): waits while another thread holds the monitor */
        MONITOR,
        /** a Lock's lock(): waits while tryLock would fail */
        LOCK,
        /** a CompletableFuture's join or get: waits until the future is done */
        JOIN,
        /** anything else a thread may do at any time: atomics, volatile accesses, complete, submit, tryLock */
        ACCESS
    }

    private static final List<Site> SITES = new ArrayList<>();
    private static final java.util.Set<String> REWRITTEN = java.util.concurrent.ConcurrentHashMap.newKeySet();

    public final String className;
    public final String method;
    public volatile int line;
    public final String op;
    public final Kind kind;

    private Site(String className, String method, int line, String op, Kind kind) {
        this.className = className;
        this.method = method;
        this.line = line;
        this.op = op;
        this.kind = kind;
    }

    /** A new site's index (called by the agent while it rewrites a class). */
    static synchronized int register(String className, String method, int line, String op, Kind kind) {
        SITES.add(new Site(className, method, line, op, kind));
        return SITES.size() - 1;
    }

    /** A synchronized method's entry is registered before its first line is known: set it once it is. */
    static void lineOf(int id, int line) {
        Site site = get(id);
        if (site.line <= 0) {
            site.line = line;
        }
    }

    /** Records that the agent rewrote the class (binary name, dotted): its frames are the ones a point reports. */
    static void rewritten(String className) {
        REWRITTEN.add(className);
    }

    static boolean isRewritten(String className) {
        return REWRITTEN.contains(className);
    }

    static synchronized Site get(int id) {
        return SITES.get(id);
    }
}
