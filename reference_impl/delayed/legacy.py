"""The pre-#23611 tracker: a heap of exact ``(deliverAt, ledger, entry)`` triples (spec §4.7).

It is the differential oracle for DD-I10: it offers every message at the first moment its exact ``D``
is due, so the bucketed tracker may only be later, by less than one bucket width.

Harness view: ``snapshot()`` returns the multiset of held triples, sorted, with the exact ``D`` in the
key position; everything else reads as on ``InMemoryDelayedDeliveryTracker``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from reference_impl.delayed.timer import Clock, VirtualTimer
from reference_impl.delayed.tracker import AbstractDelayedDeliveryTracker, Position, Triple, positions

LEGACY_BYTES_PER_MESSAGE = 24  # three 8-byte longs per message in the primitive triple queue


class LegacyDelayedDeliveryTracker(AbstractDelayedDeliveryTracker):
    """Exact-time tracker; re-adding a position pushes another triple (no dedup, as upstream)."""

    def __init__(
        self,
        tick_time_millis: int,
        clock: Clock,
        strict: bool,
        fixed_delay_detection_lookahead: int,
        *,
        timer: VirtualTimer | None = None,
        trigger: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(tick_time_millis, clock, strict, fixed_delay_detection_lookahead, timer=timer, trigger=trigger)
        self.heap: list[Triple] = []

    def _track(self, ledger_id: int, entry_id: int, deliver_at: int) -> None:
        heapq.heappush(self.heap, (deliver_at, ledger_id, entry_id))

    def get_number_of_delayed_messages(self) -> int:
        return len(self.heap)

    def get_buffer_memory_usage(self) -> int:
        return LEGACY_BYTES_PER_MESSAGE * len(self.heap)

    def next_delivery_time(self) -> int:
        if not self.heap:
            raise LookupError("no delayed messages")
        return self.heap[0][0]

    def has_message_available(self) -> bool:
        available = bool(self.heap) and self.heap[0][0] <= self.cutoff_time()
        if not available:
            self.update_timer()
        return available

    def get_scheduled_messages(self, max_messages: int) -> list[Position]:
        """Pop due triples in ``(D, ledger, entry)`` order.

        Returns one position per popped triple, so duplicates from re-reads show up twice (upstream's
        ``TreeSet`` would merge them; keeping them lets a harness count the multiset, DD-I3).
        """
        cutoff = self.cutoff_time()
        popped: list[Triple] = []
        while max_messages > 0 and self.heap and self.heap[0][0] <= cutoff:
            popped.append(heapq.heappop(self.heap))
            max_messages -= 1
        self._reset_if_empty()
        self.update_timer()
        return positions(popped)

    def clear(self) -> None:
        self.heap.clear()

    def snapshot(self) -> list[Triple]:
        return sorted(self.heap)
