import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * brokerspec's keyshared "tracker" scope: the PIP-379 dispatcher reduced to the calls it makes on
 * PendingAcksMap and DrainingHashesTracker. It installs the add handler (refuse a hash another
 * consumer drains, queue the position for replay) and the remove handler (release ref counts,
 * batches forwarded), keeps an owner per hash where the dispatcher has a selector, and runs
 * registerDrainingHashes when the harness moves a hash. Consumers are numbered from 1; positions
 * are entry ids of ledger 1.
 */
final class TrackerScope {
    private static final long LEDGER_ID = 1;

    private final List<Consumer> consumers = new ArrayList<>();
    private final TreeMap<Integer, Consumer> owners = new TreeMap<>();
    private final TreeMap<Long, Integer> replay = new TreeMap<>();
    private final List<Object> unblocked = new ArrayList<>();
    private final DrainingHashesTracker tracker;

    TrackerScope(Map<String, Object> config, boolean postDecrementBug) {
        tracker = new DrainingHashesTracker("brokerspec-tracker", unblocked::add, postDecrementBug);
        PendingAcksMap.PendingAcksAddHandler addHandler = this::handleAddingPendingAck;
        PendingAcksMap.PendingAcksRemoveHandler removeHandler = new PendingAcksMap.PendingAcksRemoveHandler() {
            @Override
            public void handleRemoving(Consumer consumer, long ledgerId, long entryId, int stickyKeyHash,
                                       boolean closing) {
                tracker.reduceRefCount(consumer, stickyKeyHash, closing);
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
        long count = (Long) config.get("consumers");
        for (long id = 1; id <= count; id++) {
            Consumer consumer = new Consumer(id, "consumer" + id);
            consumer.setPendingAcksAddHandler(addHandler);
            consumer.setPendingAcksRemoveHandler(removeHandler);
            consumers.add(consumer);
        }
        TreeSet<Integer> hashes = new TreeSet<>();
        for (Object hash : (List<?>) config.get("position_hashes")) {
            hashes.add(((Long) hash).intValue());
        }
        int i = 0;
        for (int hash : hashes) { // hash i (ascending) starts with consumer i mod n + 1
            owners.put(hash, consumers.get(i++ % consumers.size()));
        }
    }

    private boolean handleAddingPendingAck(Consumer consumer, long ledgerId, long entryId, int stickyKeyHash) {
        if (stickyKeyHash == 0) {
            throw new IllegalArgumentException("Sticky key hash is not set. It is required.");
        }
        DrainingHashesTracker.DrainingHashEntry entry = tracker.getEntry(stickyKeyHash);
        if (entry != null && entry.getConsumer() != consumer) {
            replay.put(entryId, stickyKeyHash);
            return false;
        }
        return true;
    }

    /** registerDrainingHashes for one hash that moves to {@code target}: all REMOVE work, then all ADD work. */
    private void moveHash(int stickyHash, Consumer target) {
        Consumer before = owners.put(stickyHash, target);
        before.getPendingAcks().forEach((ledgerId, entryId, batchSize, hash) -> {
            if (hash == stickyHash) {
                tracker.addEntry(before, stickyHash);
            }
        });
        target.getPendingAcks().forEach((ledgerId, entryId, batchSize, hash) -> {
            DrainingHashesTracker.DrainingHashEntry entry = tracker.getEntry(stickyHash);
            if (hash == stickyHash && entry != null && entry.getConsumer() == target) {
                tracker.reduceRefCount(target, stickyHash, false);
            }
        });
    }

    Map<String, Object> apply(String action, Map<String, Object> params) {
        unblocked.clear();
        Map<String, Object> observation = new LinkedHashMap<>();
        List<Object> removed = new ArrayList<>();
        PendingAcksMap.PendingAcksConsumer visit = (ledgerId, entryId, batchSize, hash) ->
                removed.add(List.of(entryId, hash));
        switch (action) {
            case "add_pending_ack_if_allowed": {
                long position = param(params, "position");
                boolean added = consumer(params).getPendingAcks()
                        .addPendingAckIfAllowed(LEDGER_ID, position, 1, (int) param(params, "hash"));
                if (added) {
                    replay.remove(position);
                }
                observation.put("added", added);
                break;
            }
            case "remove":
                observation.put("removed", consumer(params).getPendingAcks().remove(LEDGER_ID, param(params, "position")));
                break;
            case "remove_all_up_to":
                consumer(params).getPendingAcks().removeAllUpTo(LEDGER_ID, param(params, "position"), visit);
                observation.put("removed", removed);
                break;
            case "for_each_and_clear":
                consumer(params).getPendingAcks().forEachAndClear(visit);
                observation.put("removed", removed);
                break;
            case "for_each_and_close":
                consumer(params).getPendingAcks().forEachAndClose(visit);
                observation.put("removed", removed);
                break;
            case "should_block_sticky_key_hash":
                observation.put("blocked", tracker.shouldBlockStickyKeyHash(consumer(params), (int) param(params, "hash")));
                break;
            case "move_hash":
                moveHash((int) param(params, "hash"), consumer(params));
                break;
            case "start_batch":
                tracker.startBatch();
                break;
            case "end_batch":
                tracker.endBatch();
                break;
            default:
                throw new IllegalArgumentException("unknown action " + action);
        }
        observation.put("unblocked", new ArrayList<>(unblocked));
        return observation;
    }

    private Consumer consumer(Map<String, Object> params) {
        return consumers.get((int) param(params, "consumer") - 1);
    }

    private static long param(Map<String, Object> params, String name) {
        if (!(params.get(name) instanceof Long value)) {
            throw new IllegalArgumentException("missing integer parameter " + name);
        }
        return value;
    }

    Map<String, Object> vars() {
        List<Object> consumerVars = new ArrayList<>();
        List<Object> pending = new ArrayList<>();
        for (Consumer consumer : consumers) {
            PendingAcksMap acks = consumer.getPendingAcks();
            consumerVars.add(List.of(consumer.consumerId(), consumer.consumerName(), acks.isClosed()));
            List<Object> held = new ArrayList<>();
            acks.forEach((ledgerId, entryId, batchSize, hash) -> held.add(List.of(entryId, hash)));
            pending.add(List.of(consumer.consumerId(), held));
        }
        List<Object> ownerVars = new ArrayList<>();
        owners.forEach((hash, consumer) -> ownerVars.add(List.of(hash, consumer.consumerId())));
        List<Object> draining = new ArrayList<>();
        tracker.drainingHashes().forEach((hash, entry) -> draining.add(List.of(
                hash, entry.getConsumer().consumerId(), entry.getRefCount(), entry.getBlockedCount() > 0)));
        List<Object> replayVars = new ArrayList<>();
        replay.forEach((position, hash) -> replayVars.add(List.of(position, hash)));
        Map<String, Object> vars = new LinkedHashMap<>();
        vars.put("consumers", consumerVars);
        vars.put("owners", ownerVars);
        vars.put("pending", pending);
        vars.put("draining", draining);
        vars.put("batch_level", tracker.batchLevel());
        vars.put("unblocked_while_batching", tracker.unblockedWhileBatching());
        vars.put("replay", replayVars);
        return vars;
    }
}
