import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * A consumer's unacknowledged deliveries with their sticky key hashes (Pulsar's PendingAcksMap, PIP-379):
 * ledger id, then entry id, to (batch size, sticky key hash), iterated in ascending position order.
 * Each operation holds the map's monitor; the handlers let the dispatcher veto adds and release
 * draining ref counts on removal, batching removals so an unblocking is signalled once.
 */
final class PendingAcksMap {
    /** The last-moment check before an add (PIP-379 refuses a hash that another consumer drains). */
    interface PendingAcksAddHandler {
        boolean handleAdding(Consumer consumer, long ledgerId, long entryId, int stickyKeyHash);
    }

    /** Told of every removal; start and end a batch around removals of several entries. */
    interface PendingAcksRemoveHandler {
        void handleRemoving(Consumer consumer, long ledgerId, long entryId, int stickyKeyHash, boolean closing);

        void startBatch();

        void endBatch();
    }

    /** Receives one pending ack: its position, batch size and sticky key hash. */
    interface PendingAcksConsumer {
        void accept(long ledgerId, long entryId, int batchSize, int stickyKeyHash);
    }

    static final int PENDING_ACK_NOT_FOUND = -1;

    private record Value(int batchSize, int stickyKeyHash) {}

    private final Consumer consumer;
    private final NavigableMap<Long, NavigableMap<Long, Value>> pendingAcks = new TreeMap<>();
    private final Supplier<PendingAcksAddHandler> pendingAcksAddHandlerSupplier;
    private final Supplier<PendingAcksRemoveHandler> pendingAcksRemoveHandlerSupplier;
    private boolean closed;

    PendingAcksMap(Consumer consumer, Supplier<PendingAcksAddHandler> pendingAcksAddHandlerSupplier,
                   Supplier<PendingAcksRemoveHandler> pendingAcksRemoveHandlerSupplier) {
        this.consumer = consumer;
        this.pendingAcksAddHandlerSupplier = pendingAcksAddHandlerSupplier;
        this.pendingAcksRemoveHandlerSupplier = pendingAcksRemoveHandlerSupplier;
    }

    /** Adds (or overwrites) the position unless the map is closed or the add handler refuses it. */
    synchronized boolean addPendingAckIfAllowed(long ledgerId, long entryId, int batchSize, int stickyKeyHash) {
        if (closed) {
            return false;
        }
        PendingAcksAddHandler handler = pendingAcksAddHandlerSupplier.get();
        if (handler != null && !handler.handleAdding(consumer, ledgerId, entryId, stickyKeyHash)) {
            return false;
        }
        pendingAcks.computeIfAbsent(ledgerId, k -> new TreeMap<>()).put(entryId, new Value(batchSize, stickyKeyHash));
        return true;
    }

    /** Visits every pending ack in ascending order without changing anything. */
    synchronized void forEach(PendingAcksConsumer processor) {
        for (long[] position : positions(Long.MAX_VALUE, Long.MAX_VALUE)) {
            Value value = pendingAcks.get(position[0]).get(position[1]);
            processor.accept(position[0], position[1], value.batchSize(), value.stickyKeyHash());
        }
    }

    /** Closes the map (every later add fails), then visits and removes everything as one batch. */
    synchronized void forEachAndClose(PendingAcksConsumer processor) {
        closed = true;
        drain(processor);
    }

    /** Visits and removes everything as one batch; the map stays open (a redelivery). */
    synchronized void forEachAndClear(PendingAcksConsumer processor) {
        drain(processor);
    }

    private void drain(PendingAcksConsumer processor) {
        PendingAcksRemoveHandler handler = pendingAcksRemoveHandlerSupplier.get();
        try {
            if (handler != null) {
                handler.startBatch();
            }
            for (long[] position : positions(Long.MAX_VALUE, Long.MAX_VALUE)) {
                Value value = pendingAcks.get(position[0]).get(position[1]);
                processor.accept(position[0], position[1], value.batchSize(), value.stickyKeyHash());
                if (handler != null) {
                    handler.handleRemoving(consumer, position[0], position[1], value.stickyKeyHash(), closed);
                }
            }
        } finally {
            if (handler != null) {
                handler.endBatch();
            }
        }
        pendingAcks.clear();
    }

    /** Removes one position (an individual ack); the remove handler hears of it. */
    synchronized boolean remove(long ledgerId, long entryId) {
        NavigableMap<Long, Value> ledger = pendingAcks.get(ledgerId);
        Value value = ledger == null ? null : ledger.remove(entryId);
        if (value == null) {
            return false;
        }
        if (ledger.isEmpty()) {
            pendingAcks.remove(ledgerId);
        }
        PendingAcksRemoveHandler handler = pendingAcksRemoveHandlerSupplier.get();
        if (handler != null) {
            handler.handleRemoving(consumer, ledgerId, entryId, value.stickyKeyHash(), closed);
        }
        return true;
    }

    /** Removes the position only if its stored value is exactly (batchSize, stickyKeyHash). */
    synchronized boolean remove(long ledgerId, long entryId, int batchSize, int stickyKeyHash) {
        if (batchSize < 0) {
            return false;
        }
        NavigableMap<Long, Value> ledger = pendingAcks.get(ledgerId);
        Value value = ledger == null ? null : ledger.get(entryId);
        if (value == null || value.batchSize() != batchSize || value.stickyKeyHash() != stickyKeyHash) {
            return false;
        }
        return remove(ledgerId, entryId);
    }

    /** Removes the position like {@link #remove(long, long)}, returning its batch size, or -1 if absent. */
    synchronized int removeAndGetRemainingUnacked(long ledgerId, long entryId) {
        NavigableMap<Long, Value> ledger = pendingAcks.get(ledgerId);
        Value value = ledger == null ? null : ledger.get(entryId);
        if (value == null) {
            return PENDING_ACK_NOT_FOUND;
        }
        remove(ledgerId, entryId);
        return value.batchSize();
    }

    /** Removes every position up to the mark-delete position, as one batch if anything goes. */
    synchronized void removeAllUpTo(long markDeleteLedgerId, long markDeleteEntryId, PendingAcksConsumer callback) {
        List<long[]> doomed = positions(markDeleteLedgerId, markDeleteEntryId);
        if (doomed.isEmpty()) {
            return;
        }
        PendingAcksRemoveHandler handler = pendingAcksRemoveHandlerSupplier.get();
        try {
            if (handler != null) {
                handler.startBatch();
            }
            for (long[] position : doomed) {
                NavigableMap<Long, Value> ledger = pendingAcks.get(position[0]);
                Value value = ledger.remove(position[1]);
                if (ledger.isEmpty()) {
                    pendingAcks.remove(position[0]);
                }
                if (handler != null) {
                    handler.handleRemoving(consumer, position[0], position[1], value.stickyKeyHash(), closed);
                }
                callback.accept(position[0], position[1], value.batchSize(), value.stickyKeyHash());
            }
        } finally {
            if (handler != null) {
                handler.endBatch();
            }
        }
    }

    synchronized boolean isClosed() {
        return closed;
    }

    /** The positions up to (ledgerId, entryId) inclusive, ascending, copied so callers may remove. */
    private List<long[]> positions(long ledgerId, long entryId) {
        List<long[]> out = new ArrayList<>();
        for (Map.Entry<Long, NavigableMap<Long, Value>> ledger : pendingAcks.headMap(ledgerId, true).entrySet()) {
            NavigableMap<Long, Value> entries = ledger.getKey() < ledgerId
                    ? ledger.getValue() : ledger.getValue().headMap(entryId, true);
            for (long id : entries.keySet()) {
                out.add(new long[] {ledger.getKey(), id});
            }
        }
        return out;
    }
}
