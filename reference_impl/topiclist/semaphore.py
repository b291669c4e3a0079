"""``AsyncSemaphoreImpl``: a byte-counting FIFO semaphore with a bounded wait queue (spec §2.1, §4.1-4.5).

Observable state for a harness: ``queue`` (the :class:`Pending` entries in FIFO order), ``live``
(issued permits still holding bytes, by permit id), ``outcomes`` (how many requests ended each
way), ``request_count`` and :meth:`AsyncSemaphore.snapshot`.  Every call that passes validation
gets the next request id (``seq``, from 1), queued or not; the returned future and the granted
permit carry it as ``id``.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from .vexec import Cancellable, Executor, VFuture

LONG_MAX = 2**63 - 1
"""Java ``Long.MAX_VALUE``: the available permits of an unbounded pool, and the recorder's timeout mark."""


class PermitAcquireError(Exception):
    """Base of every way a permit request can fail (Java ``PermitAcquireException``)."""


# The spec does not fix these four texts (clients see them only inside MetadataError / ServiceNotReady
# replies); the wording is modelled on upstream's exceptions, not verified verbatim.
class PermitAcquireTimeoutError(PermitAcquireError):
    def __init__(self) -> None:
        super().__init__("Permit acquisition timed out")


class PermitAcquireQueueFullError(PermitAcquireError):
    def __init__(self) -> None:
        super().__init__("Permit acquisition queue is full")


class PermitAcquireAlreadyClosedError(PermitAcquireError):
    def __init__(self) -> None:
        super().__init__("Semaphore is already closed")


class PermitAcquireCancelledError(PermitAcquireError):
    def __init__(self) -> None:
        super().__init__("Permit acquisition was cancelled")


class Outcome(Enum):
    """How a request ended, as counted in ``AsyncSemaphore.outcomes``."""

    GRANTED = "granted"  # granted by a pass after queueing
    IMMEDIATE = "immediate"  # completed synchronously: unbounded pool or shrinking/equal update
    TIMEOUT = "timeout"
    QUEUE_FULL = "queue_full"
    ALREADY_CLOSED = "already_closed"
    CANCELLED = "cancelled"  # is_cancelled() noticed at the head during a pass
    CALLER_CANCELLED = "caller_cancelled"  # counted when the semaphore drops the cancelled entry


class Permit:
    """Bytes held by a caller.  Only the issuing semaphore may consume it (swap its value to 0)."""

    __slots__ = ("_owner", "_permits", "id")

    def __init__(self, permits: int, *, owner: object = None, id: int = 0) -> None:
        self._permits = permits
        self._owner = owner
        self.id = id

    @property
    def permits(self) -> int:
        return self._permits

    def swap_to_zero(self) -> int:
        previous, self._permits = self._permits, 0
        return previous

    def __repr__(self) -> str:
        return f"Permit(id={self.id}, permits={self._permits})"


@dataclass(eq=False)
class Pending:
    """A queued request.  ``previous_permit`` is set for a growing update."""

    seq: int
    permits: int
    previous_permit: Permit | None
    future: VFuture[Permit]
    is_cancelled: Callable[[], bool] | None
    created_at: int
    timeout_handle: Cancellable | None = None


@dataclass(frozen=True)
class SemaphoreSnapshot:
    """Hashable summary for lockstep comparison; ``queue`` holds ``(seq, permits, previous permits or None)``."""

    available: int
    closed: bool
    queue: tuple[tuple[int, int, int | None], ...]
    acquired: int


class AsyncSemaphore:
    """Strict-FIFO asynchronous semaphore; ``max_permits <= 0`` means unbounded, ``max_queue_size <= 0``
    an unbounded queue.  Grants happen only in a pass submitted to the executor, never inline."""

    def __init__(
        self,
        max_permits: int,
        max_queue_size: int,
        timeout_ms: int,
        *,
        executor: Executor,
        queue_latency_recorder: Callable[[int], None] | None = None,
    ) -> None:
        self.max_permits = max_permits
        self.max_queue_size = max_queue_size
        self.timeout_ms = timeout_ms
        self.executor = executor
        self.queue_latency_recorder = queue_latency_recorder
        self.available = max_permits
        self.closed = False
        self.queue: deque[Pending] = deque()
        self.live: dict[int, Permit] = {}
        self.outcomes: Counter[Outcome] = Counter()
        self.request_count = 0
        # One safety-net pass, half a timeout after construction; it does not repeat.
        self.deferred_pass_handle: Cancellable | None = (
            None if self.unbounded else executor.schedule(self._process_queue, timeout_ms // 2)
        )

    @property
    def unbounded(self) -> bool:
        return self.max_permits <= 0

    # -- getters ------------------------------------------------------------------------------

    @property
    def available_permits(self) -> int:
        return LONG_MAX if self.unbounded else self.available

    @property
    def acquired_permits(self) -> int:
        return 0 if self.unbounded else self.max_permits - self.available

    @property
    def queue_size(self) -> int:
        return len(self.queue)

    def snapshot(self) -> SemaphoreSnapshot:
        return SemaphoreSnapshot(
            available=self.available_permits,
            closed=self.closed,
            queue=tuple(
                (p.seq, p.permits, None if p.previous_permit is None else p.previous_permit.permits) for p in self.queue
            ),
            acquired=self.acquired_permits,
        )

    # -- operations ---------------------------------------------------------------------------

    def acquire(self, permits: int, is_cancelled: Callable[[], bool] | None = None) -> VFuture[Permit]:
        self._validate(permits)
        if self.unbounded:
            return self._immediate(permits)
        return self._enqueue(permits, None, is_cancelled)

    def update(
        self, permit: Permit, new_permits: int, is_cancelled: Callable[[], bool] | None = None
    ) -> VFuture[Permit]:
        """Resize ``permit``.  Growing waits in the queue and keeps ``permit`` valid until granted;
        shrinking or equal is synchronous and always consumes ``permit``."""
        self._validate(new_permits)
        self._check_permit(permit)
        if self.unbounded:
            return self._immediate(new_permits)
        if new_permits > permit.permits:
            return self._enqueue(new_permits, permit, is_cancelled)
        # Java falls back to acquire(new) when the swapped value dropped below `new` concurrently;
        # single-threaded, the swap returns exactly permit.permits, so leftover is never negative.
        leftover = self._consume(permit) - new_permits
        if leftover > 0:
            self.available += leftover
            self._submit_pass()
        return self._immediate(new_permits)

    def release(self, permit: Permit) -> None:
        """Idempotent: a released or consumed permit adds 0."""
        self._check_permit(permit)
        if self.unbounded:
            return
        returned = self._consume(permit)
        if returned > 0:
            self.available += returned
            self._submit_pass()

    def close(self) -> None:
        """Fail every queued request with AlreadyClosed; releases and shrinking updates still work."""
        if self.closed:
            return
        self.closed = True
        if self.deferred_pass_handle is not None:
            self.deferred_pass_handle.cancel()
        while self.queue:
            pending = self.queue.popleft()
            self._cancel_timeout(pending)
            # Outcomes are counted before completing, so callbacks already see them.
            if pending.future.done():
                self.outcomes[Outcome.CALLER_CANCELLED] += 1
            else:
                self.outcomes[Outcome.ALREADY_CLOSED] += 1
                pending.future.fail(PermitAcquireAlreadyClosedError())

    # -- internals ----------------------------------------------------------------------------

    def _validate(self, permits: int) -> None:
        if permits < 0:
            raise ValueError(f"Invalid negative permits value: {permits}")
        if not self.unbounded and permits > self.max_permits:
            raise ValueError(f"Requested permits={permits} is larger than maxPermits={self.max_permits}")

    def _check_permit(self, permit: object) -> None:
        if not isinstance(permit, Permit) or permit._owner is not self:
            raise ValueError("Invalid permit type")

    def _new_seq(self) -> int:
        self.request_count += 1
        return self.request_count

    def _issue(self, seq: int, permits: int) -> Permit:
        permit = Permit(permits, owner=self, id=seq)
        if permits > 0 and not self.unbounded:
            self.live[seq] = permit
        return permit

    def _consume(self, permit: Permit) -> int:
        self.live.pop(permit.id, None)
        return permit.swap_to_zero()

    def _immediate(self, permits: int) -> VFuture[Permit]:
        seq = self._new_seq()
        future: VFuture[Permit] = VFuture(seq)
        self.outcomes[Outcome.IMMEDIATE] += 1
        future.complete(self._issue(seq, permits))
        return future

    def _enqueue(
        self, permits: int, previous: Permit | None, is_cancelled: Callable[[], bool] | None
    ) -> VFuture[Permit]:
        seq = self._new_seq()
        future: VFuture[Permit] = VFuture(seq)
        if self.closed:
            self.outcomes[Outcome.ALREADY_CLOSED] += 1
            future.fail(PermitAcquireAlreadyClosedError())
            return future
        # Occupancy counts requests that could already be granted but whose pass has not run.
        if 0 < self.max_queue_size <= len(self.queue):
            self.outcomes[Outcome.QUEUE_FULL] += 1
            future.fail(PermitAcquireQueueFullError())
            return future
        pending = Pending(seq, permits, previous, future, is_cancelled, self.executor.now)
        self.queue.append(pending)
        pending.timeout_handle = self.executor.schedule(lambda: self._on_timeout(pending), self.timeout_ms)
        self._submit_pass()
        return future

    def _submit_pass(self) -> None:
        # Upstream's processQueue() returns at once on a closed semaphore: it submits nothing.
        if not self.closed:
            self.executor.submit(self._process_queue)

    @staticmethod
    def _cancel_timeout(pending: Pending) -> None:
        if pending.timeout_handle is not None:
            pending.timeout_handle.cancel()

    def _record(self, value: int) -> None:
        if self.queue_latency_recorder is not None:
            self.queue_latency_recorder(value)

    def _on_timeout(self, pending: Pending) -> None:
        # A caller-cancelled entry stays queued: its timeout does nothing and submits no pass.
        if pending.future.done() or pending not in self.queue:
            return
        self.queue.remove(pending)
        self._record(LONG_MAX)
        self._record(self.executor.now - pending.created_at)
        self.outcomes[Outcome.TIMEOUT] += 1
        pending.future.fail(PermitAcquireTimeoutError())
        self._submit_pass()

    def _process_queue(self) -> None:
        """One atomic pass: grant from the head while it fits (strict FIFO, head-of-line blocking)."""
        while not self.closed and self.queue:
            if self.available <= 0:
                return
            head = self.queue[0]
            if head.is_cancelled is not None and head.is_cancelled():
                self._cancel_timeout(head)
                self.queue.popleft()
                self.outcomes[Outcome.CANCELLED] += 1
                head.future.fail(PermitAcquireCancelledError())
                continue
            if head.future.done():
                self._cancel_timeout(head)
                self.queue.popleft()
                self.outcomes[Outcome.CALLER_CANCELLED] += 1
                continue
            previous = head.previous_permit
            required = head.permits - (0 if previous is None else previous.permits)
            if required > self.available:
                return
            self.available -= head.permits - (0 if previous is None else self._consume(previous))
            self._cancel_timeout(head)
            self.queue.popleft()
            self._record(self.executor.now - head.created_at)
            self.outcomes[Outcome.GRANTED] += 1
            head.future.complete(self._issue(head.seq, head.permits))
