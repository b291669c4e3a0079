package toy;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/** The controller's toy: one lock, one monitor, one atomic and one volatile field (tests/jvm). */
public class Counter {
    private final ReentrantLock lock = new ReentrantLock();
    private final AtomicInteger value = new AtomicInteger();
    private final ReentrantReadWriteLock rw = new ReentrantReadWriteLock();
    private final CountDownLatch never = new CountDownLatch(1);
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

    /** Reads under the read lock: two readers hold it at once, a writer waits for both. */
    public void read() {
        rw.readLock().lock();
        try {
            seen = value.get();
        } finally {
            rw.readLock().unlock();
        }
    }

    /** Writes under the write lock. */
    public void write() {
        rw.writeLock().lock();
        try {
            value.set(value.get() + 1);
        } finally {
            rw.writeLock().unlock();
        }
    }

    /** Waits on a latch nobody counts down: a wait the agent does not rewrite (a hang, for the controller). */
    public void hang() throws InterruptedException {
        value.incrementAndGet();
        never.await();
    }

    public int value() {
        return value.get();
    }

    public int seen() {
        return seen;
    }
}
