import java.util.Collections;
import java.util.NavigableMap;
import java.util.TreeMap;

/**
 * Pulsar's DrainingHashesTracker (PIP-379): a hash that moved away from a consumer still holding
 * unacked messages of it stays blocked for every other consumer until those are acked or the
 * consumer leaves. When an entry that blocked someone is released (not by closing), the unblocking
 * handler is told the hash, or -1 once at the end of the outermost batch. Per-consumer draining
 * stats are left out.
 *
 * <p>With {@code postDecrementBug} the release compares the ref count before decrementing it, so the
 * last pending ack leaves the entry behind with a count of 0: the hash stays blocked for good.
 */
final class DrainingHashesTracker {
    /** Told that a blocked hash can be dispatched again (-1: some hashes, after a batch). */
    interface UnblockingHandler {
        void stickyKeyHashUnblocked(int stickyKeyHash);
    }

    /** The consumer draining a hash, its pending acks of the hash, and how often it blocked others. */
    static final class DrainingHashEntry {
        private final Consumer consumer;
        private int refCount;
        private int blockedCount;

        DrainingHashEntry(Consumer consumer) {
            this.consumer = consumer;
        }

        Consumer getConsumer() {
            return consumer;
        }

        int getRefCount() {
            return refCount;
        }

        int getBlockedCount() {
            return blockedCount;
        }
    }

    private static final int STICKY_KEY_HASH_NOT_SET = 0;

    private final String dispatcherName;
    private final UnblockingHandler unblockingHandler;
    private final boolean postDecrementBug;
    private final NavigableMap<Integer, DrainingHashEntry> drainingHashes = new TreeMap<>();
    private int batchLevel;
    private boolean unblockedWhileBatching;

    DrainingHashesTracker(String dispatcherName, UnblockingHandler unblockingHandler, boolean postDecrementBug) {
        this.dispatcherName = dispatcherName;
        this.unblockingHandler = unblockingHandler;
        this.postDecrementBug = postDecrementBug;
    }

    /** Counts one more pending ack of a hash that {@code consumer} holds but no longer owns. */
    synchronized void addEntry(Consumer consumer, int stickyHash) {
        if (stickyHash == STICKY_KEY_HASH_NOT_SET) {
            throw new IllegalArgumentException("Sticky hash cannot be 0");
        }
        DrainingHashEntry entry = drainingHashes.computeIfAbsent(stickyHash, h -> new DrainingHashEntry(consumer));
        if (entry.consumer != consumer) {
            throw new IllegalStateException("Consumer " + entry.consumer.consumerName() + " is already draining hash "
                    + stickyHash + " in dispatcher " + dispatcherName + ". Same hash being used for consumer "
                    + consumer.consumerName() + ".");
        }
        entry.refCount++;
    }

    /** One pending ack of the hash is gone; the last one releases the entry and may unblock the hash. */
    void reduceRefCount(Consumer consumer, int stickyHash, boolean closing) {
        if (stickyHash == STICKY_KEY_HASH_NOT_SET) {
            return;
        }
        boolean unblocked = false;
        synchronized (this) {
            DrainingHashEntry entry = drainingHashes.get(stickyHash);
            if (entry == null) {
                return;
            }
            if (entry.consumer != consumer) {
                throw new IllegalStateException("Consumer " + consumer.consumerName() + " is trying to reduce ref "
                        + "count for draining hash " + stickyHash + " in dispatcher " + dispatcherName
                        + ", but it is being drained by " + entry.consumer.consumerName() + ".");
            }
            boolean remaining = postDecrementBug ? entry.refCount-- > 0 : --entry.refCount > 0;
            if (remaining) {
                return;
            }
            drainingHashes.remove(stickyHash);
            if (!closing && entry.blockedCount > 0) {
                if (batchLevel > 0) {
                    unblockedWhileBatching = true;
                } else {
                    unblocked = true;
                }
            }
        }
        if (unblocked) {
            unblockingHandler.stickyKeyHashUnblocked(stickyHash); // outside the monitor, as upstream
        }
    }

    /** True if another consumer drains the hash; if {@code consumer} drains it, the hash came back. */
    synchronized boolean shouldBlockStickyKeyHash(Consumer consumer, int stickyKeyHash) {
        if (stickyKeyHash == STICKY_KEY_HASH_NOT_SET) {
            return false;
        }
        DrainingHashEntry entry = drainingHashes.get(stickyKeyHash);
        if (entry == null) {
            return false;
        }
        if (entry.consumer == consumer) {
            drainingHashes.remove(stickyKeyHash);
            return false;
        }
        entry.blockedCount++;
        return true;
    }

    synchronized void startBatch() {
        batchLevel++;
    }

    /** Leaves a batch; the outermost exit reports every unblocking inside it once, with -1. */
    void endBatch() {
        boolean fire;
        synchronized (this) {
            batchLevel--;
            fire = batchLevel == 0 && unblockedWhileBatching;
            if (fire) {
                unblockedWhileBatching = false;
            }
        }
        if (fire) {
            unblockingHandler.stickyKeyHashUnblocked(-1);
        }
    }

    synchronized DrainingHashEntry getEntry(int stickyKeyHash) {
        return stickyKeyHash == STICKY_KEY_HASH_NOT_SET ? null : drainingHashes.get(stickyKeyHash);
    }

    /** A snapshot of the entries by hash, for the harness's projection. */
    synchronized NavigableMap<Integer, DrainingHashEntry> drainingHashes() {
        return Collections.unmodifiableNavigableMap(new TreeMap<>(drainingHashes));
    }

    synchronized int batchLevel() {
        return batchLevel;
    }

    synchronized boolean unblockedWhileBatching() {
        return unblockedWhileBatching;
    }
}
