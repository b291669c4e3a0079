"""Client-side record for the Key_Shared tests: derives `held(C)` from events, not from broker state.

Every public step goes through `ClientLog`, which replays the new deliveries in order and checks
KS-I1 (one holder per hash) and KS-I4 (per-key order) at each delivery, as §5 defines them.
"""

from __future__ import annotations

from reference_impl.keyshared import Consumer, KeySharedDispatcher, Position


class ClientLog:
    def __init__(self, dispatcher: KeySharedDispatcher) -> None:
        self.d = dispatcher
        self.held: dict[Consumer, set[Position]] = {}
        self.nacked: set[Position] = set()
        self.ks_i1: list[str] = []
        self.ks_i4: list[str] = []
        self._seen = 0

    def add(self, name: str, consumer_id: int, permits: int) -> Consumer:
        consumer = Consumer(name, consumer_id, permits)
        self.d.add_consumer(consumer)
        self.held[consumer] = set()
        return consumer

    def remove(self, consumer: Consumer) -> None:
        self.d.remove_consumer(consumer)
        self.held.pop(consumer, None)
        self.sync()

    def ack(self, consumer: Consumer, position: Position) -> None:
        self.d.ack(consumer, position)
        self.held[consumer].discard(position)
        self.sync()

    def nack(self, consumer: Consumer, positions: list[Position]) -> None:
        self.d.redeliver_unacknowledged(consumer, positions)
        self.held[consumer] -= set(positions)
        self.nacked |= set(positions)
        self.sync()

    def read(self) -> None:
        self.d.read_more_entries()
        self.sync()

    def run(self) -> None:
        self.d.run_until_quiescent()
        self.sync()

    def received(self, consumer: Consumer) -> list[Position]:
        return self.d.received_by(consumer)

    def sync(self) -> None:
        """Apply the deliveries made since the last sync, checking KS-I4 then KS-I1 at each one."""
        for delivery in self.d.deliveries[self._seen :]:
            consumer, position, sticky_hash = delivery.consumer, delivery.position, delivery.hash
            for entry_id in range(position[1]):
                earlier = (position[0], entry_id)
                if (
                    self.d.hash_of(earlier) == sticky_hash
                    and not self.d.is_acked(earlier)
                    and earlier not in self.held[consumer]
                    and earlier not in self.nacked
                ):
                    self.ks_i4.append(f"{consumer.name} got {position} before {earlier}")
            self.nacked.discard(position)
            self.held[consumer].add(position)
            holders = {c.name for c, held in self.held.items() if any(self.d.hash_of(p) == sticky_hash for p in held)}
            if len(holders) > 1:
                self.ks_i1.append(f"hash {sticky_hash} held by {sorted(holders)} after {position}")
        self._seen = len(self.d.deliveries)

    def ack_everything_except(self, keep: set[Position]) -> int:
        """Each connected consumer acks all it holds except `keep`; returns how many acks were sent."""
        count = 0
        for consumer, held in list(self.held.items()):
            for position in sorted(held - keep):
                self.ack(consumer, position)
                count += 1
        return count

    def stuck_messages(self) -> list[Position]:
        """KS-I5(b) witnesses: unacked, held by nobody, owner connected with permits, hash held by nobody."""
        held_hashes = {self.d.hash_of(p) for held in self.held.values() for p in held}
        held_positions = {p for held in self.held.values() for p in held}
        stuck = []
        for entry_id in range(self.d.entry_count()):
            position = (1, entry_id)
            sticky_hash = self.d.hash_of(position)
            owner = self.d.selector.select(sticky_hash)
            if (
                not self.d.is_acked(position)
                and position not in held_positions
                and owner is not None
                and owner.connected
                and self.d.available_permits(owner) > 0
                and sticky_hash not in held_hashes
            ):
                stuck.append(position)
        return stuck


def ks_i2_violations(d: KeySharedDispatcher) -> list[str]:
    """KS-I2: every tracker entry (C, H) has H != 0, C connected, ref_count = C's pending acks of H >= 1,
    and select(H) is not C; with no consumers the tracker is empty."""
    if d.tracker is None:
        return []
    problems = []
    if not d.consumers and d.tracker.draining_hashes:
        problems.append("tracker not empty without consumers")
    for sticky_hash, entry in d.tracker.draining_hashes.items():
        count = sum(1 for *_, h in entry.consumer.pending_acks.items() if h == sticky_hash)
        if sticky_hash == 0 or not entry.consumer.connected:
            problems.append(f"bad entry {sticky_hash} for {entry.consumer!r}")
        if not entry.ref_count == count >= 1:
            problems.append(f"hash {sticky_hash}: ref_count {entry.ref_count} but {count} pending acks")
        if d.selector.select(sticky_hash) is entry.consumer:
            problems.append(f"hash {sticky_hash} is draining but owned by its draining consumer")
    return problems
