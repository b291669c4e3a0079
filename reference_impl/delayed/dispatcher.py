"""A minimal dispatcher that separates offers from deliveries (spec §2, §4.5).

The tracker only *offers* positions; the dispatcher re-adds each offered message with its exact
``D`` and *delivers* it only if the tracker says "deliver now". That re-check is why deliveries stay
bounded (DD-I2) in every variant, while an early offer merely costs a wasted replay (DD-I9).

Harness view: ``offers`` and ``deliveries`` are append-only logs of ``(position, now, deliver_at)``;
``wasted_replays`` counts offers that were withheld again; ``deliver_at_of`` holds every exact ``D`` read.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference_impl.delayed.tracker import AbstractDelayedDeliveryTracker, Position

NO_DELAY = -1  # deliver_at of a message published without a delay


@dataclass(frozen=True)
class Offer:
    """The tracker handed ``position`` to the dispatcher at ``now``."""

    position: Position
    now: int
    deliver_at: int


@dataclass(frozen=True)
class Delivery:
    """The dispatcher gave ``position`` to a consumer at ``now``."""

    position: Position
    now: int
    deliver_at: int


class DispatcherModel:
    """Reads messages through a tracker and replays what it offers; wires itself as the tracker's trigger."""

    def __init__(self, tracker: AbstractDelayedDeliveryTracker, *, max_messages_per_round: int = 100) -> None:
        if max_messages_per_round < 1:
            raise ValueError(f"max_messages_per_round must be >= 1, got {max_messages_per_round}")
        self.tracker = tracker
        self.max_messages_per_round = max_messages_per_round
        self.deliver_at_of: dict[Position, int] = {}
        self.offers: list[Offer] = []
        self.deliveries: list[Delivery] = []
        self.wasted_replays = 0
        tracker.trigger = self._on_trigger

    def read(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """A cursor read (or re-read); True if the message was delivered now."""
        position = (ledger_id, entry_id)
        self.deliver_at_of[position] = deliver_at
        if self.tracker.add_message(ledger_id, entry_id, deliver_at):
            return False
        self.deliveries.append(Delivery(position, self.tracker.clock(), deliver_at))
        return True

    def dispatch_round(self) -> list[Position]:
        """One replay round; returns the positions delivered in it."""
        if not self.tracker.has_message_available():
            return []
        delivered: list[Position] = []
        for position in self.tracker.get_scheduled_messages(self.max_messages_per_round):
            deliver_at = self.deliver_at_of[position]
            now = self.tracker.clock()
            self.offers.append(Offer(position, now, deliver_at))
            if self.tracker.add_message(position[0], position[1], deliver_at):
                self.wasted_replays += 1
            else:
                self.deliveries.append(Delivery(position, now, deliver_at))
                delivered.append(position)
        return delivered

    def _on_trigger(self) -> None:
        """The tracker's timer fired: read more entries, i.e. run one round."""
        self.dispatch_round()
