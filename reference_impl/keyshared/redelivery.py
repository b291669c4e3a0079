"""The dispatcher's bookkeeping of what to send again: the replay queue (`RedeliveryMessages`, upstream's
`MessageRedeliveryController`) and, for the dispatchers PIP-379 replaced, the recently joined consumers
(`RecentlyJoinedConsumers`, classic and pip282) and PIP-282's last-sent position."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from .common import Consumer, Position, next_position


class RedeliveryMessages:
    """The replay queue: sorted position -> sticky hash, None when the hash is unknown."""

    def __init__(self) -> None:
        self._messages: dict[Position, int | None] = {}
        self._known_hashes: Counter[int] = Counter()

    def add(self, ledger_id: int, entry_id: int, sticky_key_hash: int | None = None) -> bool:
        """Add if absent; True if it was. A hash given for a position queued without one is recorded (upstream's
        `hashesToBeBlocked.putIfAbsent` is keyed by position: MessageRedeliveryController 66-78 at 90cba329a1,
        since #19167)."""
        position = (ledger_id, entry_id)
        if position in self._messages:
            if self._messages[position] is None and sticky_key_hash is not None:
                self._messages[position] = sticky_key_hash
                self._known_hashes[sticky_key_hash] += 1
            return False
        self._messages[position] = sticky_key_hash
        if sticky_key_hash is not None:
            self._known_hashes[sticky_key_hash] += 1
        return True

    def remove(self, ledger_id: int, entry_id: int) -> bool:
        position = (ledger_id, entry_id)
        if position not in self._messages:
            return False
        sticky_key_hash = self._messages.pop(position)
        if sticky_key_hash is not None:
            self._known_hashes[sticky_key_hash] -= 1
            if not self._known_hashes[sticky_key_hash]:
                del self._known_hashes[sticky_key_hash]
        return True

    def remove_all_up_to(self, ledger_id: int, entry_id: int) -> None:
        for position in [p for p in self._messages if p <= (ledger_id, entry_id)]:
            self.remove(*position)

    def contains(self, ledger_id: int, entry_id: int) -> bool:
        return (ledger_id, entry_id) in self._messages

    def contains_sticky_key_hash(self, sticky_key_hash: int) -> bool:
        """Only known hashes count (positions re-added by a redelivery request have none)."""
        return sticky_key_hash in self._known_hashes

    def get_hash(self, ledger_id: int, entry_id: int) -> int | None:
        return self._messages.get((ledger_id, entry_id))

    def first(self) -> Position | None:
        return min(self._messages) if self._messages else None

    def size(self) -> int:
        return len(self._messages)

    def clear(self) -> None:
        self._messages.clear()
        self._known_hashes.clear()

    def items(self) -> list[tuple[Position, int | None]]:
        """Harness view: `(position, hash or None)` in ascending order."""
        return sorted(self._messages.items())

    def get_messages_to_replay_now(self, max_messages: int, accept: Callable[[Position], bool]) -> list[Position]:
        """Walk the queue in ascending order, collecting up to `max_messages` accepted positions."""
        collected: list[Position] = []
        for position in sorted(self._messages):
            if len(collected) >= max_messages:
                break
            if accept(position):
                collected.append(position)
        return collected


class RecentlyJoinedConsumers:
    """Insertion-ordered consumer -> join position, kept sorted by position (classic, pip282)."""

    def __init__(self) -> None:
        self._entries: list[tuple[Consumer, Position]] = []
        self.sort_count = 0

    def put(self, consumer: Consumer, position: Position) -> None:
        for index, (existing, _) in enumerate(self._entries):
            if existing is consumer:
                self._entries[index] = (consumer, position)
                break
        else:
            self._entries.append((consumer, position))
        if len(self._entries) > 1 and self._entries[-2][1] > self._entries[-1][1]:
            self._entries.sort(key=lambda item: item[1])
            self.sort_count += 1

    def get(self, consumer: Consumer) -> Position | None:
        return next((position for existing, position in self._entries if existing is consumer), None)

    def remove(self, consumer: Consumer) -> None:
        self._entries = [item for item in self._entries if item[0] is not consumer]

    def clear(self) -> None:
        self._entries.clear()

    def head(self) -> Position | None:
        return self._entries[0][1] if self._entries else None

    def remove_head_while_at_most(self, bound: Position) -> bool:
        """Prune from the head while the join position is <= bound; True if anything was pruned."""
        pruned = 0
        while pruned < len(self._entries) and self._entries[pruned][1] <= bound:
            pruned += 1
        del self._entries[:pruned]
        return pruned > 0

    def __contains__(self, consumer: object) -> bool:
        return any(existing is consumer for existing, _ in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> list[tuple[Consumer, Position]]:
        return list(self._entries)


def advance_last_sent_position(
    last_sent: Position, individually_sent: set[Position], sent: list[Position], mark_delete: Position
) -> tuple[Position, set[Position]]:
    """PIP-282 bookkeeping after a pass: record sent positions above `last_sent`, then advance it
    while the next position was sent or is <= mark-delete; keep only positions above it."""
    pending = individually_sent | {p for p in sent if p > last_sent}
    while next_position(last_sent) in pending or next_position(last_sent) <= mark_delete:
        last_sent = next_position(last_sent)
    return last_sent, {p for p in pending if p > last_sent}
