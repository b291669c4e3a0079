package org.apache.pulsar.broker.service;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * Stand-in (written by brokerspec) for the tracker in the FIXED order of
 * docs/findings/keyshared-tracker-lost-unblock.md (the lock model's {@code locked-block}): as the current order,
 * except that {@code shouldBlockStickyKeyHash} counts the block under the write lock and only while the map still
 * holds the entry it read, so a removal that read {@code isBlocking()} false cannot have been passed by a block.
 */
public class DrainingHashesTracker {
    private final String dispatcherName;
    private final UnblockingHandler unblockingHandler;
    private final Map<Integer, DrainingHashEntry> drainingHashes = new HashMap<>();
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    int batchLevel;
    boolean unblockedWhileBatching;
    private final Map<Consumer, ConsumerDrainingHashesStats> consumerDrainingHashesStatsMap =
            new ConcurrentHashMap<>();

    public static class DrainingHashEntry {
        private static final AtomicIntegerFieldUpdater<DrainingHashEntry> REF_COUNT_UPDATER =
                AtomicIntegerFieldUpdater.newUpdater(DrainingHashEntry.class, "refCount");
        private static final AtomicIntegerFieldUpdater<DrainingHashEntry> BLOCKED_COUNT_UPDATER =
                AtomicIntegerFieldUpdater.newUpdater(DrainingHashEntry.class, "blockedCount");

        private final Consumer consumer;
        private volatile int refCount;
        private volatile int blockedCount;

        DrainingHashEntry(Consumer consumer) {
            this.consumer = consumer;
        }

        public Consumer getConsumer() {
            return consumer;
        }

        void incrementRefCount() {
            REF_COUNT_UPDATER.incrementAndGet(this);
        }

        boolean decrementRefCount() {
            return REF_COUNT_UPDATER.decrementAndGet(this) == 0;
        }

        void incrementBlockedCount() {
            BLOCKED_COUNT_UPDATER.incrementAndGet(this);
        }

        boolean isBlocking() {
            return blockedCount > 0;
        }

        public int getRefCount() {
            return refCount;
        }

        int getBlockedCount() {
            return blockedCount;
        }
    }

    private static class ConsumerDrainingHashesStats {
        private final ReentrantReadWriteLock statsLock = new ReentrantReadWriteLock();
        private final java.util.Set<Integer> drainingHashes = new java.util.TreeSet<>();

        void addHash(int stickyHash) {
            statsLock.writeLock().lock();
            try {
                drainingHashes.add(stickyHash);
            } finally {
                statsLock.writeLock().unlock();
            }
        }

        void clearHash(int hash) {
            statsLock.writeLock().lock();
            try {
                drainingHashes.remove(hash);
            } finally {
                statsLock.writeLock().unlock();
            }
        }
    }

    public interface UnblockingHandler {
        void stickyKeyHashUnblocked(int stickyKeyHash);
    }

    public DrainingHashesTracker(String dispatcherName, UnblockingHandler unblockingHandler) {
        this.dispatcherName = dispatcherName;
        this.unblockingHandler = unblockingHandler;
    }

    public void addEntry(Consumer consumer, int stickyHash) {
        if (stickyHash == 0) {
            throw new IllegalArgumentException("Sticky hash cannot be 0");
        }
        DrainingHashEntry entry;
        ConsumerDrainingHashesStats addedStatsForNewEntry = null;
        lock.writeLock().lock();
        try {
            entry = drainingHashes.get(stickyHash);
            if (entry == null) {
                entry = new DrainingHashEntry(consumer);
                drainingHashes.put(stickyHash, entry);
                addedStatsForNewEntry = consumerDrainingHashesStatsMap.computeIfAbsent(consumer,
                        k -> new ConsumerDrainingHashesStats());
            } else if (entry.getConsumer() != consumer) {
                throw new IllegalStateException("Consumer " + entry.getConsumer() + " is already draining hash "
                        + stickyHash + " in dispatcher " + dispatcherName + ".");
            } else {
                log(entry.getRefCount() + 1);
            }
        } finally {
            lock.writeLock().unlock();
        }
        entry.incrementRefCount();
        if (addedStatsForNewEntry != null) {
            addedStatsForNewEntry.addHash(stickyHash);
        }
    }

    public void startBatch() {
        lock.writeLock().lock();
        try {
            batchLevel++;
        } finally {
            lock.writeLock().unlock();
        }
    }

    public void endBatch() {
        boolean notifyUnblocking = false;
        lock.writeLock().lock();
        try {
            if (--batchLevel == 0 && unblockedWhileBatching) {
                unblockedWhileBatching = false;
                notifyUnblocking = true;
            }
        } finally {
            lock.writeLock().unlock();
        }
        if (notifyUnblocking) {
            unblockingHandler.stickyKeyHashUnblocked(-1);
        }
    }

    public void reduceRefCount(Consumer consumer, int stickyHash, boolean closing) {
        if (stickyHash == 0) {
            return;
        }
        DrainingHashEntry entry = getEntry(stickyHash);
        if (entry == null) {
            return;
        }
        if (entry.getConsumer() != consumer) {
            throw new IllegalStateException("Consumer " + entry.getConsumer() + " is already draining hash "
                    + stickyHash + " in dispatcher " + dispatcherName + ".");
        }
        if (entry.decrementRefCount()) {
            DrainingHashEntry removed;
            boolean notifyUnblocking = false;
            lock.writeLock().lock();
            try {
                removed = drainingHashes.remove(stickyHash);
                if (!closing && removed.isBlocking()) {
                    if (batchLevel > 0) {
                        unblockedWhileBatching = true;
                    } else {
                        notifyUnblocking = true;
                    }
                }
            } finally {
                lock.writeLock().unlock();
            }
            ConsumerDrainingHashesStats drainingHashesStats = consumerDrainingHashesStatsMap.get(consumer);
            if (drainingHashesStats != null) {
                drainingHashesStats.clearHash(stickyHash);
            }
            if (notifyUnblocking) {
                unblockingHandler.stickyKeyHashUnblocked(stickyHash);
            }
        } else {
            log(entry.getRefCount());
        }
    }

    public boolean shouldBlockStickyKeyHash(Consumer consumer, int stickyKeyHash) {
        if (stickyKeyHash == 0) {
            return false;
        }
        DrainingHashEntry entry = getEntry(stickyKeyHash);
        if (entry == null) {
            return false;
        }
        if (entry.getConsumer() == consumer) {
            log(entry.getRefCount());
            lock.writeLock().lock();
            try {
                drainingHashes.remove(stickyKeyHash, entry);
            } finally {
                lock.writeLock().unlock();
            }
            ConsumerDrainingHashesStats drainingHashesStats = consumerDrainingHashesStatsMap.get(consumer);
            if (drainingHashesStats != null) {
                drainingHashesStats.clearHash(stickyKeyHash);
            }
            return false;
        }
        lock.writeLock().lock();
        try {
            if (drainingHashes.get(stickyKeyHash) != entry) {
                return false;
            }
            entry.incrementBlockedCount();
        } finally {
            lock.writeLock().unlock();
        }
        return true;
    }

    public DrainingHashEntry getEntry(int stickyKeyHash) {
        if (stickyKeyHash == 0) {
            return null;
        }
        lock.readLock().lock();
        try {
            return drainingHashes.get(stickyKeyHash);
        } finally {
            lock.readLock().unlock();
        }
    }

    /** Stands in for upstream's slog lines (since #25535): their attributes, such as the volatile {@code refCount},
     * are computed whatever the level, so each is a scheduling point; the line itself is dropped. */
    private static void log(Object attribute) {
    }

    public void consumerRemoved(Consumer consumer) {
        consumerDrainingHashesStatsMap.remove(consumer);
    }
}
