"""AsyncSemaphoreImpl at upstream's lock granularity, on the deterministic scheduler.

`semaphore.py` runs each call and each queue pass as one atomic step (the semaphore scope's view). Upstream
does not: callers run `acquire`, `update` and `release` on their own threads (the connection's event loop, a
metadata callback), the grants run in `internalProcessQueue` on the semaphore's single-threaded scheduled
executor, and the two meet only through atomics, a blocking queue and completable futures. This module mirrors
upstream's source statement by statement at those meeting points, on `reference_impl.concurrent` (every lock
acquisition, atomic access, queue call, future completion and executor submission a scheduling point):

apache/pulsar `pulsar-common/.../semaphore/AsyncSemaphoreImpl.java`, current order after #25066 (04ff2c9e):
`internalAcquire` (lines 107-146: `closed.get`, `queue.offer`, `executor.schedule` of the timeout, the volatile
`setTimeoutTask`, then `processQueue`), the timeout task (lines 130-141: `future.isDone`, `queue.remove`,
`completeExceptionally`, `processQueue`), `update` (lines 169-193: `getPermits`, a growing update queued with its
previous permit, a shrinking one swapping the old permit to 0 with `releasePermits`), `release` (lines 196-205:
the swap, then `availablePermits.addAndGet`, then `processQueue`), `processQueue` (lines 236-241: `closed.get`,
`executor.execute`) and `internalProcessQueue` (lines 243-286, `synchronized`: for the head, `isDone`, then
`getRequiredPermits` reading the previous permit, `getRequiredPermitsReusingPrevious` swapping it to 0 (lines
336-342), `addAndGet(-required)`, `cancelTimeoutTask` (lines 325-330), `queue.remove`, `future.complete`, and the
permits given back when the caller had cancelled the future meanwhile).

`order` selects the code: `current` (above); `pre25066`, before apache/pulsar#25066 (55c51bd9: the request
keeps the additional permits counted when it was queued, and `update` releases the previous permit in a
`thenApply` of the grant, lines 175-205); `fixed`, the fix docs/findings/topiclist-semaphore-lock-level.md
proposes (the grant checks what the swap actually returned before taking it, and gives back the swapped
previous permit too when the caller had cancelled); `unswapped`, the current code with `releasePermits` as a
read and a write: the atomicity of `getAndSet` (the `AtomicLongFieldUpdater` of `SemaphorePermit`, lines
345-361) that the current code relies on, dropped.

The lock scope leaves out what its scripts never reach: `close()`, the `isCancelled` supplier (a constant false
here, so no point) and the queue-latency recorder (a metric, touched by no other thread). `timeoutTask` is read
once in `cancelTimeoutTask`, where Java reads the volatile field twice: only the caller writes it, once, so the
second read sees what the first saw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from reference_impl.concurrent.atomic import AtomicBoolean, AtomicLong, Volatile
from reference_impl.concurrent.executors import java_method
from reference_impl.concurrent.futures import (
    ArrayBlockingQueue,
    CancellationError,
    CompletableFuture,
    ScheduledExecutorService,
    ScheduledFuture,
)
from reference_impl.concurrent.locks import ReentrantLock

ORDERS = ("current", "fixed", "pre25066", "unswapped")


class PermitAcquireTimeoutError(Exception):
    """Java's PermitAcquireTimeoutException."""


class PermitAcquireQueueFullError(Exception):
    """Java's PermitAcquireQueueFullException."""


class PermitAcquireAlreadyClosedError(Exception):
    """Java's PermitAcquireAlreadyClosedException."""


class SemaphorePermit:
    """Bytes held by a caller: a volatile long swapped to 0 by whoever releases or reuses it first."""

    def __init__(self, permits: int, order: str) -> None:
        self.permits = Volatile("permit.permits", permits)
        self.order = order

    def __repr__(self) -> str:
        return f"SemaphorePermit({self.permits.value})"

    @java_method("getPermits")
    def get_permits(self) -> int:
        return self.permits.get()

    @java_method("releasePermits")
    def release_permits(self) -> int:
        """`PERMITS_UPDATER.getAndSet(this, 0)`; the `unswapped` order reads, then writes 0."""
        if self.order == "unswapped":
            value = self.permits.get()
            self.permits.set(0)
            return value
        return self.permits.get_and_set(0)


@dataclass(eq=False)
class PendingRequest:
    """A queued request: its size, the permit a growing update reuses (the additional permits before #25066)."""

    permits: int
    previous: SemaphorePermit | None
    acquire_permits: int
    future: CompletableFuture[SemaphorePermit]
    timeout_task: Volatile[ScheduledFuture | None] = field(
        default_factory=lambda: Volatile("request.timeoutTask", None))

    @java_method("setTimeoutTask")
    def set_timeout_task(self, task: ScheduledFuture) -> None:
        self.timeout_task.set(task)

    @java_method("cancelTimeoutTask")
    def cancel_timeout_task(self) -> None:
        task = self.timeout_task.get()
        if task is not None:
            task.cancel()
            self.timeout_task.set(None)

    @java_method("getRequiredPermits")
    def get_required_permits(self) -> int:
        return self.permits if self.previous is None else self.permits - self.previous.get_permits()

    @java_method("getRequiredPermitsReusingPrevious")
    def get_required_permits_reusing_previous(self) -> tuple[int, int]:
        """What the grant takes, and what the swap of the previous permit returned (0 without one)."""
        swapped = 0 if self.previous is None else self.previous.release_permits()
        return self.permits - swapped, swapped


class AsyncSemaphoreImpl:
    """Upstream's semaphore in the chosen `order` (see the module doc), its executor a simulated thread."""

    def __init__(self, max_permits: int, max_queue_size: int, timeout_ms: int, executor: ScheduledExecutorService,
                 order: str) -> None:
        if order not in ORDERS:
            raise ValueError(f"unknown semaphore order {order!r} (one of {', '.join(ORDERS)})")
        if max_permits <= 0:
            raise ValueError("the lock scope mirrors the bounded semaphore (max_permits > 0)")
        self.order = order
        self.max_permits = max_permits
        self.timeout_ms = timeout_ms
        self.executor = executor
        self.available_permits = AtomicLong("availablePermits", max_permits)
        self.queue: ArrayBlockingQueue[PendingRequest] = ArrayBlockingQueue("queue", max_queue_size)
        self.closed = AtomicBoolean("closed")
        self.monitor = ReentrantLock("AsyncSemaphoreImpl")  # internalProcessQueue is synchronized
        self.process_queue_scheduled_future = executor.schedule(
            self._process_queue_runnable, timeout_ms // 2, label="internalProcessQueue",
            handle="processQueueScheduledFuture")

    def new_permit(self, permits: int) -> SemaphorePermit:
        return SemaphorePermit(permits, self.order)

    def _validate(self, permits: int) -> None:
        if permits < 0 or permits > self.max_permits:
            raise ValueError(f"Requested permits={permits} outside [0, maxPermits={self.max_permits}]")

    @java_method("acquire")
    def acquire(self, permits: int) -> CompletableFuture[SemaphorePermit]:
        return self.internal_acquire(permits, None, permits)

    @java_method("internalAcquire")
    def internal_acquire(self, permits: int, previous: SemaphorePermit | None,
                         acquire_permits: int) -> CompletableFuture[SemaphorePermit]:
        self._validate(permits)
        future: CompletableFuture[SemaphorePermit] = CompletableFuture("future")
        if self.closed.get():
            future._settle(None, PermitAcquireAlreadyClosedError("Semaphore is closed"))  # not shared yet
            return future
        request = PendingRequest(permits, previous, acquire_permits, future)
        if not self.queue.offer(request):
            future._settle(None, PermitAcquireQueueFullError("Semaphore queue is full"))
            return future
        timeout = self.executor.schedule(partial(self._timeout, request), self.timeout_ms, label="timeoutTask",
                                         handle="timeoutTask")
        request.set_timeout_task(timeout)
        self.process_queue()
        return future

    @java_method("timeoutTask")
    def _timeout(self, request: PendingRequest) -> None:
        if not request.future.is_done() and self.queue.remove(request):
            request.future.complete_exceptionally(PermitAcquireTimeoutError("Permit acquisition timed out"))
            self.process_queue()

    @java_method("update")
    def update(self, permit: SemaphorePermit, new_permits: int) -> CompletableFuture[SemaphorePermit]:
        self._validate(new_permits)
        old_permits = permit.get_permits()
        additional = new_permits - old_permits
        if self.order == "pre25066":
            return self._update_pre25066(permit, new_permits, additional)
        if additional > 0:
            return self.internal_acquire(new_permits, permit, new_permits)
        leftover = permit.release_permits() - new_permits
        if leftover >= 0:
            if leftover > 0:
                self.available_permits.add_and_get(leftover)
                self.process_queue()
            return CompletableFuture.completed(self.new_permit(new_permits))
        return self.acquire(new_permits)

    def _update_pre25066(self, permit: SemaphorePermit, new_permits: int,
                         additional: int) -> CompletableFuture[SemaphorePermit]:
        """Before #25066 (55c51bd9, lines 175-205): the previous permit is released in a `thenApply` of the grant."""
        if additional > 0:
            acquire_future = self.internal_acquire(new_permits, None, additional)

            @java_method("update$thenApply")
            def release_previous(granted: SemaphorePermit) -> SemaphorePermit:
                permit.release_permits()
                return granted

            returned = acquire_future.then_apply(release_previous, name="returnedFuture")
            returned.when_complete(_cancel_source(acquire_future), name="whenCompleteFuture")
            return returned
        if additional < 0:
            self.available_permits.add_and_get(-additional)
            self.process_queue()
        permit.release_permits()
        return CompletableFuture.completed(self.new_permit(new_permits))

    @java_method("release")
    def release(self, permit: SemaphorePermit) -> None:
        released = permit.release_permits()
        if released > 0:
            self.available_permits.add_and_get(released)
            self.process_queue()

    @java_method("processQueue")
    def process_queue(self) -> None:
        if self.closed.get():
            return
        self.executor.execute(self._process_queue_runnable, label="internalProcessQueue")

    def _process_queue_runnable(self) -> None:
        self.internal_process_queue()

    @java_method("internalProcessQueue")
    def internal_process_queue(self) -> None:
        with self.monitor.held():
            while not self.closed.get() and not self.queue.is_empty():
                current = self.available_permits.get()
                if current <= 0:
                    break
                request = self.queue.peek()
                if request is None:
                    break
                if request.future.is_done():  # cancelled by the caller: drop it
                    request.cancel_timeout_task()
                    self.queue.remove(request)
                    continue
                taken = self._take(request, current)
                if taken is None:
                    break
                take, given_back = taken
                self.available_permits.add_and_get(-take)
                request.cancel_timeout_task()
                self.queue.remove(request)
                if not request.future.complete(self.new_permit(request.permits)):
                    self.available_permits.add_and_get(given_back)  # the caller cancelled meanwhile

    def _take(self, request: PendingRequest, current: int) -> tuple[int, int] | None:
        """What the head's grant takes from the available permits and what a failed completion gives back, or None
        when the head does not fit (the pass ends)."""
        if self.order == "pre25066":
            if request.acquire_permits > current:
                return None
            return request.acquire_permits, request.acquire_permits
        if request.get_required_permits() > current:
            return None
        take, swapped = request.get_required_permits_reusing_previous()
        if self.order != "fixed":
            return take, take
        if take > current:  # a concurrent release swapped the previous permit first: its own pass follows its add
            request.previous = None
            return None
        return take, take + swapped


def _cancel_source(source: CompletableFuture[SemaphorePermit]) -> Callable[[object, BaseException | None], None]:
    """The pre-#25066 `whenComplete` that cancels the grant's future when the returned one was cancelled."""

    @java_method("update$whenComplete")
    def cancel_if_cancelled(_permit: object, error: BaseException | None) -> None:
        if isinstance(error, CancellationError):
            source.cancel()

    return cancel_if_cancelled
