"""Deterministic virtual time, executor and futures (spec §2.0).

The reference never reads a real clock and never starts a thread: time is an integer count of
milliseconds owned by a :class:`VirtualExecutor`, and the harness decides when each queued entry
runs.  :class:`VFuture` follows Java ``CompletableFuture`` rules so the Java choreography can be
transcribed one to one.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Generator
from typing import Any, Generic, Protocol, TypeVar, cast

T = TypeVar("T")
U = TypeVar("U")


class CancellationError(Exception):
    """The failure held by a future that its caller cancelled (Java ``CancellationException``)."""


class Cancellable(Protocol):
    """A scheduled entry that can be withdrawn (Java ``ScheduledFuture.cancel``)."""

    def cancel(self) -> None: ...


class Executor(Protocol):
    """What the limiter needs from Java's single-threaded ``ScheduledExecutorService``."""

    @property
    def now(self) -> int: ...

    def submit(self, fn: Callable[[], object]) -> None: ...

    def schedule(self, fn: Callable[[], object], delay_ms: int) -> Cancellable: ...

    def idle(self) -> bool: ...


class ScheduleHandle:
    """An entry of a :class:`VirtualExecutor`; ``cancel()`` withdraws it if it has not run yet."""

    __slots__ = ("_executor", "cancelled", "fn", "ran", "seq", "trigger_time")

    def __init__(self, executor: VirtualExecutor, trigger_time: int, seq: int, fn: Callable[[], object]):
        self._executor = executor
        self.trigger_time = trigger_time
        self.seq = seq
        self.fn = fn
        self.cancelled = False
        self.ran = False

    def cancel(self) -> None:
        if not self.cancelled and not self.ran:
            self.cancelled = True
            self._executor._live -= 1

    def __lt__(self, other: ScheduleHandle) -> bool:
        return (self.trigger_time, self.seq) < (other.trigger_time, other.seq)


class VirtualExecutor:
    """One queue of entries ordered by ``(trigger_time, seq)``, stepped by the harness.

    ``seq`` is a global creation counter, so entries due at the same time run in submission
    order, as on Java's single executor thread.  Every choice the harness makes (step, move the
    clock) is a legal interleaving of that thread.
    """

    def __init__(self, now: int = 0) -> None:
        self._now = now
        self._seq = 0
        self._heap: list[ScheduleHandle] = []
        self._live = 0

    @property
    def now(self) -> int:
        return self._now

    def submit(self, fn: Callable[[], object]) -> None:
        self.schedule(fn, 0)

    def schedule(self, fn: Callable[[], object], delay_ms: int) -> ScheduleHandle:
        handle = ScheduleHandle(self, self._now + max(0, delay_ms), self._seq, fn)
        self._seq += 1
        self._live += 1
        heapq.heappush(self._heap, handle)
        return handle

    def _head(self) -> ScheduleHandle | None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None

    def step(self) -> bool:
        """Run the smallest due entry; False when nothing is due."""
        head = self._head()
        if head is None or head.trigger_time > self._now:
            return False
        heapq.heappop(self._heap)
        head.ran = True
        self._live -= 1
        head.fn()
        return True

    def run(self) -> int:
        """Step until nothing is due (entries submitted meanwhile included); returns the step count."""
        steps = 0
        while self.step():
            steps += 1
        return steps

    def set_clock(self, t: int) -> None:
        """Jump to ``t`` running nothing: models an executor thread that is late."""
        if t < self._now:
            raise ValueError(f"Cannot move the clock back from {self._now} to {t}")
        self._now = t

    def advance_to(self, t: int) -> None:
        """Run everything due up to ``t`` in time order, then leave the clock at ``t``."""
        if t < self._now:
            raise ValueError(f"Cannot move the clock back from {self._now} to {t}")
        self.run()
        while (nxt := self.next_trigger_time()) is not None and nxt <= t:
            self._now = max(self._now, nxt)
            self.run()
        self._now = t

    def next_trigger_time(self) -> int | None:
        head = self._head()
        return None if head is None else head.trigger_time

    def idle(self) -> bool:
        """No entries left, due or future."""
        return self._live == 0

    def pending(self) -> tuple[tuple[int, int], ...]:
        """``(trigger_time, seq)`` of every live entry, in the order they will run."""
        return tuple((h.trigger_time, h.seq) for h in sorted(h for h in self._heap if not h.cancelled))


class VFuture(Generic[T]):
    """A ``CompletableFuture`` stand-in.

    Callbacks added while pending run synchronously, in registration order, inside the call that
    completes the future; a callback added to a done future runs at once.  A callback must not
    raise: an exception escapes the completing call so a reference bug surfaces immediately.
    ``id`` is an optional stable name the creator assigns so a harness can refer to the future.
    """

    def __init__(self, id: int | None = None) -> None:
        self.id = id
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._cancelled = False
        self._callbacks: list[Callable[[VFuture[T]], object]] = []

    def __repr__(self) -> str:
        if not self._done:
            state = "pending"
        elif self._cancelled:
            state = "cancelled"
        elif self._error is not None:
            state = f"failed {self._error!r}"
        else:
            state = f"completed {self._value!r}"
        return f"VFuture(id={self.id}, {state})"

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return self._cancelled

    def result(self) -> T:
        if not self._done:
            raise RuntimeError("VFuture is not done")
        if self._error is not None:
            raise self._error
        return cast(T, self._value)

    def exception(self) -> BaseException | None:
        if not self._done:
            raise RuntimeError("VFuture is not done")
        return self._error

    def complete(self, value: T) -> bool:
        """Complete with ``value``; False (and no effect) if already done."""
        if self._done:
            return False
        self._value = value
        self._settle()
        return True

    def fail(self, error: BaseException) -> bool:
        """Fail with ``error``; False (and no effect) if already done."""
        if self._done:
            return False
        self._error = error
        self._settle()
        return True

    def cancel(self) -> bool:
        """Caller cancellation: fails the future with :class:`CancellationError` if still pending."""
        if self._done:
            return False
        self._cancelled = True
        self._error = CancellationError("Future was cancelled by its caller")
        self._settle()
        return True

    def _settle(self) -> None:
        self._done = True
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def add_done_callback(self, fn: Callable[[VFuture[T]], object]) -> None:
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def forward_to(self, other: VFuture[T]) -> None:
        """Make ``other`` complete as this future does (value or failure)."""

        def copy(src: VFuture[T]) -> None:
            if src._error is not None:
                other.fail(src._error)
            else:
                other.complete(cast(T, src._value))

        self.add_done_callback(copy)

    def then_apply(self, fn: Callable[[T], U]) -> VFuture[U]:
        """Java ``thenApply``: a failure passes through; cancelling the result does not cancel self."""
        out: VFuture[U] = VFuture()

        def on_done(src: VFuture[T]) -> None:
            if src._error is not None:
                out.fail(src._error)
                return
            try:
                value = fn(cast(T, src._value))
            except Exception as e:
                out.fail(e)
                return
            out.complete(value)

        self.add_done_callback(on_done)
        return out

    def then_compose(self, fn: Callable[[T], VFuture[U]]) -> VFuture[U]:
        """Java ``thenCompose``: a synchronous exception from ``fn`` fails the result (stages are total)."""
        out: VFuture[U] = VFuture()

        def on_done(src: VFuture[T]) -> None:
            if src._error is not None:
                out.fail(src._error)
                return
            try:
                inner = fn(cast(T, src._value))
            except Exception as e:
                out.fail(e)
                return
            inner.forward_to(out)

        self.add_done_callback(on_done)
        return out

    def __await__(self) -> Generator[Any, None, T]:
        """Await from asyncio code (used with :class:`~reference_impl.topiclist.aio.AsyncioExecutor`)."""
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def copy(src: VFuture[T]) -> None:
            if waiter.done():
                return
            if src._error is not None:
                waiter.set_exception(src._error)
            else:
                waiter.set_result(cast(T, src._value))

        self.add_done_callback(copy)
        return (yield from waiter.__await__())


def completed_future(value: T) -> VFuture[T]:
    future: VFuture[T] = VFuture()
    future.complete(value)
    return future


def failed_future(error: BaseException) -> VFuture[Any]:
    future: VFuture[Any] = VFuture()
    future.fail(error)
    return future
