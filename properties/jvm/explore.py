"""Every interleaving of a lock-level port's threads, stateless, under a preemption bound (as CHESS bounds them).

The port is reset before each schedule and the schedule replayed from the start, so nothing of the real code's
state has to be copied: a schedule is its list of thread names. A run follows the current thread while it is
enabled and otherwise the first enabled one; each other enabled thread at each step starts a new schedule, if
switching to it keeps the schedule within `preemptions` (switching away from an enabled thread is a preemption;
switching from a blocked or finished one is free). `judge` reads every snapshot; the first schedule it finds
violations in is returned, with its violations, and `replay` runs it again to the same snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from properties.jvm.threads import LockLevelPort, Snapshot

Judge = Callable[[Snapshot], list[str]]
DEADLOCK = "deadlock"
"""What a schedule finds when no thread is enabled and not every thread is done."""


@dataclass(frozen=True)
class Exploration:
    """The outcome: the failing schedule and what it broke, or none after `schedules` schedules."""

    schedules: int
    steps: int
    schedule: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()
    last: Snapshot | None = None


def _judged(snap: Snapshot, judge: Judge) -> list[str]:
    found = judge(snap)
    if not found and not snap.enabled and not snap.finished:
        found = [DEADLOCK]
    return found


def explore(port: LockLevelPort, judge: Judge, preemptions: int = 2, max_schedules: int = 20_000,
            max_steps: int = 400) -> Exploration:
    """Runs the schedules (see the module doc) until `judge` finds something or none is left."""
    pending: list[tuple[str, ...]] = [()]
    schedules = steps = 0
    first = True
    while pending and schedules < max_schedules:
        prefix = pending.pop()
        snap = port.snapshot if first else port.reset()
        first = False
        schedules += 1
        schedule: list[str] = []
        used = 0
        last: str | None = None
        found = _judged(snap, judge)
        if found:
            return Exploration(schedules, steps, (), tuple(found), snap)
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
            found = _judged(snap, judge)
            if found:
                return Exploration(schedules, steps, tuple(schedule), tuple(found), snap)
    return Exploration(schedules, steps)


def replay(port: LockLevelPort, schedule: Sequence[str], judge: Judge) -> tuple[Snapshot, list[str]]:
    """Runs `schedule` from the initial state (the port is reset first); the last snapshot and its violations."""
    snap = port.reset()
    found = _judged(snap, judge)
    for thread in schedule:
        snap = port.run(thread)
        found = _judged(snap, judge)
        if found:
            break
    return snap, found
