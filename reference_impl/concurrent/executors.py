"""Deterministic, harness-stepped threads, timers, futures and locks: one scheduler for every mechanism.

Nothing runs on its own: a :class:`World` owns the virtual clock (integer ms) and every simulated
thread, and the harness drives it one *choice* at a time (``world.choices()`` / ``world.step(c)``).
A ``("run", thread)`` choice runs one atomic **segment** of that thread: its current task runs until it
ends, blocks in :func:`join` / :meth:`SimLock.acquire`, or reaches :func:`yield_point`. A primitive that
does not have to wait (a done future, a free lock) does not end the segment. ``("advance", t)`` moves the
clock to the next instant at which a timer is due or a busy thread becomes free.

Tasks need a stack that can be suspended at any call depth (a user callback may call ``join``), so each
simulated thread runs its tasks in its own greenlet on the harness's OS thread: a segment is one switch into
that greenlet and one switch back (the greenlet is kept between tasks, since creating one costs far more
than a switch). The interleaving is therefore entirely the harness's choice, and no OS thread is ever
started. An ``Exception`` that escapes a task is recorded in ``world.uncaught`` (Java would log it) and the
step returns normally; any other ``BaseException`` (KeyboardInterrupt, SystemExit, a test framework's
failure) ends the task and propagates out of ``world.step`` with a note naming the task, thread and instant.

How a harness reads the state (between steps, nothing is running):

* ``world.now``, ``world.history`` (choices taken), ``world.choices()`` (enabled choices, run choices in
  thread-creation order, then at most one advance);
* ``world.thread_states()``: per thread its queue (task labels), the suspended task and what it is
  blocked on, ``busy_until``, shutdown flag, enabled flag;
* ``world.wait_for_graph()``, ``world.deadlock()``, ``world.stuck()``, ``world.can_progress()``, ``world.quiescent()``;
* ``world.op_futures`` (every store op future, for exactly-once checks via ``SimFuture.attempts``, with the
  thread that submitted it and the one that completed it: ``submitted_on``, ``completed_on``),
  ``world.flush_log``, ``world.notification_log`` (filled by the store), ``world.uncaught`` (exceptions
  that escaped a task, which Java would log; a correct run leaves it empty).

Code the harness calls directly (between steps, outside any simulated thread; its name is
:data:`EXTERNAL`) runs atomically at the current instant: yield points are no-ops, ``charge`` is ignored,
and a ``join`` or lock acquisition that would have to wait raises ``RuntimeError``. Issue client calls
from simulated threads (``world.thread("client").execute(...)``) when they may block or should interleave.
A recorded trace replays with ``world.step(("run", name))`` / ``world.step(("advance", t))``.

A **preemptive** world (``World(preemptive=True)``, as loom and dejafu schedule) makes every operation on a
shared primitive a scheduling point: each lock acquisition (``SimLock``, and the read and write locks of
:mod:`reference_impl.concurrent.locks`), each atomic and volatile access (:mod:`reference_impl.concurrent.atomic`)
and each explicit :func:`scheduling_point` suspends the thread *before* the operation, labelled with what it
is about to do (``ThreadState.suspended_at``, prefixed by the innermost :func:`java_method` on its stack).
A step then runs the thread from one point to the next, crossing task boundaries, so a thread's next label
is always visible between steps; :meth:`World.prime` runs every thread to its first point before the first
step. A release is not a point: it only lets a waiter in, and whatever the releasing thread does next up to
its next point touches nothing another thread can see (every shared access is itself a point).

Call :meth:`World.dispose` (or use ``with World() as w``) when a run ends with suspended tasks (a
deadlock, an abandoned schedule): it unwinds them at once, so their ``finally`` blocks run at a known point
rather than whenever the garbage collector frees their greenlets. Step a world from one OS thread only:
a greenlet cannot be resumed from another.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Generic, Literal, ParamSpec, Protocol, TypeVar, cast

import networkx as nx
from greenlet import GreenletExit, greenlet

T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")

EXTERNAL = "<external>"
"""Name of the harness's own context: code called between steps, outside any simulated thread."""

Choice = tuple[Literal["run"], "SimThread"] | tuple[Literal["advance"], int]
Policy = Literal["fifo", "random"] | Callable[[list[Choice]], Choice]


class RejectedExecutionError(Exception):
    """A submission to a shut-down executor (Java's RejectedExecutionException)."""


class _Context(threading.local):
    """Which world, thread and task is running on this OS thread (all None while the harness runs).

    Thread-local so that worlds stepped on different OS threads never see each other's tasks.
    """

    world: World | None = None
    thread: SimThread | None = None
    task: _Task | None = None


_ctx = _Context()


def current_thread_name() -> str:
    """Name of the simulated thread running the caller, or :data:`EXTERNAL` for the harness."""
    return _ctx.thread.name if _ctx.thread is not None else EXTERNAL


def current_task_id() -> int | None:
    """Id of the task running the caller (ids grow with submission order), None for the harness."""
    return _ctx.task.id if _ctx.task is not None else None


def join(future: SimFuture[T]) -> T:
    """Block the current simulated thread until ``future`` is done; return its value or raise its error.

    On a done future it returns at once without ending the segment. From the harness (outside any
    simulated thread) a pending future cannot be waited for and raises ``RuntimeError``.
    """
    if not future.done():
        task = _ctx.task
        if task is None:
            raise RuntimeError(f"join({future.label}) on a pending future outside a simulated thread")
        task.waiting_on = future
        task.suspend()
    return future.result()


def yield_point(label: str) -> None:
    """End the current segment; the thread stays enabled. A no-op for the harness (it is atomic)."""
    task = _ctx.task
    if task is not None:
        task.yield_label = label
        task.suspend()


class Waitable(Protocol):
    """What a suspended task can wait on: a future, a lock, or a mode of a read/write lock."""

    def blocks(self, thread: str) -> bool:
        """Whether ``thread`` cannot go on yet."""
        ...

    @property
    def wait_label(self) -> str: ...

    @property
    def wait_target(self) -> str | None:
        """The thread it waits for (a lock's holder, a future's completer), if one is known."""
        ...


def preemptive() -> bool:
    """Whether the caller runs on a simulated thread of a preemptive world (so its operations are points)."""
    return _ctx.world is not None and _ctx.world.preemptive and _ctx.task is not None


def scheduling_point(operation: str, waiting_on: Waitable | None = None) -> None:
    """In a preemptive world, suspend before ``operation`` (not enabled while ``waiting_on`` blocks);
    elsewhere a no-op. The label is ``operation`` prefixed by the innermost :func:`java_method`."""
    task = _ctx.task
    thread = _ctx.thread
    if task is None or thread is None or _ctx.world is None or not _ctx.world.preemptive:
        return
    if _ctx.world.disposing:
        raise GreenletExit
    task.yield_label = f"{thread.frames[-1]}: {operation}" if thread.frames else operation
    task.waiting_on = waiting_on
    task.suspend()


def java_method(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Name the scheduling points inside the decorated method after the Java method it mirrors."""

    def decorate(fn: Callable[P, T]) -> Callable[P, T]:
        @wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> T:
            thread = _ctx.thread
            if thread is None:
                return fn(*args, **kwargs)
            thread.frames.append(name)
            try:
                return fn(*args, **kwargs)
            finally:
                thread.frames.pop()

        return run

    return decorate


# --------------------------------------------------------------------------------------------------
# Tasks, threads, timers
# --------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Task:
    """One unit of work queued on a thread; it may span several segments."""

    id: int
    fn: Callable[[], object]
    cost: int
    label: str
    timer: Timer | None = None
    waiting_on: Waitable | None = None
    yield_label: str | None = None

    def suspend(self) -> None:
        """Switch back to the harness; the next segment of this task resumes here."""
        _to_harness(False)

    def blocked_for(self, thread: SimThread) -> bool:
        return self.waiting_on is not None and self.waiting_on.blocks(thread.name)


class SimThread:
    """A single-threaded executor with a FIFO queue (Java's single-thread ExecutorService)."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.busy_until = 0
        self.is_shutdown = False
        self._queue: deque[_Task] = deque()
        self._current: _Task | None = None
        self._glet: greenlet | None = None
        """Runs this thread's tasks; created at its first segment, replaced if an exception killed it."""
        self.frames: list[str] = []
        """The :func:`java_method` names on this thread's stack, innermost last (scheduling-point labels)."""

    def __repr__(self) -> str:
        return f"SimThread({self.name!r})"

    def execute(self, fn: Callable[[], object], cost: int = 0, label: str | None = None) -> None:
        """Queue ``fn``; its ``cost`` is charged to the segment that starts it."""
        if self.is_shutdown:
            raise RejectedExecutionError(f"{self.name} is shut down")
        self._queue.append(self.world._new_task(fn, cost, label))

    def shutdown(self) -> None:
        """Graceful shutdown: queued and suspended work still runs, later submissions are rejected."""
        self.is_shutdown = True

    @property
    def queued(self) -> tuple[str, ...]:
        """Labels of the queued (not yet started) tasks, head first."""
        return tuple(t.label for t in self._queue)

    @property
    def running(self) -> str | None:
        """Label of the started-but-unfinished task, if any."""
        return self._current.label if self._current is not None else None

    @property
    def blocked(self) -> bool:
        return self._current is not None and self._current.blocked_for(self)

    @property
    def has_work(self) -> bool:
        """Runnable work ignoring ``busy_until``: an unblocked suspended task, or a queue if idle."""
        if self._current is not None:
            return not self._current.blocked_for(self)
        return bool(self._queue)

    @property
    def enabled(self) -> bool:
        """Whether ``("run", self)`` is a legal choice now."""
        return self.busy_until <= self.world.now and self.has_work


class ScheduledSimThread(SimThread):
    """A single-threaded ScheduledExecutorService: one-shot and periodic timers (Java semantics)."""

    def schedule(self, fn: Callable[[], object], delay_ms: int, label: str | None = None) -> Timer:
        return self._add_timer(fn, delay_ms, None, "once", None, label)

    def schedule_at_fixed_rate(
        self,
        fn: Callable[[], object],
        initial_ms: int,
        period_ms: int,
        idle: Callable[[], bool] | None = None,
        label: str | None = None,
    ) -> Timer:
        """Run at ``first + k*period``; a late run triggers back-to-back catch-up runs."""
        return self._add_timer(fn, initial_ms, period_ms, "fixed_rate", idle, label)

    def schedule_with_fixed_delay(
        self,
        fn: Callable[[], object],
        initial_ms: int,
        delay_ms: int,
        idle: Callable[[], bool] | None = None,
        label: str | None = None,
    ) -> Timer:
        """Run ``delay`` after the previous run completed."""
        return self._add_timer(fn, initial_ms, delay_ms, "fixed_delay", idle, label)

    def shutdown(self) -> None:
        """Periodic timers are cancelled (Java's default policy); one-shot timers still fire."""
        super().shutdown()
        for timer in list(self.world._timers):
            if timer.thread is self and timer.period is not None:
                timer.cancel()

    def _add_timer(
        self,
        fn: Callable[[], object],
        delay: int,
        period: int | None,
        mode: Literal["once", "fixed_rate", "fixed_delay"],
        idle: Callable[[], bool] | None,
        label: str | None,
    ) -> Timer:
        if self.is_shutdown:
            raise RejectedExecutionError(f"{self.name} is shut down")
        if delay < 0 or (period is not None and period <= 0):
            raise ValueError("delays must be >= 0 and periods > 0")
        w = self.world
        timer = Timer(w, self, fn, label or _label_of(fn), w.now + delay, period, mode, idle, w._next_seq())
        w._arm(timer)
        return timer


class Timer:
    """A pending one-shot or periodic timer; ``cancel()`` it to stop further runs."""

    def __init__(
        self,
        world: World,
        thread: ScheduledSimThread,
        fn: Callable[[], object],
        label: str,
        first: int,
        period: int | None,
        mode: Literal["once", "fixed_rate", "fixed_delay"],
        idle: Callable[[], bool] | None,
        seq: int,
    ) -> None:
        self.world = world
        self.thread = thread
        self.fn = fn
        self.label = label
        self.first = first
        self.deadline = first
        self.period = period
        self.mode = mode
        self.idle = idle
        self.seq = seq
        self.runs = 0
        self.cancelled = False
        self.queued_task: _Task | None = None

    def __repr__(self) -> str:
        return f"Timer({self.label!r}, deadline={self.deadline}, {self.mode})"

    def is_idle(self) -> bool:
        """Whether a run would do nothing (one-shot timers are never idle)."""
        return self.idle is not None and self.idle()

    def cancel(self) -> None:
        """Stop the timer; a queued but not started run is removed, a running one is not rescheduled."""
        self.cancelled = True
        w = self.world
        if self in w._timers:
            w._timers.remove(self)
        task = self.queued_task
        if task is not None and task in self.thread._queue:
            self.thread._queue.remove(task)

    def _next_deadline(self, completed_at: int) -> int:
        assert self.period is not None
        if self.mode == "fixed_rate":
            return self.first + self.runs * self.period
        return completed_at + self.period


class OrderedExecutor:
    """BookKeeper's OrderedExecutor: ``n`` single threads, a key always maps to the same one."""

    def __init__(self, world: World, name: str, n: int) -> None:
        if n < 1:
            raise ValueError("an OrderedExecutor needs at least one thread")
        self.world = world
        self.name = name
        self.threads = [world.thread(f"{name}-OrderedExecutor-{i}-0") for i in range(n)]

    def choose_thread(self, key: str | None) -> SimThread:
        """The thread for ``key``, bit-exact with BookKeeper 4.18.0 (see :func:`choose_thread_index`)."""
        n = len(self.threads)
        if n == 1:
            return self.threads[0]
        if key is None:
            return self.threads[self.world.rng.randrange(n)]
        return self.threads[choose_thread_index(key, n)]

    def execute_ordered(self, key: str, fn: Callable[[], object], cost: int = 0, label: str | None = None) -> None:
        """Tasks of one key run serially in submission order, on ``choose_thread(key)``."""
        self.choose_thread(key).execute(fn, cost, label)

    def shutdown(self) -> None:
        for t in self.threads:
            t.shutdown()


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode``: over UTF-16 code units, signed 32-bit with overflow."""
    data = s.encode("utf-16-le")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | (data[i + 1] << 8))) & 0xFFFF_FFFF
    return h - (1 << 32) if h & 0x8000_0000 else h


def choose_thread_index(key: str, n: int) -> int:
    """``((h & 0xFFFF_FFFF_FFFF_FFFF) >> 1) % n``: sign-extend to 64 bits, unsigned shift, modulo.

    Java's ``signSafeMod`` correction never fires because the shifted value is non-negative.
    """
    return ((java_string_hash(key) & 0xFFFF_FFFF_FFFF_FFFF) >> 1) % n


# --------------------------------------------------------------------------------------------------
# Locks and futures
# --------------------------------------------------------------------------------------------------


class SimLock:
    """A re-entrant lock (a Java monitor). Blocking on it is a wait-for edge to ``holder``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.holder: str | None = None
        self.count = 0

    def __repr__(self) -> str:
        return f"SimLock({self.name!r}, holder={self.holder!r})"

    def blocks(self, thread: str) -> bool:
        return self.holder not in (None, thread)

    @property
    def wait_label(self) -> str:
        return self.name

    @property
    def wait_target(self) -> str | None:
        return self.holder

    def acquire(self) -> None:
        """Take the lock, blocking the current thread while another thread holds it (in a preemptive
        world the acquisition is a scheduling point, taken only once the lock is free)."""
        me = current_thread_name()
        if preemptive():
            scheduling_point(f"{self.name}.lock", self)
        if self.holder not in (None, me):
            task = _ctx.task
            if task is None:
                raise RuntimeError(f"lock {self.name} is held by {self.holder}; the harness cannot block")
            while self.holder not in (None, me):
                task.waiting_on = self
                task.suspend()
        self.holder = me
        self.count += 1

    def release(self) -> None:
        if self.holder != current_thread_name():
            raise RuntimeError(f"{current_thread_name()} releases {self.name} held by {self.holder}")
        self.count -= 1
        if self.count == 0:
            self.holder = None


class SimFuture(Generic[T]):
    """A CompletableFuture. Non-async continuations run inside the completing segment, on the completing
    thread, in registration order (on a done future: at once, on the registering thread).

    ``attempts`` counts calls to complete/fail, so a harness can check that a reference never tried a
    second completion. ``completer`` names the thread expected to complete it (the wait-for edge target).
    ``completed_on`` is the World's record of the thread whose first completion took (where its non-async
    callbacks ran), and ``submitted_on`` the thread that registered an op future (``World.register_op``).
    Errors are passed through unwrapped (Java would wrap them in CompletionException).
    """

    def __init__(self, world: World, label: str = "", completer: str | None = None) -> None:
        self.world = world
        self.label = label
        self.completer = completer
        self.attempts = 0
        self.completed_on: str | None = None
        self.submitted_on: str | None = None
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[SimFuture[T]], None]] = []

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("failed" if self._error else "done")
        return f"SimFuture({self.label!r}, {state})"

    # -- completion ---------------------------------------------------------------------------------
    def complete(self, value: T) -> bool:
        self.attempts += 1
        if self._done:
            return False
        self._value = value
        self._finish()
        return True

    def fail(self, error: BaseException) -> bool:
        self.attempts += 1
        if self._done:
            return False
        self._error = error
        self._finish()
        return True

    def _finish(self) -> None:
        self._done = True
        self.completed_on = current_thread_name()
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    # -- inspection ---------------------------------------------------------------------------------
    def done(self) -> bool:
        return self._done

    def blocks(self, thread: str) -> bool:
        return not self._done

    @property
    def wait_label(self) -> str:
        return self.label

    @property
    def wait_target(self) -> str | None:
        return self.completer

    def failed(self) -> bool:
        return self._done and self._error is not None

    def exception(self) -> BaseException | None:
        """The failure of a done future, or None (also None while pending)."""
        return self._error

    def result(self) -> T:
        """The value of a done future; raises its error, or ``RuntimeError`` while pending."""
        if not self._done:
            raise RuntimeError(f"future {self.label!r} is not done")
        if self._error is not None:
            raise self._error
        return cast(T, self._value)

    # -- continuations ------------------------------------------------------------------------------
    def add_done_callback(self, fn: Callable[[SimFuture[T]], None]) -> None:
        """Run ``fn(self)`` when done, with the same thread rules as a non-async continuation."""
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def _derived(self, completer: str | None) -> SimFuture[Any]:
        return SimFuture(self.world, self.label, completer)

    def then_apply(self, fn: Callable[[T], U]) -> SimFuture[U]:
        d: SimFuture[U] = self._derived(self.completer)

        def fire(src: SimFuture[T]) -> None:
            if src._error is not None:
                d.fail(src._error)
                return
            try:
                d.complete(fn(cast(T, src._value)))
            except Exception as e:
                d.fail(e)

        self.add_done_callback(fire)
        return d

    def then_compose(self, fn: Callable[[T], SimFuture[U]]) -> SimFuture[U]:
        d: SimFuture[U] = self._derived(self.completer)

        def fire(src: SimFuture[T]) -> None:
            if src._error is not None:
                d.fail(src._error)
                return
            try:
                inner = fn(cast(T, src._value))
            except Exception as e:
                d.fail(e)
                return
            inner.add_done_callback(d._relay)

        self.add_done_callback(fire)
        return d

    def when_complete(self, fn: Callable[[T | None, BaseException | None], object]) -> SimFuture[T]:
        d: SimFuture[T] = self._derived(self.completer)

        def fire(src: SimFuture[T]) -> None:
            try:
                fn(src._value, src._error)
            except Exception as e:
                # Java: an exception from the action fails the result only if the source succeeded.
                if src._error is None:
                    d.fail(e)
                    return
            d._relay(src)

        self.add_done_callback(fire)
        return d

    def exceptionally(self, fn: Callable[[BaseException], T]) -> SimFuture[T]:
        d: SimFuture[T] = self._derived(self.completer)

        def fire(src: SimFuture[T]) -> None:
            if src._error is None:
                d.complete(cast(T, src._value))
                return
            try:
                d.complete(fn(src._error))
            except Exception as e:
                d.fail(e)

        self.add_done_callback(fire)
        return d

    def then_apply_async(self, fn: Callable[[T], U], executor: SimThread) -> SimFuture[U]:
        def run(v: T, d: SimFuture[U]) -> None:
            try:
                d.complete(fn(v))
            except Exception as e:
                d.fail(e)

        return self._async(run, executor)

    def then_compose_async(self, fn: Callable[[T], SimFuture[U]], executor: SimThread) -> SimFuture[U]:
        def run(v: T, d: SimFuture[U]) -> None:
            try:
                inner = fn(v)
            except Exception as e:
                d.fail(e)
                return
            inner.add_done_callback(d._relay)

        return self._async(run, executor)

    def _async(self, run: Callable[[T, SimFuture[U]], None], executor: SimThread) -> SimFuture[U]:
        """Submit ``run`` to ``executor`` when this succeeds.

        As in Java's ``UniApply.tryFire``, a failed source fails the result on the completing thread
        without a submission, and a rejected submission fails the result instead of raising.
        """
        d: SimFuture[U] = self._derived(executor.name)

        def fire(src: SimFuture[T]) -> None:
            if src._error is not None:
                d.fail(src._error)
                return
            value = cast(T, src._value)
            try:
                executor.execute(lambda: run(value, d), label=f"async:{self.label}")
            except RejectedExecutionError as e:
                d.fail(e)

        self.add_done_callback(fire)
        return d

    def _relay(self, src: SimFuture[Any]) -> None:
        if src._error is not None:
            self.fail(src._error)
        else:
            self.complete(cast(T, src._value))


# --------------------------------------------------------------------------------------------------
# The world
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadState:
    """What a harness sees of one thread between steps."""

    name: str
    queued: tuple[str, ...]
    current: str | None
    """Label of the started-but-unfinished (suspended) task, if any."""
    suspended_at: str | None
    """The ``yield_point`` label where it paused, if it paused at one."""
    blocked_on: str | None
    """Label of the future or name of the lock it is blocked on, if blocked."""
    waiting_for: str | None
    """The wait-for edge target: the future's completer or the lock's holder."""
    busy_until: int
    shutdown: bool
    enabled: bool


class World:
    """Owns the virtual clock, the threads, the timers and the logs; the harness steps it.

    See the module docstring for the stepping contract and how to read the state.
    """

    def __init__(self, seed: int = 0, *, preemptive: bool = False) -> None:
        self.preemptive = preemptive
        """Every operation on a shared primitive is a scheduling point (see the module docstring)."""
        self.disposing = False
        self.now = 0
        self.rng = random.Random(seed)
        self.threads: list[SimThread] = []
        self.history: list[tuple[str, str | int]] = []
        self.op_futures: list[SimFuture[Any]] = []
        self.flush_log: list[Any] = []
        self.notification_log: list[Any] = []
        self.uncaught: list[tuple[str, str, BaseException]] = []
        self._by_name: dict[str, SimThread] = {}
        self._timers: list[Timer] = []
        self._seq = 0
        self._segment_cost = 0
        self._running: SimThread | None = None

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()

    # -- construction -------------------------------------------------------------------------------
    def _add(self, t: SimThread) -> SimThread:
        if t.name in self._by_name:
            raise ValueError(f"thread name {t.name!r} already used in this world")
        self.threads.append(t)
        self._by_name[t.name] = t
        return t

    def thread(self, name: str) -> SimThread:
        return self._add(SimThread(self, name))

    def scheduled_thread(self, name: str) -> ScheduledSimThread:
        t = ScheduledSimThread(self, name)
        self._add(t)
        return t

    def ordered_executor(self, name: str, n: int) -> OrderedExecutor:
        return OrderedExecutor(self, name, n)

    def lock(self, name: str) -> SimLock:
        return SimLock(name)

    def future(self, label: str = "", completer: str | None = None) -> SimFuture[Any]:
        return SimFuture(self, label, completer)

    def register_op(self, future: SimFuture[Any]) -> None:
        """Record an op future and the thread submitting it: ``stuck()`` and ``quiescent``-time checks look at
        these, and a harness judges where it completes against where it was submitted."""
        future.submitted_on = current_thread_name()
        self.op_futures.append(future)

    def get_thread(self, name: str) -> SimThread:
        return self._by_name[name]

    def _next_seq(self) -> int:
        """A world-wide logical timestamp for ordering log records within one instant."""
        self._seq += 1
        return self._seq

    def _new_task(self, fn: Callable[[], object], cost: int, label: str | None) -> _Task:
        if cost < 0:
            raise ValueError("cost must be >= 0")
        return _Task(self._next_seq(), fn, cost, label or _label_of(fn))

    # -- cost ---------------------------------------------------------------------------------------
    def charge(self, ms: int) -> None:
        """Add virtual cost to the current segment (the harness itself is outside time: no-op)."""
        if ms < 0:
            raise ValueError("charge must be >= 0")
        if _ctx.world is self:
            self._segment_cost += ms

    # -- choices ------------------------------------------------------------------------------------
    def choices(self) -> list[Choice]:
        """Enabled choices: runnable threads in creation order, then the single advance, if any."""
        out: list[Choice] = [("run", t) for t in self.threads if t.enabled]
        t_next = self._next_instant()
        if t_next is not None:
            out.append(("advance", t_next))
        return out

    def pending_timers(self) -> list[str]:
        """Labels of the timers not yet due, in the order they will fire."""
        return [tm.label for tm in sorted(self._timers, key=lambda tm: (tm.deadline, tm.seq))]

    def _next_instant(self) -> int | None:
        instants = [tm.deadline for tm in self._timers]
        instants += [t.busy_until for t in self.threads if t.busy_until > self.now]
        return min(instants) if instants else None

    def step(self, choice: tuple[str, SimThread | str | int]) -> None:
        """Apply one choice; ``("run", name)`` is accepted as well, for replaying traces."""
        if self._running is not None or _ctx.world is not None:
            raise RuntimeError("step() called from inside a simulated thread")
        kind, arg = choice
        if kind == "advance":
            if arg != self._next_instant():
                raise ValueError(f"advance to {arg} is not enabled (next instant {self._next_instant()})")
            assert isinstance(arg, int)
            self._advance(arg)
            self.history.append(("advance", arg))
        elif kind == "run":
            thread = arg if isinstance(arg, SimThread) else self._by_name[str(arg)]
            if not thread.enabled:
                raise ValueError(f"{thread.name} is not enabled")
            self.history.append(("run", thread.name))  # before running: a BaseException may end the step
            self._run_segment(thread)
        else:
            raise ValueError(f"unknown choice {choice!r}")

    def run(
        self,
        policy: Policy = "fifo",
        *,
        until: Callable[[], bool] | None = None,
        stop_when_quiescent: bool = True,
        max_steps: int = 100_000,
    ) -> int:
        """Step until ``until()`` holds, the world is quiescent (unless told not to stop there) or stuck,
        or no choice is left. Returns the number of steps taken.

        ``"fifo"`` (canonical) runs the earliest-created enabled thread and advances only when no thread
        is enabled; ``"random"`` picks uniformly with ``world.rng``; a callable picks from the list.
        """
        for n in range(max_steps):
            if (until is not None and until()) or (stop_when_quiescent and self.quiescent()) or self.stuck():
                return n
            options = self.choices()
            if not options:
                return n
            if policy == "fifo":
                choice = options[0]
            elif policy == "random":
                choice = self.rng.choice(options)
            else:
                choice = policy(options)
            self.step(choice)
        raise RuntimeError(f"run() did not settle within {max_steps} steps")

    def run_until_time(self, t: int, policy: Policy = "fifo") -> int:
        """Step, past quiescence if need be, until nothing more can happen at or before ``t``."""

        def at_horizon() -> bool:
            nxt = self._next_instant()
            return not any(th.enabled for th in self.threads) and (nxt is None or nxt > t)

        return self.run(policy, until=at_horizon, stop_when_quiescent=False)

    def prime(self) -> None:
        """Run every thread with queued work to its first scheduling point (preemptive worlds): code before
        a thread's first point touches nothing shared, so this is no step, and every thread's next label
        is known from the start."""
        if not self.preemptive:
            raise RuntimeError("prime() is for preemptive worlds")
        for thread in self.threads:
            if thread._current is None and thread._queue:
                self._run_segment(thread)

    # -- stepping internals -------------------------------------------------------------------------
    def _advance(self, t: int) -> None:
        self.now = t
        due = sorted((tm for tm in self._timers if tm.deadline <= t), key=lambda tm: (tm.deadline, tm.seq))
        for timer in due:
            self._fire(timer)

    def _arm(self, timer: Timer) -> None:
        """Make ``timer`` pending, or queue its run at once if it is already due."""
        if timer.deadline <= self.now:
            self._fire(timer)
        else:
            self._timers.append(timer)

    def _fire(self, timer: Timer) -> None:
        if timer in self._timers:
            self._timers.remove(timer)
        task = self._new_task(timer.fn, 0, timer.label)
        task.timer = timer
        timer.queued_task = task
        timer.thread._queue.append(task)

    def _run_segment(self, thread: SimThread) -> None:
        self._segment_cost = 0
        task = thread._current
        if task is None:
            task = thread._queue.popleft()
            thread._current = task
            if task.timer is not None:
                task.timer.queued_task = None
            self._segment_cost = task.cost
        else:
            task.waiting_on = None
            task.yield_label = None
        if thread._glet is None:
            thread._glet = greenlet(self._loop)
        glet = thread._glet
        finished = False
        escaped: BaseException | None = None
        try:
            finished = self._switch(thread, task, glet.switch)
        except BaseException as e:
            escaped = e
        thread.busy_until = self.now + self._segment_cost
        if glet.dead:
            thread._glet = None
        if finished or glet.dead:
            thread._current = None
            timer = task.timer
            if escaped is not None and timer is not None:
                timer.cancelled = True
            if timer is not None and timer.period is not None and not timer.cancelled:
                timer.runs += 1
                timer.deadline = timer._next_deadline(thread.busy_until)
                self._arm(timer)
        if escaped is not None:
            escaped.add_note(f"escaped task {task.label!r} on simulated thread {thread.name} at t={self.now}")
            raise escaped
        if self.preemptive and thread._current is None and thread._queue and thread.busy_until <= self.now:
            self._run_segment(thread)  # on to the next task's first point: a step runs from point to point

    def _switch(self, thread: SimThread, task: _Task | None, into: Callable[[], Any]) -> Any:
        """Call ``into`` (a switch into, or a throw at, ``thread``'s greenlet) as ``thread`` running ``task``,
        and return what the greenlet switches back.

        The greenlet's parent is set to the caller each time, so the greenlet returns (or an escaping
        exception propagates) to whoever stepped the world. The caller's context is restored afterwards,
        not cleared: a finalizer may dispose a world from inside another world's task, wherever the
        garbage collector happens to run.
        """
        assert thread._glet is not None
        thread._glet.parent = greenlet.getcurrent()
        outer = _ctx.world, _ctx.thread, _ctx.task
        self._running = thread
        _ctx.world, _ctx.thread, _ctx.task = self, thread, task
        try:
            return into()
        finally:
            self._running = None
            _ctx.world, _ctx.thread, _ctx.task = outer

    def _loop(self) -> None:
        """The body of a thread's greenlet: each pass runs the task the harness switched in, then reports it
        finished. Java's executors log an escaped exception (a periodic task is then not rescheduled); a
        ``BaseException`` is not theirs to swallow, so it ends the greenlet and reaches the harness."""
        while True:
            thread, task = _ctx.thread, _ctx.task
            assert thread is not None and task is not None
            try:
                task.fn()
            except Exception as e:
                self.uncaught.append((thread.name, task.label, e))
                if task.timer is not None:
                    task.timer.cancelled = True
            _to_harness(True)

    # -- analysis -----------------------------------------------------------------------------------
    def thread_states(self) -> list[ThreadState]:
        out = []
        for t in self.threads:
            cur = t._current
            blocked = cur is not None and cur.blocked_for(t)
            on = waiting_for = None
            if blocked and cur is not None:
                on, waiting_for = _wait_target(cur)
            out.append(
                ThreadState(
                    t.name,
                    t.queued,
                    cur.label if cur else None,
                    cur.yield_label if cur else None,
                    on,
                    waiting_for,
                    t.busy_until,
                    t.is_shutdown,
                    t.enabled,
                )
            )
        return out

    def next_operation(self, name: str) -> str | None:
        """The label thread `name` is suspended at (what its next step performs), or None when it has no task."""
        current = self._by_name[name]._current
        return current.yield_label if current is not None else None

    def wait_for_graph(self) -> nx.DiGraph:
        """Nodes: thread names. Edge waiter -> future's completer (label: future label) or -> lock holder
        (label: lock name), for every blocked thread. A future without a completer adds no edge."""
        g = nx.DiGraph()
        g.add_nodes_from(t.name for t in self.threads)
        for t in self.threads:
            cur = t._current
            if cur is not None and cur.blocked_for(t):
                label, target = _wait_target(cur)
                if target is not None:
                    g.add_edge(t.name, target, label=label)
        return g

    def deadlock(self) -> list[tuple[str, str, str]] | None:
        """One cycle of the wait-for graph as ``[(waiter, waited_for, label), ...]``, or None."""
        g = self.wait_for_graph()
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            return None
        return [(u, v, g.edges[u, v]["label"]) for u, v in cycle]

    def quiescent(self) -> bool:
        """No thread blocked or holding queued/suspended work, no one-shot timer pending, every periodic
        timer idle."""
        if any(t._current is not None or t._queue for t in self.threads):
            return False
        return all(tm.period is not None and tm.is_idle() for tm in self._timers)

    def stuck(self) -> bool:
        """No progress is possible (:meth:`can_progress`), yet some thread is blocked or some op future is
        pending."""
        if self.can_progress():
            return False
        return any(t.blocked for t in self.threads) or any(not f.done() for f in self.op_futures)

    def can_progress(self) -> bool:
        """Whether some thread has runnable work (busy threads count, since an advance frees them), or a
        pending timer could create some: one-shot timers and non-idle periodic timers count only if their
        thread is not blocked, because a run queued behind a blocked task can never start. (The spec lists
        the timer conditions without that refinement; without it the legacy variant of the blocking-callback
        deadlock, whose periodic flush sits behind the blocked task, would never be reported as stuck.)
        """
        if any(t.has_work for t in self.threads):
            return True
        return any(
            not tm.thread.blocked and not (tm.period is not None and tm.is_idle()) for tm in self._timers
        )

    # -- teardown -----------------------------------------------------------------------------------
    def dispose(self) -> None:
        """Unwind every thread's greenlet (``GreenletExit`` where it is suspended, so a suspended task's
        ``finally`` blocks run now) and drop all queued work and timers. The world is unusable after.

        A ``finally`` block that reaches a scheduling point while unwinding (a lock taken to end a batch) is cut
        short there by another ``GreenletExit``: nothing may wait for a step that will never come."""
        self.disposing = True
        for t in self.threads:
            if t._glet is not None:
                self._switch(t, t._current, t._glet.throw)
                t._glet = None
            t._current = None
            t._queue.clear()
            t.is_shutdown = True
        self._timers.clear()


def _to_harness(finished: bool) -> None:
    """Switch from a thread's greenlet back to the harness, telling it whether the task has finished."""
    parent = greenlet.getcurrent().parent
    assert parent is not None
    parent.switch(finished)


def _wait_target(task: _Task) -> tuple[str, str | None]:
    w = task.waiting_on
    assert w is not None
    return w.wait_label, w.wait_target


def _label_of(fn: Callable[..., object]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
