"""The metadata store: ops, batching, flush, backends, notifications and close (spec §2.2, §3, §4.1-§4.5).

``MetadataStore(..., threading="pip453")`` is the current model: an ``<N>-event`` thread completes ops and
fans out notifications, ``<N>-scheduler`` runs delayed retries, ``<N>-batch-flusher`` runs the periodic
flush under a lock, and ``<N>-worker-OrderedExecutor-<i>-0`` threads do the cache's serde.
``threading="legacy"`` is pre-PIP-453: one scheduled thread ``<N>`` does all of it, the cache does serde
inline, and size-triggered flushes are tasks guarded by a ``flush_in_progress`` flag.

How a harness reads the state: ``store.closed``, ``store.read_q`` / ``store.write_q`` (queued ops),
``store.ops`` (every op in creation order, with ``dispatched_at``, ``completed_seq`` and outcome, which
gives per-path issue vs completion order), ``store.queue_waits``, ``store.flush_lock`` (its ``holder``) or
``store.flush_in_progress``, ``store.caches``, ``backend.tree.data``; and on the world, ``flush_log``
(:class:`FlushRecord`) and ``notification_log`` (:class:`NotificationRecord`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, cast

from reference_impl.concurrent.executors import (
    OrderedExecutor,
    RejectedExecutionError,
    ScheduledSimThread,
    SimFuture,
    SimLock,
    SimThread,
    Timer,
    World,
    current_thread_name,
    yield_point,
)

# The errors and values moved to api.py (shared with cache.py); re-exported so `store.X` still works.
from .api import AlreadyClosedError as AlreadyClosedError
from .api import AlreadyExistsError as AlreadyExistsError
from .api import BackoffConfig, Serde
from .api import BadVersionError as BadVersionError
from .api import ContentDeserializationError as ContentDeserializationError
from .api import Costs as Costs
from .api import GetResult as GetResult
from .api import InvalidPathError as InvalidPathError
from .api import MetadataStoreError as MetadataStoreError
from .api import MetadataTimeoutError as MetadataTimeoutError
from .api import NotFoundError as NotFoundError
from .api import Notification as Notification
from .api import NotificationType as NotificationType
from .api import Stat as Stat
from .cache import MetadataCache

CLOSING_MESSAGE = "Metadata store is getting closed"
CONNECTION_LOSS_RETRY_MS = 100


# --------------------------------------------------------------------------------------------------
# Ops and records (the errors and the shared values are in api.py)
# --------------------------------------------------------------------------------------------------


class OpType(Enum):
    GET = "get"
    EXISTS = "exists"
    GET_CHILDREN = "get_children"
    PUT = "put"
    DELETE = "delete"

    @property
    def is_write(self) -> bool:
        return self in (OpType.PUT, OpType.DELETE)


def utf16_len(s: str) -> int:
    """Java ``String.length()``: UTF-16 code units."""
    return len(s.encode("utf-16-le")) // 2


def parent(path: str) -> str | None:
    """``p[:p.rfind('/')]``, or None when that index is <= 0 (no notification for the root)."""
    i = path.rfind("/")
    return path[:i] if i > 0 else None


def is_valid_path(path: str) -> bool:
    """``"/"``, or non-blank, starting with ``/`` and not ending with ``/`` (a path that starts with
    ``/`` is never blank, so the blank check needs no code of its own)."""
    return path == "/" or (path.startswith("/") and not path.endswith("/"))


@dataclass(eq=False)
class MetadataOp:
    """One queued/dispatched operation (spec §3), plus observation stamps for the harness."""

    id: int
    type: OpType
    path: str
    data: bytes | None
    expected_version: int | None
    created_at: int
    future: SimFuture[Any]
    issued_seq: int
    dispatched_at: int | None = None
    completed_seq: int | None = None
    error: BaseException | None = None

    @property
    def size(self) -> int:
        """``len(path)`` in UTF-16 code units, plus ``len(data)`` for a PUT."""
        return utf16_len(self.path) + (len(self.data) if self.type is OpType.PUT and self.data else 0)


@dataclass(eq=False)
class FlushRecord:
    """One flush: who ran it and when, and the batches it dispatched as ``(queue, op ids)``.

    ``start``/``end`` are virtual ms (lock acquired/released; legacy: task start/end); ``start_seq`` and
    ``end_seq`` order flushes that share an instant. ``end`` is None while the flush is in progress.
    """

    flush_id: int
    store: str
    thread: str
    periodic: bool
    start: int
    start_seq: int
    end: int | None = None
    end_seq: int | None = None
    batches: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)

    @property
    def hold(self) -> int | None:
        """Lock hold time (legacy: task duration), once finished."""
        return None if self.end is None else self.end - self.start


@dataclass(eq=False)
class NotificationRecord:
    """A notification: arrival (``received_notification``), then delivery on the event thread.

    ``dropped`` is set when the event thread had shut down and the delivery task was rejected.
    """

    store: str
    arrival_seq: int
    notification: Notification
    thread: str | None = None
    start_seq: int | None = None
    end_seq: int | None = None
    dropped: bool = False


# --------------------------------------------------------------------------------------------------
# Configuration (§8)
# --------------------------------------------------------------------------------------------------

BROKER_CONF_KEYS: Mapping[str, str] = {
    "metadataStoreSerDesThreads": "num_serdes_threads",
    "metadataStoreBatchingEnabled": "batching_enabled",
    "metadataStoreBatchingMaxDelayMillis": "max_delay_ms",
    "metadataStoreBatchingMaxOperations": "max_operations",
    "metadataStoreBatchingMaxSizeKb": "max_size_kb",
}
"""broker.conf / ServiceConfiguration name -> model parameter."""


@dataclass(frozen=True)
class MetadataStoreConfig:
    """The store's knobs with broker defaults; construction validates them (ValueError)."""

    num_serdes_threads: int = 1
    batching_enabled: bool = True
    max_delay_ms: int = 5
    max_operations: int = 1000
    max_size_kb: int = 128

    def __post_init__(self) -> None:
        if self.num_serdes_threads < 1:
            raise ValueError("num_serdes_threads must be >= 1")
        if self.max_operations < 1:
            raise ValueError("max_operations must be >= 1")
        if self.max_size_kb < 1:
            raise ValueError("max_size_kb must be >= 1")
        if self.max_delay_ms < 0:
            raise ValueError("max_delay_ms must be >= 0")
        if self.batching_enabled and self.max_delay_ms == 0:
            raise ValueError("max_delay_ms must be > 0 when batching is enabled (a zero period cannot run)")

    @classmethod
    def from_broker_conf(cls, props: Mapping[str, str]) -> MetadataStoreConfig:
        """Read the broker.conf keys of :data:`BROKER_CONF_KEYS`; other keys are ignored.

        Booleans parse like Java's ``Boolean.parseBoolean`` (only a case-insensitive "true" is true).
        """
        kwargs: dict[str, Any] = {}
        for key, param in BROKER_CONF_KEYS.items():
            if key in props:
                raw = props[key].strip()
                kwargs[param] = raw.lower() == "true" if param == "batching_enabled" else int(raw)
        return cls(**kwargs)


# --------------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------------

_Outcome = tuple[Any, MetadataStoreError | None]


class DataTree:
    """The flat data tree ``path -> (bytes, version)``, shared by every store registered on it."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[bytes, int]] = {}
        self.stores: list[MetadataStore] = []

    def children(self, path: str) -> list[str]:
        """Sorted last segments of the nodes directly under ``path`` (for ``/``: the top-level nodes)."""
        prefix = "/" if path == "/" else path + "/"
        return sorted(p[len(prefix) :] for p in self.data if p.startswith(prefix) and "/" not in p[len(prefix) :])

    def apply(self, op: MetadataOp, every_ancestor: bool) -> tuple[_Outcome, list[Notification]]:
        """Apply one op as if run alone; return its outcome and the notifications it causes.

        ``every_ancestor``: ChildrenChanged for every ancestor (memory store) or only the parent (zk).
        """
        path, node, exp = op.path, self.data.get(op.path), op.expected_version
        if op.type is OpType.GET:
            return (None if node is None else GetResult(node[0], Stat(path, node[1], node[1] == 0)), None), []
        if op.type is OpType.EXISTS:
            return (node is not None, None), []
        if op.type is OpType.GET_CHILDREN:
            return (self.children(path), None), []
        if op.type is OpType.PUT:
            if exp == -1 and node is not None:
                return (None, BadVersionError(f"{path} already exists")), []
            if exp is not None and exp >= 0 and (node is None or node[1] != exp):
                return (None, BadVersionError(f"{path}: expected version {exp}")), []
            version = 0 if node is None else node[1] + 1
            assert op.data is not None
            self.data[path] = (op.data, version)
            kind = NotificationType.CREATED if node is None else NotificationType.MODIFIED
            notes = [Notification(kind, path)]
            if node is None:
                notes += self._children_changed(path, every_ancestor)
            return (Stat(path, version, version == 0), None), notes
        if node is None:
            return (None, NotFoundError(path)), []
        if exp is not None and exp != node[1]:
            return (None, BadVersionError(f"{path}: expected version {exp}")), []
        del self.data[path]
        return (None, None), [
            Notification(NotificationType.DELETED, path),
            *self._children_changed(path, every_ancestor),
        ]

    @staticmethod
    def _children_changed(path: str, every_ancestor: bool) -> list[Notification]:
        out = []
        p = parent(path)
        while p is not None:
            out.append(Notification(NotificationType.CHILDREN_CHANGED, p))
            p = parent(p) if every_ancestor else None
        return out


class ZkBackend:
    """Batched backend: batches run on ``<N>-backend``, completions are posted to ``<N>-event``."""

    def __init__(self, world: World, tree: DataTree | None = None) -> None:
        self.world = world
        self.tree = tree if tree is not None else DataTree()
        self.faults: deque[str] = deque()

    def inject(self, kind: Literal["connection_loss", "error"], count: int = 1) -> None:
        """Make the next ``count`` batches (including individual resends) fail as a whole."""
        if kind not in ("connection_loss", "error"):
            raise ValueError(f"unknown fault {kind!r}")
        self.faults.extend([kind] * count)

    def process(self, store: MetadataStore, batch: list[MetadataOp]) -> None:
        """The backend task for one batch (runs on ``store``'s ``<N>-backend``)."""
        fault = self.faults.popleft() if self.faults else None
        if fault == "connection_loss":
            # Upstream: one op may be what breaks the connection, so each is retried on its own.
            def resend() -> None:
                for op in batch:
                    store._send([op])

            try:
                store.scheduler.schedule(resend, CONNECTION_LOSS_RETRY_MS, label="connection-loss-retry")
            except RejectedExecutionError as e:
                for op in batch:
                    op.future.fail(e)
            return
        if fault == "error":
            for op in batch:
                op.future.fail(MetadataStoreError("injected backend error"))
            return
        outcomes = []
        notes: list[Notification] = []
        for op in batch:
            outcome, ns = self.tree.apply(op, every_ancestor=False)
            outcomes.append(outcome)
            notes += ns
        # ZooKeeper delivers a watch event before the response of the change that caused it.
        for st in self.tree.stores:
            for n in notes:
                st.received_notification(n)

        def complete() -> None:
            for op, (value, error) in zip(batch, outcomes, strict=True):
                _settle(op.future, value, error)

        try:
            store.event_executor.execute(
                complete, cost=store.costs.completion_ms, label=f"complete{[op.id for op in batch]}"
            )
        except RejectedExecutionError as e:
            for op in batch:
                op.future.fail(e)


class MemoryBackend:
    """LocalMemoryMetadataStore: unbatched, applied synchronously on the calling thread."""

    def __init__(self, world: World, tree: DataTree | None = None) -> None:
        self.world = world
        self.tree = tree if tree is not None else DataTree()

    def apply_now(self, op: MetadataOp) -> None:
        (value, error), notes = self.tree.apply(op, every_ancestor=True)
        for st in self.tree.stores:
            for n in notes:
                st.received_notification(n)
        _settle(op.future, value, error)


def _settle(future: SimFuture[Any], value: Any, error: BaseException | None) -> None:
    if error is not None:
        future.fail(error)
    else:
        future.complete(value)


# --------------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------------


class MetadataStore:
    """AbstractMetadataStore + AbstractBatchedMetadataStore (ZK or local-memory flavour)."""

    def __init__(
        self,
        world: World,
        name: str = "metadata-store",
        *,
        backend: ZkBackend | MemoryBackend,
        threading: Literal["pip453", "legacy"] = "pip453",
        batching_enabled: bool = True,
        max_delay_ms: int = 5,
        max_operations: int = 1000,
        max_size_kb: int = 128,
        num_serdes_threads: int = 1,
        flush_schedule: Literal["fixed_rate", "fixed_delay"] = "fixed_rate",
        costs: Costs | None = None,
    ) -> None:
        if threading not in ("pip453", "legacy"):
            raise ValueError(f"unknown threading {threading!r}")
        if flush_schedule not in ("fixed_rate", "fixed_delay"):
            raise ValueError(f"unknown flush_schedule {flush_schedule!r}")
        self.config = MetadataStoreConfig(
            num_serdes_threads, batching_enabled, max_delay_ms, max_operations, max_size_kb
        )
        self.world = world
        self.name = name
        self.backend = backend
        self.threading = threading
        self.flush_schedule = flush_schedule
        self.costs = costs if costs is not None else Costs()
        # The memory store has no batching and no flusher, whatever the setting says.
        self.batching = batching_enabled and isinstance(backend, ZkBackend)
        self.closed = False
        self.read_q: deque[MetadataOp] = deque()
        self.write_q: deque[MetadataOp] = deque()
        self.ops: list[MetadataOp] = []
        self.queue_waits: list[tuple[int, int]] = []
        self.listeners: list[Callable[[Notification], None]] = [self._forward_to_caches]
        self.listener_errors: list[tuple[Notification, Exception]] = []
        self.caches: list[MetadataCache[Any]] = []
        self.flush_in_progress = False
        self.flush_lock: SimLock | None = None
        self.flusher: ScheduledSimThread | None = None
        self.flush_handle: Timer | None = None

        self.event_executor: SimThread
        self.scheduler: ScheduledSimThread
        self.worker: OrderedExecutor | None
        if threading == "pip453":
            self.event_executor = world.thread(f"{name}-event")
            self.scheduler = world.scheduled_thread(f"{name}-scheduler")
            self.worker = world.ordered_executor(f"{name}-worker", num_serdes_threads)
            if self.batching:
                self.flusher = world.scheduled_thread(f"{name}-batch-flusher")
                self.flush_lock = world.lock(f"{name}-flush-lock")
            flush_thread = self.flusher
        else:
            main = world.scheduled_thread(name)
            self.event_executor = self.scheduler = flush_thread = main
            self.worker = None
        self.backend_thread = world.thread(f"{name}-backend") if isinstance(backend, ZkBackend) else None
        backend.tree.stores.append(self)

        if self.batching:
            assert flush_thread is not None
            schedule = (
                flush_thread.schedule_at_fixed_rate
                if flush_schedule == "fixed_rate"
                else flush_thread.schedule_with_fixed_delay
            )
            self.flush_handle = schedule(
                lambda: self.flush(periodic=True),
                max_delay_ms,
                max_delay_ms,
                idle=lambda: not self.read_q and not self.write_q,
                label=f"{name}:periodic-flush",
            )

    def __repr__(self) -> str:
        return f"MetadataStore({self.name!r}, {self.threading})"

    # -- public ops ---------------------------------------------------------------------------------
    def get(self, path: str) -> SimFuture[GetResult | None]:
        return self._submit(OpType.GET, path)

    def exists(self, path: str) -> SimFuture[bool]:
        return self._submit(OpType.EXISTS, path)

    def get_children(self, path: str) -> SimFuture[list[str]]:
        return self._submit(OpType.GET_CHILDREN, path)

    def delete(self, path: str, expected_version: int | None = None) -> SimFuture[None]:
        return self._submit(OpType.DELETE, path, None, expected_version)

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> SimFuture[Stat]:
        return self._submit(OpType.PUT, path, data, expected_version)

    def register_listener(self, fn: Callable[[Notification], None]) -> None:
        self.listeners.append(fn)

    def metadata_cache(self, serde: Serde[Any], retry_backoff: BackoffConfig | None = None) -> MetadataCache[Any]:
        """A new MetadataCache on this store; it receives notifications after older caches."""
        cache: MetadataCache[Any] = MetadataCache(self, serde, retry_backoff)
        self.caches.append(cache)
        return cache

    @property
    def op_completer(self) -> str:
        """The thread that completes op futures of the zk backend (``<N>-event``, legacy ``<N>``)."""
        return self.event_executor.name

    # -- submission ---------------------------------------------------------------------------------
    def _failed(self, label: str, error: MetadataStoreError) -> SimFuture[Any]:
        f = self.world.future(label, current_thread_name())
        f.fail(error)
        return f

    def _submit(
        self, kind: OpType, path: str, data: bytes | None = None, expected: int | None = None
    ) -> SimFuture[Any]:
        label = f"{kind.value}({path})"
        if self.closed:
            return self._failed(label, AlreadyClosedError(f"{self.name} is closed"))
        if not is_valid_path(path):
            return self._failed(label, InvalidPathError(repr(path)))
        memory = isinstance(self.backend, MemoryBackend)
        future = self.world.future(label, current_thread_name() if memory else self.op_completer)
        op = MetadataOp(len(self.ops), kind, path, data, expected, self.world.now, future, self.world._next_seq())
        self.ops.append(op)
        self.world.register_op(future)
        future.add_done_callback(lambda f: self._stamp(op, f))
        if isinstance(self.backend, MemoryBackend):
            self.backend.apply_now(op)
        elif self.batching:
            self._enqueue(op)
        else:
            self._dispatch([op])
        return future

    def _stamp(self, op: MetadataOp, f: SimFuture[Any]) -> None:
        op.completed_seq = self.world._next_seq()
        op.error = f.exception()

    def _enqueue(self, op: MetadataOp) -> None:
        # The spec's "a closed store fails it" cannot happen here: validation ran in the same step.
        q = self.write_q if op.type.is_write else self.read_q
        q.append(op)
        if len(q) > self.config.max_operations:
            if self.threading == "pip453":
                self.flush()
            elif not self.flush_in_progress:
                self.flush_in_progress = True
                self.scheduler.execute(self.flush, label=f"{self.name}:size-flush")

    # -- flush --------------------------------------------------------------------------------------
    def next_batch(self, q: deque[MetadataOp]) -> list[MetadataOp]:
        """DefaultMetadataStoreBatchStrategy: up to ``max_operations`` ops and ``max_size_kb`` of writes;
        reads add no size, and a single oversized op forms its own batch."""
        size, ops = 0, list[MetadataOp]()
        limit = self.config.max_size_kb * 1024
        while q:
            op = q[0]
            if op.type.is_write:
                size += op.size
            if ops and size > limit:
                break
            ops.append(q.popleft())
            if len(ops) == self.config.max_operations:
                break
        return ops

    def flush(self, periodic: bool = False) -> None:
        """Drain ``read_q`` then ``write_q`` batch by batch (PIP-453: under the flush lock)."""
        if self.flush_lock is not None:
            self.flush_lock.acquire()
        w = self.world
        rec = FlushRecord(len(w.flush_log), self.name, current_thread_name(), periodic, w.now, w._next_seq())
        w.flush_log.append(rec)
        for queue_name, q in (("read", self.read_q), ("write", self.write_q)):
            while batch := self.next_batch(q):
                rec.batches.append((queue_name, tuple(op.id for op in batch)))
                yield_point("flush:next_batch")
                self._dispatch(batch)
                yield_point("flush:dispatched")
        rec.end, rec.end_seq = w.now, w._next_seq()
        if self.flush_lock is not None:
            self.flush_lock.release()
        else:
            self.flush_in_progress = False

    def _fail_if_closed(self, batch: list[MetadataOp]) -> bool:
        if self.closed:
            for op in batch:
                op.future.fail(AlreadyClosedError(f"{self.name} is closed"))
        return self.closed

    def _dispatch(self, batch: list[MetadataOp]) -> None:
        if self._fail_if_closed(batch):
            return
        for op in batch:
            op.dispatched_at = self.world.now
            self.queue_waits.append((op.id, self.world.now - op.created_at))
        self.world.charge(self.costs.flush_batch_ms)
        self._to_backend(batch)

    def _send(self, batch: list[MetadataOp]) -> None:
        """Resend without recording a queue wait again (connection-loss retry)."""
        if not self._fail_if_closed(batch):
            self._to_backend(batch)

    def _to_backend(self, batch: list[MetadataOp]) -> None:
        backend = cast(ZkBackend, self.backend)
        assert self.backend_thread is not None
        self.backend_thread.execute(
            lambda: backend.process(self, batch),
            cost=self.costs.backend_ms,
            label=f"backend{[op.id for op in batch]}",
        )

    # -- notifications ------------------------------------------------------------------------------
    def received_notification(self, n: Notification) -> None:
        """Queue delivery of ``n`` to every listener, in registration order, on the event thread."""
        w = self.world
        rec = NotificationRecord(self.name, w._next_seq(), n)
        w.notification_log.append(rec)

        def deliver() -> None:
            rec.thread, rec.start_seq = current_thread_name(), w._next_seq()
            for listener in list(self.listeners):
                try:
                    listener(n)
                except Exception as e:  # logged and skipped, as upstream does
                    self.listener_errors.append((n, e))
            rec.end_seq = w._next_seq()

        try:
            self.event_executor.execute(
                deliver, cost=self.costs.notification_ms, label=f"notify:{n.type.value}({n.path})"
            )
        except RejectedExecutionError:
            rec.dropped = True

    def _forward_to_caches(self, n: Notification) -> None:
        if n.type is not NotificationType.CHILDREN_CHANGED:
            for cache in self.caches:
                cache.accept(n)

    # -- close --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Idempotent: fail queued ops, stop the flush, then shut down workers, scheduler, event thread."""
        if self.closed:
            return
        self.closed = True
        if self.batching:
            for q in (self.read_q, self.write_q):
                while q:
                    q.popleft().future.fail(AlreadyClosedError(CLOSING_MESSAGE))
            assert self.flush_handle is not None
            self.flush_handle.cancel()
            if self.flusher is not None:
                self.flusher.shutdown()
        if self.worker is not None:
            self.worker.shutdown()
        self.scheduler.shutdown()
        self.event_executor.shutdown()
