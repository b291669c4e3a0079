"""The worked examples of spec §7, with their exact numbers."""

from __future__ import annotations

import pytest

from reference_impl.delayed import (
    DispatcherModel,
    InMemoryDelayedDeliveryTracker,
    TrackerKind,
    Variant,
    round_up,
    trim,
)
from tests.delayed.support import ManualClock, check_invariants, early_offers, make


@pytest.mark.parametrize("variant", ["current", "pr23611"])
def test_e1_tick_one_both_variants_agree(variant: Variant) -> None:
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(1, clock, False, 0, variant)
    assert tracker.precision_millis == 1
    for (ledger, entry), d in [((1, 2), 20), ((2, 1), 10), ((3, 3), 30), ((4, 5), 50), ((5, 4), 40)]:
        assert tracker.add_message(ledger, entry, d) is True
        check_invariants(tracker)
    assert tracker.has_message_available() is False
    assert tracker.get_number_of_delayed_messages() == 5
    assert tracker.get_scheduled_messages(10) == []

    clock.set(15)
    assert tracker.add_message(6, 6, 10) is False
    assert tracker.get_number_of_delayed_messages() == 5
    assert tracker.has_message_available() is True
    assert tracker.get_scheduled_messages(10) == [(2, 1)]
    check_invariants(tracker)

    clock.set(60)
    assert tracker.get_number_of_delayed_messages() == 4
    assert tracker.get_scheduled_messages(1) == [(1, 2)]
    assert tracker.get_number_of_delayed_messages() == 3
    assert tracker.get_scheduled_messages(3) == [(3, 3), (4, 5), (5, 4)]
    assert tracker.get_number_of_delayed_messages() == 0
    assert tracker.has_message_available() is False
    assert tracker.get_scheduled_messages(10) == []
    check_invariants(tracker)


@pytest.mark.parametrize("variant", ["current", "pr23611"])
def test_e3_non_strict_cutoff_and_keys(variant: Variant) -> None:
    tracker = InMemoryDelayedDeliveryTracker(100, ManualClock(0), False, 0, variant)
    assert (tracker.precision_bits, tracker.precision_millis) == (6, 64)
    assert [tracker.add_message(1, i, d) for i, d in enumerate([10, 99, 100, 101, 200])] == [
        False,
        False,
        False,
        True,
        True,
    ]
    assert tracker.get_number_of_delayed_messages() == 2
    assert tracker.buckets.keys() == [64, 192]
    check_invariants(tracker)


@pytest.mark.parametrize("variant", ["current", "pr23611"])
def test_e4_strict_tick_one(variant: Variant) -> None:
    tracker = InMemoryDelayedDeliveryTracker(1, ManualClock(10), True, 0, variant)
    assert tracker.add_message(3, 3, 9) is False
    assert tracker.add_message(2, 2, 10) is False
    assert tracker.add_message(1, 1, 11) is True
    assert tracker.get_number_of_delayed_messages() == 1
    assert tracker.has_message_available() is False
    check_invariants(tracker)


def test_e4_strict_tick_100_current_files_under_64() -> None:
    tracker = InMemoryDelayedDeliveryTracker(100, ManualClock(10), True, 0, "current")
    assert [tracker.add_message(3, 3, 9), tracker.add_message(2, 2, 10), tracker.add_message(1, 1, 11)] == [
        False,
        False,
        True,
    ]
    assert tracker.snapshot() == [(64, 1, 1)]
    assert tracker.has_message_available() is False
    assert tracker.get_scheduled_messages(10) == []
    check_invariants(tracker)


def test_e4_strict_tick_100_pr23611_offers_one_ms_early() -> None:
    clock = ManualClock(10)
    tracker = InMemoryDelayedDeliveryTracker(100, clock, True, 0, "pr23611")
    assert [tracker.add_message(3, 3, 9), tracker.add_message(2, 2, 10), tracker.add_message(1, 1, 11)] == [
        False,
        False,
        True,
    ]
    assert tracker.snapshot() == [(0, 1, 1)]
    assert tracker.has_message_available() is True
    assert tracker.get_scheduled_messages(10) == [(1, 1)]
    # DD-I1 (strict: D <= now) is violated: D = 11 is offered at now = 10.
    assert 11 - clock() == 1


def test_e11_current_strict_timer_walkthrough() -> None:
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(1000, clock, True, 0, "current")
    timer = tracker.timer
    assert tracker.add_message(1, 1, 60400) is True
    assert tracker.add_message(2, 2, 61000) is True
    assert tracker.snapshot() == [(60416, 1, 1), (61440, 2, 2)]
    assert [h.deadline for h in timer.pending()] == [60416]
    check_invariants(tracker)

    clock.set(60000)
    assert tracker.has_message_available() is False
    assert tracker.get_scheduled_messages(100) == []
    first = timer.pending()
    assert [h.deadline for h in first] == [60416]
    check_invariants(tracker)

    clock.set(60416)
    timer.fire(first[0])
    assert tracker.last_tick_run == 60416
    assert tracker.get_scheduled_messages(100) == [(1, 1)]
    assert tracker.get_number_of_delayed_messages() == 1
    assert tracker.has_message_available() is False
    assert [h.deadline for h in timer.pending()] == [61440]
    assert timer.created_count == 2
    check_invariants(tracker)

    clock.set(61440)
    assert timer.fire_due() == 1
    assert tracker.get_scheduled_messages(100) == [(2, 2)]
    assert tracker.get_number_of_delayed_messages() == 0
    assert timer.pending() == []
    check_invariants(tracker)


def test_e11_pr23611_offers_400_ms_early() -> None:
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(1000, clock, True, 0, "pr23611")
    tracker.add_message(1, 1, 60400)
    tracker.add_message(2, 2, 61000)
    assert tracker.buckets.keys() == [59904, 60928]
    clock.set(60000)
    assert tracker.has_message_available() is True
    assert tracker.get_scheduled_messages(100) == [(1, 1)]
    assert 60400 - clock() == 400


# (kind, strict) -> (first offer, first delivery, wasted replays) for T=1000, D=60400, one round per ms.
WORKED_TABLE: list[tuple[TrackerKind, bool, int, int, int]] = [
    ("legacy", False, 59400, 59400, 0),
    ("legacy", True, 60400, 60400, 0),
    ("pr23611", False, 58904, 59400, 59400 - 58904),
    ("pr23611", True, 59904, 60400, 60400 - 59904),
    ("current", False, 59415, 59415, 0),
    ("current", True, 60416, 60416, 0),
]


@pytest.mark.parametrize(("kind", "strict", "offer_at", "deliver_at", "wasted"), WORKED_TABLE)
def test_worked_example_table(kind: TrackerKind, strict: bool, offer_at: int, deliver_at: int, wasted: int) -> None:
    d, tick, bits = 60400, 1000, 9
    assert (trim(d, bits), round_up(d, bits)) == (59904, 60416)
    clock = ManualClock(0)
    dispatcher = DispatcherModel(make(kind, tick, clock, strict))
    assert dispatcher.read(1, 1, d) is False
    for now in range(0, 61000):
        clock.set(now)
        dispatcher.dispatch_round()
        if dispatcher.deliveries:
            break
    assert dispatcher.offers[0].now == offer_at
    assert dispatcher.deliveries[0].now == deliver_at
    assert len(dispatcher.deliveries) == 1
    assert dispatcher.wasted_replays == wasted
    assert len(dispatcher.offers) == wasted + 1
    offer_vs_d = offer_at - d
    limit = -(tick + 511) if not strict else -511
    assert offer_vs_d >= limit
    # Deliveries stay bounded in every variant (DD-I2); offers only in legacy and current (DD-I1).
    assert deliver_at - d >= (0 if strict else -tick)
    assert (early_offers(dispatcher) == []) == (kind != "pr23611")
    if kind == "current":
        assert 0 <= offer_at - WORKED_TABLE[int(strict)][2] <= 511
