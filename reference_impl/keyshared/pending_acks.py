"""PendingAcksMap: a consumer's unacknowledged deliveries with their sticky hashes (spec §4.2).

The map is `ledger -> (entry -> (remaining_unacked, hash))`, iterated in ascending (ledger, entry)
order. Every operation is atomic (Java holds the map's lock; here it takes the model lock
`pending[consumer_id]`). Handlers come from suppliers that are read at every call and may return
None, so the dispatcher can install or remove them at any time.

The map only needs its consumer's id (to name its lock) and hands the consumer back to the handlers,
so it is generic over a `PendingAcksOwner` rather than importing `Consumer`: `common.Consumer` builds
its own map, and importing it here would close an import circle. The broker's consumer owns a
`PendingAcksMap[Consumer]` and takes `PendingAcks*Handler[Consumer]` handlers (Java's types, spelled
generically).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, overload

from .locks import LockTracer, pending_lock, record_handler_call, traced

PENDING_ACK_NOT_FOUND = -1
_MAX_REMAINING_UNACKED = 2**31 - 1

# p(ledger_id, entry_id, remaining_unacked, sticky_key_hash)
PendingAcksConsumer = Callable[[int, int, int, int], None]


class PendingAcksOwner(Protocol):
    """What the map needs of its consumer: the id that names its model lock `pending[consumer_id]`."""

    @property
    def consumer_id(self) -> int: ...


OwnerT = TypeVar("OwnerT", bound=PendingAcksOwner)
OwnerT_contra = TypeVar("OwnerT_contra", bound=PendingAcksOwner, contravariant=True)


class PendingAcksAddHandler(Protocol[OwnerT_contra]):
    """Last-moment veto on adding a pending ack (PIP-379 uses it to refuse draining hashes)."""

    def handle_adding(self, consumer: OwnerT_contra, ledger_id: int, entry_id: int, sticky_key_hash: int) -> bool: ...


class PendingAcksRemoveHandler(Protocol[OwnerT_contra]):
    """Notified of every removal; batches group removals so unblocking is signalled once."""

    def handle_removing(
        self, consumer: OwnerT_contra, ledger_id: int, entry_id: int, sticky_key_hash: int, closing: bool
    ) -> None: ...

    def start_batch(self) -> None: ...

    def end_batch(self) -> None: ...


def _no_handler() -> None:
    """Default supplier: no handler installed."""
    return None


class PendingAcksMap(Generic[OwnerT]):
    """Pending acks of one consumer. `closed` and `size()` are part of the observable state."""

    def __init__(
        self,
        consumer: OwnerT,
        add_handler_supplier: Callable[[], PendingAcksAddHandler[OwnerT] | None] = _no_handler,
        remove_handler_supplier: Callable[[], PendingAcksRemoveHandler[OwnerT] | None] = _no_handler,
    ) -> None:
        self._consumer = consumer
        self._add_handler_supplier = add_handler_supplier
        self._remove_handler_supplier = remove_handler_supplier
        self._ledgers: dict[int, dict[int, tuple[int, int]]] = {}
        self._size = 0
        self.closed = False
        # Installed by the dispatcher when the consumer joins; None means "no tracing".
        self.lock_tracer: LockTracer | None = None

    def _sorted_items(self) -> list[tuple[int, int, int, int]]:
        return [
            (ledger_id, entry_id, *self._ledgers[ledger_id][entry_id])
            for ledger_id in sorted(self._ledgers)
            for entry_id in sorted(self._ledgers[ledger_id])
        ]

    def _notify_removing(
        self, handler: PendingAcksRemoveHandler[OwnerT] | None, ledger_id: int, entry_id: int, sticky_key_hash: int
    ) -> None:
        if handler is not None:
            record_handler_call(self.lock_tracer, "handle_removing")
            handler.handle_removing(self._consumer, ledger_id, entry_id, sticky_key_hash, self.closed)

    def _delete(self, ledger_id: int, entry_id: int) -> tuple[int, int]:
        ledger = self._ledgers[ledger_id]
        value = ledger.pop(entry_id)
        if not ledger:
            del self._ledgers[ledger_id]
        self._size -= 1
        return value

    def _get(self, ledger_id: int, entry_id: int) -> tuple[int, int] | None:
        ledger = self._ledgers.get(ledger_id)
        return None if ledger is None else ledger.get(entry_id)

    def add_pending_ack_if_allowed(
        self, ledger_id: int, entry_id: int, remaining_unacked: int, sticky_key_hash: int
    ) -> bool:
        """Insert or overwrite, unless the map is closed or the add handler vetoes."""
        if not 0 <= remaining_unacked <= _MAX_REMAINING_UNACKED:
            raise ValueError(f"remainingUnacked must be in [0, {_MAX_REMAINING_UNACKED}], got {remaining_unacked}")
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            if self.closed:
                return False
            handler = self._add_handler_supplier()
            if handler is not None:
                record_handler_call(self.lock_tracer, "handle_adding")
                if not handler.handle_adding(self._consumer, ledger_id, entry_id, sticky_key_hash):
                    return False
            ledger = self._ledgers.setdefault(ledger_id, {})
            if entry_id not in ledger:
                self._size += 1
            ledger[entry_id] = (remaining_unacked, sticky_key_hash)
            return True

    @overload
    def remove(self, ledger_id: int, entry_id: int) -> bool: ...

    @overload
    def remove(self, ledger_id: int, entry_id: int, remaining_unacked: int, sticky_key_hash: int) -> bool: ...

    def remove(
        self,
        ledger_id: int,
        entry_id: int,
        remaining_unacked: int | None = None,
        sticky_key_hash: int | None = None,
    ) -> bool:
        """Remove a position; with (remaining_unacked, hash) only if the stored value matches exactly."""
        if (remaining_unacked is None) != (sticky_key_hash is None):
            raise TypeError("remove() takes either (l, e) or (l, e, remaining_unacked, sticky_key_hash)")
        if remaining_unacked is not None and remaining_unacked < 0:
            return False
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            stored = self._get(ledger_id, entry_id)
            if stored is None:
                return False
            if remaining_unacked is not None and stored != (remaining_unacked, sticky_key_hash):
                return False
            self._delete(ledger_id, entry_id)
            self._notify_removing(self._remove_handler_supplier(), ledger_id, entry_id, stored[1])
            return True

    def remove_and_get_remaining_unacked(self, ledger_id: int, entry_id: int) -> int:
        """Like `remove(l, e)`, returning the stored count or PENDING_ACK_NOT_FOUND."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            stored = self._get(ledger_id, entry_id)
            if stored is None:
                return PENDING_ACK_NOT_FOUND
            self._delete(ledger_id, entry_id)
            self._notify_removing(self._remove_handler_supplier(), ledger_id, entry_id, stored[1])
            return stored[0]

    def update_remaining_unacked(self, ledger_id: int, entry_id: int, acked_delta: int) -> bool:
        """Subtract `acked_delta`; reaching 0 keeps the entry (and its hash)."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            stored = self._get(ledger_id, entry_id)
            if stored is None or stored[0] - acked_delta < 0:
                return False
            self._ledgers[ledger_id][entry_id] = (stored[0] - acked_delta, stored[1])
            return True

    def get_remaining_unacked(self, ledger_id: int, entry_id: int) -> int:
        """Stored remaining count, or PENDING_ACK_NOT_FOUND."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            stored = self._get(ledger_id, entry_id)
            return PENDING_ACK_NOT_FOUND if stored is None else stored[0]

    def contains(self, ledger_id: int, entry_id: int) -> bool:
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            return self._get(ledger_id, entry_id) is not None

    def size(self) -> int:
        return self._size

    def remove_all_up_to(
        self, mark_delete_ledger_id: int, mark_delete_entry_id: int, callback: PendingAcksConsumer | None = None
    ) -> None:
        """Remove every position <= the mark-delete position, as one handler batch."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            bound = (mark_delete_ledger_id, mark_delete_entry_id)
            doomed = [item for item in self._sorted_items() if (item[0], item[1]) <= bound]
            if not doomed:
                return
            handler = self._remove_handler_supplier()
            try:
                if handler is not None:
                    handler.start_batch()
                for ledger_id, entry_id, remaining, sticky_key_hash in doomed:
                    self._delete(ledger_id, entry_id)
                    self._notify_removing(handler, ledger_id, entry_id, sticky_key_hash)
                    if callback is not None:
                        callback(ledger_id, entry_id, remaining, sticky_key_hash)
            finally:
                if handler is not None:
                    handler.end_batch()

    def for_each(self, processor: PendingAcksConsumer) -> None:
        """Visit every entry in ascending order without changing anything."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            for item in self._sorted_items():
                processor(*item)

    def for_each_and_close(self, processor: PendingAcksConsumer) -> None:
        """Close (all later adds fail), then visit and remove everything as one batch."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            self.closed = True
            self._drain(processor)

    def for_each_and_clear(self, processor: PendingAcksConsumer) -> None:
        """Visit and remove everything as one batch; the map stays open."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            self._drain(processor)

    def _drain(self, processor: PendingAcksConsumer) -> None:
        handler = self._remove_handler_supplier()
        try:
            if handler is not None:
                handler.start_batch()
            for ledger_id, entry_id, remaining, sticky_key_hash in self._sorted_items():
                processor(ledger_id, entry_id, remaining, sticky_key_hash)
                self._notify_removing(handler, ledger_id, entry_id, sticky_key_hash)
        finally:
            if handler is not None:
                handler.end_batch()
        self._ledgers.clear()
        self._size = 0

    def items(self) -> list[tuple[int, int, int, int]]:
        """Harness view: `(ledger_id, entry_id, remaining_unacked, hash)` in ascending order."""
        with traced(self.lock_tracer, pending_lock(self._consumer.consumer_id)):
            return self._sorted_items()
