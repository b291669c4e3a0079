"""``AsyncDualMemoryLimiterImpl`` and its utilities (spec §2.2, §4.6).

Two :class:`AsyncSemaphore` pools (heap, direct) on one executor, the ``withPermits`` helpers that
release a permit when the work depending on it ends, ``acquireDirectMemoryPermitsAndWriteAndFlush``,
the reply commands it writes, and the size and hash functions every port must share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Protocol, TypeVar

import crc32c

from .semaphore import AsyncSemaphore, Permit
from .vexec import Executor, VFuture, failed_future

T = TypeVar("T")

IsCancelled = Callable[[], bool] | None
OnAcquireError = Callable[[BaseException], VFuture[T]]
ReleasePolicy = bool | Callable[[BaseException], bool]
"""Whether a helper releases its permit when the stage fails: always (True, `current`), never (False),
or only for some failures (the §6(a) draft keeps the initial heap permit only when the listing fails)."""


def _releases_on(policy: ReleasePolicy, error: BaseException) -> bool:
    return policy(error) if callable(policy) else policy


class LimitType(Enum):
    HEAP_MEMORY = "heap"
    DIRECT_MEMORY = "direct"


class DualPermit:
    """A pool permit tagged with its pool; ``permits`` reads through to the underlying permit."""

    __slots__ = ("_owner", "limit_type", "underlying")

    def __init__(self, owner: AsyncDualMemoryLimiter, limit_type: LimitType, underlying: Permit) -> None:
        self._owner = owner
        self.limit_type = limit_type
        self.underlying = underlying

    @property
    def permits(self) -> int:
        return self.underlying.permits

    def __repr__(self) -> str:
        return f"DualPermit({self.limit_type.name}, {self.underlying!r})"


class AsyncDualMemoryLimiter:
    """Heap and direct pools sharing one executor; ``limiter(type)`` exposes each pool's state."""

    def __init__(
        self,
        heap_max: int,
        heap_queue: int,
        heap_timeout_ms: int,
        direct_max: int,
        direct_queue: int,
        direct_timeout_ms: int,
        *,
        executor: Executor,
        heap_recorder: Callable[[int], None] | None = None,
        direct_recorder: Callable[[int], None] | None = None,
    ) -> None:
        self.executor = executor
        self.heap = AsyncSemaphore(
            heap_max, heap_queue, heap_timeout_ms, executor=executor, queue_latency_recorder=heap_recorder
        )
        self.direct = AsyncSemaphore(
            direct_max, direct_queue, direct_timeout_ms, executor=executor, queue_latency_recorder=direct_recorder
        )

    def limiter(self, limit_type: LimitType) -> AsyncSemaphore:
        return self.heap if limit_type is LimitType.HEAP_MEMORY else self.direct

    def acquire(self, size: int, limit_type: LimitType, is_cancelled: IsCancelled = None) -> VFuture[DualPermit]:
        return self._wrap(limit_type, self.limiter(limit_type).acquire(size, is_cancelled))

    def update(self, permit: DualPermit, new_size: int, is_cancelled: IsCancelled = None) -> VFuture[DualPermit]:
        self._check_permit(permit)
        pool = self.limiter(permit.limit_type)
        return self._wrap(permit.limit_type, pool.update(permit.underlying, new_size, is_cancelled))

    def release(self, permit: DualPermit) -> None:
        self._check_permit(permit)
        self.limiter(permit.limit_type).release(permit.underlying)

    def close(self) -> None:
        self.heap.close()
        self.direct.close()

    def _check_permit(self, permit: object) -> None:
        if not isinstance(permit, DualPermit) or permit._owner is not self:
            raise ValueError("Invalid permit type")

    def _wrap(self, limit_type: LimitType, future: VFuture[Permit]) -> VFuture[DualPermit]:
        # Java `thenApply`: cancelling the wrapper does not reach the pool request (upstream behaviour).
        wrapped = future.then_apply(lambda p: DualPermit(self, limit_type, p))
        wrapped.id = future.id
        return wrapped

    def with_acquired_permits(
        self,
        size: int,
        limit_type: LimitType,
        is_cancelled: IsCancelled,
        fn: Callable[[DualPermit], VFuture[T]],
        on_acquire_error: OnAcquireError[T],
        *,
        exceptional_release: ReleasePolicy = True,
    ) -> VFuture[T]:
        """Run ``fn`` with a fresh permit and release it when ``fn``'s future ends.

        ``exceptional_release=False`` is the §6(a) draft choreography: the permit is released only
        when ``fn``'s future succeeds.
        """
        return self._with_permits(
            self.acquire(size, limit_type, is_cancelled), fn, on_acquire_error, exceptional_release
        )

    def with_updated_permits(
        self,
        permit: DualPermit,
        new_size: int,
        is_cancelled: IsCancelled,
        fn: Callable[[DualPermit], VFuture[T]],
        on_acquire_error: OnAcquireError[T],
        *,
        exceptional_release: ReleasePolicy = True,
    ) -> VFuture[T]:
        """As :meth:`with_acquired_permits`, resizing ``permit`` instead of acquiring."""
        return self._with_permits(
            self.update(permit, new_size, is_cancelled), fn, on_acquire_error, exceptional_release
        )

    def _with_permits(
        self,
        permit_future: VFuture[DualPermit],
        fn: Callable[[DualPermit], VFuture[T]],
        on_acquire_error: OnAcquireError[T],
        exceptional_release: ReleasePolicy,
    ) -> VFuture[T]:
        result: VFuture[T] = VFuture()

        def on_permit(acquired: VFuture[DualPermit]) -> None:
            error = acquired.exception()
            if error is not None:
                _call_stage(on_acquire_error, error).forward_to(result)
                return
            permit = acquired.result()
            try:
                stage = fn(permit)
            except Exception as e:
                if _releases_on(exceptional_release, e):
                    self.release(permit)
                result.fail(e)
                return

            def on_stage(done: VFuture[T]) -> None:
                # Release before the result completes, as Java's `whenComplete` inside `thenCompose`.
                error = done.exception()
                if error is None or _releases_on(exceptional_release, error):
                    self.release(permit)
                done.forward_to(result)

            stage.add_done_callback(on_stage)

        permit_future.add_done_callback(on_permit)
        return result


def _call_stage(fn: Callable[[BaseException], VFuture[T]], error: BaseException) -> VFuture[T]:
    """Stages are total: a synchronous exception of an error handler fails its stage."""
    try:
        return fn(error)
    except Exception as e:
        return failed_future(e)


# -- replies ----------------------------------------------------------------------------------


class ServerError(StrEnum):
    """Error codes of ``CommandError`` used by the flows (names of Pulsar's ``ServerError``)."""

    TOO_MANY_REQUESTS = "TooManyRequests"
    AUTHORIZATION_ERROR = "AuthorizationError"
    AUTHENTICATION_ERROR = "AuthenticationError"
    METADATA_ERROR = "MetadataError"
    SERVICE_NOT_READY = "ServiceNotReady"


@dataclass(frozen=True)
class ErrorReply:
    request_id: int
    code: ServerError
    message: str


@dataclass(frozen=True)
class SuccessReply:
    request_id: int


@dataclass(frozen=True)
class GetTopicsResponse:
    request_id: int
    topics: tuple[str, ...]
    topics_hash: str
    changed: bool
    filtered: bool = False


@dataclass(frozen=True)
class WatchSuccess:
    request_id: int
    watcher_id: int
    topics_hash: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class WatchUpdate:
    watcher_id: int
    new_topics: tuple[str, ...]
    deleted_topics: tuple[str, ...]
    topics_hash: str


Reply = ErrorReply | SuccessReply | GetTopicsResponse | WatchSuccess | WatchUpdate
SizedReply = GetTopicsResponse | WatchSuccess | WatchUpdate


class SerializationError(Exception):
    """Raised by a channel when a reply cannot be serialized (an armed harness fault)."""


class Channel(Protocol):
    """What :func:`acquire_direct_and_write` needs from a connection."""

    def serialize(self, reply: SizedReply) -> None: ...

    def write(self, reply: SizedReply, listener: Callable[[bool], None]) -> None: ...


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8"))


def wire_size(reply: SizedReply) -> int:
    """Stand-in for the protobuf size: 32 + Σ(utf8 length + 4) over the reply's strings."""
    match reply:
        case GetTopicsResponse() | WatchSuccess():
            strings: tuple[str, ...] = (*reply.topics, reply.topics_hash)
        case WatchUpdate():
            strings = (*reply.new_topics, *reply.deleted_topics, reply.topics_hash)
    return 32 + sum(_utf8_len(s) + 4 for s in strings)


def heap_size(topics: Sequence[str]) -> int:
    """``TopicListMemoryLimiter.estimateTopicListSize``: Σ(utf8 length + 32)."""
    return sum(_utf8_len(t) + 32 for t in topics)


def topics_hash(topics: Sequence[str]) -> str:
    """CRC32C of the sorted, comma-joined names, as lowercase hex of the little-endian 4 bytes."""
    value = crc32c.crc32c(",".join(sorted(topics)).encode("utf-8"))
    return int(value).to_bytes(4, "little").hex()


def acquire_direct_and_write(
    conn: Channel,
    limiter: AsyncDualMemoryLimiter,
    is_cancelled: IsCancelled,
    reply: SizedReply,
    on_acquire_error: OnAcquireError[None],
    *,
    exceptional_release: bool = True,
) -> VFuture[None]:
    """Acquire ``wire_size(reply)`` direct bytes, serialize, start the write.

    The result completes when the write is queued; the permit is released when the write
    completes.  ``exceptional_release=False`` is the §6(a) draft: no release after a
    serialization fault, and release only on a successful write.
    """
    acquired = limiter.acquire(wire_size(reply), LimitType.DIRECT_MEMORY, is_cancelled)
    result: VFuture[None] = VFuture()

    def on_permit(done: VFuture[DualPermit]) -> None:
        error = done.exception()
        if error is not None:
            _call_stage(on_acquire_error, error).forward_to(result)
            return
        permit = done.result()
        try:
            conn.serialize(reply)
        except Exception as e:
            if exceptional_release:
                limiter.release(permit)
            result.fail(e)
            return

        def on_written(ok: bool) -> None:
            if ok or exceptional_release:
                limiter.release(permit)

        conn.write(reply, on_written)
        result.complete(None)

    acquired.add_done_callback(on_permit)
    return result
