"""Model locks for the lock-discipline check (spec §4.6, KS-I10).

There are no real threads: components announce the named model locks they would take in Java
(`dispatcher`, `pending[c]`, `tracker`, `stats[c]`, `selector`) to an optional `LockTracer`, which
records the set of locks held at every acquisition and at every handler call. A harness reads
`LockTracer.events` or `LockTracer.order_edges()` and checks that the lock-order graph is acyclic and
that no unblocking handler call (`"unblock"`) happened while `tracker` or a `stats[...]` lock was held.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Literal

DISPATCHER_LOCK = "dispatcher"
TRACKER_LOCK = "tracker"
SELECTOR_LOCK = "selector"


def pending_lock(consumer_id: int) -> str:
    """Name of the lock of one consumer's PendingAcksMap (keyed by the deterministic consumer id)."""
    return f"pending[{consumer_id}]"


def stats_lock(consumer_id: int) -> str:
    """Name of the lock of one consumer's draining-hash stats in the tracker."""
    return f"stats[{consumer_id}]"


@dataclass(frozen=True)
class LockEvent:
    """One acquisition of `name`, or one call of the handler `name`, with the locks held at that moment."""

    kind: Literal["acquire", "handler"]
    name: str
    held: frozenset[str]


class LockTracer:
    """Records lock acquisitions and handler calls of one simulated thread at a time.

    Interleaved calls (acks, flows) run on another Java thread; the dispatcher wraps them in
    `other_thread()` so that they do not appear to run under the dispatcher monitor.
    """

    def __init__(self) -> None:
        self.events: list[LockEvent] = []
        self._held: list[str] = []

    @property
    def held(self) -> frozenset[str]:
        """Locks held right now by the current simulated thread."""
        return frozenset(self._held)

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Acquire `name` for the duration of the block (reentrant, like Java monitors)."""
        self.events.append(LockEvent("acquire", name, self.held))
        self._held.append(name)
        try:
            yield
        finally:
            popped = self._held.pop()
            assert popped == name, f"lock {name} released out of order (top was {popped})"

    def handler_call(self, name: str) -> None:
        """Record that a callback named `name` is being invoked."""
        self.events.append(LockEvent("handler", name, self.held))

    @contextmanager
    def other_thread(self) -> Iterator[None]:
        """Run the block as another thread: it starts holding no locks."""
        saved = self._held
        self._held = []
        try:
            yield
        finally:
            self._held = saved

    def order_edges(self) -> set[tuple[str, str]]:
        """Edges `held -> acquired` of the lock-order graph (reentrant self-edges excluded)."""
        return {
            (held, event.name)
            for event in self.events
            if event.kind == "acquire"
            for held in event.held
            if held != event.name
        }


def traced(tracer: LockTracer | None, name: str) -> AbstractContextManager[None]:
    """`tracer.hold(name)`, or a no-op when no tracer is installed."""
    return tracer.hold(name) if tracer is not None else nullcontext()


def record_handler_call(tracer: LockTracer | None, name: str) -> None:
    """`tracer.handler_call(name)` when a tracer is installed."""
    if tracer is not None:
        tracer.handler_call(name)
