"""Every interleaving of a lock-level port's threads, stateless, under a preemption bound (as CHESS bounds them).

The port is reset before each schedule (the first included) and the schedule replayed from the start, so
nothing of the real code's state has to be copied: a schedule is its list of thread names. A run follows the
current thread while it is enabled and otherwise the first enabled one; each other enabled thread at each step
starts a new schedule, if switching to it keeps the schedule within `preemptions` (switching away from an
enabled thread is a preemption; switching from a blocked or finished one is free). `judge` reads every
snapshot; the first schedule it finds violations in is returned, with its violations, and `replay` runs it
again to the same snapshot.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from properties.jvm.threads import LockLevelPort, Snapshot

Judge = Callable[[Snapshot, str | None], list[str]]
"""What a snapshot breaks, given the thread whose run led to it (None: the initial state, after a reset)."""
DEADLOCK = "deadlock"
"""What a schedule finds when no thread is enabled and not every thread is done."""


@dataclass(frozen=True)
class Exploration:
    """The outcome: the failing schedule and what it broke, or none after `schedules` schedules."""

    schedules: int
    steps: int
    complete: bool = False
    schedule: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()
    last: Snapshot | None = None


def _judged(snap: Snapshot, judge: Judge, thread: str | None) -> list[str]:
    found = judge(snap, thread)
    if not found and not snap.enabled and not snap.finished:
        found = [DEADLOCK]
    return found


def explore(port: LockLevelPort, judge: Judge, preemptions: int = 2, max_schedules: int = 20_000,
            max_steps: int = 400, stop_at: float = math.inf) -> Exploration:
    """Runs the schedules (see the module doc) with no preemption, then with at most 1, ... up to `preemptions`
    (so a failure found has the fewest preemptions any failing schedule has), until `judge` finds something, none
    is left (`complete`), or `max_schedules` ran or the monotonic clock passed `stop_at` (not complete)."""
    schedules = steps = 0
    for bound in range(preemptions + 1):
        found = _bounded(port, judge, bound, max_schedules - schedules, max_steps, stop_at)
        schedules, steps = schedules + found.schedules, steps + found.steps
        if found.violations or not found.complete or bound == preemptions:
            return dataclasses.replace(found, schedules=schedules, steps=steps)
    raise AssertionError("unreachable: the last bound returns")


def _bounded(port: LockLevelPort, judge: Judge, preemptions: int, max_schedules: int, max_steps: int,
             stop_at: float) -> Exploration:
    """The schedules within `preemptions` (the module doc), depth first."""
    pending: list[tuple[str, ...]] = [()]
    schedules = steps = 0
    while pending and schedules < max_schedules and time.monotonic() < stop_at:
        prefix = pending.pop()
        snap = port.reset()
        schedules += 1
        schedule: list[str] = []
        used = 0
        last: str | None = None
        found = _judged(snap, judge, None)
        if found:
            return Exploration(schedules, steps, schedule=(), violations=tuple(found), last=snap)
        while snap.enabled and len(schedule) < max_steps:
            enabled = snap.enabled
            if len(schedule) < len(prefix):
                choice = prefix[len(schedule)]
            else:
                choice = last if last in enabled else enabled[0]
                for other in reversed(enabled):
                    cost = used + (1 if last in enabled and other != last else 0)
                    if other != choice and cost <= preemptions:
                        pending.append((*schedule, other))
            used += 1 if last in enabled and choice != last else 0
            snap = port.run(choice)
            steps += 1
            schedule.append(choice)
            last = choice
            found = _judged(snap, judge, choice)
            if found:
                return Exploration(schedules, steps, schedule=tuple(schedule), violations=tuple(found), last=snap)
        if snap.enabled:  # cut at max_steps: what lies beyond was not explored
            return Exploration(schedules, steps)
    return Exploration(schedules, steps, complete=not pending)


@dataclass(frozen=True)
class Replayed:
    """A schedule run again: the steps it ran, the last snapshot, what it found, and the step at which the
    schedule stopped fitting the code (its thread blocked or done there), if it did."""

    steps: int
    last: Snapshot
    violations: tuple[str, ...]
    misfit: str = ""


def replay(port: LockLevelPort, schedule: Sequence[str], judge: Judge) -> Replayed:
    """Runs `schedule` from the initial state (the port is reset first), up to its first violation."""
    snap = port.reset()
    found = _judged(snap, judge, None)
    for step, thread in enumerate(schedule, start=1):
        if found:
            return Replayed(step - 1, snap, tuple(found))
        if thread not in snap.enabled:
            state = next((t.state for t in snap.threads if t.name == thread), "unknown")
            return Replayed(step - 1, snap, (), f"step {step}: thread {thread} is {state} (at "
                                                f"{next((t.point for t in snap.threads if t.name == thread), None)})")
        snap = port.run(thread)
        found = _judged(snap, judge, thread)
    return Replayed(len(schedule), snap, tuple(found))
