"""Key_Shared (AUTO_SPLIT) dispatcher model with three variants (spec §4.4–§4.6).

`KeySharedDispatcher` mirrors PersistentStickyKeyDispatcherMultipleConsumers (`pip379`, current),
PersistentStickyKeyDispatcherMultipleConsumersClassic (`classic`, the 3.x readPosition gate) and the
unreleased PIP-282 lastSentPosition gate (`pip282`). The storage is one ledger (id 1) with one
message per entry; the cursor has a read position, a mark-delete position and individual acks.

Concurrency without threads (§4.6): add/remove consumer, the dispatcher part of a redelivery and a
dispatch pass with its send are mutually exclusive. Acks and flows may run inside a pass through the
`interleave(stage, index)` callback, and the asynchronous storage read is the gap between
`begin_read` and `complete_read`, where the harness may run anything. The interleave items are the
queued positions examined by the replay filter (stage "replay_filter") and the read entries of the
dispatch pass (stage "dispatch"); classic's dispatch pass interleaves between its per-consumer groups.

How a harness reads the state:
- `deliveries` is the dispatch log (`Delivery(consumer, position, hash, read_type)`), in order;
  `received_by(c)` gives one consumer's received positions in order.
- `consumers` (join order); per consumer `pending_acks.items()`, `unacked_messages` and `available_permits(c)`;
  `total_available_permits`, the dispatcher's sum of its consumers' permits.
- `tracker.draining_hashes` (pip379), `replay_queue.items()`, `read_position`,
  `mark_delete_position`, `individually_acked`, `recently_joined.items()` (classic, pip282),
  `last_sent_position`/`individually_sent_positions` (pip282), the flags `scheduled_read`,
  `skip_next_replay_to_trigger_look_ahead` and `is_dispatcher_stuck_on_replays`, the in-flight read
  flags `have_pending_read`, `have_pending_replay_read` and `should_rewind_before_reading_or_replaying`,
  `unblock_calls`, and `last_impacted` (the selector's last impacted result, pip379).
- `view()` returns all of it as one immutable, identity-free `DispatcherView` (consumers by id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum

from .common import Consumer, IllegalStateError, Position, next_position
from .draining import DrainingHashesTracker
from .locks import DISPATCHER_LOCK, LockTracer, traced
from .pending_acks import PENDING_ACK_NOT_FOUND
from .redelivery import RecentlyJoinedConsumers, RedeliveryMessages, advance_last_sent_position
from .selector import (
    ConsistentHashingStickyKeyConsumerSelector,
    ImpactedConsumersResult,
    OperationType,
    UpdatedHashRanges,
)
from .views import ConsumerView, DispatcherView, DrainingView

VARIANTS = ("pip379", "classic", "pip282")
LEDGER_ID = 1
DISPATCHER_NAME = "key-shared-dispatcher"
_INT_MAX = 2**31 - 1

# interleave(stage, index): stage is "replay_filter" or "dispatch"; index >= 1 is the item about to run.
Interleave = Callable[[str, int], None]


class ReadType(Enum):
    NORMAL = "Normal"
    REPLAY = "Replay"


@dataclass(frozen=True)
class Delivery:
    """One message handed to a consumer (its pending ack was accepted)."""

    consumer: Consumer
    position: Position
    hash: int
    read_type: ReadType


@dataclass(eq=False)
class ReadOp:
    """An issued storage read, completed later by `complete_read` (the asynchronous gap)."""

    read_type: ReadType
    positions: tuple[Position, ...]
    completed: bool = False


@dataclass(frozen=True)
class ReadResult:
    """Outcome of one read: what each consumer got, and which read positions sit in the replay queue."""

    read_type: ReadType | None
    dispatched: dict[Consumer, list[Position]] = field(default_factory=dict)
    to_replay: tuple[Position, ...] = ()


class _DrainingAddHandler:
    """PendingAcksAddHandler that routes to the dispatcher's last-moment check."""

    def __init__(self, dispatcher: KeySharedDispatcher) -> None:
        self._dispatcher = dispatcher

    def handle_adding(self, consumer: Consumer, ledger_id: int, entry_id: int, sticky_key_hash: int) -> bool:
        return self._dispatcher.handle_adding_pending_ack(consumer, ledger_id, entry_id, sticky_key_hash)


class DrainingRemoveHandler:
    """PendingAcksRemoveHandler that releases draining ref counts, batching as the map does."""

    def __init__(self, tracker: DrainingHashesTracker) -> None:
        self._tracker = tracker

    def handle_removing(
        self, consumer: Consumer, ledger_id: int, entry_id: int, sticky_key_hash: int, closing: bool
    ) -> None:
        self._tracker.reduce_ref_count(consumer, sticky_key_hash, closing)

    def start_batch(self) -> None:
        self._tracker.start_batch()

    def end_batch(self) -> None:
        self._tracker.end_batch()


class KeySharedDispatcher:
    """The dispatcher model; see the module docstring for the harness view."""

    def __init__(
        self,
        variant: str = "pip379",
        *,
        replica_points: int = 100,
        hash_range_max: int = 65535,
        read_batch_size: int = 100,
        look_ahead_per_consumer: int = 4000,
        look_ahead_per_subscription: int = 40000,
        max_unacked_per_consumer: int = 0,
        max_unacked_per_subscription: int = 0,
        filter_acked_on_complete: bool = False,
        async_flow: bool = False,
        remove_counts_queued: bool = False,
        lock_tracer: LockTracer | None = None,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
        self.variant = variant
        self.read_batch_size = read_batch_size
        self.look_ahead_per_consumer = look_ahead_per_consumer
        self.look_ahead_per_subscription = look_ahead_per_subscription
        self.max_unacked_per_consumer = max_unacked_per_consumer
        self.max_unacked_per_subscription = max_unacked_per_subscription
        # The jump-during-read finding's fix (docs/findings/keyshared-jump-during-read.md): a read's entries that the
        # cursor acknowledged while it was in flight are dropped at its completion. Upstream filters at issue time
        # (asyncReplayEntries, the read's skip condition) and a Normal read's completion drops only individually
        # deleted entries (filterReadEntries), so an entry a skip, clear-backlog or expiry passed meanwhile is still
        # dispatched.
        self.filter_acked_on_complete = filter_acked_on_complete
        # Upstream's flow order: Consumer.flowPermits adds to the consumer at once, consumerFlow queues the total's
        # update on the broker's executor (`run_queued_flow`); `remove_counts_queued` is the fix of
        # docs/findings/keyshared-permits-queued-flow.md (a leaver takes off only the permits the total counted).
        self.async_flow = async_flow
        self.remove_counts_queued = remove_counts_queued
        self.queued_flows: list[tuple[Consumer, int]] = []
        self.lock_tracer = lock_tracer
        # Upstream creates the selector in impacted mode exactly when draining hashes are required.
        self.selector = ConsistentHashingStickyKeyConsumerSelector(
            replica_points, variant == "pip379", hash_range_max, lock_tracer=lock_tracer
        )
        self.tracker: DrainingHashesTracker | None = (
            DrainingHashesTracker(DISPATCHER_NAME, self._sticky_key_hash_unblocked, lock_tracer=lock_tracer)
            if variant == "pip379"
            else None
        )
        self.recently_joined: RecentlyJoinedConsumers | None = (
            RecentlyJoinedConsumers() if variant != "pip379" else None
        )
        self.consumers: list[Consumer] = []
        # PersistentDispatcherMultipleConsumers.totalAvailablePermits: flows add, dispatches and leavers subtract.
        self.total_available_permits = 0
        self.replay_queue = RedeliveryMessages()
        self.read_position: Position = (LEDGER_ID, 0)
        self.mark_delete_position: Position = (LEDGER_ID, -1)
        self.individually_acked: set[Position] = set()
        self.deliveries: list[Delivery] = []
        self.unblock_calls: list[int] = []
        self.scheduled_read = False
        self.min_replayed_position: Position | None = None
        self.skip_next_replay_to_trigger_look_ahead = False
        self.is_dispatcher_stuck_on_replays = False
        self.last_sent_position: Position | None = None
        self.individually_sent_positions: set[Position] = set()
        self.last_impacted: ImpactedConsumersResult | None = None
        # At most one outstanding read of each type, as upstream's havePendingRead/havePendingReplayRead.
        self.have_pending_read = False
        self.have_pending_replay_read = False
        self.should_rewind_before_reading_or_replaying = False
        self._messages: list[tuple[bytes, int]] = []  # entry id -> (sticky key, hash)
        self._pass_depth = 0
        self._deferred_prune = False

    # ------------------------------------------------------------------ storage and cursor

    def publish(self, key: bytes | str) -> Position:
        """Append one message with sticky key `key` (str is UTF-8) to ledger 1."""
        sticky_key = key.encode("utf-8") if isinstance(key, str) else key
        self._messages.append((sticky_key, self.selector.make_sticky_key_hash(sticky_key)))
        return (LEDGER_ID, len(self._messages) - 1)

    def entry_count(self) -> int:
        """Number of published entries: positions (1, 0) .. (1, entry_count() - 1)."""
        return len(self._messages)

    def hash_of(self, position: Position) -> int:
        return self._messages[self._entry_index(position)][1]

    def key_of(self, position: Position) -> bytes:
        return self._messages[self._entry_index(position)][0]

    def _entry_index(self, position: Position) -> int:
        ledger_id, entry_id = position
        if ledger_id != LEDGER_ID or not 0 <= entry_id < len(self._messages):
            raise ValueError(f"unknown position {position}")
        return entry_id

    def is_acked(self, position: Position) -> bool:
        return position <= self.mark_delete_position or position in self.individually_acked

    def received_by(self, consumer: Consumer) -> list[Position]:
        """Positions delivered to `consumer`, in delivery order (the client-side record)."""
        return [d.position for d in self.deliveries if d.consumer is consumer]

    # ------------------------------------------------------------------ permits and limits

    def available_permits(self, consumer: Consumer) -> int:
        if not consumer.connected:
            return 0
        permits = max(consumer.permits, 0)
        if self.max_unacked_per_consumer > 0:
            permits = min(permits, max(self.max_unacked_per_consumer - consumer.pending_acks.size(), 0))
        return permits

    def look_ahead_limit(self) -> int:
        """Effective replay-queue limit for look-ahead (pip379, pip282); non-positive parts are unset."""
        count = len(self.consumers)
        per_consumer, per_subscription = self.look_ahead_per_consumer, self.look_ahead_per_subscription
        if per_consumer <= 0:
            limit = per_subscription
        else:
            limit = per_consumer * count
            if 0 < per_subscription < limit:
                limit = per_subscription
        if limit <= 0:
            by_subscription = self.max_unacked_per_subscription
            by_consumers = count * self.max_unacked_per_consumer
            limit = min(
                by_subscription if by_subscription > 0 else _INT_MAX, by_consumers if by_consumers > 0 else _INT_MAX
            )
        return limit

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Client grants permits; does not take the dispatcher monitor (may run inside `interleave`).
        Consumer.flowPermits adds them to the consumer, then the dispatcher's consumerFlow to its total (queued on
        the broker's executor upstream, run at once here), ignored for a consumer no longer connected."""
        consumer.permits += permits
        if self.async_flow:
            self.queued_flows.append((consumer, permits))
        elif any(existing is consumer for existing in self.consumers):
            self.total_available_permits += permits

    def run_queued_flow(self) -> None:
        """The executor runs the oldest queued internalConsumerFlow: it ignores a consumer no longer in the set
        (`PersistentDispatcherMultipleConsumers.java` 308-314), else the total grows by its permits."""
        consumer, permits = self.queued_flows.pop(0)
        with traced(self.lock_tracer, DISPATCHER_LOCK):
            if any(existing is consumer for existing in self.consumers):
                self.total_available_permits += permits

    # ------------------------------------------------------------------ mutual exclusion

    def _require_no_pass(self) -> None:
        if self._pass_depth:
            raise IllegalStateError(
                "the dispatcher monitor is held by a dispatch pass; only ack and flow may interleave"
            )

    @contextmanager
    def _pass(self) -> Iterator[None]:
        """A replay-filter or dispatch pass; mark-delete pruning requested inside it runs at the end."""
        self._pass_depth += 1
        try:
            yield
        finally:
            self._pass_depth -= 1
        if not self._pass_depth and self._deferred_prune:
            self._deferred_prune = False
            self._prune_recently_joined()

    def _interleave(self, interleave: Interleave | None, stage: str, index: int) -> None:
        if interleave is not None and index > 0:
            tracer = self.lock_tracer
            if tracer is None:
                interleave(stage, index)
            else:
                with tracer.other_thread():
                    interleave(stage, index)

    # ------------------------------------------------------------------ consumers

    def add_consumer(self, consumer: Consumer) -> None:
        """Join: rewind if first, add to the ring, then the variant hook (§4.4, §4.5)."""
        self._require_no_pass()
        if any(existing is consumer for existing in self.consumers) or not consumer.connected:
            # Upstream only logs this; the reference refuses, since the selector would be corrupted.
            raise ValueError(f"{consumer!r} is already added or was removed; use a new Consumer to reconnect")
        with traced(self.lock_tracer, DISPATCHER_LOCK):
            if not self.consumers:
                if self.have_pending_read or self.have_pending_replay_read:
                    # Upstream: the in-flight read is discarded and the rewind happens when it completes.
                    self.should_rewind_before_reading_or_replaying = True
                else:
                    self.read_position = next_position(self.mark_delete_position)
                self.replay_queue.clear()
            consumer.pending_acks.lock_tracer = self.lock_tracer
            if self.tracker is not None:
                consumer.set_pending_acks_add_handler(_DrainingAddHandler(self))
                consumer.set_pending_acks_remove_handler(DrainingRemoveHandler(self.tracker))
                consumer.set_draining_hashes_consumer_stats_updater(self.tracker.update_consumer_stats)
            self.consumers.append(consumer)
            # The consumer's initial permits are its first flow (upstream: a FLOW command after subscribing).
            self.total_available_permits += consumer.permits
            impacted = self.selector.add_consumer(consumer)
            self.last_impacted = impacted
            if self.variant == "pip379":
                self._register_draining_hashes(consumer, impacted)
            else:
                self._record_recently_joined(consumer)

    def _record_recently_joined(self, consumer: Consumer) -> None:
        assert self.recently_joined is not None
        if self.variant == "classic":
            join: Position | None = self.read_position
        else:
            join = self._update_if_needed_and_get_last_sent_position()
        read_entry_unacked = self.read_position[1] - self.mark_delete_position[1] > 1
        rewind_pending = self.should_rewind_before_reading_or_replaying
        if join is not None and len(self.consumers) > 1 and read_entry_unacked and not rewind_pending:
            self.recently_joined.put(consumer, join)

    def remove_consumer(self, consumer: Consumer) -> None:
        """Leave: ring first, then requeue (or drop) the pending acks, then the variant hook."""
        self._require_no_pass()
        if not consumer.connected or not any(existing is consumer for existing in self.consumers):
            return
        with traced(self.lock_tracer, DISPATCHER_LOCK):
            impacted = self.selector.remove_consumer(consumer)
            self.last_impacted = impacted
            consumer.connected = False
            self.consumers = [existing for existing in self.consumers if existing is not consumer]
            added: list[Position] = []
            if self.consumers:

                def requeue(ledger_id: int, entry_id: int, _remaining: int, sticky_key_hash: int) -> None:
                    if self._add_message_to_replay((ledger_id, entry_id), sticky_key_hash):
                        added.append((ledger_id, entry_id))

                consumer.pending_acks.for_each_and_close(requeue)
                queued = sum(n for c, n in self.queued_flows if c is consumer) if self.remove_counts_queued else 0
                self.total_available_permits -= consumer.permits - queued
            else:
                self.total_available_permits = 0  # clearComponentsAfterRemovedAllConsumers
                self.replay_queue.clear()
                if self.tracker is not None:
                    self.tracker.clear()
                # The pending acks are dropped without handlers: nobody is left to drain or unblock.
                consumer.set_pending_acks_add_handler(None)
                consumer.set_pending_acks_remove_handler(None)
                consumer.pending_acks.for_each_and_close(lambda _l, _e, _r, _h: None)
            if self.tracker is not None:
                self._register_draining_hashes(consumer, impacted)
                self.tracker.consumer_removed(consumer)
            else:
                self._recently_joined_consumer_removed(consumer)
            if added:
                self.scheduled_read = True

    def _recently_joined_consumer_removed(self, consumer: Consumer) -> None:
        assert self.recently_joined is not None
        self.recently_joined.remove(consumer)
        if len(self.consumers) == 1:
            self.recently_joined.clear()
        elif not self.consumers and self.variant == "pip282":
            self.last_sent_position = None
            self.individually_sent_positions.clear()
        self._prune_recently_joined()

    # ------------------------------------------------------------------ pip379 draining

    def _register_draining_hashes(self, skip: Consumer, impacted: ImpactedConsumersResult | None) -> None:
        """REMOVE: the consumer lost hashes it still holds -> draining entries; ADD: it got them back."""
        tracker = self.tracker
        if impacted is None or tracker is None:
            return

        def process(target: Consumer, ranges: UpdatedHashRanges, operation: OperationType) -> None:
            if target is skip:
                return

            def visit(_ledger_id: int, _entry_id: int, _remaining: int, sticky_key_hash: int) -> None:
                if sticky_key_hash == 0 or not ranges.contains_sticky_key(sticky_key_hash):
                    return
                if operation is OperationType.REMOVE:
                    tracker.add_entry(target, sticky_key_hash)
                else:
                    entry = tracker.get_entry(sticky_key_hash)
                    if entry is not None and entry.consumer is target:
                        tracker.reduce_ref_count(target, sticky_key_hash, False)

            target.pending_acks.for_each(visit)

        impacted.process_updated_hash_ranges(process)

    def handle_adding_pending_ack(
        self, consumer: Consumer, ledger_id: int, entry_id: int, sticky_key_hash: int
    ) -> bool:
        """Last-moment check, atomic with the insert: a hash drained by another consumer goes to replay."""
        if sticky_key_hash == 0:
            raise ValueError("Sticky key hash is not set. It is required.")
        assert self.tracker is not None
        entry = self.tracker.get_entry(sticky_key_hash)
        if entry is not None and entry.consumer is not consumer:
            self.replay_queue.add(ledger_id, entry_id, sticky_key_hash)
            return False
        return True

    def _add_message_to_replay(self, position: Position, sticky_key_hash: int) -> bool:
        """addMessageToReplay: only a position the cursor has not acknowledged is queued (checkIfMessageIsUnacked;
        a cursor jump may have passed a pending ack or a read in flight)."""
        return not self.is_acked(position) and self.replay_queue.add(*position, sticky_key_hash)

    def _sticky_key_hash_unblocked(self, sticky_key_hash: int) -> None:
        self.unblock_calls.append(sticky_key_hash)
        self.scheduled_read = True

    # ------------------------------------------------------------------ acks and redelivery

    def ack(self, consumer: Consumer, position: Position) -> None:
        """Individual ack; does not take the dispatcher monitor (may run inside `interleave`)."""
        self._entry_index(position)
        ledger_id, entry_id = position
        # getAckOwnerConsumer, then applyPendingAckCompletions: the owner's counter loses what its entry counted.
        for owner in [consumer, *(other for other in self.consumers if other is not consumer)]:
            remaining = owner.pending_acks.remove_and_get_remaining_unacked(ledger_id, entry_id)
            if remaining != PENDING_ACK_NOT_FOUND:
                owner.unacked_messages -= remaining
                break
        if self.is_acked(position):
            return
        self.individually_acked.add(position)
        mark_delete = self.mark_delete_position
        while next_position(mark_delete) in self.individually_acked:
            mark_delete = next_position(mark_delete)
            self.individually_acked.discard(mark_delete)
        if mark_delete == self.mark_delete_position:
            return
        self.mark_delete_position = mark_delete
        self._mark_delete_position_move_forward()

    def _mark_delete_position_move_forward(self) -> None:
        """After mark-delete moved (an ack's or a cursor jump's): the cursor's read position catches up, then
        the dispatcher's hook drops pending acks and replay positions at or below it (the remove handler
        releases draining ref counts) and runs the variant's mark-delete hook."""
        mark_delete = self.mark_delete_position
        # Upstream's cursor moves the read position forward if mark-delete passed it.
        self.read_position = max(self.read_position, next_position(mark_delete))
        for existing in self.consumers:
            self._remove_pending_acks_up_to(existing, mark_delete)
        with traced(self.lock_tracer, DISPATCHER_LOCK):
            self.replay_queue.remove_all_up_to(*mark_delete)
            if self.variant == "pip379":
                self.scheduled_read = True
            elif self._pass_depth:
                self._deferred_prune = True
            else:
                self._prune_recently_joined()

    @staticmethod
    def _remove_pending_acks_up_to(consumer: Consumer, mark_delete: Position) -> None:
        """Consumer.removePendingAcksUpToPositionAndDecrementUnacked (#25581, 5168fcb36c): removeAllUpTo, and the
        counter loses the remaining unacked messages of every entry it removed."""
        removed = [0]

        def count(_ledger_id: int, _entry_id: int, remaining: int, _sticky_key_hash: int) -> None:
            removed[0] += remaining

        consumer.pending_acks.remove_all_up_to(*mark_delete, count)
        consumer.unacked_messages -= removed[0]

    # ------------------------------------------------------------------ cursor jumps (admin and expiry)

    def skip_entries(self, count: int) -> None:
        """PersistentSubscription.skipMessages: ManagedCursorImpl.asyncSkipEntries(count, Exclude) marks
        deleted up to the count-th entry after mark-delete that is not individually acked (the last entry if
        fewer are left); then the mark-delete hook (see `_cursor_moved_to`)."""
        self._require_no_pass()
        entry_id, left = self.mark_delete_position[1], count
        while left and entry_id + 1 < len(self._messages):
            entry_id += 1
            if (LEDGER_ID, entry_id) not in self.individually_acked:
                left -= 1
        self._cursor_moved_to((LEDGER_ID, entry_id))

    def clear_backlog(self) -> None:
        """PersistentSubscription.clearBacklog: ManagedCursorImpl.asyncClearBacklog marks deleted up to the
        last entry; then the mark-delete hook."""
        self._require_no_pass()
        self._cursor_moved_to((LEDGER_ID, len(self._messages) - 1))

    def expire_messages(self, position: Position) -> None:
        """PersistentSubscription.expireMessages(position): PersistentMessageExpiryMonitor marks deleted up
        to `position` (nothing at or below mark-delete, PR #24881); then the mark-delete hook."""
        self._require_no_pass()
        self._entry_index(position)
        self._cursor_moved_to(position)

    def _cursor_moved_to(self, mark_delete: Position) -> None:
        """A cursor jump's mark-delete move. The cursor forgets the individual acks at or below it and moves
        the read position past it; the subscription then calls the dispatcher's markDeletePositionMoveForward
        (apache/pulsar PR #25592, after skip, clear-backlog and expiry), which removes every consumer's
        pending acks up to mark-delete through PendingAcksMap.removeAllUpTo and the replay positions up to it,
        and the Key_Shared dispatcher reschedules a read. The consumers are not told (issue #25627)."""
        if mark_delete <= self.mark_delete_position:
            return
        self.mark_delete_position = mark_delete
        self.individually_acked = {p for p in self.individually_acked if p > mark_delete}
        self._mark_delete_position_move_forward()

    def reset_cursor(self, position: Position) -> None:
        """PersistentSubscription.resetCursor(position): the subscription is fenced and every consumer is
        disconnected (`remove_consumer`, in join order); ManagedCursorImpl then resets the read position to
        `position`, mark-delete to the entry before it, and drops the individual acks. cursorIsReset changes
        nothing the reference keeps. Refused while a read is in flight (the model takes no reset there)."""
        self._require_no_pass()
        if self.have_pending_read or self.have_pending_replay_read:
            raise IllegalStateError("reset_cursor while a read is in flight")
        if not 0 <= position[1] <= len(self._messages) or position[0] != LEDGER_ID:
            raise ValueError(f"unknown position {position}")
        for consumer in list(self.consumers):
            self.remove_consumer(consumer)
        self.mark_delete_position = (LEDGER_ID, position[1] - 1)
        self.individually_acked.clear()
        self.read_position = position

    def redeliver_unacknowledged(self, consumer: Consumer, positions: list[Position] | None = None) -> None:
        """Negative ack: release the consumer's pending acks (all, or `positions`) back to replay."""
        self._require_no_pass()
        released: list[Position] = []
        if positions is None:
            # Upstream runs the redeliver-all path inside the synchronized dispatcher method.
            with traced(self.lock_tracer, DISPATCHER_LOCK):
                total = [0]

                def release(ledger_id: int, entry_id: int, remaining: int, _sticky_key_hash: int) -> None:
                    released.append((ledger_id, entry_id))
                    total[0] += remaining

                # forEachAndClear, then the messages it counted off the counter (#25589, 9e1bae353a)
                consumer.pending_acks.for_each_and_clear(release)
                consumer.unacked_messages -= total[0]
                added = self._requeue_without_hash(released)
        else:
            for ledger_id, entry_id in positions:
                remaining = consumer.pending_acks.remove_and_get_remaining_unacked(ledger_id, entry_id)
                if remaining != PENDING_ACK_NOT_FOUND:
                    released.append((ledger_id, entry_id))
                    consumer.unacked_messages -= remaining
            with traced(self.lock_tracer, DISPATCHER_LOCK):
                added = self._requeue_without_hash(released)
        if added:
            self.scheduled_read = True

    def _requeue_without_hash(self, released: list[Position]) -> bool:
        added = False
        for position in released:
            if not self.is_acked(position) and self.replay_queue.add(*position):
                added = True
        return added

    # ------------------------------------------------------------------ recently joined (classic, pip282)

    def _prune_recently_joined(self) -> bool:
        """Drop joined consumers the mark-delete position has caught up with; schedules a read if any."""
        if self.recently_joined is None:
            return False
        mark_delete = self.mark_delete_position
        bound = next_position(mark_delete) if self.variant == "classic" else mark_delete
        pruned = self.recently_joined.remove_head_while_at_most(bound)
        if pruned:
            # Upstream calls readMoreEntries() after pruning, at the lookup and in the mark-delete hook.
            self.scheduled_read = True
        return pruned

    def _recently_joined_limit(self, consumer: Consumer, read_type: ReadType) -> Position | None:
        """The consumer's join position, capped by the head's on a Replay read; None if not recently joined."""
        assert self.recently_joined is not None
        self._prune_recently_joined()
        limit = self.recently_joined.get(consumer)
        if limit is None:
            return None
        head = self.recently_joined.head()
        if read_type is ReadType.REPLAY and head is not None and head < limit:
            limit = head
        return limit

    def _classic_restricted_max_entries(
        self, consumer: Consumer, positions: list[Position], permits: int, read_type: ReadType, hashes: set[int] | None
    ) -> int:
        count = min(len(positions), permits)
        if count == 0:
            return 0
        if (
            read_type is ReadType.NORMAL
            and hashes is not None
            and any(self.replay_queue.contains_sticky_key_hash(h) for h in hashes)
        ):
            return 0
        limit = self._recently_joined_limit(consumer, read_type)
        if limit is None:
            return count
        for index in range(count):
            if positions[index] >= limit:
                return index
        return count

    def _update_if_needed_and_get_last_sent_position(self) -> Position | None:
        if self.last_sent_position is not None and self.mark_delete_position > self.last_sent_position:
            self.last_sent_position = self.mark_delete_position
        return self.last_sent_position

    # ------------------------------------------------------------------ reads

    def _can_replay_messages(self) -> bool:
        if self.variant == "classic":
            if self.is_dispatcher_stuck_on_replays:
                self.is_dispatcher_stuck_on_replays = False
                return False
            return True
        if self.skip_next_replay_to_trigger_look_ahead:
            self.skip_next_replay_to_trigger_look_ahead = False
            return False
        return True

    def begin_read(self, interleave: Interleave | None = None) -> ReadOp | None:
        """Issue a read: replay first (through the variant filter), else a Normal read; None if idle.

        Every returned ReadOp must be passed to `complete_read`: while it is outstanding, no other
        read of the same type is issued (upstream's pending-read flags; the spec is silent here).
        """
        self._require_no_pass()
        with traced(self.lock_tracer, DISPATCHER_LOCK):
            if not self.consumers:
                return None
            count = min(sum(self.available_permits(c) for c in self.consumers), self.read_batch_size)
            if count <= 0:
                return None
            replay = [] if self.have_pending_replay_read else self._messages_to_replay_now(count, interleave)
            if replay:
                op = ReadOp(ReadType.REPLAY, tuple(replay))
                self.have_pending_replay_read = True
            else:
                normal = [] if self.have_pending_read else self._read_entries(count)
                if not normal:
                    return None
                op = ReadOp(ReadType.NORMAL, tuple(normal))
                self.have_pending_read = True
            self.min_replayed_position = self.replay_queue.first()
            return op

    def _messages_to_replay_now(self, count: int, interleave: Interleave | None) -> list[Position]:
        while self._can_replay_messages():
            if self.variant == "classic":
                collected = self._classic_replay_filter(count, interleave)
            else:
                collected = self._filtered_replay(count, interleave)
            # Upstream's replay read skips positions already acked at the cursor and drops them from
            # the queue; if nothing is left it reads again.
            acked = [p for p in collected if self.is_acked(p)]
            for position in acked:
                self.replay_queue.remove(*position)
            live = [p for p in collected if not self.is_acked(p)]
            if live or not acked:
                return live
        return []

    def _filtered_replay(self, count: int, interleave: Interleave | None) -> list[Position]:
        """pip379/pip282 per-pass filter: per-consumer permits; pip379 also remembers blocked hashes."""
        permits: dict[Consumer, int] = {}
        blocked: set[int] = set()
        seen = 0

        def accept(position: Position) -> bool:
            nonlocal seen
            self._interleave(interleave, "replay_filter", seen)
            seen += 1
            if not self.replay_queue.contains(*position):
                return False  # dropped by an interleaved ack
            sticky_key_hash = self.replay_queue.get_hash(*position)
            if sticky_key_hash is None:
                return True  # filtered at dispatch time, once the entry is read
            if sticky_key_hash in blocked:
                return False
            consumer = self.selector.select(sticky_key_hash)
            if (
                consumer is None
                or permits.setdefault(consumer, self.available_permits(consumer)) <= 0
                or not self._can_dispatch_entry(consumer, position, sticky_key_hash, ReadType.REPLAY)[0]
            ):
                if self.variant == "pip379":
                    blocked.add(sticky_key_hash)
                return False
            permits[consumer] -= 1
            return True

        with self._pass():
            return self.replay_queue.get_messages_to_replay_now(count, accept)

    def _classic_replay_filter(self, count: int, interleave: Interleave | None) -> list[Position]:
        """classic: take the first `count` queued positions, group them per consumer and gate each group."""
        candidates = self.replay_queue.get_messages_to_replay_now(count, lambda _p: True)
        accepted: list[Position] = []
        groups: dict[Consumer, list[Position]] = {}
        with self._pass():
            for index, position in enumerate(candidates):
                self._interleave(interleave, "replay_filter", index)
                if not self.replay_queue.contains(*position):
                    continue
                sticky_key_hash = self.replay_queue.get_hash(*position)
                if sticky_key_hash is None:
                    accepted.append(position)
                    continue
                consumer = self.selector.select(sticky_key_hash)
                if consumer is not None:
                    groups.setdefault(consumer, []).append(position)
            for consumer, positions in groups.items():
                permits = self.available_permits(consumer)
                if permits == 0:
                    continue
                allowed = self._classic_restricted_max_entries(consumer, positions, permits, ReadType.REPLAY, None)
                accepted.extend(positions[:allowed])
        return sorted(accepted)

    def _read_entries(self, count: int) -> list[Position]:
        """A Normal read from `read_position`, skipping individually acked entries."""
        if self.variant == "classic":
            assert self.recently_joined is not None
            if not any(self.available_permits(c) > 0 and c not in self.recently_joined for c in self.consumers):
                return []
        else:
            limit = self.look_ahead_limit()
            if self.replay_queue.size() >= limit:
                return []
            count = min(count, max(limit - self.replay_queue.size(), 1))
        positions: list[Position] = []
        entry_id = self.read_position[1]
        while len(positions) < count and entry_id < len(self._messages):
            position = (LEDGER_ID, entry_id)
            if not self.is_acked(position):
                positions.append(position)
            entry_id += 1
        if positions:
            self.read_position = next_position(positions[-1])
        return positions

    def complete_read(self, op: ReadOp, interleave: Interleave | None = None) -> ReadResult:
        """Deliver the entries of `op`: the dispatch pass and send of the variant."""
        self._require_no_pass()
        if op.completed:
            raise IllegalStateError("read operation already completed")
        op.completed = True
        with traced(self.lock_tracer, DISPATCHER_LOCK):
            if op.read_type is ReadType.NORMAL:
                self.have_pending_read = False
            else:
                self.have_pending_replay_read = False
            if self.filter_acked_on_complete:
                op = ReadOp(op.read_type, tuple(p for p in op.positions if not self.is_acked(p)), True)
            if self.should_rewind_before_reading_or_replaying:
                # The first consumer joined while this read was in flight: drop it, then rewind.
                if not (self.have_pending_read or self.have_pending_replay_read):
                    self.should_rewind_before_reading_or_replaying = False
                    self.read_position = next_position(self.mark_delete_position)
                return ReadResult(op.read_type)
            if not self.consumers:
                if op.read_type is ReadType.NORMAL:
                    self.read_position = next_position(self.mark_delete_position)
                return ReadResult(op.read_type)
            first = self.replay_queue.first()
            if first is not None and self.min_replayed_position is not None and first < self.min_replayed_position:
                # A smaller position was queued during the read: retry so it goes first (#12885).
                if op.read_type is ReadType.NORMAL:
                    for position in op.positions:
                        self._add_message_to_replay(position, self.hash_of(position))
                return ReadResult(op.read_type, {}, self._still_queued(op))
            if self.variant == "classic":
                dispatched = self._classic_dispatch(op, interleave)
            else:
                dispatched = self._per_entry_dispatch(op, interleave)
            return ReadResult(op.read_type, dispatched, self._still_queued(op))

    def _still_queued(self, op: ReadOp) -> tuple[Position, ...]:
        return tuple(p for p in op.positions if self.replay_queue.contains(*p))

    def read_more_entries(self, interleave: Interleave | None = None) -> ReadResult:
        op = self.begin_read(interleave)
        return ReadResult(None) if op is None else self.complete_read(op, interleave)

    def fire_scheduled_read(self) -> ReadResult:
        """The scheduled (virtual-time) read fires."""
        self._require_no_pass()
        self.scheduled_read = False
        return self.read_more_entries()

    def _progress_key(self) -> tuple[object, ...]:
        return (
            len(self.deliveries),
            self.read_position,
            self.mark_delete_position,
            tuple(self.replay_queue.items()),
            self.scheduled_read,
            self.skip_next_replay_to_trigger_look_ahead,
            self.is_dispatcher_stuck_on_replays,
            tuple((c.consumer_id, p) for c, p in self.recently_joined.items()) if self.recently_joined else (),
            self.last_sent_position,
            tuple(sorted(self.individually_sent_positions)),
        )

    def run_until_quiescent(self, max_reads: int = 1000) -> int:
        """Fire scheduled reads or read until nothing changes; returns the number of reads issued.

        "Nothing changes" compares deliveries, positions, the replay queue and the flags. A return to
        any state already seen in this run also stops it: the look-ahead (or classic "stuck") flag can
        alternate forever without a delivery, which upstream ends by waiting on the cursor. The result
        equals `max_reads` only when that guard stopped the loop.
        """
        seen = {self._progress_key()}
        for reads in range(1, max_reads + 1):
            if self.scheduled_read:
                self.fire_scheduled_read()
            else:
                self.read_more_entries()
            key = self._progress_key()
            if key in seen:
                return reads
            seen.add(key)
        return max_reads

    # ------------------------------------------------------------------ dispatch passes

    def _can_dispatch_entry(
        self, consumer: Consumer, position: Position, sticky_key_hash: int, read_type: ReadType
    ) -> tuple[bool, bool]:
        """(dispatchable, blocked_by_hash) for pip379 and pip282."""
        if self.variant == "pip282":
            limit = self._recently_joined_limit(consumer, read_type)
            if limit is not None and position > limit:
                return False, False
        if read_type is ReadType.NORMAL and self.replay_queue.contains_sticky_key_hash(sticky_key_hash):
            return False, True
        if self.tracker is not None and self.tracker.should_block_sticky_key_hash(consumer, sticky_key_hash):
            return False, True
        return True, False

    def _per_entry_dispatch(self, op: ReadOp, interleave: Interleave | None) -> dict[Consumer, list[Position]]:
        """pip379 (and pip282 without the tracker and the already-blocked set): entries in read order."""
        read_type = op.read_type
        groups: dict[Consumer, list[Position]] = {}
        permits: dict[Consumer, int] = {}
        already_blocked: set[int] = set()
        blocked_by_hash_consumers: dict[Consumer, None] = {}
        consumers_for_entries: set[Consumer] = set()
        with self._pass():
            if self.variant == "pip282":
                self._update_if_needed_and_get_last_sent_position()
                if self.last_sent_position is None:
                    self.last_sent_position = self.mark_delete_position
            look_ahead_allowed = self.replay_queue.size() < self.look_ahead_limit()
            for index, position in enumerate(op.positions):
                self._interleave(interleave, "dispatch", index)
                sticky_key_hash = self.hash_of(position)
                consumer: Consumer | None = None
                dispatch = blocked_by_hash = False
                if sticky_key_hash not in already_blocked:
                    consumer = self.selector.select(sticky_key_hash)
                    if consumer is not None:
                        consumers_for_entries.add(consumer)
                        # Per-pass permits are read when the consumer is first met, as upstream does.
                        if permits.setdefault(consumer, self.available_permits(consumer)) > 0:
                            dispatch, blocked_by_hash = self._can_dispatch_entry(
                                consumer, position, sticky_key_hash, read_type
                            )
                if dispatch and consumer is not None:
                    permits[consumer] -= 1
                    groups.setdefault(consumer, []).append(position)
                    continue
                if blocked_by_hash and consumer is not None:
                    blocked_by_hash_consumers[consumer] = None
                self._add_message_to_replay(position, sticky_key_hash)
                if self.variant == "pip379":
                    already_blocked.add(sticky_key_hash)
            if look_ahead_allowed and not groups:
                trigger = read_type is ReadType.NORMAL and any(permits[c] > 0 for c in blocked_by_hash_consumers)
                trigger = trigger or any(
                    c not in consumers_for_entries and self.available_permits(c) > 0 for c in self.consumers
                )
                if trigger:
                    self.skip_next_replay_to_trigger_look_ahead = True
            dispatched = self._send(groups, read_type)
            if self.variant == "pip282":
                assert self.last_sent_position is not None
                self.last_sent_position, self.individually_sent_positions = advance_last_sent_position(
                    self.last_sent_position,
                    self.individually_sent_positions,
                    [p for sent in dispatched.values() for p in sent],
                    self.mark_delete_position,
                )
        return dispatched

    def _classic_dispatch(self, op: ReadOp, interleave: Interleave | None) -> dict[Consumer, list[Position]]:
        """classic: group per selected consumer, then gate and send group by group."""
        groups: dict[Consumer, list[Position]] = {}
        hashes: dict[Consumer, set[int]] = {}
        dispatched: dict[Consumer, list[Position]] = {}
        with self._pass():
            for position in op.positions:
                sticky_key_hash = self.hash_of(position)
                consumer = self.selector.select(sticky_key_hash)
                if consumer is None:
                    self._add_message_to_replay(position, sticky_key_hash)
                    continue
                groups.setdefault(consumer, []).append(position)
                hashes.setdefault(consumer, set()).add(sticky_key_hash)
            for index, (consumer, positions) in enumerate(groups.items()):
                self._interleave(interleave, "dispatch", index)
                allowed = self._classic_restricted_max_entries(
                    consumer, positions, self.available_permits(consumer), op.read_type, hashes[consumer]
                )
                for position in positions[allowed:]:
                    self._add_message_to_replay(position, self.hash_of(position))
                if allowed:
                    dispatched.update(self._send({consumer: positions[:allowed]}, op.read_type))
            assert self.recently_joined is not None
            if not any(dispatched.values()) and not self.recently_joined:
                self.is_dispatcher_stuck_on_replays = True
        return dispatched

    def _send(self, groups: dict[Consumer, list[Position]], read_type: ReadType) -> dict[Consumer, list[Position]]:
        """Per entry: add the pending ack (the add handler may refuse); on success deliver, use a permit."""
        delivered: dict[Consumer, list[Position]] = {}
        for consumer, positions in groups.items():
            if read_type is ReadType.REPLAY:
                for position in positions:
                    self.replay_queue.remove(*position)
            for position in positions:
                sticky_key_hash = self.hash_of(position)
                if consumer.pending_acks.add_pending_ack_if_allowed(position[0], position[1], 1, sticky_key_hash):
                    self.deliveries.append(Delivery(consumer, position, sticky_key_hash, read_type))
                    consumer.permits -= 1
                    consumer.unacked_messages += 1  # sendMessages: incrementUnackedMessages
                    self.total_available_permits -= 1  # the pass takes what it sent off the total
                    delivered.setdefault(consumer, []).append(position)
        return delivered

    # ------------------------------------------------------------------ harness view

    def view(self) -> DispatcherView:
        """Everything observable, as plain immutable data keyed by consumer id."""
        tracker_entries = self.tracker.draining_hashes if self.tracker is not None else {}
        return DispatcherView(
            variant=self.variant,
            consumers=tuple(
                ConsumerView(
                    name=c.name,
                    consumer_id=c.consumer_id,
                    connected=c.connected,
                    permits=c.permits,
                    available_permits=self.available_permits(c),
                    received=tuple(self.received_by(c)),
                    pending_acks=tuple(((led, ent), h) for led, ent, _r, h in c.pending_acks.items()),
                )
                for c in self.consumers
            ),
            read_position=self.read_position,
            mark_delete_position=self.mark_delete_position,
            individually_acked=tuple(sorted(self.individually_acked)),
            replay_queue=tuple(self.replay_queue.items()),
            draining_hashes=tuple(
                DrainingView(h, e.consumer.consumer_id, e.ref_count, e.blocked_count)
                for h, e in sorted(tracker_entries.items())
            ),
            ring_ranges=tuple(
                (a.range.start, a.range.end, a.consumer.consumer_id)
                for a in self.selector.get_consumer_hash_assignments_snapshot().assignments
            ),
            recently_joined=tuple(
                (c.consumer_id, p) for c, p in (self.recently_joined.items() if self.recently_joined else [])
            ),
            last_sent_position=self.last_sent_position,
            individually_sent_positions=tuple(sorted(self.individually_sent_positions)),
            scheduled_read=self.scheduled_read,
            skip_next_replay_to_trigger_look_ahead=self.skip_next_replay_to_trigger_look_ahead,
            is_dispatcher_stuck_on_replays=self.is_dispatcher_stuck_on_replays,
            min_replayed_position=self.min_replayed_position,
            have_pending_read=self.have_pending_read,
            have_pending_replay_read=self.have_pending_replay_read,
            should_rewind_before_reading_or_replaying=self.should_rewind_before_reading_or_replaying,
            unblock_calls=tuple(self.unblock_calls),
            delivery_count=len(self.deliveries),
        )
