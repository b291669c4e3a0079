"""asyncio adapter (spec §2.0): the same reference code on a real event loop, for stress tests.

Entries run via ``loop.call_soon`` / ``loop.call_later`` on the loop's single thread, so the
semantics of the :class:`~reference_impl.topiclist.vexec.VirtualExecutor` are kept; only the
interleavings and the clock (``int(loop.time() * 1000)``) are real.  ``VFuture`` is awaitable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class _Entry:
    """A submitted or scheduled callback; counted until it runs or is cancelled."""

    __slots__ = ("_executor", "_handle", "_settled", "fn")

    def __init__(self, executor: AsyncioExecutor, fn: Callable[[], object]) -> None:
        self._executor = executor
        self.fn = fn
        self._settled = False
        self._handle: asyncio.Handle | None = None

    def run(self) -> None:
        self._settle()
        self.fn()

    def cancel(self) -> None:
        if not self._settled and self._handle is not None:
            self._handle.cancel()
            self._settle()

    def _settle(self) -> None:
        if not self._settled:
            self._settled = True
            self._executor._live -= 1


class AsyncioExecutor:
    """Executor interface over an asyncio loop; ``idle()`` tells whether any entry is outstanding."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._live = 0

    @property
    def now(self) -> int:
        return int(self.loop.time() * 1000)

    def submit(self, fn: Callable[[], object]) -> None:
        entry = _Entry(self, fn)
        self._live += 1
        entry._handle = self.loop.call_soon(entry.run)

    def schedule(self, fn: Callable[[], object], delay_ms: int) -> _Entry:
        entry = _Entry(self, fn)
        self._live += 1
        entry._handle = self.loop.call_later(max(0, delay_ms) / 1000, entry.run)
        return entry

    def idle(self) -> bool:
        return self._live == 0
