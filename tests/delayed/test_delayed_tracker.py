"""Edge cases of spec §4 on InMemoryDelayedDeliveryTracker (variant ``current`` unless stated)."""

from __future__ import annotations

import pytest

from reference_impl.delayed import MAX_LONG, MIN_LONG, InMemoryDelayedDeliveryTracker, VirtualTimer
from tests.delayed.support import ManualClock, check_invariants


def tracker_at(
    now: int = 0, tick: int = 100, strict: bool = False, lookahead: int = 0
) -> tuple[ManualClock, InMemoryDelayedDeliveryTracker]:
    clock = ManualClock(now)
    return clock, InMemoryDelayedDeliveryTracker(tick, clock, strict, lookahead)


# ----- construction and input validation -----


@pytest.mark.parametrize(
    ("tick", "lookahead", "variant"), [(0, 0, "current"), (-1, 0, "current"), (1, -1, "current"), (1, 0, "bogus")]
)
def test_constructor_rejects_bad_parameters(tick: int, lookahead: int, variant: str) -> None:
    with pytest.raises(ValueError):
        InMemoryDelayedDeliveryTracker(tick, ManualClock(), False, lookahead, variant)  # type: ignore[arg-type]


def test_default_timer_is_on_the_tracker_clock_and_injected_timer_is_used() -> None:
    clock = ManualClock(7)
    tracker = InMemoryDelayedDeliveryTracker(1, clock, True, 0)
    assert tracker.timer.clock is clock
    timer = VirtualTimer(clock)
    injected = InMemoryDelayedDeliveryTracker(1, clock, True, 0, timer=timer)
    injected.add_message(1, 1, 100)
    assert timer.created_count == 1
    assert [h.deadline for h in timer.pending()] == [100]


@pytest.mark.parametrize(
    ("ledger", "entry", "deliver_at"),
    [(-1, 0, 500), (2**63, 0, 500), (0, -1, 500), (0, 2**63, 500), (0, 0, 2**63), (0, 0, MIN_LONG - 1)],
)
def test_add_message_rejects_out_of_range_values(ledger: int, entry: int, deliver_at: int) -> None:
    _, tracker = tracker_at()
    with pytest.raises(ValueError):
        tracker.add_message(ledger, entry, deliver_at)
    assert tracker.get_number_of_delayed_messages() == 0


@pytest.mark.parametrize("bad", [1.5, True, "3"])
def test_add_message_rejects_non_integers(bad: object) -> None:
    _, tracker = tracker_at()
    with pytest.raises(TypeError):
        tracker.add_message(1, 1, bad)  # type: ignore[arg-type]


def test_extreme_valid_values() -> None:
    _, tracker = tracker_at(tick=1000, strict=True)
    assert tracker.add_message(0, 0, MIN_LONG) is False
    assert tracker.add_message(MAX_LONG, MAX_LONG, MAX_LONG) is True
    # round_up saturates: the key is trim(Long.MAX_VALUE), as §3 specifies.
    assert tracker.snapshot() == [(2**63 - 512, MAX_LONG, MAX_LONG)]
    check_invariants(tracker)


# ----- §4.1 add_message -----


@pytest.mark.parametrize(("strict", "cutoff"), [(False, 1100), (True, 1000)])
def test_add_rejects_at_cutoff_and_accepts_just_above(strict: bool, cutoff: int) -> None:
    _, tracker = tracker_at(now=1000, strict=strict)
    assert tracker.cutoff_time() == cutoff
    assert tracker.add_message(1, 1, cutoff) is False
    assert tracker.messages_have_fixed_delay is False
    assert tracker.get_number_of_delayed_messages() == 0
    assert tracker.add_message(1, 2, cutoff + 1) is True
    assert tracker.get_number_of_delayed_messages() == 1


def test_negative_deliver_at_is_rejected_even_if_clock_is_negative() -> None:
    _, tracker = tracker_at(now=-10_000, strict=True)
    assert tracker.add_message(1, 1, -1) is False
    assert tracker.messages_have_fixed_delay is False
    assert tracker.add_message(1, 2, 0) is True


def test_re_add_is_idempotent() -> None:
    _, tracker = tracker_at()
    assert tracker.add_message(1, 1, 500) is True
    memory = tracker.get_buffer_memory_usage()
    assert tracker.add_message(1, 1, 500) is True
    assert tracker.add_message(1, 1, 511) is True  # same bucket 448 (P=64): still one triple
    assert tracker.get_number_of_delayed_messages() == 1
    assert tracker.get_buffer_memory_usage() == memory == 30
    check_invariants(tracker)


def test_same_position_with_different_d_in_two_buckets_is_held_twice() -> None:
    clock, tracker = tracker_at()
    tracker.add_message(1, 1, 500)
    tracker.add_message(1, 1, 900)
    assert tracker.snapshot() == [(448, 1, 1), (896, 1, 1)]
    assert tracker.get_number_of_delayed_messages() == 2
    clock.set(1000)
    # Every emitted triple is reported (upstream's TreeSet would merge the duplicate; see tracker docstring).
    assert tracker.get_scheduled_messages(10) == [(1, 1), (1, 1)]
    assert tracker.get_number_of_delayed_messages() == 0
    check_invariants(tracker)


def test_fixed_delay_detection() -> None:
    _, tracker = tracker_at(tick=100)
    tracker.add_message(1, 1, 1000)
    assert tracker.highest_delivery_time_tracked == 1000
    tracker.add_message(1, 2, 900)  # == highest - T: still fixed
    assert tracker.messages_have_fixed_delay is True
    assert tracker.highest_delivery_time_tracked == 1000
    tracker.add_message(1, 3, 899)  # < highest - T
    assert tracker.messages_have_fixed_delay is False
    tracker.add_message(1, 4, 2000)
    assert tracker.highest_delivery_time_tracked == 2000
    assert tracker.messages_have_fixed_delay is False


# ----- §4.2 / §4.3 availability and drains -----


def test_get_scheduled_drains_in_key_order_but_returns_position_order() -> None:
    clock, tracker = tracker_at(tick=100)
    tracker.add_message(5, 1, 200)  # key 192
    tracker.add_message(1, 7, 300)  # key 256
    tracker.add_message(1, 9, 300)
    clock.set(300)
    assert tracker.get_scheduled_messages(1) == [(5, 1)]  # the smaller key goes first
    assert tracker.get_scheduled_messages(2) == [(1, 7), (1, 9)]
    tracker.add_message(5, 2, 500)  # key 448
    tracker.add_message(1, 3, 600)  # key 576
    clock.set(600)
    assert tracker.get_scheduled_messages(10) == [(1, 3), (5, 2)]
    check_invariants(tracker)


def test_partial_drain_takes_smallest_entry_ids_first_across_ledgers() -> None:
    clock, tracker = tracker_at(tick=100)
    for ledger, entry in [(2, 5), (2, 1), (1, 9), (1, 4), (2, 3)]:
        tracker.add_message(ledger, entry, 150)
    clock.set(150)
    assert tracker.get_scheduled_messages(3) == [(1, 4), (1, 9), (2, 1)]
    assert tracker.snapshot() == [(128, 2, 3), (128, 2, 5)]
    check_invariants(tracker)
    assert tracker.get_scheduled_messages(3) == [(2, 3), (2, 5)]


def test_bucket_is_due_only_when_its_whole_range_is_due() -> None:
    """current, non-strict: key k is due at now >= k + P - 1 - T, never earlier."""
    clock, tracker = tracker_at(tick=100)
    tracker.add_message(1, 1, 130)  # key 128; the bucket spans D in [128, 191]
    clock.set(128 + 64 - 1 - 100 - 1)
    assert tracker.has_message_available() is False
    assert tracker.get_scheduled_messages(10) == []
    clock.set(128 + 64 - 1 - 100)
    assert tracker.has_message_available() is True
    assert tracker.get_scheduled_messages(10) == [(1, 1)]


@pytest.mark.parametrize("n", [0, -3])
def test_non_positive_max_messages_still_runs_end_of_call_steps(n: int) -> None:
    _, tracker = tracker_at(tick=100)
    tracker.add_message(1, 1, 1000)
    handle = tracker.handle
    assert handle is not None
    tracker.clear()
    tracker.add_message(9, 9, 50)  # rejected: sets fixed to False, stores nothing
    assert tracker.messages_have_fixed_delay is False
    assert handle.is_pending  # clear() does not touch the timer
    assert tracker.get_scheduled_messages(n) == []
    assert tracker.messages_have_fixed_delay is True  # reset: the tracker is empty
    assert tracker.highest_delivery_time_tracked == 0
    assert handle.cancelled  # update_timer() ran
    assert tracker.timer_state() == (None, None, 0)


def test_non_empty_drain_keeps_highest_and_fixed() -> None:
    clock, tracker = tracker_at(tick=100)
    tracker.add_message(1, 1, 1000)
    tracker.add_message(1, 2, 800)  # < highest - T
    clock.set(800)
    assert tracker.get_scheduled_messages(10) == [(1, 2)]
    assert tracker.messages_have_fixed_delay is False
    assert tracker.highest_delivery_time_tracked == 1000
    clock.set(1000)
    assert tracker.get_scheduled_messages(10) == [(1, 1)]
    assert (tracker.messages_have_fixed_delay, tracker.highest_delivery_time_tracked) == (True, 0)


def test_has_message_available_arms_the_timer_when_false() -> None:
    _, tracker = tracker_at(tick=100)
    tracker.add_message(1, 1, 5000)
    tracker.close()  # disarms, keeps the message
    assert tracker.timer_state() == (None, None, 0)
    assert tracker.has_message_available() is False
    handle, target, _ = tracker.timer_state()
    assert target == 4992
    assert handle is not None and handle.deadline == 4992
    check_invariants(tracker)


# ----- §4.4 counters, memory, clear, pause, close -----


def test_memory_follows_adds_and_drains() -> None:
    clock, tracker = tracker_at(tick=1)
    for entry in range(1024):
        tracker.add_message(1, entry, 10)
    assert tracker.get_buffer_memory_usage() == 2076
    tracker.add_message(2, 0, 10)
    assert tracker.get_buffer_memory_usage() == 2076 + 30
    clock.set(10)
    tracker.get_scheduled_messages(1000)
    assert tracker.get_buffer_memory_usage() == (8 + 12 + 8 + 2 * 24) + 30
    check_invariants(tracker)


def test_memory_bound_with_small_entry_ids() -> None:
    _, tracker = tracker_at(tick=8)
    for i in range(200):
        tracker.add_message(i % 3, (i * 37) % 5000, 100 + i)
    count, bitmaps = tracker.get_number_of_delayed_messages(), len(tracker.buckets.bitmaps())
    assert tracker.get_buffer_memory_usage() <= 2 * count + 28 * bitmaps
    check_invariants(tracker)


def test_clear_keeps_flags_and_timer() -> None:
    _, tracker = tracker_at(tick=100)
    tracker.add_message(1, 1, 1000)
    tracker.add_message(1, 2, 700)
    assert tracker.messages_have_fixed_delay is False
    handle = tracker.handle
    tracker.clear()
    assert tracker.get_number_of_delayed_messages() == 0
    assert tracker.get_buffer_memory_usage() == 0
    assert tracker.snapshot() == []
    assert tracker.highest_delivery_time_tracked == 1000
    assert tracker.messages_have_fixed_delay is False
    assert tracker.handle is handle and handle is not None and handle.is_pending
    check_invariants(tracker, after_clear=True)
    tracker.update_timer()
    assert handle.cancelled
    check_invariants(tracker)


def test_next_delivery_time() -> None:
    _, tracker = tracker_at(tick=100)
    with pytest.raises(LookupError):
        tracker.next_delivery_time()
    tracker.add_message(1, 1, 700)
    tracker.add_message(1, 2, 300)
    assert tracker.next_delivery_time() == 256


def test_should_pause_all_deliveries_formula() -> None:
    clock, tracker = tracker_at(tick=100, lookahead=2)
    tracker.add_message(1, 1, 1000)  # key 960, due at now >= 960 + 63 - 100 = 923
    assert tracker.should_pause_all_deliveries() is False  # count 1 < 2
    tracker.add_message(1, 2, 1000)
    assert tracker.should_pause_all_deliveries() is True
    clock.set(923)
    assert tracker.should_pause_all_deliveries() is False  # messages are available

    _, unfixed = tracker_at(tick=100, lookahead=2)
    unfixed.add_message(1, 1, 1000)
    unfixed.add_message(1, 2, 1000)
    unfixed.add_message(1, 3, 10)  # rejected: clears the fixed-delay flag
    assert unfixed.messages_have_fixed_delay is False
    assert unfixed.should_pause_all_deliveries() is False


def test_should_pause_disabled_when_lookahead_is_zero() -> None:
    _, tracker = tracker_at(tick=100, lookahead=0)
    tracker.add_message(1, 1, 1000)
    assert tracker.should_pause_all_deliveries() is False


@pytest.mark.parametrize(("lookahead", "reaches_availability"), [(0, False), (2, False), (1, True)])
def test_should_pause_evaluates_availability_only_when_reached(lookahead: int, reaches_availability: bool) -> None:
    _, tracker = tracker_at(tick=100, lookahead=lookahead)
    tracker.add_message(1, 1, 5000)
    tracker.close()  # disarmed: has_message_available() would re-arm via update_timer()
    created = tracker.timer.created_count
    # lookahead 0 stops at the first operand, lookahead 2 at the count (1 < 2): neither reaches availability.
    assert tracker.should_pause_all_deliveries() is reaches_availability
    assert (tracker.timer.created_count == created + 1) is reaches_availability
    assert (tracker.handle is not None) is reaches_availability


def test_close_cancels_the_armed_handle() -> None:
    _, tracker = tracker_at(tick=100)
    tracker.close()  # nothing armed: no error
    tracker.add_message(1, 1, 1000)
    handle = tracker.handle
    assert handle is not None
    tracker.close()
    assert handle.cancelled
    assert tracker.timer_state() == (None, None, 0)
    assert tracker.timer.pending() == []
    assert tracker.get_number_of_delayed_messages() == 1
