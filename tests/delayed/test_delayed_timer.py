"""VirtualTimer (spec §2) and the tracker's timer rules (§4.6)."""

from __future__ import annotations

import pytest

from reference_impl.delayed import InMemoryDelayedDeliveryTracker, TimeoutHandle, VirtualTimer
from tests.delayed.support import ManualClock, check_invariants


class Recorder:
    """A TimerTask that logs the handles it ran with, optionally re-arming itself once."""

    def __init__(self, timer: VirtualTimer, rearm_delay: int | None = None) -> None:
        self.timer = timer
        self.rearm_delay = rearm_delay
        self.ran: list[TimeoutHandle | None] = []

    def run(self, handle: TimeoutHandle | None) -> None:
        self.ran.append(handle)
        if self.rearm_delay is not None:
            delay, self.rearm_delay = self.rearm_delay, None
            self.timer.new_timeout(self, delay)


def test_new_timeout_deadline_seq_and_count() -> None:
    clock = ManualClock(100)
    timer = VirtualTimer(clock)
    task = Recorder(timer)
    first = timer.new_timeout(task, 50)
    second = timer.new_timeout(task, 0)
    assert (first.deadline, first.seq, second.deadline, second.seq) == (150, 0, 100, 1)
    assert timer.created_count == 2
    assert timer.pending() == [second, first]
    with pytest.raises(ValueError):
        timer.new_timeout(task, -1)
    assert timer.created_count == 2


def test_pending_ties_break_on_seq_and_handles_compare_by_identity() -> None:
    timer = VirtualTimer(ManualClock(0))
    task = Recorder(timer)
    a = timer.new_timeout(task, 10)
    b = timer.new_timeout(task, 10)
    assert timer.pending() == [a, b]
    assert a != b  # same deadline, different handles


def test_cancel_is_idempotent_and_ignored_after_firing() -> None:
    clock = ManualClock(0)
    timer = VirtualTimer(clock)
    task = Recorder(timer)
    a = timer.new_timeout(task, 5)
    a.cancel()
    a.cancel()
    assert a.cancelled and not a.fired
    assert timer.pending() == []
    b = timer.new_timeout(task, 5)
    clock.set(5)
    timer.fire(b)
    b.cancel()
    assert b.fired and not b.cancelled
    assert task.ran == [b]


def test_fire_requires_pending_and_due() -> None:
    clock = ManualClock(0)
    timer = VirtualTimer(clock)
    task = Recorder(timer)
    handle = timer.new_timeout(task, 10)
    with pytest.raises(ValueError, match="not due"):
        timer.fire(handle)
    clock.set(25)  # late firing is allowed (wheel granularity)
    timer.fire(handle)
    assert handle.fired and task.ran == [handle]
    with pytest.raises(ValueError, match="not pending"):
        timer.fire(handle)
    cancelled = timer.new_timeout(task, 0)
    cancelled.cancel()
    with pytest.raises(ValueError, match="not pending"):
        timer.fire(cancelled)
    assert task.ran == [handle]


def test_fire_due_includes_handles_armed_while_firing() -> None:
    clock = ManualClock(0)
    timer = VirtualTimer(clock)
    chained = Recorder(timer, rearm_delay=0)
    later = Recorder(timer)
    timer.new_timeout(chained, 3)
    timer.new_timeout(later, 4)
    timer.new_timeout(later, 9)
    clock.set(4)
    assert timer.fire_due() == 3  # chained, its re-armed handle (deadline 4), then later@4
    assert len(chained.ran) == 2 and len(later.ran) == 1
    assert [h.deadline for h in timer.pending()] == [9]
    assert timer.fire_due() == 0


# ----- §4.6 on the tracker -----


def make(now: int = 0, tick: int = 100, strict: bool = True) -> tuple[ManualClock, InMemoryDelayedDeliveryTracker]:
    clock = ManualClock(now)
    return clock, InMemoryDelayedDeliveryTracker(tick, clock, strict, 0)


def test_update_timer_keeps_handle_when_head_unchanged() -> None:
    _, tracker = make()
    tracker.add_message(1, 1, 1000)  # key 1024
    handle = tracker.handle
    tracker.add_message(1, 2, 2000)
    tracker.update_timer()
    assert tracker.handle is handle
    assert tracker.timer.created_count == 1


def test_update_timer_rearms_when_head_moves_earlier() -> None:
    _, tracker = make()
    tracker.add_message(1, 1, 2000)  # key 2048
    old = tracker.handle
    tracker.add_message(1, 2, 1000)  # key 1024
    assert old is not None and old.cancelled
    assert tracker.target == 1024
    assert tracker.handle is not None and tracker.handle.deadline == 1024
    check_invariants(tracker)


@pytest.mark.parametrize("now", [1024, 1100])
def test_update_timer_does_not_arm_when_head_is_already_due(now: int) -> None:
    clock, tracker = make()
    tracker.add_message(1, 1, 1000)  # key 1024
    tracker.add_message(1, 2, 3000)
    clock.set(now)  # the handle for 1024 was never fired
    tracker.close()
    tracker.update_timer()  # delay = 1024 - now <= 0
    assert tracker.timer_state() == (None, None, 0)
    assert tracker.timer.pending() == []
    check_invariants(tracker)  # DD-I6: allowed because head key <= now


def test_update_timer_throttles_to_one_trigger_per_tick() -> None:
    clock, tracker = make(tick=1000)
    tracker.add_message(1, 1, 600)  # key 1024 (P=512)
    handle = tracker.handle
    assert handle is not None and handle.deadline == 1024  # max(1024, 0 + 1000 - 0)
    clock.set(1024)
    tracker.timer.fire(handle)
    assert tracker.last_tick_run == 1024
    tracker.get_scheduled_messages(10)
    tracker.add_message(1, 2, 1030)  # key 1536, delay 512 < last_tick_run + T - now = 1000
    assert tracker.handle is not None and tracker.handle.deadline == 2024
    assert tracker.target == 1536
    check_invariants(tracker)


def test_update_timer_cancels_when_empty() -> None:
    clock, tracker = make()
    tracker.add_message(1, 1, 1000)
    handle = tracker.handle
    clock.set(1024)
    assert tracker.get_scheduled_messages(10) == [(1, 1)]
    assert handle is not None and handle.cancelled
    assert tracker.timer_state() == (None, None, 0)


def test_run_ignores_none_and_cancelled_handles() -> None:
    calls: list[int] = []
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(100, clock, True, 0, trigger=lambda: calls.append(clock()))
    tracker.add_message(1, 1, 1000)
    armed = tracker.handle
    tracker.run(None)
    stale = tracker.timer.new_timeout(tracker, 5)
    stale.cancel()
    tracker.run(stale)
    assert calls == []
    assert tracker.last_tick_run == 0
    assert tracker.handle is armed


def test_run_with_foreign_handle_triggers_but_keeps_armed_state() -> None:
    calls: list[int] = []
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(100, clock, True, 0, trigger=lambda: calls.append(clock()))
    tracker.add_message(1, 1, 1000)
    armed, target = tracker.handle, tracker.target
    foreign = VirtualTimer(clock).new_timeout(tracker, 0)  # a live handle that is not the armed one
    clock.set(50)
    tracker.run(foreign)
    assert calls == [50]
    assert tracker.last_tick_run == 50
    assert (tracker.handle, tracker.target) == (armed, target)


def test_run_with_armed_handle_clears_state_and_triggers_once() -> None:
    calls: list[int] = []
    clock = ManualClock(0)
    tracker = InMemoryDelayedDeliveryTracker(100, clock, True, 0, trigger=lambda: calls.append(clock()))
    tracker.add_message(1, 1, 1000)
    clock.set(1030)  # late firing
    assert tracker.timer.fire_due() == 1
    assert calls == [1030]
    assert tracker.timer_state() == (None, None, 1030)
