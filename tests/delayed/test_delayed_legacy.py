"""The pre-#23611 exact-triple tracker (spec §4.7) and the differential bound DD-I10."""

from __future__ import annotations

import pytest

from reference_impl.delayed import (
    DispatcherModel,
    InMemoryDelayedDeliveryTracker,
    LegacyDelayedDeliveryTracker,
    precision_bits,
    round_up,
)
from tests.delayed.support import ManualClock, check_invariants, early_offers


def test_constructor_validation() -> None:
    with pytest.raises(ValueError):
        LegacyDelayedDeliveryTracker(0, ManualClock(), False, 0)
    with pytest.raises(ValueError):
        LegacyDelayedDeliveryTracker(1, ManualClock(), False, -1)


def test_e1_on_legacy() -> None:
    clock = ManualClock(0)
    tracker = LegacyDelayedDeliveryTracker(1, clock, False, 0)
    for (ledger, entry), d in [((1, 2), 20), ((2, 1), 10), ((3, 3), 30), ((4, 5), 50), ((5, 4), 40)]:
        assert tracker.add_message(ledger, entry, d) is True
    assert tracker.get_number_of_delayed_messages() == 5
    assert tracker.get_buffer_memory_usage() == 5 * 24
    clock.set(15)
    assert tracker.add_message(6, 6, 10) is False
    assert tracker.get_scheduled_messages(10) == [(2, 1)]
    clock.set(60)
    assert tracker.get_scheduled_messages(1) == [(1, 2)]
    assert tracker.get_scheduled_messages(3) == [(3, 3), (4, 5), (5, 4)]
    assert tracker.has_message_available() is False
    check_invariants(tracker)


def test_exact_times_and_memory() -> None:
    clock = ManualClock(0)
    tracker = LegacyDelayedDeliveryTracker(1000, clock, True, 0)
    assert tracker.add_message(1, 1, 60400) is True
    assert tracker.next_delivery_time() == 60400
    assert tracker.snapshot() == [(60400, 1, 1)]
    assert [h.deadline for h in tracker.timer.pending()] == [60400]
    clock.set(60399)
    assert tracker.has_message_available() is False
    clock.set(60400)
    assert tracker.has_message_available() is True
    assert tracker.get_scheduled_messages(5) == [(1, 1)]
    assert tracker.get_buffer_memory_usage() == 0
    with pytest.raises(LookupError):
        tracker.next_delivery_time()


def test_re_adds_are_not_deduplicated() -> None:
    clock = ManualClock(0)
    tracker = LegacyDelayedDeliveryTracker(100, clock, False, 0)
    assert tracker.add_message(1, 1, 500) is True
    assert tracker.add_message(1, 1, 500) is True
    assert tracker.get_number_of_delayed_messages() == 2
    assert tracker.get_buffer_memory_usage() == 48
    clock.set(400)
    assert tracker.get_scheduled_messages(1) == [(1, 1)]  # n counts popped triples
    assert tracker.get_number_of_delayed_messages() == 1
    assert tracker.get_scheduled_messages(5) == [(1, 1)]
    check_invariants(tracker)


def test_pops_in_exact_time_order_then_resets_flags() -> None:
    clock = ManualClock(0)
    tracker = LegacyDelayedDeliveryTracker(10, clock, True, 0)
    tracker.add_message(2, 2, 300)
    tracker.add_message(9, 1, 200)
    tracker.add_message(1, 5, 150)  # < highest - T: not a fixed delay
    assert tracker.messages_have_fixed_delay is False
    clock.set(250)
    assert tracker.get_scheduled_messages(1) == [(1, 5)]
    assert tracker.get_scheduled_messages(5) == [(9, 1)]
    assert tracker.messages_have_fixed_delay is False
    clock.set(300)
    assert tracker.get_scheduled_messages(5) == [(2, 2)]
    assert (tracker.messages_have_fixed_delay, tracker.highest_delivery_time_tracked) == (True, 0)


def test_clear_and_should_pause() -> None:
    tracker = LegacyDelayedDeliveryTracker(100, ManualClock(0), False, 2)
    tracker.add_message(1, 1, 1000)
    tracker.add_message(1, 2, 1000)
    assert tracker.should_pause_all_deliveries() is True
    handle = tracker.handle
    tracker.clear()
    assert tracker.get_number_of_delayed_messages() == 0
    assert tracker.highest_delivery_time_tracked == 1000
    assert handle is not None and handle.is_pending
    assert tracker.should_pause_all_deliveries() is False


def offer_times(tracker_kind: str, tick: int, strict: bool, deliver_ats: list[int], end: int) -> dict[int, int]:
    """Add every message once at now 0, then one round per ms; return entry -> offer time."""
    clock = ManualClock(0)
    tracker = (
        LegacyDelayedDeliveryTracker(tick, clock, strict, 0)
        if tracker_kind == "legacy"
        else InMemoryDelayedDeliveryTracker(tick, clock, strict, 0, "current")
    )
    dispatcher = DispatcherModel(tracker, max_messages_per_round=len(deliver_ats))
    for entry, d in enumerate(deliver_ats):
        assert dispatcher.read(1, entry, d) is False
    for now in range(end):
        clock.set(now)
        dispatcher.dispatch_round()
    assert tracker.get_number_of_delayed_messages() == 0
    assert dispatcher.wasted_replays == 0
    assert early_offers(dispatcher) == []
    assert [d.now for d in dispatcher.deliveries] == [o.now for o in dispatcher.offers]
    return {o.position[1]: o.now for o in dispatcher.offers}


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("tick", [1, 3, 8, 100, 1000])
def test_dd_i10_current_is_later_than_legacy_by_less_than_one_bucket(tick: int, strict: bool) -> None:
    bits = precision_bits(tick)
    p = 1 << bits
    first = tick + 1 if not strict else 1
    deliver_ats = list(range(first, first + 3 * p + 7))
    end = deliver_ats[-1] + p  # every current offer happens before D + P
    legacy = offer_times("legacy", tick, strict, deliver_ats, end)
    current = offer_times("current", tick, strict, deliver_ats, end)
    for entry, d in enumerate(deliver_ats):
        lag = current[entry] - legacy[entry]
        assert 0 <= lag <= p - 1
        assert lag == (round_up(d, bits) - d if strict else p - 1 - d % p)
