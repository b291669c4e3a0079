package org.apache.pulsar.broker.service;

import java.util.ArrayList;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Supplier;

/**
 * Stand-in (written by brokerspec) with upstream's package, constructor and the methods the lock scope calls, at
 * upstream's lock granularity (apache/pulsar a72046382b {@code PendingAcksMap.java}): one read/write lock per map;
 * {@code forEach} under the read lock, {@code remove(l, e)} and {@code forEachAndClose} under the write lock with
 * the remove handler called inside it, {@code forEachAndClose} a handler batch. The pending acks are a sorted map
 * of ledger to entry to (remaining unacked, sticky hash).
 */
public class PendingAcksMap {
    public interface PendingAcksAddHandler {
        boolean handleAdding(Consumer consumer, long ledgerId, long entryId, int stickyKeyHash);
    }

    public interface PendingAcksRemoveHandler {
        void handleRemoving(Consumer consumer, long ledgerId, long entryId, int stickyKeyHash, boolean closing);

        void startBatch();

        void endBatch();
    }

    public interface PendingAcksConsumer {
        void accept(long ledgerId, long entryId, int remainingUnacked, int stickyKeyHash);
    }

    private final Consumer consumer;
    private final TreeMap<Long, TreeMap<Long, int[]>> pendingAcks = new TreeMap<>();
    private final Supplier<PendingAcksAddHandler> pendingAcksAddHandlerSupplier;
    private final Supplier<PendingAcksRemoveHandler> pendingAcksRemoveHandlerSupplier;
    private final Lock readLock;
    private final Lock writeLock;
    private boolean closed = false;
    private volatile long size;

    PendingAcksMap(Consumer consumer, Supplier<PendingAcksAddHandler> pendingAcksAddHandlerSupplier,
                   Supplier<PendingAcksRemoveHandler> pendingAcksRemoveHandlerSupplier) {
        this.consumer = consumer;
        this.pendingAcksAddHandlerSupplier = pendingAcksAddHandlerSupplier;
        this.pendingAcksRemoveHandlerSupplier = pendingAcksRemoveHandlerSupplier;
        ReadWriteLock readWriteLock = new ReentrantReadWriteLock();
        this.writeLock = readWriteLock.writeLock();
        this.readLock = readWriteLock.readLock();
    }

    public boolean addPendingAckIfAllowed(long ledgerId, long entryId, int remainingUnacked, int stickyKeyHash) {
        try {
            writeLock.lock();
            if (closed) {
                return false;
            }
            PendingAcksAddHandler handler = pendingAcksAddHandlerSupplier.get();
            if (handler != null && !handler.handleAdding(consumer, ledgerId, entryId, stickyKeyHash)) {
                return false;
            }
            int[] previous = pendingAcks.computeIfAbsent(ledgerId, k -> new TreeMap<>())
                    .put(entryId, new int[] {remainingUnacked, stickyKeyHash});
            if (previous == null) {
                size++;
            }
            return true;
        } finally {
            writeLock.unlock();
        }
    }

    public long size() {
        return size;
    }

    public void forEach(PendingAcksConsumer processor) {
        try {
            readLock.lock();
            processPendingAcks(processor);
        } finally {
            readLock.unlock();
        }
    }

    private void processPendingAcks(PendingAcksConsumer processor) {
        for (Map.Entry<Long, TreeMap<Long, int[]>> ledger : new ArrayList<>(pendingAcks.entrySet())) {
            for (Map.Entry<Long, int[]> ack : new ArrayList<>(ledger.getValue().entrySet())) {
                processor.accept(ledger.getKey(), ack.getKey(), ack.getValue()[0], ack.getValue()[1]);
            }
        }
    }

    public void forEachAndClose(PendingAcksConsumer processor) {
        try {
            writeLock.lock();
            closed = true;
            PendingAcksRemoveHandler handler = pendingAcksRemoveHandlerSupplier.get();
            if (handler != null) {
                try {
                    handler.startBatch();
                    processPendingAcks((ledgerId, entryId, batchSize, stickyKeyHash) -> {
                        processor.accept(ledgerId, entryId, batchSize, stickyKeyHash);
                        handler.handleRemoving(consumer, ledgerId, entryId, stickyKeyHash, closed);
                    });
                } finally {
                    handler.endBatch();
                }
            } else {
                processPendingAcks(processor);
            }
            pendingAcks.clear();
            size = 0;
        } finally {
            writeLock.unlock();
        }
    }

    public boolean remove(long ledgerId, long entryId) {
        try {
            writeLock.lock();
            TreeMap<Long, int[]> ledgerMap = pendingAcks.get(ledgerId);
            if (ledgerMap == null) {
                return false;
            }
            int[] removed = ledgerMap.remove(entryId);
            if (removed == null) {
                return false;
            }
            size--;
            PendingAcksRemoveHandler handler = pendingAcksRemoveHandlerSupplier.get();
            if (handler != null) {
                handler.handleRemoving(consumer, ledgerId, entryId, removed[1], closed);
            }
            if (ledgerMap.isEmpty()) {
                pendingAcks.remove(ledgerId);
            }
            return true;
        } finally {
            writeLock.unlock();
        }
    }
}
