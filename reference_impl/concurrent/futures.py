"""`CompletableFuture`, blocking queues and a scheduled executor on the deterministic scheduler.

Each operation on a shared object is a scheduling point of a preemptive world, labelled after the Java call
(``future.complete``, ``queue.offer``, ``executor.execute``), so code mirrored statement by statement after
upstream runs at upstream's granularity. Outside a preemptive world they are plain calls.

`CompletableFuture` runs its dependents inline on the completing thread, as Java's non-async stages do; the
completion of a dependent stage is part of the step that completed its source (no point of its own: only the
thread running the source's completion can reach it then). Java pops dependents in reverse registration order;
the code mirrored here registers at most one dependent per future, so the order never shows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar, cast

from reference_impl.concurrent.executors import ScheduledSimThread, Timer, scheduling_point

T = TypeVar("T")
U = TypeVar("U")


class CancellationError(Exception):
    """Java's CancellationException: what a cancelled future completes with."""


class CompletableFuture(Generic[T]):
    """`java.util.concurrent.CompletableFuture`: completion, cancellation and `isDone` are points."""

    def __init__(self, name: str = "future") -> None:
        self.name = name
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None
        self._dependents: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        state = "pending" if not self.done else ("failed" if self.error is not None else "done")
        return f"CompletableFuture({self.name!r}, {state})"

    @classmethod
    def completed(cls, value: T, name: str = "future") -> CompletableFuture[T]:
        """`CompletableFuture.completedFuture`: done before anyone else can see it."""
        future: CompletableFuture[T] = cls(name)
        future._settle(value, None)
        return future

    @property
    def cancelled(self) -> bool:
        return isinstance(self.error, CancellationError)

    def is_done(self) -> bool:
        scheduling_point(f"{self.name}.isDone")
        return self.done

    def complete(self, value: T) -> bool:
        scheduling_point(f"{self.name}.complete")
        return self._settle(value, None)

    def complete_exceptionally(self, error: BaseException) -> bool:
        scheduling_point(f"{self.name}.completeExceptionally")
        return self._settle(None, error)

    def cancel(self) -> bool:
        """`cancel(false)`: completes it with a CancellationError if it is still pending."""
        scheduling_point(f"{self.name}.cancel")
        return self._settle(None, CancellationError())

    def then_apply(self, fn: Callable[[T], U], name: str) -> CompletableFuture[U]:
        """Register `fn`; on a done future it runs at once, on the registering thread."""
        scheduling_point(f"{self.name}.thenApply")
        dependent: CompletableFuture[U] = CompletableFuture(name)

        def fire() -> None:
            if self.error is not None:
                dependent._settle(None, self.error)
            else:
                dependent._settle(fn(cast(T, self.value)), None)

        self._depend(fire)
        return dependent

    def when_complete(self, fn: Callable[[T | None, BaseException | None], object], name: str) -> CompletableFuture[T]:
        scheduling_point(f"{self.name}.whenComplete")
        dependent: CompletableFuture[T] = CompletableFuture(name)

        def fire() -> None:
            fn(self.value, self.error)
            dependent._settle(self.value, self.error)

        self._depend(fire)
        return dependent

    def _depend(self, fire: Callable[[], None]) -> None:
        if self.done:
            fire()
        else:
            self._dependents.append(fire)

    def _settle(self, value: T | None, error: BaseException | None) -> bool:
        if self.done:
            return False
        self.done, self.value, self.error = True, value, error
        dependents, self._dependents = self._dependents, []
        for fire in dependents:
            fire()
        return True


class ArrayBlockingQueue(Generic[T]):
    """`ArrayBlockingQueue` (capacity > 0) or `LinkedBlockingQueue` (unbounded): each call takes the queue's own
    lock for its whole length, so each is one atomic point."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self.items: deque[T] = deque()

    def __repr__(self) -> str:
        return f"ArrayBlockingQueue({self.name!r}, {list(self.items)!r})"

    def offer(self, item: T) -> bool:
        scheduling_point(f"{self.name}.offer")
        if 0 < self.capacity <= len(self.items):
            return False
        self.items.append(item)
        return True

    def peek(self) -> T | None:
        scheduling_point(f"{self.name}.peek")
        return self.items[0] if self.items else None

    def poll(self) -> T | None:
        scheduling_point(f"{self.name}.poll")
        return self.items.popleft() if self.items else None

    def remove(self, item: T) -> bool:
        """`remove(Object)`: by identity here (upstream's requests do not override equals)."""
        scheduling_point(f"{self.name}.remove")
        for i, queued in enumerate(self.items):
            if queued is item:
                del self.items[i]
                return True
        return False

    def is_empty(self) -> bool:
        scheduling_point(f"{self.name}.isEmpty")
        return not self.items

    def size(self) -> int:
        scheduling_point(f"{self.name}.size")
        return len(self.items)


class ScheduledFuture:
    """The handle `schedule` returns: `cancel(false)` stops a run that has not started (a point)."""

    def __init__(self, name: str, timer: Timer) -> None:
        self.name = name
        self.timer = timer

    def cancel(self) -> None:
        scheduling_point(f"{self.name}.cancel")
        self.timer.cancel()


class ScheduledExecutorService:
    """A single-threaded `ScheduledExecutorService` on a simulated thread: submissions are points."""

    def __init__(self, thread: ScheduledSimThread, name: str = "executor") -> None:
        self.thread = thread
        self.name = name

    def execute(self, fn: Callable[[], object], label: str) -> None:
        scheduling_point(f"{self.name}.execute")
        self.thread.execute(fn, label=label)

    def schedule(self, fn: Callable[[], object], delay_ms: int, label: str, handle: str) -> ScheduledFuture:
        """Run `fn` on the thread `delay_ms` from now; `handle` names the returned future in labels."""
        scheduling_point(f"{self.name}.schedule")
        return ScheduledFuture(handle, self.thread.schedule(fn, delay_ms, label=label))
