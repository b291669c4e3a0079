"""The semaphore's lock scope bound to the reference: upstream-granularity code stepped in lockstep with the model.

`SemaphoreLocksReference` runs `reference_impl.topiclist.lock_level.AsyncSemaphoreImpl` on a preemptive `World`:
the two caller threads of the configuration's scripts (each operation a task), the semaphore's executor as a
scheduled simulated thread, every lock acquisition, atomic access, queue call, future completion and submission
a scheduling point. A model action ``caller(step=L)`` runs the caller thread's next step, which must be the
operation labelled L (a thread about to do something else is a divergence named as such); ``clock`` moves the
world's clock to its next timer.

It judges SL-1..SL-4 from its own ledger, never from the semaphore's opinion: the permits it handed out at the
start, the future each operation returned to its caller (recorded when the operation returns, as a caller holds
it), the permit each granted future carries and the value left in it, the available permits after each step,
and which threads still have work.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from models.core import Action, Json, Observation, Param
from models.topiclist.semaphore_locks import (
    CALLERS,
    CANCELLED,
    DONE,
    GRANTED,
    MONITOR,
    PENDING,
    QUEUE_FULL,
    SUBMITTING,
    TIMED_OUT,
    SemaphoreLocksModel,
)
from properties.engines.lockstep import BaseImplementation, refusal
from reference_impl.concurrent.executors import World, java_method
from reference_impl.concurrent.futures import CancellationError, CompletableFuture, ScheduledExecutorService
from reference_impl.topiclist.lock_level import (
    AsyncSemaphoreImpl,
    PermitAcquireQueueFullError,
    PermitAcquireTimeoutError,
    SemaphorePermit,
)

TIMEOUT_MS = 10
"""Every request's timeout; the constructor's one-shot pass runs at half of it."""


@java_method("cancel")
def _cancel(future: CompletableFuture[SemaphorePermit]) -> None:
    """The caller's code cancelling the future an operation returned to it."""
    future.cancel()


def _state(future: CompletableFuture[SemaphorePermit]) -> str:
    if not future.done:
        return PENDING
    if future.error is None:
        return GRANTED
    if isinstance(future.error, CancellationError):
        return CANCELLED
    if isinstance(future.error, PermitAcquireTimeoutError):
        return TIMED_OUT
    if isinstance(future.error, PermitAcquireQueueFullError):
        return QUEUE_FULL
    raise RuntimeError(f"a request failed with {type(future.error).__name__}: {future.error}")


class SemaphoreLocksReference(BaseImplementation):
    """The upstream-granularity semaphore of one order, its callers and executor on simulated threads, the ledger."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        self.model = model = SemaphoreLocksModel(config, variant)  # parses and completes the configuration
        self.world = World(preemptive=True)
        callers = [self.world.thread(name) for name in CALLERS]
        self.executor = self.world.scheduled_thread("executor")
        self.sem = AsyncSemaphoreImpl(model.max_permits, model.max_queue, TIMEOUT_MS,
                                      ScheduledExecutorService(self.executor), model.order)
        self.sem.available_permits.value = model.max_permits - sum(model.held)  # the held permits were granted
        self.seeds = [self.sem.new_permit(h) for h in model.held]
        self.futures: dict[str, CompletableFuture[SemaphorePermit]] = {}  # each operation's, once it returned
        # id(PendingRequest) -> the request and the operation that queued it; holding the request keeps its id from
        # being reused by a later one (which would inherit a stale name, depending on when the collector ran)
        self.names: dict[int, tuple[object, str]] = {}
        self.running: dict[str, int] = {}
        for thread, script in zip(callers, model.scripts, strict=True):
            for index, op in enumerate(script):
                thread.execute(partial(self._op, thread.name, index, op), label=op)
        self.broken: set[str] = set()
        self.disagreement = ""
        self.world.prime()

    # -- the callers' operations (tasks) ------------------------------------------------------------------------
    def _op(self, thread: str, index: int, op: str) -> None:
        self.running[thread] = index
        words = op.split()
        if words[0] == "acquire":
            self.futures[f"{thread}.{index}"] = self.sem.acquire(int(words[1]))
        elif words[0] == "update":
            self.futures[f"{thread}.{index}"] = self.sem.update(self.seeds[int(words[1][1:])], int(words[2]))
        elif words[0] == "release":
            self.sem.release(self.seeds[int(words[1][1:])])
        else:
            _cancel(self.futures[f"{thread}.{index - 1}"])

    # -- Implementation -----------------------------------------------------------------------------------------
    def apply(self, action: Action) -> Observation:
        uncaught = len(self.world.uncaught)
        if action.name == "clock":
            advances = [c for c in self.world.choices() if c[0] == "advance"]
            if not self.model.clock or not advances:
                self.disagreement = "clock: no timer is pending" if self.model.clock else "clock: the clock is off"
                return None
            self.world.step(advances[0])
        else:
            name, step = action.name, str(action["step"])
            refused = refusal(name, step, self._label(name), self.world.get_thread(name).enabled)
            if refused:
                self.disagreement = refused
                return None
            self.world.step(("run", name))
            if step == "internalAcquire: queue.offer":
                self._name_new_requests(name)
        self.world.prime()  # a task submitted to the idle executor runs to its first point
        for thread_name, _task, error in self.world.uncaught[uncaught:]:
            raise RuntimeError(f"{thread_name} raised {type(error).__name__}: {error}") from error
        self._judge()
        return None

    def vars(self) -> dict[str, Json]:
        return {
            "available": self.sem.available_permits.value,
            "queue": [self.names[id(r)][1] for r in self.sem.queue.items],
            "requests": [[name, _state(f)] for name, f in sorted(self.futures.items())],
            "permits": [[name, value] for name, value in self._held()],
            "timers": [*self.world.pending_timers()],
            "executor_queue": [*self.executor.queued],
            "locks": {MONITOR: [] if self.sem.monitor.holder is None else [self.sem.monitor.holder]},
            "threads": [[name, self._label(name)] for name in (*CALLERS, self.executor.name)],
            "broken": [*sorted(self.broken)],
        }

    def violations(self) -> list[str]:
        return sorted(self.broken) + (["divergence"] if self.disagreement else [])

    def close(self) -> None:
        self.world.dispose()

    # -- the ledger ---------------------------------------------------------------------------------------------
    def _label(self, name: str) -> str:
        return self.world.next_operation(name) or DONE

    def _name_new_requests(self, thread: str) -> None:
        for request in self.sem.queue.items:
            if id(request) not in self.names:
                self.names[id(request)] = (request, f"{thread}.{self.running[thread]}")

    def _held(self) -> list[tuple[str, int]]:
        """What the callers hold: the permits handed out at the start, then each granted future's permit."""
        held = [(f"P{i}", p.permits.value) for i, p in enumerate(self.seeds)]
        granted = [(name, f.value) for name, f in self.futures.items() if f.done and f.error is None]
        return held + sorted((name, p.permits.value) for name, p in granted if p is not None)

    def _quiescent(self) -> bool:
        return all(t.current is None and not t.queued for t in self.world.thread_states())

    def _judge(self) -> None:
        available, limit = self.sem.available_permits.value, self.model.max_permits
        if not 0 <= available <= limit:
            self.broken.add("SL-1")
        held = sum(value for _, value in self._held())
        if available + held > limit:
            self.broken.add("SL-2")
        if self._quiescent() and available + held != limit:
            self.broken.add("SL-3")
        executor = next(t for t in self.world.thread_states() if t.name == self.executor.name)
        coming = {self._label(name) for name in CALLERS} & SUBMITTING
        if executor.current is None and not executor.queued and self.sem.queue.items and not coming:
            head = self.sem.queue.items[0]
            if self.model.order == "pre25066":
                needs = head.acquire_permits
            else:
                needs = head.permits - (head.previous.permits.value if head.previous is not None else 0)
            if not head.future.done and needs <= available:
                self.broken.add("SL-4")
