"""DrainingHashesTracker: hashes that moved away from a consumer still holding unacked messages (§4.3).

A draining entry `(consumer, ref_count, blocked_count)` blocks its hash for every other consumer
until the owner's pending acks of that hash are gone. When an entry that blocked someone is
released (not by closing), the unblocking handler is told the hash, or -1 once per outermost batch.

Lock discipline (§4.6): the entry map is guarded by the model lock `tracker`; per-consumer stats by
`stats[c]`. The tracker lock is always released before a stats lock is taken, and the unblocking
handler is called holding neither, so the stats path (`stats[c]` then `tracker`) cannot deadlock.

Harness view: `draining_hashes` (hash -> DrainingHashEntry), `batch_level`,
`unblocked_while_batching`, and `update_consumer_stats(c)` for the per-consumer stats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .common import Consumer, IllegalStateError
from .common import ConsumerDrainingStats as ConsumerDrainingStats  # re-exported: it used to live here
from .hashing import STICKY_KEY_HASH_NOT_SET
from .locks import TRACKER_LOCK, LockTracer, record_handler_call, stats_lock, traced


@dataclass(eq=False)
class DrainingHashEntry:
    """The consumer draining a hash, its pending-ack count for it, and how often it blocked others."""

    consumer: Consumer
    ref_count: int = 0
    blocked_count: int = 0


@dataclass
class _ConsumerDrainingHashesStats:
    hashes: set[int] = field(default_factory=set)
    cleared_total: int = 0


class DrainingHashesTracker:
    """Mirrors Pulsar's DrainingHashesTracker."""

    def __init__(
        self,
        dispatcher_name: str,
        unblocking_handler: Callable[[int], None],
        *,
        lock_tracer: LockTracer | None = None,
    ) -> None:
        self.dispatcher_name = dispatcher_name
        self._unblocking_handler = unblocking_handler
        self.lock_tracer = lock_tracer
        self.draining_hashes: dict[int, DrainingHashEntry] = {}
        self.batch_level = 0
        self.unblocked_while_batching = False
        self._consumer_stats: dict[Consumer, _ConsumerDrainingHashesStats] = {}

    def add_entry(self, consumer: Consumer, sticky_hash: int) -> None:
        """Count one more pending ack of `sticky_hash` held by `consumer`, which lost the hash."""
        if sticky_hash == STICKY_KEY_HASH_NOT_SET:
            raise ValueError("Sticky hash cannot be 0")
        with traced(self.lock_tracer, TRACKER_LOCK):
            entry = self.draining_hashes.get(sticky_hash)
            created = entry is None
            if entry is None:
                entry = DrainingHashEntry(consumer)
                self.draining_hashes[sticky_hash] = entry
            elif entry.consumer is not consumer:
                raise IllegalStateError(
                    f"Consumer {entry.consumer!r} is already draining hash {sticky_hash} in dispatcher "
                    f"{self.dispatcher_name}. Same hash being used for consumer {consumer!r}."
                )
            entry.ref_count += 1
        if created:
            with traced(self.lock_tracer, stats_lock(consumer.consumer_id)):
                self._consumer_stats.setdefault(consumer, _ConsumerDrainingHashesStats()).hashes.add(sticky_hash)

    def reduce_ref_count(self, consumer: Consumer, sticky_hash: int, closing: bool) -> None:
        """One pending ack of the hash is gone; at 0 the entry is released (and may unblock)."""
        if sticky_hash == STICKY_KEY_HASH_NOT_SET:
            return
        unblocked_hash: int | None = None
        with traced(self.lock_tracer, TRACKER_LOCK):
            entry = self.draining_hashes.get(sticky_hash)
            if entry is None:
                return
            if entry.consumer is not consumer:
                raise IllegalStateError(
                    f"Consumer {consumer!r} is trying to reduce ref count for draining hash {sticky_hash} in "
                    f"dispatcher {self.dispatcher_name}, but it is being drained by {entry.consumer!r}."
                )
            entry.ref_count -= 1
            if entry.ref_count > 0:
                return
            del self.draining_hashes[sticky_hash]
            if not closing and entry.blocked_count > 0:
                if self.batch_level > 0:
                    self.unblocked_while_batching = True
                else:
                    unblocked_hash = sticky_hash
        self._clear_hash_from_stats(consumer, sticky_hash)
        if unblocked_hash is not None:
            self._notify_unblocked(unblocked_hash)

    def should_block_sticky_key_hash(self, consumer: Consumer, sticky_key_hash: int) -> bool:
        """True if another consumer drains the hash; lazily drops the entry if `consumer` owns it."""
        if sticky_key_hash == STICKY_KEY_HASH_NOT_SET:
            return False
        with traced(self.lock_tracer, TRACKER_LOCK):
            entry = self.draining_hashes.get(sticky_key_hash)
            if entry is None:
                return False
            if entry.consumer is not consumer:
                entry.blocked_count += 1
                return True
            # The hash came back to its draining consumer: nothing to wait for any more.
            del self.draining_hashes[sticky_key_hash]
        self._clear_hash_from_stats(consumer, sticky_key_hash)
        return False

    def start_batch(self) -> None:
        with traced(self.lock_tracer, TRACKER_LOCK):
            self.batch_level += 1

    def end_batch(self) -> None:
        """Leave a batch; the outermost exit reports unblocking once, with -1."""
        with traced(self.lock_tracer, TRACKER_LOCK):
            self.batch_level -= 1
            fire = self.batch_level == 0 and self.unblocked_while_batching
            if fire:
                self.unblocked_while_batching = False
        if fire:
            self._notify_unblocked(-1)

    def get_entry(self, sticky_key_hash: int) -> DrainingHashEntry | None:
        if sticky_key_hash == STICKY_KEY_HASH_NOT_SET:
            return None
        with traced(self.lock_tracer, TRACKER_LOCK):
            return self.draining_hashes.get(sticky_key_hash)

    def clear(self) -> None:
        """Drop every entry and all stats, without any callback (the last consumer left)."""
        with traced(self.lock_tracer, TRACKER_LOCK):
            self.draining_hashes.clear()
            self._consumer_stats.clear()

    def consumer_removed(self, consumer: Consumer) -> None:
        self._consumer_stats.pop(consumer, None)

    def update_consumer_stats(self, consumer: Consumer) -> ConsumerDrainingStats:
        """The consumer-stats path: holds `stats[c]`, then reads the tracker."""
        with traced(self.lock_tracer, stats_lock(consumer.consumer_id)):
            stats = self._consumer_stats.get(consumer)
            if stats is None:
                return ConsumerDrainingStats(0, 0, 0, ())
            per_hash: list[tuple[int, int, int]] = []
            for sticky_hash in sorted(stats.hashes):
                entry = self.get_entry(sticky_hash)
                if entry is not None:
                    per_hash.append((sticky_hash, entry.ref_count, entry.blocked_count))
            return ConsumerDrainingStats(
                len(per_hash), stats.cleared_total, sum(unacked for _, unacked, _ in per_hash), tuple(per_hash)
            )

    def _clear_hash_from_stats(self, consumer: Consumer, sticky_hash: int) -> None:
        with traced(self.lock_tracer, stats_lock(consumer.consumer_id)):
            stats = self._consumer_stats.get(consumer)
            if stats is not None:
                stats.hashes.discard(sticky_hash)
                stats.cleared_total += 1

    def _notify_unblocked(self, sticky_hash: int) -> None:
        record_handler_call(self.lock_tracer, "unblock")
        self._unblocking_handler(sticky_hash)
