"""DrainingHashesTracker, PendingAcksMap and their dispatcher callers at upstream's lock granularity.

`draining.py` and `pending_acks.py` run each method as one critical section (the dispatcher scope's
view). Upstream does not: a method is a few steps separated by its locks and atomics, and the steps of
the dispatcher thread and of a connection thread acking messages interleave. This module mirrors
upstream's source statement by statement at those separations, on the deterministic scheduler of
`reference_impl.concurrent` (every lock acquisition and atomic access a scheduling point):

- `DrainingHashesTracker`, after apache/pulsar 0063cdd8
  `pulsar-broker/.../service/DrainingHashesTracker.java`: the entry map under a `ReentrantReadWriteLock`
  (fields at lines 51-54; `getEntry` takes the read lock, lines 426-436), the entry's `refCount` and
  `blockedCount` as volatile ints changed through field updaters (lines 69-70, 96-121), `addEntry` (lines
  233-275: write lock at 240, get or create, unlock at 265, then `incrementRefCount` at 268, then the stats at
  273), `startBatch`/`endBatch` (lines 281-308: the -1 call at 306, outside the lock), `reduceRefCount` (lines
  317-373: `getEntry` at 322, `decrementRefCount` at 332, then the write lock at 340 around
  `drainingHashes.remove(stickyHash)` by key at 342 and `!closing && removed.isBlocking()` at 343, unlocked
  at 351, then the stats at 360 and the unblocking handler at 365 outside it), and `shouldBlockStickyKeyHash`
  (lines 382-418: `getEntry` at 387, a lazy `remove(stickyKeyHash, entry)` under the write lock at 397-401
  when the hash is back with its drainer, else `incrementBlockedCount()` at 415 holding no lock);
- `PendingAcksMap`, after apache/pulsar 01df066a `.../service/PendingAcksMap.java`: a read/write lock per
  consumer (lines 102-104); `forEach` under the read lock (172-174), `remove(l, e)` under the write lock with
  the remove handler called inside it (321-332), `forEachAndClose` under the write lock (`closed` set at 223,
  the handler batch at 228-234, the map cleared at 239), `removeAllUpTo` first under the read lock and again
  under the write lock when there is something to remove (397-470: the retry at 470), its handler batch
  ended inside the write lock (463);
- the callers in `PersistentStickyKeyDispatcherMultipleConsumers` (0063cdd8): the REMOVE and ADD parts of
  `registerDrainingHashes` (lines 169-188) walk the impacted consumer's map with `forEach` (173), the ADD part
  reading `getEntry` (182) before `reduceRefCount` (184); `removeConsumer` (197-206) drops the consumer from
  the selector, closes its map (`super.removeConsumer`, 200), then registers the draining hashes (205) and
  drops its stats (206); the dispatch's `canDispatchEntry` calls `shouldBlockStickyKeyHash` (532). Every
  dispatcher-side operation runs on the one dispatcher thread (under the dispatcher's monitor, which no other
  thread here takes, so it is never contended); acks run on a connection thread;
- the points upstream added since, read at apache/pulsar 90cba329a1: the volatile `size` of `PendingAcksMap`
  (#26019, 38deb2a1ea: `size--` in `remove` at line 314 before the handler and in `removeAllUpTo` at 488 after
  it, each a read and a write; `size = 0` in `forEachAndClose` at 247), and the tracker's log lines, whose
  attributes slog computes whatever the level (#25535, 4998cd9e4f): `entry.getRefCount()` read inside
  `addEntry`'s write lock for an existing entry (269), after a decrement that left it above 0 (383), and before
  the lazy removal in `shouldBlockStickyKeyHash` (414). `verify --jvm` on upstream's unedited classes runs in
  lockstep with these points (docs/findings/keyshared-tracker-lost-unblock.md).

`order` selects the tracker's code: `current` (above); `locked-block`, the fix of
docs/findings/keyshared-tracker-lost-unblock.md (`shouldBlockStickyKeyHash` takes the write lock and
counts the block only while the map still holds the entry it read); `pre23854`, the tracker before
apache/pulsar#23854 (every method `synchronized` on the tracker, the unblocking handler and the stats
updated inside the monitor, the counters plain ints); and `unserialized`, the current tracker under callers
that take no PendingAcksMap lock: the one atomicity switch the current order relies on (see the finding),
dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from reference_impl.concurrent.atomic import AtomicInteger, AtomicLong
from reference_impl.concurrent.executors import java_method, scheduling_point
from reference_impl.concurrent.locks import ReentrantLock, ReentrantReadWriteLock

ORDERS = ("current", "locked-block", "pre23854", "unserialized")
LEDGER = 1


class NullPointerException(Exception):
    """A dereference of null, as the JVM would throw it."""


class IllegalStateException(Exception):
    """Java's IllegalStateException."""


class _PlainInt:
    """An `int` field changed only under a monitor (the pre-#23854 entry): no scheduling point of its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.value = 0

    def get(self) -> int:
        return self.value

    def increment_and_get(self) -> int:
        self.value += 1
        return self.value

    def decrement_and_get(self) -> int:
        self.value -= 1
        return self.value


@dataclass(eq=False)
class Consumer:
    """The part of Pulsar's Consumer the tracker sees: its id and its map of pending acks."""

    consumer_id: int
    pending_acks: PendingAcksMap = field(init=False)

    def __repr__(self) -> str:
        return f"Consumer({self.consumer_id})"


class DrainingHashEntry:
    """A hash draining from `consumer`: how many of its pending acks hold it, how often it blocked others."""

    def __init__(self, consumer: Consumer, atomic: bool) -> None:
        self.consumer = consumer
        counter = AtomicInteger if atomic else _PlainInt
        self.ref_count = counter("entry.refCount")
        self.blocked_count = counter("entry.blockedCount")

    def increment_ref_count(self) -> None:
        self.ref_count.increment_and_get()

    def decrement_ref_count(self) -> bool:
        return self.ref_count.decrement_and_get() == 0

    def increment_blocked_count(self) -> None:
        self.blocked_count.increment_and_get()

    def is_blocking(self) -> bool:
        return self.blocked_count.get() > 0


class ConsumerDrainingHashesStats:
    """A consumer's draining-hash statistics under their own read/write lock."""

    def __init__(self, consumer_id: int) -> None:
        self.stats_lock = ReentrantReadWriteLock(f"stats[{consumer_id}]")
        self.draining_hashes: set[int] = set()
        self.draining_hashes_cleared_total = 0

    def add_hash(self, sticky_hash: int) -> None:
        with self.stats_lock.write_lock().held():
            self.draining_hashes.add(sticky_hash)

    def clear_hash(self, sticky_hash: int) -> None:
        with self.stats_lock.write_lock().held():
            self.draining_hashes.discard(sticky_hash)
            self.draining_hashes_cleared_total += 1


def _deref(entry: DrainingHashEntry | None) -> DrainingHashEntry:
    if entry is None:
        raise NullPointerException("removed.isBlocking() on null")
    return entry


class DrainingHashesTracker:
    """Pulsar's DrainingHashesTracker in the chosen `order` (see the module doc)."""

    def __init__(self, unblocking_handler: Callable[[int], None], order: str) -> None:
        if order not in ORDERS:
            raise ValueError(f"unknown tracker order {order!r} (one of {', '.join(ORDERS)})")
        self.order = order
        self.unblocking_handler = unblocking_handler
        self.draining_hashes: dict[int, DrainingHashEntry] = {}
        self.lock = ReentrantReadWriteLock("tracker")
        self.monitor = ReentrantLock("tracker")  # pre-#23854: every public method was synchronized
        self.batch_level = 0
        self.unblocked_while_batching = False
        self.consumer_draining_hashes_stats_map: dict[int, ConsumerDrainingHashesStats] = {}

    @contextmanager
    def _synchronized(self) -> Iterator[None]:
        """The pre-#23854 `synchronized` method body; today's methods take their locks inside instead."""
        if self.order != "pre23854":
            yield
            return
        with self.monitor.held():
            yield

    def _stats(self, consumer: Consumer) -> ConsumerDrainingHashesStats | None:
        return self.consumer_draining_hashes_stats_map.get(consumer.consumer_id)

    @java_method("addEntry")
    def add_entry(self, consumer: Consumer, sticky_hash: int) -> None:
        if sticky_hash == 0:
            raise ValueError("Sticky hash cannot be 0")
        if self.order == "pre23854":
            with self._synchronized():
                entry, added_stats = self._get_or_create(consumer, sticky_hash)
                if added_stats is not None:
                    added_stats.add_hash(sticky_hash)  # inside the monitor, as before #23854
                entry.increment_ref_count()
            return
        with self.lock.write_lock().held():
            entry, added_stats = self._get_or_create(consumer, sticky_hash)
            if added_stats is None:
                entry.ref_count.get()  # the log line's attribute, computed whatever the level (#25535)
        entry.increment_ref_count()
        if added_stats is not None:
            added_stats.add_hash(sticky_hash)

    def _get_or_create(
        self, consumer: Consumer, sticky_hash: int
    ) -> tuple[DrainingHashEntry, ConsumerDrainingHashesStats | None]:
        """The map half of addEntry, under the tracker's lock: the entry, and the consumer's stats if it was created."""
        entry = self.draining_hashes.get(sticky_hash)
        if entry is None:
            entry = DrainingHashEntry(consumer, atomic=self.order != "pre23854")
            self.draining_hashes[sticky_hash] = entry
            stats = self.consumer_draining_hashes_stats_map.setdefault(
                consumer.consumer_id, ConsumerDrainingHashesStats(consumer.consumer_id))
            return entry, stats
        if entry.consumer is not consumer:
            raise IllegalStateException(f"Consumer {entry.consumer} is already draining hash {sticky_hash}")
        return entry, None

    @java_method("startBatch")
    def start_batch(self) -> None:
        with self._synchronized(), self._write_locked():
            self.batch_level += 1

    @java_method("endBatch")
    def end_batch(self) -> None:
        notify = False
        with self._synchronized():
            with self._write_locked():
                self.batch_level -= 1
                if self.batch_level == 0 and self.unblocked_while_batching:
                    self.unblocked_while_batching = False
                    notify = True
            if notify and self.order == "pre23854":
                self.unblocking_handler(-1)
        if notify and self.order != "pre23854":
            self.unblocking_handler(-1)

    @contextmanager
    def _write_locked(self) -> Iterator[None]:
        """Today's write lock; nothing more inside the pre-#23854 monitor."""
        if self.order == "pre23854":
            yield
            return
        with self.lock.write_lock().held():
            yield

    @java_method("reduceRefCount")
    def reduce_ref_count(self, consumer: Consumer, sticky_hash: int, closing: bool) -> None:
        if sticky_hash == 0:
            return
        with self._synchronized():
            entry = self._get_entry(sticky_hash)
            if entry is None:
                return
            if entry.consumer is not consumer:
                raise IllegalStateException(f"Consumer {entry.consumer} is already draining hash {sticky_hash}")
            if not entry.decrement_ref_count():
                if self.order != "pre23854":
                    entry.ref_count.get()  # the log line's attribute (#25535)
                return
            notify = False
            with self._write_locked():
                removed = self.draining_hashes.pop(sticky_hash, None)  # remove(stickyHash): by key
                if not closing and _deref(removed).is_blocking():
                    if self.batch_level > 0:
                        self.unblocked_while_batching = True
                    else:
                        notify = True
                if self.order == "pre23854":
                    self._clear_stats(consumer, sticky_hash)
                    if notify:
                        self.unblocking_handler(sticky_hash)
                    return
        self._clear_stats(consumer, sticky_hash)
        if notify:
            self.unblocking_handler(sticky_hash)

    def _clear_stats(self, consumer: Consumer, sticky_hash: int) -> None:
        stats = self._stats(consumer)
        if stats is not None:
            stats.clear_hash(sticky_hash)

    @java_method("shouldBlockStickyKeyHash")
    def should_block_sticky_key_hash(self, consumer: Consumer, sticky_key_hash: int) -> bool:
        if sticky_key_hash == 0:
            return False
        with self._synchronized():
            entry = self._get_entry(sticky_key_hash)
            if entry is None:
                return False
            if entry.consumer is consumer:  # the hash came back to its drainer: drop the entry
                if self.order != "pre23854":
                    entry.ref_count.get()  # the info log line's attribute
                with self._write_locked():
                    if self.draining_hashes.get(sticky_key_hash) is entry:  # remove(stickyKeyHash, entry)
                        del self.draining_hashes[sticky_key_hash]
                    if self.order == "pre23854":
                        self._clear_stats(consumer, sticky_key_hash)
                        return False
                self._clear_stats(consumer, sticky_key_hash)
                return False
            if self.order == "locked-block":  # the fix: count the block only while the entry is still there
                with self.lock.write_lock().held():
                    if self.draining_hashes.get(sticky_key_hash) is not entry:
                        return False
                    entry.increment_blocked_count()
                return True
            entry.increment_blocked_count()
            return True

    def _get_entry(self, sticky_key_hash: int) -> DrainingHashEntry | None:
        """getEntry: under the read lock today; plain inside the pre-#23854 monitor."""
        if sticky_key_hash == 0:
            return None
        if self.order == "pre23854":
            return self.draining_hashes.get(sticky_key_hash)
        with self.lock.read_lock().held():
            return self.draining_hashes.get(sticky_key_hash)

    @java_method("getEntry")
    def get_entry(self, sticky_key_hash: int) -> DrainingHashEntry | None:
        with self._synchronized():
            return self._get_entry(sticky_key_hash)

    def consumer_removed(self, consumer: Consumer) -> None:
        self.consumer_draining_hashes_stats_map.pop(consumer.consumer_id, None)


PendingAcksConsumer = Callable[[int, int, int, int], None]
"""accept(ledgerId, entryId, batchSize, stickyKeyHash)."""


class PendingAcksRemoveHandler:
    """What the dispatcher installs on a consumer's map: removals reduce the tracker's ref counts."""

    def __init__(self, tracker: DrainingHashesTracker) -> None:
        self.tracker = tracker

    def handle_removing(self, consumer: Consumer, sticky_key_hash: int, closing: bool) -> None:
        self.tracker.reduce_ref_count(consumer, sticky_key_hash, closing)

    def start_batch(self) -> None:
        self.tracker.start_batch()

    def end_batch(self) -> None:
        self.tracker.end_batch()


class PendingAcksMap:
    """A consumer's pending acks `entry id -> (batch size, sticky hash)` on one ledger, under a read/write lock.

    `serialized=False` is the `unserialized` order: callers and the map take no lock at all.
    """

    def __init__(self, consumer: Consumer, handler: PendingAcksRemoveHandler, serialized: bool, sized: bool) -> None:
        self.consumer = consumer
        self.handler = handler
        self.serialized = serialized
        self.lock = ReentrantReadWriteLock(f"map[{consumer.consumer_id}]")
        self.pending_acks: dict[int, tuple[int, int]] = {}
        self.closed = False
        self.size = AtomicLong(f"map[{consumer.consumer_id}].size") if sized else None
        """The volatile size of #26019 (None: the map before it), written under the write lock; in this scope nobody
        reads it, but each `size--` is a read and a write, so two scheduling points."""

    def _decrement_size(self) -> None:
        if self.size is not None:
            self.size.set(self.size.get() - 1)

    @contextmanager
    def _locked(self, write: bool) -> Iterator[None]:
        if not self.serialized:
            yield
            return
        with (self.lock.write_lock() if write else self.lock.read_lock()).held():
            yield

    def put(self, entry_id: int, sticky_key_hash: int) -> None:
        """Seed a pending ack before any thread runs (the harness's setup, not a dispatch)."""
        self.pending_acks[entry_id] = (1, sticky_key_hash)
        if self.size is not None:
            self.size.value += 1

    @java_method("forEach")
    def for_each(self, processor: PendingAcksConsumer) -> None:
        with self._locked(write=False):
            for entry_id, (batch_size, sticky_key_hash) in sorted(self.pending_acks.items()):
                processor(LEDGER, entry_id, batch_size, sticky_key_hash)

    @java_method("remove")
    def remove(self, ledger_id: int, entry_id: int) -> bool:
        with self._locked(write=True):
            removed = self.pending_acks.pop(entry_id, None) if ledger_id == LEDGER else None
            if removed is None:
                return False
            self._decrement_size()
            self.handler.handle_removing(self.consumer, removed[1], self.closed)
            return True

    @java_method("forEachAndClose")
    def for_each_and_close(self, processor: PendingAcksConsumer) -> None:
        with self._locked(write=True):
            self.closed = True
            try:
                self.handler.start_batch()
                for entry_id, (batch_size, sticky_key_hash) in sorted(self.pending_acks.items()):
                    processor(LEDGER, entry_id, batch_size, sticky_key_hash)
                    self.handler.handle_removing(self.consumer, sticky_key_hash, self.closed)
            finally:
                self.handler.end_batch()
            self.pending_acks.clear()
            if self.size is not None:
                self.size.set(0)

    @java_method("removeAllUpTo")
    def remove_all_up_to(self, mark_delete_ledger_id: int, mark_delete_entry_id: int) -> None:
        """Under the read lock first; again under the write lock if anything is at or below mark-delete."""
        if self._remove_all_up_to(mark_delete_ledger_id, mark_delete_entry_id, write=False):
            self._remove_all_up_to(mark_delete_ledger_id, mark_delete_entry_id, write=True)

    def _remove_all_up_to(self, mark_delete_ledger_id: int, mark_delete_entry_id: int, write: bool) -> bool:
        """One pass; True when a read-locked pass found something to remove (retry under the write lock)."""
        with self._locked(write):
            bound = (mark_delete_ledger_id, mark_delete_entry_id)
            doomed = sorted(e for e in self.pending_acks if (LEDGER, e) <= bound)
            if doomed and not write and self.serialized:
                return True
            batch_started = False
            try:
                for entry_id in doomed:
                    if not batch_started:
                        self.handler.start_batch()
                        batch_started = True
                    removed = self.pending_acks.get(entry_id)
                    if removed is not None:  # unserialized, a concurrent close may have taken it already
                        self.handler.handle_removing(self.consumer, removed[1], self.closed)
                        self.pending_acks.pop(entry_id, None)
                        self._decrement_size()
            finally:
                if batch_started:
                    self.handler.end_batch()
            return False


class StickyKeyDispatcher:
    """The dispatcher's side of PersistentStickyKeyDispatcherMultipleConsumers that drives the tracker.

    The selector is reduced to who owns each hash: `prefer` lists, per hash, the consumers the consistent-hash
    ring would give it to, first choice first, so a hash belongs to its most preferred connected consumer (a
    join takes hashes only from their owners, a leave hands each of its hashes to the next in line, as the ring
    does). `join`, `remove_consumer` and `dispatch` run on the dispatcher thread (or a connection's, under the
    dispatcher's monitor), `ack` and `ack_up_to` on a consumer's connection thread.
    """

    def __init__(self, order: str, prefer: Mapping[int, tuple[int, ...]], present: tuple[int, ...],
                 synchronized: bool = False) -> None:
        self.order = order
        self.synchronized = synchronized
        """Whether `join`, `remove_consumer` and `dispatch` take the dispatcher's monitor (their Java methods are
        `synchronized`): needed once membership changes run on a thread of their own."""
        self.monitor = ReentrantLock("dispatcher")
        self.unblocked: list[int] = []  # every stickyKeyHashUnblocked call, in order
        self.tracker = DrainingHashesTracker(self.sticky_key_hash_unblocked, order)
        self.handler = PendingAcksRemoveHandler(self.tracker)
        self.prefer = dict(prefer)
        self.consumers: dict[int, Consumer] = {}
        self.connected: set[int] = set()
        for cid in sorted({c for p in self.prefer.values() for c in p}):
            self._new_consumer(cid)
        self.connected = set(present)
        self.owners = {h: self._choice(h) for h in self.prefer}
        self.replay: list[int] = []  # redeliveryMessages: entry ids the closed consumers' maps handed back

    def _choice(self, sticky_hash: int) -> int:
        """The selector's owner of the hash among the connected consumers."""
        return next(c for c in self.prefer[sticky_hash] if c in self.connected)

    def _new_consumer(self, consumer_id: int) -> Consumer:
        consumer = Consumer(consumer_id)
        consumer.pending_acks = PendingAcksMap(consumer, self.handler, serialized=self.order != "unserialized",
                                               sized=self.order != "pre23854")
        self.consumers[consumer_id] = consumer
        return consumer

    def sticky_key_hash_unblocked(self, sticky_key_hash: int) -> None:
        """The tracker's UnblockingHandler: upstream reschedules a read (an executor submission, so a point)."""
        scheduling_point("stickyKeyHashUnblocked")
        self.unblocked.append(sticky_key_hash)

    @java_method("registerDrainingHashes")
    def register_draining_hashes(self, impacted: Consumer, hashes: set[int], adding: bool) -> None:
        """The consumer `impacted` gained (`adding`, the ADD part) or lost `hashes` (the updated ranges)."""

        def process(_ledger_id: int, _entry_id: int, _batch_size: int, pending_hash: int) -> None:
            if pending_hash not in hashes:
                return
            if adding:  # reduce the ref count in case the hash came back to its drainer
                entry = self.tracker.get_entry(pending_hash)
                if entry is not None and entry.consumer is impacted:
                    self.tracker.reduce_ref_count(impacted, pending_hash, False)
            else:
                self.tracker.add_entry(impacted, pending_hash)

        impacted.pending_acks.for_each(process)

    @contextmanager
    def _monitor(self) -> Iterator[None]:
        if not self.synchronized:
            yield
            return
        with self.monitor.held():
            yield

    @java_method("addConsumer")
    def join(self, consumer_id: int) -> None:
        """addConsumer: a new consumer object takes the hashes the selector now gives it; the REMOVE part runs for
        each consumer that lost some, in id order (the joiner itself is upstream's skipConsumer). Upstream's
        `ImpactedConsumersResult.processUpdatedHashRanges` walks a map keyed by `Consumer`, whose order is not
        specified: id order is one it may take."""
        with self._monitor():
            self._join(consumer_id)

    def _join(self, consumer_id: int) -> None:
        self._new_consumer(consumer_id)
        self.connected.add(consumer_id)
        lost: dict[int, set[int]] = {}
        for h, owner in sorted(self.owners.items()):
            if self._choice(h) != owner:
                lost.setdefault(owner, set()).add(h)
                self.owners[h] = consumer_id
        for loser in sorted(lost):
            self.register_draining_hashes(self.consumers[loser], lost[loser], adding=False)

    @java_method("trySendMessagesToConsumers")
    def dispatch(self, sticky_hash: int) -> bool:
        """canDispatchEntry's draining check for the hash's owner: True if the hash is blocked."""
        with self._monitor():
            return self.tracker.should_block_sticky_key_hash(self.consumers[self.owners[sticky_hash]], sticky_hash)

    @java_method("removeConsumer")
    def remove_consumer(self, consumer_id: int) -> None:
        """removeConsumer: the selector gives the leaver's hashes to their heirs, the leaver's map is closed into
        replay (a handler batch, `closing` true), then the ADD part for each heir (in id order) and the leaver's
        stats are dropped."""
        with self._monitor():
            self._remove_consumer(consumer_id)

    def _remove_consumer(self, consumer_id: int) -> None:
        leaver = self.consumers[consumer_id]
        self.connected.discard(consumer_id)
        gained: dict[int, set[int]] = {}
        for h, owner in sorted(self.owners.items()):
            if owner == consumer_id:
                self.owners[h] = self._choice(h)
                gained.setdefault(self.owners[h], set()).add(h)
        leaver.pending_acks.for_each_and_close(lambda _l, entry_id, _b, _h: self.replay.append(entry_id))
        for heir in sorted(gained):
            self.register_draining_hashes(self.consumers[heir], gained[heir], adding=True)
        self.tracker.consumer_removed(leaver)

    def ack(self, consumer_id: int, entry_id: int) -> bool:
        """An individual ack on the consumer's connection thread: PendingAcksMap.remove."""
        return self.consumers[consumer_id].pending_acks.remove(LEDGER, entry_id)

    def ack_up_to(self, consumer_id: int, entry_id: int) -> None:
        """Mark-delete moved to `entry_id` (a cumulative ack): removeAllUpTo, one handler batch."""
        self.consumers[consumer_id].pending_acks.remove_all_up_to(LEDGER, entry_id)
