"""DispatcherModel: offers versus deliveries (spec §2, §4.5)."""

from __future__ import annotations

import pytest

from reference_impl.delayed import (
    NO_DELAY,
    Delivery,
    DispatcherModel,
    InMemoryDelayedDeliveryTracker,
    LegacyDelayedDeliveryTracker,
    Offer,
)
from tests.delayed.support import ManualClock, check_invariants, early_deliveries


def test_rejects_non_positive_round_size() -> None:
    tracker = InMemoryDelayedDeliveryTracker(1, ManualClock(), False, 0)
    with pytest.raises(ValueError):
        DispatcherModel(tracker, max_messages_per_round=0)


def test_read_without_delay_delivers_immediately() -> None:
    clock = ManualClock(42)
    dispatcher = DispatcherModel(InMemoryDelayedDeliveryTracker(100, clock, False, 0))
    assert dispatcher.read(3, 4, NO_DELAY) is True
    assert dispatcher.deliveries == [Delivery((3, 4), 42, -1)]
    assert dispatcher.offers == []
    assert dispatcher.deliver_at_of == {(3, 4): -1}


def test_held_read_then_round_delivers_with_exact_d() -> None:
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(100, clock, False, 0)
    dispatcher = DispatcherModel(tracker)
    assert dispatcher.read(1, 1, 500) is False
    assert dispatcher.deliveries == []
    clock.set(447 - 100 + 64 - 1)  # current non-strict: bucket 448 due at 448 + 63 - 100 = 411
    assert dispatcher.dispatch_round() == []
    assert dispatcher.offers == []
    clock.set(411)
    assert dispatcher.dispatch_round() == [(1, 1)]
    assert dispatcher.offers == [Offer((1, 1), 411, 500)]
    assert dispatcher.deliveries == [Delivery((1, 1), 411, 500)]
    assert dispatcher.wasted_replays == 0
    assert tracker.get_number_of_delayed_messages() == 0


def test_round_respects_max_messages_per_round() -> None:
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(1, clock, True, 0)
    dispatcher = DispatcherModel(tracker, max_messages_per_round=2)
    for entry in range(5):
        dispatcher.read(1, entry, 10)
    clock.set(10)
    assert dispatcher.dispatch_round() == [(1, 0), (1, 1)]
    assert dispatcher.dispatch_round() == [(1, 2), (1, 3)]
    assert dispatcher.dispatch_round() == [(1, 4)]
    assert dispatcher.dispatch_round() == []
    assert len(dispatcher.offers) == 5


def test_timer_trigger_runs_a_round() -> None:
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(1000, clock, True, 0)
    dispatcher = DispatcherModel(tracker)
    dispatcher.read(1, 1, 60400)
    dispatcher.read(2, 2, 61000)
    clock.set(60416)
    assert tracker.timer.fire_due() == 1
    assert dispatcher.deliveries == [Delivery((1, 1), 60416, 60400)]
    check_invariants(tracker)
    clock.set(61440)
    assert tracker.timer.fire_due() == 1
    assert [d.position for d in dispatcher.deliveries] == [(1, 1), (2, 2)]
    assert tracker.timer.pending() == []
    assert early_deliveries(dispatcher) == []


def test_re_read_of_tracked_position_same_d() -> None:
    clock = ManualClock(0)
    current = InMemoryDelayedDeliveryTracker(100, clock, False, 0)
    legacy = LegacyDelayedDeliveryTracker(100, clock, False, 0)
    for tracker, expected_count in ((current, 1), (legacy, 2)):
        dispatcher = DispatcherModel(tracker)
        assert dispatcher.read(1, 1, 500) is False
        assert dispatcher.read(1, 1, 500) is False
        assert tracker.get_number_of_delayed_messages() == expected_count
        check_invariants(tracker)


def test_wasted_replay_re_tracks_the_message() -> None:
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(100, clock, True, 0, "pr23611")
    dispatcher = DispatcherModel(tracker)
    dispatcher.read(1, 1, 70)  # pr23611 key trim(70) = 64
    clock.set(64)
    assert dispatcher.dispatch_round() == []
    assert dispatcher.offers == [Offer((1, 1), 64, 70)]
    assert dispatcher.wasted_replays == 1
    assert tracker.snapshot() == [(64, 1, 1)]
    clock.set(70)
    assert dispatcher.dispatch_round() == [(1, 1)]
    assert dispatcher.deliveries == [Delivery((1, 1), 70, 70)]
