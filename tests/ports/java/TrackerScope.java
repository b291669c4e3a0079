import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Supplier;

/**
 * brokerspec's keyshared "tracker" scope: the PIP-379 dispatcher reduced to the calls it makes on
 * PendingAcksMap and DrainingHashesTracker. It installs the add handler (refuse a hash another
 * consumer drains, queue the position for replay) and the remove handler (release ref counts,
 * batches forwarded), keeps an owner per hash where the dispatcher has a selector, and runs
 * registerDrainingHashes when the harness moves a hash. Consumers are numbered from 1; position p
 * is entry p of ledger position_ledgers[p] (ledger 1 when that list is empty). The harness's record of
 * what each consumer holds names the step's events the variables do not show.
 */
final class TrackerScope {
    private final List<Consumer> consumers = new ArrayList<>();
    private final List<Long> ledgers = new ArrayList<>();
    private final TreeMap<Integer, Consumer> owners = new TreeMap<>();
    private final TreeMap<List<Long>, Integer> replay = new TreeMap<>(TrackerScope::comparePositions);
    private final List<Map<List<Long>, Integer>> held = new ArrayList<>();
    private final TreeSet<String> events = new TreeSet<>();
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
            held.add(new TreeMap<>(TrackerScope::comparePositions));
        }
        TreeSet<Integer> hashes = new TreeSet<>();
        List<?> positionHashes = (List<?>) config.get("position_hashes");
        List<?> positionLedgers = (List<?>) config.get("position_ledgers");
        for (int p = 0; p < positionHashes.size(); p++) {
            int hash = ((Long) positionHashes.get(p)).intValue();
            if (hash != 0) { // STICKY_KEY_HASH_NOT_SET has no owner
                hashes.add(hash);
            }
            ledgers.add(positionLedgers.isEmpty() ? 1L : (Long) positionLedgers.get(p));
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
            replay.put(List.of(ledgerId, entryId), stickyKeyHash);
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
        events.clear();
        Map<String, Object> observation = new LinkedHashMap<>();
        List<Object> removed = new ArrayList<>();
        PendingAcksMap.PendingAcksConsumer visit = (ledgerId, entryId, batchSize, hash) ->
                removed.add(List.of(ledgerId, entryId, hash));
        Map<List<Long>, Integer> record = params.get("consumer") == null ? Map.of()
                : held.get((int) param(params, "consumer") - 1);
        Supplier<List<Long>> position = () -> {
            long entryId = param(params, "position");
            return List.of(ledgers.get((int) entryId), entryId);
        };
        switch (action) {
            case "add_pending_ack_if_allowed": {
                List<Long> at = position.get();
                int batchSize = (int) param(params, "batch_size");
                int hash = (int) param(params, "hash");
                try {
                    boolean added = consumer(params).getPendingAcks().addPendingAckIfAllowed(at.get(0), at.get(1),
                            batchSize, hash);
                    if (added) {
                        if (record.containsKey(at)) {
                            events.add("overwrote");
                        }
                        record.put(at, hash);
                        replay.remove(at);
                    }
                    observation.put("added", added);
                } catch (IllegalArgumentException e) {
                    events.add("hash_not_set");
                    observation.put("error", "IllegalArgumentException");
                }
                break;
            }
            case "remove": {
                List<Long> at = position.get();
                PendingAcksMap acks = consumer(params).getPendingAcks();
                boolean done;
                if (params.get("batch_size") == null) {
                    done = acks.remove(at.get(0), at.get(1));
                } else {
                    done = acks.remove(at.get(0), at.get(1), (int) param(params, "batch_size"),
                            (int) param(params, "hash"));
                    if (!done) {
                        events.add("kept_mismatch");
                    }
                }
                if (done) {
                    record.remove(at);
                }
                observation.put("removed", done);
                break;
            }
            case "remove_and_get_remaining_unacked": {
                List<Long> at = position.get();
                int remaining = consumer(params).getPendingAcks().removeAndGetRemainingUnacked(at.get(0), at.get(1));
                if (remaining != PendingAcksMap.PENDING_ACK_NOT_FOUND) {
                    record.remove(at);
                }
                observation.put("removed", remaining);
                break;
            }
            case "remove_all_up_to": {
                List<Long> at = position.get();
                if (record.keySet().stream().map(p -> p.get(0)).distinct().count() > 1) {
                    events.add("across_ledgers");
                }
                consumer(params).getPendingAcks().removeAllUpTo(at.get(0), at.get(1), visit);
                record.keySet().removeIf(p -> comparePositions(p, at) <= 0); // the cursor's order
                observation.put("removed", removed);
                break;
            }
            case "for_each_and_clear":
                consumer(params).getPendingAcks().forEachAndClear(visit);
                record.clear();
                observation.put("removed", removed);
                break;
            case "for_each_and_close":
                consumer(params).getPendingAcks().forEachAndClose(visit);
                record.clear();
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

    private static int comparePositions(List<Long> a, List<Long> b) {
        int byLedger = Long.compare(a.get(0), b.get(0));
        return byLedger != 0 ? byLedger : Long.compare(a.get(1), b.get(1));
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
            List<Object> pendingAcks = new ArrayList<>();
            acks.forEach((ledgerId, entryId, batchSize, hash) -> pendingAcks.add(List.of(ledgerId, entryId,
                    batchSize, hash)));
            pending.add(List.of(consumer.consumerId(), pendingAcks));
        }
        List<Object> ownerVars = new ArrayList<>();
        owners.forEach((hash, consumer) -> ownerVars.add(List.of(hash, consumer.consumerId())));
        List<Object> draining = new ArrayList<>();
        tracker.drainingHashes().forEach((hash, entry) -> draining.add(List.of(
                hash, entry.getConsumer().consumerId(), entry.getRefCount(), entry.getBlockedCount() > 0)));
        List<Object> replayVars = new ArrayList<>();
        replay.forEach((position, hash) -> replayVars.add(List.of(position.get(0), position.get(1), hash)));
        Map<String, Object> vars = new LinkedHashMap<>();
        vars.put("consumers", consumerVars);
        vars.put("owners", ownerVars);
        vars.put("pending", pending);
        vars.put("draining", draining);
        vars.put("batch_level", tracker.batchLevel());
        vars.put("unblocked_while_batching", tracker.unblockedWhileBatching());
        vars.put("replay", replayVars);
        vars.put("events", new ArrayList<>(events));
        return vars;
    }
}
