"""MetadataCacheImpl on top of a metadata store, seen as :class:`~.api.MetadataStoreApi` (spec §2.3, §4.3).

PIP-453 runs every serialize/deserialize/clone of a path on the store's worker ``choose_thread(path)``;
legacy runs them inline (on the caller, or on whichever thread completes the store future).

How a harness reads the state: ``cache.entries`` (path -> future of ``CacheGetResult | None``),
``cache.snapshot()`` (the same, resolved to ``"pending"``, ``"failed"``, ``None`` for a cached absence or
``(value, version)``), and ``serde.records`` of a :class:`RecordingSerde` (the serde log: thread, path,
kind, seq, task id). A refresh that is between its two steps holds ``cache.key_lock(path)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from reference_impl.concurrent.executors import (
    RejectedExecutionError,
    SimFuture,
    SimLock,
    SimThread,
    current_task_id,
    current_thread_name,
    yield_point,
)

# The cache sees its store through api.MetadataStoreApi (as upstream's MetadataCacheImpl sees the
# MetadataStore interface), so store.py can build caches without an import circle. The types that
# moved to api.py are re-exported so `cache.X` still works.
from .api import (
    AlreadyExistsError,
    BadVersionError,
    ContentDeserializationError,
    GetResult,
    MetadataStoreApi,
    MetadataTimeoutError,
    NotFoundError,
    Notification,
    NotificationType,
    Stat,
)
from .api import BackoffConfig as BackoffConfig
from .api import CacheGetResult as CacheGetResult
from .api import Serde as Serde

T = TypeVar("T")


class JsonSerde:
    """Compact, key-sorted JSON (what the spec's worked examples use)."""

    def serialize(self, path: str, value: Any) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()

    def deserialize(self, path: str, data: bytes, stat: Stat) -> Any:
        return json.loads(data)


class SerdeRecord(NamedTuple):
    thread: str
    path: str
    kind: Literal["serialize", "deserialize"]
    seq: int
    task: int | None
    """Id of the executing task (ids grow with submission order), None for the harness."""


class RecordingSerde(Generic[T]):
    """Wraps a serde and logs every call with the thread it ran on (the serde log of MD-I1).

    ``costs.serde_ms`` is charged by the cache around every serde call, so every serde costs the same
    and this wrapper only records.
    """

    def __init__(self, inner: Serde[T]) -> None:
        self.inner = inner
        self.records: list[SerdeRecord] = []

    def _record(self, path: str, kind: Literal["serialize", "deserialize"]) -> None:
        self.records.append(SerdeRecord(current_thread_name(), path, kind, len(self.records), current_task_id()))

    def serialize(self, path: str, value: T) -> bytes:
        self._record(path, "serialize")
        return self.inner.serialize(path, value)

    def deserialize(self, path: str, data: bytes, stat: Stat) -> T:
        self._record(path, "deserialize")
        return self.inner.deserialize(path, data, stat)


class Backoff:
    """Pulsar's ``Backoff`` without jitter: doubling delays, capped, with a mandatory stop."""

    def __init__(self, config: BackoffConfig, now: Callable[[], int]) -> None:
        self.config = config
        self._now = now
        self.next_delay = config.initial_ms
        self.first = 0
        self.mandatory_stop_made = False

    def next(self) -> int:
        c = self.config
        cur = self.next_delay
        if cur < c.max_ms:
            self.next_delay = min(2 * self.next_delay, c.max_ms)
        if not self.mandatory_stop_made:
            now = self._now()
            if cur == c.initial_ms:
                self.first = now
                elapsed = 0
            else:
                elapsed = now - self.first
            if elapsed + cur > c.mandatory_stop_ms:
                cur = max(c.mandatory_stop_ms - elapsed, c.initial_ms)
                self.mandatory_stop_made = True
        return cur


class MetadataCache(Generic[T]):
    """A Caffeine-backed cache of deserialized values, kept fresh by the store's notifications."""

    def __init__(self, store: MetadataStoreApi, serde: Serde[T], retry_backoff: BackoffConfig | None = None) -> None:
        self.store = store
        self.world = store.world
        self.serde = serde
        self.retry_backoff = retry_backoff if retry_backoff is not None else BackoffConfig()
        self.entries: dict[str, SimFuture[CacheGetResult[T] | None]] = {}
        self._name = f"{store.name}-cache{len(store.caches)}"
        self._key_locks: dict[str, SimLock] = {}

    def __repr__(self) -> str:
        return f"MetadataCache({self._name!r})"

    # -- reads --------------------------------------------------------------------------------------
    def get(self, path: str) -> SimFuture[T | None]:
        return self.get_with_stats(path).then_apply(lambda r: None if r is None else r.value)

    def get_with_stats(self, path: str) -> SimFuture[CacheGetResult[T] | None]:
        """The entry's future; on a miss, publish it in the same step, then read into it.

        Publishing first matters with PIP-453's size-triggered flush: ``store.get`` may flush inline, with
        yield points, and a Created/Modified notification delivered meanwhile must find the entry (and
        refresh it), as it would in Caffeine, whose ``computeIfAbsent`` makes it wait for the load.
        Otherwise a read dispatched before a concurrent write would stay cached for good (MD-I7).
        """
        entry = self.entries.get(path)
        if entry is None:
            entry = self.world.future(f"get({path})", self._completer(path))
            self._publish(path, entry)
            self._read(path).add_done_callback(entry._relay)
        return entry

    def get_if_cached(self, path: str) -> T | None:
        entry = self.entries.get(path)
        if entry is None or not entry.done() or entry.failed():
            return None
        r = entry.result()
        return None if r is None else r.value

    def exists(self, path: str) -> SimFuture[bool]:
        return self.store.exists(path)

    # -- writes -------------------------------------------------------------------------------------
    def create(self, path: str, value: T) -> SimFuture[None]:
        """Serialize, ``put(expected=-1)``, then load the entry; completes after the load."""
        result: SimFuture[None] = self.world.future(f"create({path})", self._completer(path))

        def on_put(f: SimFuture[Stat]) -> None:
            err = f.exception()
            if err is not None:
                result.fail(AlreadyExistsError(path) if isinstance(err, BadVersionError) else err)
            else:
                self.get_with_stats(path).add_done_callback(lambda g: _relay_as_none(g, result))

        self._serialized(path, value).then_compose(lambda data: self.store.put(path, data, -1)).add_done_callback(
            on_put
        )
        return result

    def put(self, path: str, value: T) -> SimFuture[None]:
        """Serialize, unconditional put, then refresh on the completing thread."""

        def refreshed(_stat: Stat) -> None:
            self.refresh(path)

        written = self._serialized(path, value).then_compose(lambda data: self.store.put(path, data, None))
        return written.then_apply(refreshed)

    def delete(self, path: str) -> SimFuture[None]:
        """Upstream deletes through the store; the Deleted notification invalidates the entry."""
        return self.store.delete(path)

    def read_modify_update(self, path: str, fn: Callable[[T], T]) -> SimFuture[T]:
        """Clone the cached value, apply ``fn``, CAS it back; retried on BadVersion."""

        def modify(r: CacheGetResult[T] | None) -> SimFuture[T]:
            if r is None:
                return self._failed(path, NotFoundError(path))
            return self._write(path, fn(self._clone(path, r)), r.stat.version)

        return self._execute_with_retry(path, lambda: self._compose_on_worker(path, modify))

    def read_modify_update_or_create(self, path: str, fn: Callable[[T | None], T]) -> SimFuture[T]:
        """Like :meth:`read_modify_update`, but an absent entry gives ``fn(None)`` and ``expected=-1``."""

        def modify(r: CacheGetResult[T] | None) -> SimFuture[T]:
            if r is None:
                return self._write(path, fn(None), -1)
            return self._write(path, fn(self._clone(path, r)), r.stat.version)

        return self._execute_with_retry(path, lambda: self._compose_on_worker(path, modify))

    # -- cache maintenance --------------------------------------------------------------------------
    def key_lock(self, path: str) -> SimLock:
        """Caffeine's per-key lock: a refresh holds it across its two steps, an invalidation takes it."""
        lock = self._key_locks.get(path)
        if lock is None:
            lock = self._key_locks[path] = self.world.lock(f"{self._name}:{path}")
        return lock

    def refresh(self, path: str) -> None:
        """``computeIfPresent``: (1) start a read, yield, (2) publish it, all under the key lock, so readers
        on other threads can run between the steps and mutations of the same key cannot."""
        if path not in self.entries:
            return
        lock = self.key_lock(path)
        lock.acquire()
        if path in self.entries:  # it may have been invalidated while we waited for the lock
            fresh = self._read(path)
            yield_point(f"refresh({path})")
            if path in self.entries:
                self._publish(path, fresh)
        lock.release()

    def invalidate(self, path: str) -> None:
        if path not in self.entries:
            return
        lock = self.key_lock(path)
        lock.acquire()
        self.entries.pop(path, None)
        lock.release()

    def accept(self, n: Notification) -> None:
        """Created/Modified refresh the entry, Deleted invalidates it; ChildrenChanged is ignored."""
        if n.type in (NotificationType.CREATED, NotificationType.MODIFIED):
            self.refresh(n.path)
        elif n.type is NotificationType.DELETED:
            self.invalidate(n.path)

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path, f in self.entries.items():
            if not f.done():
                out[path] = "pending"
            elif f.failed():
                out[path] = "failed"
            else:
                r = f.result()
                out[path] = None if r is None else (r.value, r.stat.version)
        return out

    # -- internals ----------------------------------------------------------------------------------
    @property
    def pip453(self) -> bool:
        return self.store.worker is not None

    def _worker(self, path: str) -> SimThread:
        assert self.store.worker is not None
        return self.store.worker.choose_thread(path)

    def _completer(self, path: str) -> str:
        """Who completes this cache's composite futures: the path's worker, legacy ``<N>``."""
        return self._worker(path).name if self.pip453 else self.store.op_completer

    def _failed(self, path: str, error: Exception) -> SimFuture[Any]:
        f = self.world.future(path, current_thread_name())
        f.fail(error)
        return f

    def _serialize(self, path: str, value: T) -> bytes:
        self.world.charge(self.store.costs.serde_ms)
        return self.serde.serialize(path, value)

    def _deserialize(self, path: str, data: bytes, stat: Stat) -> T:
        self.world.charge(self.store.costs.serde_ms)
        return self.serde.deserialize(path, data, stat)

    def _clone(self, path: str, r: CacheGetResult[T]) -> T:
        """Copy-on-write protection of the cached object: ``deserialize(serialize(cur))``."""
        return self._deserialize(path, self._serialize(path, r.value), r.stat)

    def _read(self, path: str) -> SimFuture[CacheGetResult[T] | None]:
        """``store.get``, then deserialize on the path's worker (legacy: inline)."""

        def decode(res: GetResult | None) -> SimFuture[CacheGetResult[T] | None]:
            out: SimFuture[CacheGetResult[T] | None] = self.world.future(f"decode({path})", current_thread_name())
            if res is None:
                out.complete(None)
                return out
            try:
                value = self._deserialize(path, res.value, res.stat)
            except Exception as e:
                err = ContentDeserializationError(f"{path}: {e}")
                err.__cause__ = e
                out.fail(err)
                return out
            out.complete(CacheGetResult(value, res.stat))
            return out

        src = self.store.get(path)
        if not self.pip453:
            return src.then_compose(decode)
        return src.then_compose_async(decode, self._worker(path))

    def _publish(self, path: str, f: SimFuture[CacheGetResult[T] | None]) -> None:
        self.entries[path] = f
        f.add_done_callback(lambda g: self._drop_if_failed(path, g))

    def _drop_if_failed(self, path: str, f: SimFuture[CacheGetResult[T] | None]) -> None:
        """Caffeine removes a failed future with ``remove(key, future)`` under the key lock.

        Only a refresh holds that lock across a step boundary, and it ends by replacing ``f``; so when
        another thread holds it, the upstream remove would wait and then find nothing to do. We skip it:
        same cache state, no wait. (The wait could otherwise close a cycle at close time: a refresh whose
        read overflows the queue waits for the flush lock, while the flusher, failing its batch because
        the store closed, waits for the key lock.)
        """
        if f.failed() and self.entries.get(path) is f and self.key_lock(path).holder in (None, current_thread_name()):
            del self.entries[path]

    def _serialized(self, path: str, value: T) -> SimFuture[bytes]:
        """Serialize on the path's worker (legacy: on the calling thread)."""
        out: SimFuture[bytes]
        if not self.pip453:
            out = self.world.future(f"serialize({path})", current_thread_name())
            _settle_with(out, lambda: self._serialize(path, value))
            return out
        out = self.world.future(f"serialize({path})", self._worker(path).name)
        assert self.store.worker is not None
        try:
            self.store.worker.execute_ordered(
                path, lambda: _settle_with(out, lambda: self._serialize(path, value)), label=f"serialize({path})"
            )
        except RejectedExecutionError as e:
            out.fail(e)
        return out

    def _compose_on_worker(self, path: str, fn: Callable[[CacheGetResult[T] | None], SimFuture[T]]) -> SimFuture[T]:
        """One read-modify-update attempt: look up, then ``fn`` on the worker (legacy: inline)."""
        src = self.get_with_stats(path)
        if not self.pip453:
            return src.then_compose(fn)
        return src.then_compose_async(fn, self._worker(path))

    def _write(self, path: str, new: T, expected: int) -> SimFuture[T]:
        """Serialize ``new``, CAS-put it, refresh on the completing thread, and yield ``new``."""
        data = self._serialize(path, new)

        def refreshed(_stat: Stat) -> T:
            self.refresh(path)
            return new

        return self.store.put(path, data, expected).then_apply(refreshed)

    def _execute_with_retry(self, path: str, attempt: Callable[[], SimFuture[T]]) -> SimFuture[T]:
        """Retry on BadVersion after invalidating the entry, with backoff on the scheduler."""
        result: SimFuture[T] = self.world.future(f"read_modify_update({path})", self._completer(path))
        backoff = Backoff(self.retry_backoff, lambda: self.world.now)

        def run() -> None:
            attempt().add_done_callback(on_done)

        def on_done(f: SimFuture[T]) -> None:
            err = f.exception()
            if err is None:
                result.complete(f.result())
                return
            if not isinstance(err, BadVersionError):
                result.fail(err)
                return
            self.invalidate(path)
            if backoff.mandatory_stop_made:
                # Upstream fails with the BadVersion itself if no backoff was ever taken; that cannot
                # coincide with a made stop, which only next() sets.
                result.fail(MetadataTimeoutError(f"read_modify_update({path}) gave up after the mandatory stop"))
                return
            try:
                self.store.scheduler.schedule(run, backoff.next(), label=f"retry:{path}")
            except RejectedExecutionError as e:
                result.fail(e)

        run()
        return result


def _settle_with(out: SimFuture[T], fn: Callable[[], T]) -> None:
    try:
        value = fn()
    except Exception as e:
        out.fail(e)
        return
    out.complete(value)


def _relay_as_none(src: SimFuture[Any], dst: SimFuture[None]) -> None:
    err = src.exception()
    if err is not None:
        dst.fail(err)
    else:
        dst.complete(None)
