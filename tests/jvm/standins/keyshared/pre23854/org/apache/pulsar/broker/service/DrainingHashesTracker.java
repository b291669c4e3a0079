package org.apache.pulsar.broker.service;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Stand-in (written by brokerspec) for the tracker BEFORE apache/pulsar#23854 (8f04945c47^
 * {@code DrainingHashesTracker.java}), a known-bad order: every public method {@code synchronized} on the tracker,
 * the counters plain ints, the stats updated and the unblocking handler called inside the monitor (LK-4: the
 * deadlock #23854 fixed), and the lazy removal of {@code shouldBlockStickyKeyHash} without a stats update, as
 * upstream had it. The stats are {@code synchronized} on themselves, as upstream's were.
 */
public class DrainingHashesTracker {
    private final String dispatcherName;
    private final UnblockingHandler unblockingHandler;
    private final Map<Integer, DrainingHashEntry> drainingHashes = new HashMap<>();
    int batchLevel;
    boolean unblockedWhileBatching;
    private final Map<Consumer, ConsumerDrainingHashesStats> consumerDrainingHashesStatsMap =
            new ConcurrentHashMap<>();

    public static class DrainingHashEntry {
        private final Consumer consumer;
        private int refCount;
        private int blockedCount;

        DrainingHashEntry(Consumer consumer) {
            this.consumer = consumer;
        }

        public Consumer getConsumer() {
            return consumer;
        }

        void incrementRefCount() {
            refCount++;
        }

        boolean decrementRefCount() {
            return --refCount == 0;
        }

        void incrementBlockedCount() {
            blockedCount++;
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
        private final TreeSet<Integer> drainingHashes = new TreeSet<>();

        synchronized void addHash(int stickyHash) {
            drainingHashes.add(stickyHash);
        }

        synchronized boolean clearHash(int hash) {
            drainingHashes.remove(hash);
            return drainingHashes.isEmpty();
        }
    }

    public interface UnblockingHandler {
        void stickyKeyHashUnblocked(int stickyKeyHash);
    }

    public DrainingHashesTracker(String dispatcherName, UnblockingHandler unblockingHandler) {
        this.dispatcherName = dispatcherName;
        this.unblockingHandler = unblockingHandler;
    }

    public synchronized void addEntry(Consumer consumer, int stickyHash) {
        if (stickyHash == 0) {
            throw new IllegalArgumentException("Sticky hash cannot be 0");
        }
        DrainingHashEntry entry = drainingHashes.get(stickyHash);
        if (entry == null) {
            entry = new DrainingHashEntry(consumer);
            drainingHashes.put(stickyHash, entry);
            consumerDrainingHashesStatsMap.computeIfAbsent(consumer, k -> new ConsumerDrainingHashesStats())
                    .addHash(stickyHash);
        } else if (entry.getConsumer() != consumer) {
            throw new IllegalStateException("Consumer " + entry.getConsumer() + " is already draining hash "
                    + stickyHash + " in dispatcher " + dispatcherName + ".");
        }
        entry.incrementRefCount();
    }

    public synchronized void startBatch() {
        batchLevel++;
    }

    public synchronized void endBatch() {
        if (--batchLevel == 0 && unblockedWhileBatching) {
            unblockedWhileBatching = false;
            unblockingHandler.stickyKeyHashUnblocked(-1);
        }
    }

    public synchronized void reduceRefCount(Consumer consumer, int stickyHash, boolean closing) {
        if (stickyHash == 0) {
            return;
        }
        DrainingHashEntry entry = drainingHashes.get(stickyHash);
        if (entry == null) {
            return;
        }
        if (entry.getConsumer() != consumer) {
            throw new IllegalStateException("Consumer " + entry.getConsumer() + " is already draining hash "
                    + stickyHash + " in dispatcher " + dispatcherName + ".");
        }
        if (entry.decrementRefCount()) {
            DrainingHashEntry removed = drainingHashes.remove(stickyHash);
            ConsumerDrainingHashesStats drainingHashesStats = consumerDrainingHashesStatsMap.get(consumer);
            if (drainingHashesStats != null) {
                drainingHashesStats.clearHash(stickyHash);
            }
            if (!closing && removed.isBlocking()) {
                if (batchLevel > 0) {
                    unblockedWhileBatching = true;
                } else {
                    unblockingHandler.stickyKeyHashUnblocked(stickyHash);
                }
            }
        }
    }

    public synchronized boolean shouldBlockStickyKeyHash(Consumer consumer, int stickyKeyHash) {
        if (stickyKeyHash == 0) {
            return false;
        }
        DrainingHashEntry entry = drainingHashes.get(stickyKeyHash);
        if (entry == null) {
            return false;
        }
        if (entry.getConsumer() == consumer) {
            drainingHashes.remove(stickyKeyHash, entry);
            return false;
        }
        entry.incrementBlockedCount();
        return true;
    }

    public synchronized DrainingHashEntry getEntry(int stickyKeyHash) {
        return stickyKeyHash != 0 ? drainingHashes.get(stickyKeyHash) : null;
    }

    public void consumerRemoved(Consumer consumer) {
        consumerDrainingHashesStatsMap.remove(consumer);
    }
}
