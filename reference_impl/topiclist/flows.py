"""The broker and proxy flows that use the limiter (spec §2.3, §4.7, §4.8, §6).

A *flow world* (:class:`Broker` or :class:`Proxy`) owns a lookup semaphore, a size cache,
connections, and the pending items the harness completes by id: listings (broker), forwarded
broker responses (proxy) and socket writes (both).  Ids of connections, listings, responses and
writes are increasing integers from 1, one counter per kind and world.  Nothing here runs
unless the harness calls a handler, an action, or steps the executor.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from .dual_limiter import (
    AsyncDualMemoryLimiter,
    DualPermit,
    ErrorReply,
    GetTopicsResponse,
    LimitType,
    ReleasePolicy,
    Reply,
    SerializationError,
    ServerError,
    SizedReply,
    SuccessReply,
    WatchSuccess,
    WatchUpdate,
    acquire_direct_and_write,
    heap_size,
)
from .dual_limiter import topics_hash as hash_topics
from .semaphore import PermitAcquireQueueFullError, PermitAcquireTimeoutError
from .vexec import Executor, VFuture, completed_future, failed_future

Variant = Literal["current", "no_exceptional_release"]
VARIANTS: tuple[Variant, ...] = ("current", "no_exceptional_release")

DEFAULT_TOPIC_LIST_SIZE = 10240
"""The estimate handed to the first lister of a namespace whose size is not known yet (10 KiB)."""

PERSISTENT = "PERSISTENT"
HEAP = LimitType.HEAP_MEMORY

_RETRYABLE = (PermitAcquireTimeoutError, PermitAcquireQueueFullError)


class LookupSemaphore:
    """``brokerService.getLookupRequestSemaphore()``: a plain non-blocking counting semaphore."""

    def __init__(self, max_permits: int) -> None:
        self.max = max_permits
        self.available = max_permits

    def try_acquire(self) -> bool:
        if self.available <= 0:
            return False
        self.available -= 1
        return True

    def release(self) -> None:
        # Like java.util.concurrent.Semaphore, no upper clamp: an extra release shows as available > max.
        self.available += 1


class SizeState(Enum):
    UNSET = "unset"
    INITIALIZING = "initializing"
    KNOWN = "known"


class SizeHolder:
    """``TopicListSizeResultCache.ResultHolder``: the last actual heap size of one listing key."""

    def __init__(self) -> None:
        self.state = SizeState.UNSET
        self.size: int | None = None  # set exactly when the state is KNOWN
        # One future for every caller while INITIALIZING (upstream keeps one pending future per
        # holder, spec §4.7); `waiters` counts the callers handed it, for harness projections.
        self.pending: VFuture[int] | None = None
        self.waiters = 0

    def get_size_async(self) -> VFuture[int]:
        if self.size is not None:
            return completed_future(self.size)
        if self.state is SizeState.UNSET:
            self.state = SizeState.INITIALIZING
            return completed_future(DEFAULT_TOPIC_LIST_SIZE)
        if self.pending is None:
            self.pending = VFuture()
        self.waiters += 1
        return self.pending

    def update_size(self, actual: int) -> None:
        # State first: a waiter's continuation may re-enter this holder synchronously.
        self.state, self.size = SizeState.KNOWN, actual
        self._wake(actual)

    def reset_if_initializing(self) -> None:
        if self.state is SizeState.INITIALIZING:
            self.state = SizeState.UNSET
            self._wake(DEFAULT_TOPIC_LIST_SIZE)

    def _wake(self, size: int) -> None:
        pending, self.pending, self.waiters = self.pending, None, 0
        if pending is not None:
            pending.complete(size)


class TopicListSizeCache:
    """Size holders keyed by ``(namespace, mode)``."""

    def __init__(self) -> None:
        self.holders: dict[tuple[str, str], SizeHolder] = {}

    def holder(self, namespace: str, mode: str) -> SizeHolder:
        return self.holders.setdefault((namespace, mode), SizeHolder())


class Backoff:
    """Pulsar ``Backoff`` without jitter: 100 ms, doubling, capped at 25 s, reset by any success."""

    def __init__(self, initial_ms: int = 100, max_ms: int = 25_000) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max_ms
        self.current_ms = initial_ms

    def next(self) -> int:
        delay = self.current_ms
        self.current_ms = min(self.current_ms * 2, self.max_ms)
        return delay

    def reset(self) -> None:
        self.current_ms = self.initial_ms


@dataclass(eq=False)
class PendingWrite:
    """A reply in the socket buffer; the harness completes it with ``complete_write(id, ok)``."""

    write_id: int
    conn: Connection
    reply: SizedReply
    listener: Callable[[bool], None]


class Connection:
    """A client connection: ``replies`` is the append-only log of reply attempts."""

    def __init__(self, conn_id: int, world: _FlowWorld) -> None:
        self.id = conn_id
        self.active = True
        self.replies: list[Reply] = []
        self.pending_writes: dict[int, PendingWrite] = {}
        self.retry_backoff = Backoff()
        self._world = world

    def reply(self, reply: Reply) -> None:
        """An error or success reply: needs no permits, logged even when the connection is inactive."""
        self.replies.append(reply)

    def serialize(self, reply: SizedReply) -> None:
        faults = self._world.armed_faults
        if not isinstance(reply, WatchUpdate) and reply.request_id in faults:
            faults.discard(reply.request_id)
            raise SerializationError(f"Failed to serialize the response to request {reply.request_id}")

    def write(self, reply: SizedReply, listener: Callable[[bool], None]) -> None:
        self.replies.append(reply)
        pending = PendingWrite(next(self._world._write_ids), self, reply, listener)
        self.pending_writes[pending.write_id] = pending
        self._world.pending_writes[pending.write_id] = pending

    def __repr__(self) -> str:
        return f"Connection(id={self.id}, active={self.active}, replies={len(self.replies)})"


@dataclass(eq=False)
class PendingListing:
    """A metadata-store listing in flight; the harness completes it with ``complete_listing``."""

    listing_id: int
    request_id: int  # the get-topics or watch request the listing serves, so a harness can name it
    namespace: str
    mode: str
    future: VFuture[list[str]]


@dataclass(frozen=True)
class BrokerResponse:
    topics: tuple[str, ...]
    topics_hash: str
    changed: bool


@dataclass(eq=False)
class PendingBrokerResponse:
    """A get-topics request the proxy forwarded to a broker."""

    response_id: int
    conn: Connection
    request_id: int
    namespace: str
    mode: str
    topics_hash: str | None
    future: VFuture[BrokerResponse]


class ListingError(Exception):
    """A failed metadata-store listing (the message becomes the MetadataError text)."""


class BrokerRequestError(Exception):
    """A broker's error reply to a forwarded request; ``kind`` picks the proxy's reply code."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(eq=False)
class Watcher:
    """A topic-list watcher.  ``initializing`` until its first listing succeeds or fails for good;
    ``live`` once topic events queue for it; ``registered`` until closed or failed."""

    watcher_id: int
    conn: Connection
    namespace: str
    request_id: int
    request_topics_hash: str | None
    registered: bool = True
    initializing: bool = True
    live: bool = False
    topics: list[str] = field(default_factory=list)
    sending_in_progress: bool = False
    update_queue: deque[WatchUpdate] = field(default_factory=deque)


class _FlowWorld:
    """What broker and proxy share: lookup, size cache, connections, writes, faults, the variant."""

    def __init__(
        self, limiter: AsyncDualMemoryLimiter, executor: Executor, *, lookup_max: int, variant: Variant
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"Unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
        self.limiter = limiter
        self.executor = executor
        self.variant = variant
        self.lookup = LookupSemaphore(lookup_max)
        self.size_cache = TopicListSizeCache()
        self.connections: dict[int, Connection] = {}
        self.pending_writes: dict[int, PendingWrite] = {}
        self.armed_faults: set[int] = set()
        self._conn_ids = itertools.count(1)
        self._write_ids = itertools.count(1)

    @property
    def _exceptional_release(self) -> bool:
        """False in the §6(a) draft choreography, which has no release on exceptional paths."""
        return self.variant == "current"

    def _initial_release(self, upstream_failures: list[BaseException]) -> ReleasePolicy:
        """§6(a).1: the draft keeps the initial heap permit only when the listing (broker) or the
        forwarded request (proxy) itself failed; a later stage failing still releases it."""
        if self.variant == "current":
            return True
        return lambda error: not any(error is failure for failure in upstream_failures)

    def connect(self) -> Connection:
        conn = Connection(next(self._conn_ids), self)
        self.connections[conn.id] = conn
        return conn

    def complete_write(self, write_id: int, ok: bool) -> None:
        pending = self.pending_writes.pop(write_id, None)
        if pending is None:
            raise ValueError(f"No pending write with id {write_id}")
        del pending.conn.pending_writes[write_id]
        pending.listener(ok)

    def arm_serialization_fault(self, request_id: int) -> None:
        """The next serialization of a reply to ``request_id`` (in any connection) raises."""
        self.armed_faults.add(request_id)

    def disconnect(self, conn: Connection) -> None:
        conn.active = False

    def is_quiescent(self) -> bool:
        """No write pending, no permit request queued, executor idle (subclasses add their items)."""
        return (
            not self.pending_writes
            and self.limiter.heap.queue_size == 0
            and self.limiter.direct.queue_size == 0
            and self.executor.idle()
        )

    def _clamp(self, estimate: int) -> int:
        heap_max = self.limiter.heap.max_permits
        return min(estimate, heap_max) if heap_max > 0 else estimate


class Broker(_FlowWorld):
    """Broker get-topics handler and topic-list watcher service."""

    def __init__(
        self,
        limiter: AsyncDualMemoryLimiter,
        executor: Executor,
        *,
        lookup_max: int = 50_000,
        variant: Variant = "current",
    ) -> None:
        super().__init__(limiter, executor, lookup_max=lookup_max, variant=variant)
        self.pending_listings: dict[int, PendingListing] = {}
        self.watchers: dict[int, Watcher] = {}
        self.denied_namespaces: set[str] = set()
        self._listing_ids = itertools.count(1)

    # -- harness actions ----------------------------------------------------------------------

    def deny_authorization(self, namespace: str) -> None:
        self.denied_namespaces.add(namespace)

    def complete_listing(self, listing_id: int, topics: Sequence[str] | None = None, error: str | None = None) -> None:
        """Finish a listing with ``topics`` or with a ``ListingError(error)``."""
        if (topics is None) == (error is None):
            raise ValueError("complete_listing needs exactly one of topics or error")
        listing = self.pending_listings.pop(listing_id, None)
        if listing is None:
            raise ValueError(f"No pending listing with id {listing_id}")
        if topics is not None:
            listing.future.complete(list(topics))
        else:
            listing.future.fail(ListingError(error))

    def is_quiescent(self) -> bool:
        return not self.pending_listings and super().is_quiescent()

    def _list(self, namespace: str, mode: str, request_id: int) -> VFuture[list[str]]:
        listing = PendingListing(next(self._listing_ids), request_id, namespace, mode, VFuture())
        self.pending_listings[listing.listing_id] = listing
        return listing.future

    # -- get topics (§4.8 broker) -------------------------------------------------------------

    def handle_get_topics(
        self, conn: Connection, request_id: int, namespace: str, mode: str, topics_hash: str | None = None
    ) -> None:
        if not self.lookup.try_acquire():
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Failed due to too many pending lookup requests")
            )
            return
        if namespace in self.denied_namespaces:
            conn.reply(
                ErrorReply(
                    request_id, ServerError.AUTHORIZATION_ERROR, "Client is not authorized to GetTopicsOfNamespace"
                )
            )
            self.lookup.release()
            return
        holder = self.size_cache.holder(namespace, mode)
        limiter = self.limiter

        def is_cancelled() -> bool:
            return not conn.active

        def heap_refused(_error: BaseException) -> VFuture[None]:
            holder.reset_if_initializing()
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Failed due to heap memory limit exceeded")
            )
            return completed_future(None)

        upstream_failures: list[BaseException] = []

        def list_topics(initial: DualPermit) -> VFuture[None]:
            listing = self._list(namespace, mode, request_id)
            listing.add_done_callback(lambda f: _note_failure(f, upstream_failures))
            return listing.then_compose(lambda topics: listed(initial, topics))

        def listed(initial: DualPermit, topics: list[str]) -> VFuture[None]:
            actual = heap_size(topics)
            holder.update_size(actual)
            return limiter.with_updated_permits(initial, actual, is_cancelled, lambda _p: send(topics), update_refused)

        def update_refused(_error: BaseException) -> VFuture[None]:
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Failed due to heap memory limit exceeded")
            )
            return completed_future(None)

        def send(topics: list[str]) -> VFuture[None]:
            response = _get_topics_response(request_id, topics, topics_hash)
            return acquire_direct_and_write(
                conn, limiter, is_cancelled, response, direct_refused, exceptional_release=self._exceptional_release
            )

        def direct_refused(_error: BaseException) -> VFuture[None]:
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Cannot acquire permits for direct memory")
            )
            return completed_future(None)

        def finish(done: VFuture[None]) -> None:
            self.lookup.release()
            error = done.exception()
            if error is not None:
                holder.reset_if_initializing()
                conn.reply(ErrorReply(request_id, ServerError.METADATA_ERROR, str(error)))

        holder.get_size_async().then_compose(
            lambda estimate: limiter.with_acquired_permits(
                self._clamp(estimate),
                HEAP,
                is_cancelled,
                list_topics,
                heap_refused,
                exceptional_release=self._initial_release(upstream_failures),
            )
        ).add_done_callback(finish)

    # -- watcher (§4.8 watcher) ---------------------------------------------------------------

    def handle_watch(
        self,
        conn: Connection,
        request_id: int,
        watcher_id: int,
        namespace: str,
        topics_hash: str | None = None,
    ) -> None:
        existing = self.watchers.get(watcher_id)
        if existing is not None and existing.registered:
            # Refreshing an existing watcher is not modelled (§9).
            raise ValueError(f"Watcher id {watcher_id} is already registered")
        if not self.lookup.try_acquire():
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Failed due to too many pending lookup requests")
            )
            return
        if namespace in self.denied_namespaces:
            conn.reply(
                ErrorReply(
                    request_id, ServerError.AUTHORIZATION_ERROR, "Proxy Client is not authorized to watchTopicList"
                )
            )
            self.lookup.release()
            return
        watcher = Watcher(watcher_id, conn, namespace, request_id, topics_hash)
        self.watchers[watcher_id] = watcher
        self._init_watcher(watcher)

    def handle_watch_close(self, conn: Connection, request_id: int, watcher_id: int) -> None:
        watcher = self.watchers.get(watcher_id)
        if watcher is not None and watcher.registered:
            # The watch request's error goes first: upstream fails the watcher future, whose handler
            # answers synchronously, before `sendSuccessResponse` for the close request.
            if watcher.initializing:
                watcher.conn.reply(
                    ErrorReply(
                        watcher.request_id, ServerError.METADATA_ERROR, "Closed watcher before creation was complete"
                    )
                )
                self.lookup.release()
            self._unregister(watcher)
        # Upstream answers Success even for an unknown watcher id.
        conn.reply(SuccessReply(request_id))

    def topics_changed(self, namespace: str, new: Sequence[str], deleted: Sequence[str]) -> None:
        """Queue a ``WatchUpdate`` for every live watcher of ``namespace``; send if none is in flight."""
        for watcher in self.watchers.values():
            if not (watcher.registered and watcher.live and watcher.namespace == namespace):
                continue
            gone = set(deleted)
            watcher.topics = [t for t in watcher.topics if t not in gone]
            for topic in new:
                if topic not in watcher.topics:
                    watcher.topics.append(topic)
            watcher.update_queue.append(
                WatchUpdate(watcher.watcher_id, tuple(new), tuple(deleted), hash_topics(watcher.topics))
            )
            if not watcher.initializing and not watcher.sending_in_progress:
                watcher.sending_in_progress = True
                self._send_next_update(watcher)

    def _unregister(self, watcher: Watcher) -> None:
        watcher.registered = False
        watcher.initializing = False
        watcher.live = False
        watcher.update_queue.clear()

    def _init_watcher(self, watcher: Watcher) -> None:
        """Step 2: estimate, clamp, heap acquire, list; heap is released when listing ends."""
        conn = watcher.conn
        holder = self.size_cache.holder(watcher.namespace, PERSISTENT)
        limiter = self.limiter

        def is_cancelled() -> bool:
            return not conn.active or not watcher.registered

        def list_topics(initial: DualPermit) -> VFuture[list[str]]:
            acquired = initial.permits
            return self._list(watcher.namespace, PERSISTENT, watcher.request_id).then_compose(
                lambda topics: listed(initial, acquired, topics)
            )

        def listed(initial: DualPermit, acquired: int, topics: list[str]) -> VFuture[list[str]]:
            actual = heap_size(topics)
            holder.update_size(actual)
            if watcher.registered:
                watcher.live = True
                watcher.topics = list(topics)
            if acquired == actual:
                return completed_future(topics)
            return limiter.with_updated_permits(
                initial, actual, is_cancelled, lambda _p: completed_future(topics), failed_future
            )

        # §6(a) point 1 names the get-topics listing only: the watcher's heap permit is always released,
        # so the variant's shortest TL-I7 traces stay the three of §6(a).  (Its direct writes do follow
        # points 2 and 3, through _watch_send.)
        holder.get_size_async().then_compose(
            lambda estimate: limiter.with_acquired_permits(
                self._clamp(estimate), HEAP, is_cancelled, list_topics, failed_future
            )
        ).add_done_callback(lambda done: self._watcher_initialized(watcher, done))

    def _watcher_initialized(self, watcher: Watcher, done: VFuture[list[str]]) -> None:
        error = done.exception()
        if error is not None:
            # The spec's watcher steps do not say it; as in the get-topics flows (and upstream), a failed
            # listing step resets the size holder, else this watcher's retry and every later lister of
            # the key would wait forever on an INITIALIZING holder.
            self.size_cache.holder(watcher.namespace, PERSISTENT).reset_if_initializing()
        if not watcher.registered:
            return  # closed before creation completed: already answered, the late result is discarded
        conn = watcher.conn
        if error is None:
            watcher.initializing = False
            conn.retry_backoff.reset()
            self._send_watch_success(watcher, done.result())
        elif isinstance(error, _RETRYABLE) and conn.active:
            self.executor.schedule(lambda: self._retry_init(watcher), conn.retry_backoff.next())
        else:
            conn.reply(ErrorReply(watcher.request_id, ServerError.METADATA_ERROR, str(error)))
            self._unregister(watcher)
            self.lookup.release()

    def _retry_init(self, watcher: Watcher) -> None:
        if watcher.registered:
            self._init_watcher(watcher)

    def _send_watch_success(self, watcher: Watcher, topics: list[str]) -> None:
        digest = hash_topics(topics)
        shown = () if digest == watcher.request_topics_hash else tuple(topics)
        watcher.sending_in_progress = True
        sent = self._watch_send(watcher, WatchSuccess(watcher.request_id, watcher.watcher_id, digest, shown))
        self.lookup.release()  # as soon as the first send attempt has started
        sent.add_done_callback(lambda done: self._watch_success_sent(watcher, done))

    def _watch_success_sent(self, watcher: Watcher, done: VFuture[None]) -> None:
        error = done.exception()
        if error is not None and watcher.registered:
            # A serialization fault or an oversized reply: the success never reached the log.
            watcher.conn.reply(ErrorReply(watcher.request_id, ServerError.METADATA_ERROR, str(error)))
            self._unregister(watcher)
        self._send_next_update(watcher)

    def _send_next_update(self, watcher: Watcher) -> None:
        """Send queued updates one at a time: the next starts when the previous send future ends.
        A send that fails for good (e.g. larger than the direct pool) drops that update."""
        while watcher.registered and watcher.update_queue:
            sent = self._watch_send(watcher, watcher.update_queue.popleft())
            if not sent.done():
                sent.add_done_callback(lambda _done: self._send_next_update(watcher))
                return
        watcher.sending_in_progress = False

    def _watch_send(self, watcher: Watcher, reply: WatchSuccess | WatchUpdate) -> VFuture[None]:
        """Step 5: Timeout or QueueFull retry after the backoff, forever, while active and registered;
        anything else stops quietly.  Completes when the write started or the send stopped."""
        conn = watcher.conn
        if not conn.active or not watcher.registered:
            return completed_future(None)
        refused = False

        def is_cancelled() -> bool:
            return not conn.active or not watcher.registered

        def on_refused(error: BaseException) -> VFuture[None]:
            nonlocal refused
            refused = True
            if isinstance(error, _RETRYABLE) and conn.active and watcher.registered:
                retried: VFuture[None] = VFuture()
                self.executor.schedule(
                    lambda: self._watch_send(watcher, reply).forward_to(retried), conn.retry_backoff.next()
                )
                return retried
            return completed_future(None)

        def reset_on_success(done: VFuture[None]) -> None:
            if not refused and done.exception() is None:
                conn.retry_backoff.reset()

        try:
            sent = acquire_direct_and_write(
                conn, self.limiter, is_cancelled, reply, on_refused, exceptional_release=self._exceptional_release
            )
        except ValueError as e:
            return failed_future(e)
        sent.add_done_callback(reset_on_success)
        return sent


def _get_topics_response(request_id: int, topics: Sequence[str], client_hash: str | None) -> GetTopicsResponse:
    digest = hash_topics(topics)
    if digest == client_hash:
        return GetTopicsResponse(request_id, (), digest, changed=False)
    return GetTopicsResponse(request_id, tuple(topics), digest, changed=True)


_BROKER_ERROR_CODES = {
    "AuthorizationError": ServerError.AUTHORIZATION_ERROR,
    "AuthenticationError": ServerError.AUTHENTICATION_ERROR,
}


class Proxy(_FlowWorld):
    """Proxy get-topics: forwards to a broker, with its own size cache and lookup semaphore."""

    def __init__(
        self,
        limiter: AsyncDualMemoryLimiter,
        executor: Executor,
        *,
        lookup_max: int = 50_000,
        variant: Variant = "current",
    ) -> None:
        super().__init__(limiter, executor, lookup_max=lookup_max, variant=variant)
        self.pending_broker_responses: dict[int, PendingBrokerResponse] = {}
        self._response_ids = itertools.count(1)

    def complete_broker_response(
        self,
        response_id: int,
        topics: Sequence[str] | None = None,
        topics_hash: str | None = None,
        *,
        changed: bool = True,
        error_kind: str | None = None,
        message: str | None = None,
    ) -> None:
        """Deliver the broker's answer: ``topics`` (hash computed when not given) or ``error_kind``
        ("AuthorizationError", "AuthenticationError", anything else maps to ServiceNotReady)."""
        if (topics is None) == (error_kind is None):
            raise ValueError("complete_broker_response needs exactly one of topics or error_kind")
        pending = self.pending_broker_responses.pop(response_id, None)
        if pending is None:
            raise ValueError(f"No pending broker response with id {response_id}")
        if topics is not None:
            digest = hash_topics(topics) if topics_hash is None else topics_hash
            pending.future.complete(BrokerResponse(tuple(topics), digest, changed))
        else:
            kind = str(error_kind)
            pending.future.fail(BrokerRequestError(kind, message if message is not None else kind))

    def is_quiescent(self) -> bool:
        return not self.pending_broker_responses and super().is_quiescent()

    def handle_get_topics(
        self, conn: Connection, request_id: int, namespace: str, mode: str, topics_hash: str | None = None
    ) -> None:
        if not self.lookup.try_acquire():
            conn.reply(
                ErrorReply(
                    request_id,
                    ServerError.SERVICE_NOT_READY,
                    "Too many concurrent lookup and partitionsMetadata requests",
                )
            )
            return
        try:
            self._get_topics(conn, request_id, namespace, mode, topics_hash)
        finally:
            # The proxy holds its lookup permit only while the synchronous handler runs.
            self.lookup.release()

    def _get_topics(
        self, conn: Connection, request_id: int, namespace: str, mode: str, client_hash: str | None
    ) -> None:
        holder = self.size_cache.holder(namespace, mode)
        limiter = self.limiter

        def is_cancelled() -> bool:
            return not conn.active

        def heap_refused(_error: BaseException) -> VFuture[None]:
            holder.reset_if_initializing()
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Failed due to heap memory limit exceeded")
            )
            return completed_future(None)

        upstream_failures: list[BaseException] = []

        def forward(initial: DualPermit) -> VFuture[None]:
            pending = PendingBrokerResponse(
                next(self._response_ids), conn, request_id, namespace, mode, client_hash, VFuture()
            )
            self.pending_broker_responses[pending.response_id] = pending
            pending.future.add_done_callback(lambda f: _note_failure(f, upstream_failures))
            return pending.future.then_compose(lambda response: answered(initial, response))

        def answered(initial: DualPermit, response: BrokerResponse) -> VFuture[None]:
            actual = heap_size(response.topics)
            holder.update_size(actual)
            return limiter.with_updated_permits(
                initial, actual, is_cancelled, lambda _p: send(response), update_refused
            )

        def update_refused(_error: BaseException) -> VFuture[None]:
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Failed due to heap memory limit exceeded")
            )
            return completed_future(None)

        def send(response: BrokerResponse) -> VFuture[None]:
            reply = GetTopicsResponse(request_id, response.topics, response.topics_hash, response.changed)
            return acquire_direct_and_write(
                conn, limiter, is_cancelled, reply, direct_refused, exceptional_release=self._exceptional_release
            )

        def direct_refused(_error: BaseException) -> VFuture[None]:
            conn.reply(
                ErrorReply(request_id, ServerError.TOO_MANY_REQUESTS, "Failed due to direct memory limit exceeded")
            )
            return completed_future(None)

        def finish(done: VFuture[None]) -> None:
            error = done.exception()
            if error is not None:
                holder.reset_if_initializing()
                code = ServerError.SERVICE_NOT_READY
                if isinstance(error, BrokerRequestError):
                    code = _BROKER_ERROR_CODES.get(error.kind, ServerError.SERVICE_NOT_READY)
                conn.reply(ErrorReply(request_id, code, str(error)))

        holder.get_size_async().then_compose(
            lambda estimate: limiter.with_acquired_permits(
                self._clamp(estimate),
                HEAP,
                is_cancelled,
                forward,
                heap_refused,
                exceptional_release=self._initial_release(upstream_failures),
            )
        ).add_done_callback(finish)


# -- configuration (§8) -----------------------------------------------------------------------


@dataclass(frozen=True)
class TopicListConfig:
    """Limiter and lookup settings in the units the reference uses (bytes, ms)."""

    heap_max: int
    heap_queue: int
    heap_timeout_ms: int
    direct_max: int
    direct_queue: int
    direct_timeout_ms: int
    lookup_max: int

    def create_limiter(
        self,
        executor: Executor,
        *,
        heap_recorder: Callable[[int], None] | None = None,
        direct_recorder: Callable[[int], None] | None = None,
    ) -> AsyncDualMemoryLimiter:
        return AsyncDualMemoryLimiter(
            self.heap_max,
            self.heap_queue,
            self.heap_timeout_ms,
            self.direct_max,
            self.direct_queue,
            self.direct_timeout_ms,
            executor=executor,
            heap_recorder=heap_recorder,
            direct_recorder=direct_recorder,
        )


_MB = 1024 * 1024


def from_config(conf: Mapping[str, object], *, proxy: bool = False) -> TopicListConfig:
    """Map ``broker.conf`` (or ``proxy.conf``) names to :class:`TopicListConfig`; unknown names are
    ignored, absent ones take the shipped defaults, and ``0`` MB means an unbounded pool."""

    def number(name: str, default: int) -> int:
        raw = conf.get(name, default)
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ValueError(f"{name}: expected an integer, got {raw!r}") from None

    lookup_name = "maxConcurrentLookupRequests" if proxy else "maxConcurrentLookupRequest"
    return TopicListConfig(
        heap_max=number("maxTopicListInFlightHeapMemSizeMB", 100) * _MB,
        heap_queue=number("maxTopicListInFlightHeapMemSizePermitsAcquireQueueSize", 10_000),
        heap_timeout_ms=number("maxTopicListInFlightHeapMemSizePermitsAcquireTimeoutMillis", 25_000),
        direct_max=number("maxTopicListInFlightDirectMemSizeMB", 100) * _MB,
        direct_queue=number("maxTopicListInFlightDirectMemSizePermitsAcquireQueueSize", 10_000),
        direct_timeout_ms=number("maxTopicListInFlightDirectMemSizePermitsAcquireTimeoutMillis", 25_000),
        lookup_max=number(lookup_name, 50_000),
    )


def _note_failure(future: VFuture[Any], failures: list[BaseException]) -> None:
    error = future.exception()
    if error is not None:
        failures.append(error)
