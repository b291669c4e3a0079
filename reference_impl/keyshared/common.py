"""Types shared by every component: positions, IllegalStateError and the broker-side Consumer.

`ConsumerDrainingStats` lives here, beside the consumer whose stats it is (upstream: part of the
consumer's stats), rather than in draining.py: draining.py builds on `Consumer`, so the consumer
naming a type of draining.py would close an import circle. draining.py re-exports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .pending_acks import PendingAcksAddHandler, PendingAcksMap, PendingAcksRemoveHandler

# (ledger_id, entry_id); tuples compare lexicographically, like Pulsar positions.
Position = tuple[int, int]


def next_position(position: Position) -> Position:
    """The entry after `position` in its ledger (upstream's `getNext` on a position of one ledger)."""
    return (position[0], position[1] + 1)


class IllegalStateError(RuntimeError):
    """Java's IllegalStateException."""


@dataclass(frozen=True)
class ConsumerDrainingStats:
    """Per-consumer draining stats; `draining_hashes` holds `(hash, unack_msgs, blocked_attempts)`."""

    draining_hashes_count: int
    draining_hashes_cleared_total: int
    draining_hashes_unacked_messages: int
    draining_hashes: tuple[tuple[int, int, int], ...]


class Consumer:
    """A connected Key_Shared consumer as the broker sees it.

    Identity matters (§2): `__eq__`/`__hash__` are deliberately not overridden, so every dict and
    set keyed by consumers, and every comparison, is by identity. Two consumers may share a name.

    Harness view: `name`, `consumer_id` (deterministic, chosen by the caller), `permits` (may go
    negative), `connected` (False once removed), `pending_acks` (see `PendingAcksMap.items()`) and
    `unacked_messages` (upstream's `unackedMessages`: the dispatcher adds what it sends, and subtracts what
    each ack, mark-delete cleanup and redelivery removed from the pending acks).
    """

    def __init__(self, name: str, consumer_id: int, permits: int = 0) -> None:
        self.name = name
        self.consumer_id = consumer_id
        self.permits = permits
        self.unacked_messages = 0
        self.connected = True
        self._pending_acks_add_handler: PendingAcksAddHandler[Consumer] | None = None
        self._pending_acks_remove_handler: PendingAcksRemoveHandler[Consumer] | None = None
        self._draining_stats_updater: Callable[[Consumer], ConsumerDrainingStats] | None = None
        # The suppliers read the handler fields at every call, as Java's method references do.
        self.pending_acks: PendingAcksMap[Consumer] = PendingAcksMap(
            self, lambda: self._pending_acks_add_handler, lambda: self._pending_acks_remove_handler
        )

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}, {self.consumer_id})"

    def set_pending_acks_add_handler(self, handler: PendingAcksAddHandler[Consumer] | None) -> None:
        self._pending_acks_add_handler = handler

    def set_pending_acks_remove_handler(self, handler: PendingAcksRemoveHandler[Consumer] | None) -> None:
        self._pending_acks_remove_handler = handler

    def get_pending_acks(self) -> PendingAcksMap[Consumer]:
        return self.pending_acks

    def set_draining_hashes_consumer_stats_updater(
        self, updater: Callable[[Consumer], ConsumerDrainingStats] | None
    ) -> None:
        self._draining_stats_updater = updater

    def get_draining_hashes_stats(self) -> ConsumerDrainingStats | None:
        """Draining stats through the installed updater (the Java consumer-stats path); None if none."""
        updater = self._draining_stats_updater
        return None if updater is None else updater(self)
