"""Harness-controlled timer standing in for Netty's ``HashedWheelTimer`` (spec §2).

Nothing fires on its own: the harness advances its clock and then calls :meth:`VirtualTimer.fire`
or :meth:`VirtualTimer.fire_due`, so every firing is an explicit, replayable trace step. Firing a
handle later than its deadline models wheel-timer granularity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

Clock = Callable[[], int]


class TimerTask(Protocol):
    """What a timeout runs when it fires (Netty's ``TimerTask``)."""

    def run(self, handle: TimeoutHandle | None) -> None: ...


@dataclass(eq=False)
class TimeoutHandle:
    """One armed timeout (Netty's ``Timeout``). Compared by identity, as the tracker does."""

    deadline: int
    seq: int
    task: TimerTask = field(repr=False)
    cancelled: bool = False
    fired: bool = False

    def cancel(self) -> None:
        """Idempotent; a handle that already fired stays fired and is not marked cancelled."""
        if not self.fired:
            self.cancelled = True

    @property
    def is_pending(self) -> bool:
        """Neither cancelled nor fired."""
        return not (self.cancelled or self.fired)


class VirtualTimer:
    """Deterministic timer on a virtual clock.

    Harness view: ``pending()`` lists live handles in firing order (DD-I6: "at most one pending
    handle created by the tracker") and ``created_count`` counts ``new_timeout`` calls.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.created_count = 0
        self._live: list[TimeoutHandle] = []

    def new_timeout(self, task: TimerTask, delay_ms: int) -> TimeoutHandle:
        """Arm ``task`` to run at ``clock() + delay_ms``."""
        if delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {delay_ms}")
        handle = TimeoutHandle(deadline=self.clock() + delay_ms, seq=self.created_count, task=task)
        self.created_count += 1
        self._live.append(handle)
        return handle

    def pending(self) -> list[TimeoutHandle]:
        """Handles neither cancelled nor fired, sorted by ``(deadline, seq)``."""
        self._live = [h for h in self._live if h.is_pending]
        return sorted(self._live, key=lambda h: (h.deadline, h.seq))

    def fire(self, handle: TimeoutHandle) -> None:
        """Fire one pending, due handle: mark it fired, then run its task."""
        if not handle.is_pending:
            raise ValueError(f"handle seq={handle.seq} is not pending")
        now = self.clock()
        if now < handle.deadline:
            raise ValueError(f"handle seq={handle.seq} is not due: deadline {handle.deadline} > now {now}")
        handle.fired = True
        handle.task.run(handle)

    def fire_due(self) -> int:
        """Fire due handles in ``(deadline, seq)`` order, including ones armed while firing."""
        fired = 0
        while True:
            now = self.clock()
            due = [h for h in self.pending() if h.deadline <= now]
            if not due:
                return fired
            self.fire(due[0])
            fired += 1
