"""Shared test helpers: a manual clock and checkers for the structural invariants (DD-I5, DD-I6, DD-I7)."""

from __future__ import annotations

from reference_impl.delayed import (
    AbstractDelayedDeliveryTracker,
    DispatcherModel,
    InMemoryDelayedDeliveryTracker,
    LegacyDelayedDeliveryTracker,
    Offer,
    TrackerKind,
    closed_form_size,
)


class ManualClock:
    """The harness-owned clock: only moves when a test says so, never backwards."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def set(self, now: int) -> None:
        assert now >= self.now, "the clock never moves backwards"
        self.now = now


def make(
    kind: TrackerKind, tick: int, clock: ManualClock, strict: bool, lookahead: int = 0
) -> AbstractDelayedDeliveryTracker:
    """A tracker of kind ``current``, ``pr23611`` or ``legacy``."""
    if kind == "legacy":
        return LegacyDelayedDeliveryTracker(tick, clock, strict, lookahead)
    return InMemoryDelayedDeliveryTracker(tick, clock, strict, lookahead, kind)


def check_invariants(tracker: AbstractDelayedDeliveryTracker, *, after_clear: bool = False) -> None:
    """DD-I5/DD-I7 on the bucket layout and DD-I6 on the timer; read-only."""
    snapshot = tracker.snapshot()
    count = tracker.get_number_of_delayed_messages()
    assert count == len(snapshot)
    if isinstance(tracker, InMemoryDelayedDeliveryTracker):
        index = tracker.buckets
        assert count == index.count()
        assert index.keys() == sorted({key for key, _, _ in index.items()}), "empty ledger map kept"
        assert all(len(bitmap) > 0 for bitmap in index.bitmaps()), "empty bitmap kept"
        sizes = [len(bitmap.serialize()) for bitmap in index.bitmaps()]
        assert sizes == [closed_form_size(bitmap) for bitmap in index.bitmaps()]
        assert tracker.get_buffer_memory_usage() == sum(sizes) == index.serialized_size()
    pending = [h for h in tracker.timer.pending() if h.task is tracker]
    assert len(pending) <= 1
    if count == 0:
        assert after_clear or not pending
    else:
        head = tracker.next_delivery_time()
        handle, target, _ = tracker.timer_state()
        if head > tracker.clock():
            assert pending == [handle]
            assert handle is not None
            assert target == head <= handle.deadline


def early_offers(dispatcher: DispatcherModel) -> list[Offer]:
    """DD-I1 witnesses: offers before ``D`` (strict) or more than ``T`` before it (non-strict)."""
    tracker = dispatcher.tracker
    slack = 0 if tracker.strict else tracker.tick_time_millis
    return [o for o in dispatcher.offers if o.deliver_at - o.now > slack]


def early_deliveries(dispatcher: DispatcherModel) -> list[tuple[int, int]]:
    """DD-I2 witnesses."""
    tracker = dispatcher.tracker
    slack = 0 if tracker.strict else tracker.tick_time_millis
    return [d.position for d in dispatcher.deliveries if d.deliver_at - d.now > slack]
