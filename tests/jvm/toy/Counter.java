package toy;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

/** The controller's toy: one lock, one monitor, one atomic and one volatile field (tests/jvm). */
public class Counter {
    private final ReentrantLock lock = new ReentrantLock();
    private final AtomicInteger value = new AtomicInteger();
    private int guarded;
    private volatile int seen;

    /** Read, then write: two points, so two threads can lose an update. */
    public void racyIncrement() {
        int read = value.get(); // racy read
        value.set(read + 1); // racy write
    }

    /** The same under the lock: the lock is the only point, so no update is lost. */
    public void lockedIncrement() {
        lock.lock();
        try {
            int read = value.get();
            value.set(read + 1);
        } finally {
            lock.unlock();
        }
    }

    /** A synchronized method with a point inside (the volatile write): the other thread waits at its entry. */
    public synchronized void bump() {
        guarded++;
        seen = guarded;
    }

    /** A synchronized block (monitorenter / monitorexit) around a volatile write. */
    public void publish() {
        synchronized (this) {
            seen = guarded + 100;
        }
    }

    /** Throws out of a synchronized method: the rewrite must still release the monitor. */
    public synchronized void fail() {
        seen = -1;
        throw new IllegalStateException("boom");
    }

    public int value() {
        return value.get();
    }

    public int seen() {
        return seen;
    }
}
