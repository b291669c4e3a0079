"""MetadataCache semantics (spec §4.3) and the worked examples F1 and F7 (§7)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from reference_impl.metadata import (
    AlreadyClosedError,
    AlreadyExistsError,
    Backoff,
    BackoffConfig,
    BadVersionError,
    ContentDeserializationError,
    Costs,
    JsonSerde,
    MemoryBackend,
    MetadataCache,
    MetadataStore,
    MetadataTimeoutError,
    NotFoundError,
    Notification,
    NotificationType,
    RecordingSerde,
    RejectedExecutionError,
    SimFuture,
    Stat,
    World,
    ZkBackend,
    current_thread_name,
)

from .checks import md_i1, md_i2, md_i3, md_i4, md_i5, md_i7


def settle(world: World, f: SimFuture[Any]) -> Any:
    world.run(until=f.done)
    return f.result()


def memory_cache(world: World, n: int = 1, **kw: Any) -> tuple[MetadataStore, MetadataCache[Any], RecordingSerde[Any]]:
    store = MetadataStore(world, backend=MemoryBackend(world), num_serdes_threads=n, **kw)
    serde: RecordingSerde[Any] = RecordingSerde(JsonSerde())
    return store, store.metadata_cache(serde), serde


def zk_cache(world: World, **kw: Any) -> tuple[MetadataStore, MetadataCache[Any], RecordingSerde[Any]]:
    store = MetadataStore(world, "N", backend=ZkBackend(world), **kw)
    serde: RecordingSerde[Any] = RecordingSerde(JsonSerde())
    return store, store.metadata_cache(serde), serde


# -- §7 worked examples ------------------------------------------------------------------------------


def test_f7_memory_backend_five_workers(world: World) -> None:
    store, cache, serde = memory_cache(world, n=5)
    w2 = "metadata-store-worker-OrderedExecutor-2-0"

    def run_checked(f: SimFuture[Any]) -> Any:
        """Step fifo, checking MD-I1..I5 after every step and MD-I7 at quiescence."""
        while not world.quiescent():
            world.step(world.choices()[0])
            assert md_i1(store, serde) + md_i2(world, store) + md_i3(world, store) + md_i4(world) == []
            assert md_i5(world) == []
        assert md_i7(store, cache) == []
        return f.result()

    assert store.worker is not None and store.worker.choose_thread("/key1").name == w2
    assert run_checked(cache.create("/key1", {"a": "a", "b": 1})) is None
    assert store.backend.tree.data["/key1"] == (b'{"a":"a","b":1}', 0)
    assert [(r.kind, r.thread) for r in serde.records] == [("serialize", w2), ("deserialize", w2), ("deserialize", w2)]
    d1, d2 = serde.records[1].task, serde.records[2].task
    assert d1 is not None and d2 is not None and d1 < d2  # D1 (the load) was submitted before D2 (refresh)

    result = run_checked(cache.read_modify_update("/key1", lambda v: {"a": v["a"], "b": v["b"] + 1}))
    assert result == {"a": "a", "b": 2}
    assert [r.kind for r in serde.records[3:]] == [
        "serialize",  # clone: serialize
        "deserialize",  # clone: deserialize
        "serialize",  # the new value
        "deserialize",  # D3, the rmu's refresh
        "deserialize",  # D4, the Modified notification's refresh
    ]

    got = run_checked(cache.get_with_stats("/key1"))
    assert (got.value, got.stat.version) == ({"a": "a", "b": 2}, 1)

    before = len(serde.records)
    missing = cache.read_modify_update("/missing", lambda v: v)
    world.run()
    assert isinstance(missing.exception(), NotFoundError)
    assert cache.snapshot()["/missing"] is None  # stays cached as absent
    assert len(serde.records) == before

    key1 = [r for r in serde.records if r.path == "/key1"]
    assert sum(r.kind == "serialize" for r in key1) == 3
    assert sum(r.kind == "deserialize" for r in key1) == 5
    assert {r.thread for r in key1} == {w2}
    assert [r.task for r in key1] == sorted(r.task for r in key1 if r.task is not None)
    assert store.backend.tree.data == {"/key1": (b'{"a":"a","b":2}', 1)}
    assert world.uncaught == [] and store.listener_errors == []


def test_f1_serdes_threads_five(world: World) -> None:
    """metadataStoreSerDesThreads=5; both prefixes share the store (local and configuration URLs equal)."""
    store = MetadataStore(world, "metadata-store", backend=MemoryBackend(world), num_serdes_threads=5)
    iterations = {}
    all_threads: set[str] = set()
    for prefix in ("/test-local/", "/test-config/"):
        serde: RecordingSerde[Any] = RecordingSerde(JsonSerde())
        cache = store.metadata_cache(serde)
        i = 0
        while i < 100 and len({r.thread for r in serde.records if r.kind == "serialize"}) < 5:
            path = f"{prefix}{i}"
            assert settle(world, cache.create(path, f"value-{i}")) is None
            world.run()
            assert settle(world, cache.get(path)) == f"value-{i}"
            assert settle(world, cache.read_modify_update(path, lambda s: s + "-updated")) == f"value-{i}-updated"
            world.run()
            i += 1
        iterations[prefix] = i
        by_kind: dict[str, dict[str, set[str]]] = {"serialize": defaultdict(set), "deserialize": defaultdict(set)}
        for r in serde.records:
            by_kind[r.kind][r.thread].add(r.path)
        assert by_kind["serialize"] == by_kind["deserialize"]
        threads_of_path: dict[str, set[str]] = defaultdict(set)
        for r in serde.records:
            threads_of_path[r.path].add(r.thread)
        assert all(len(t) == 1 for t in threads_of_path.values())  # no path under two threads
        all_threads |= {r.thread for r in serde.records}
    assert iterations == {"/test-local/": 9, "/test-config/": 8}
    assert all_threads == {f"metadata-store-worker-OrderedExecutor-{i}-0" for i in range(5)}


# -- get / read --------------------------------------------------------------------------------------


def test_get_miss_inserts_in_the_same_step_and_hit_reuses_the_entry(world: World) -> None:
    store, cache, _ = zk_cache(world)
    client = world.thread("client")
    seen: list[Any] = []
    client.execute(lambda: seen.append(cache.get("/a")))
    world.step(("run", client))
    assert list(cache.entries) == ["/a"] and cache.snapshot() == {"/a": "pending"}
    entry = cache.entries["/a"]
    assert cache.get_with_stats("/a") is entry
    cache.get("/a")
    assert len(store.ops) == 1  # one read only
    assert entry.completer == "N-worker-OrderedExecutor-0-0"
    world.run()
    assert seen[0].result() is None and cache.snapshot() == {"/a": None}


def test_deserialization_failure_fails_and_removes_the_entry(world: World) -> None:
    store, cache, _ = zk_cache(world)
    store.backend.tree.data["/bad"] = (b"{not json", 0)
    f = cache.get("/bad")
    world.run()
    assert isinstance(f.exception(), ContentDeserializationError)
    assert "/bad" not in cache.entries
    assert cache.get_if_cached("/bad") is None


def test_get_if_cached(world: World) -> None:
    store, cache, _ = memory_cache(world)
    store.backend.tree.data["/a"] = (b"1", 0)
    assert cache.get_if_cached("/a") is None
    cache.get("/a")
    assert cache.get_if_cached("/a") is None  # still deserializing on the worker
    world.run()
    assert cache.get_if_cached("/a") == 1


def test_legacy_deserializes_on_the_completing_thread_and_serializes_on_the_caller(world: World) -> None:
    store, cache, serde = zk_cache(world, threading="legacy")
    client = world.thread("client")
    client.execute(lambda: cache.create("/a", 1))
    world.run()
    # zk posts Created before the put's completion, so its refresh finds no entry yet: only the load reads.
    assert [(r.kind, r.thread) for r in serde.records] == [("serialize", "client"), ("deserialize", "N")]
    assert store.worker is None and cache.get_if_cached("/a") == 1


# -- refresh / accept / invalidate -------------------------------------------------------------------


def test_refresh_publishes_in_a_second_step_readers_see_the_old_entry(world: World) -> None:
    store, cache, _ = zk_cache(world, batching_enabled=False)
    store.backend.tree.data["/a"] = (b"1", 0)
    settle(world, cache.get("/a"))
    old = cache.entries["/a"]
    store.backend.tree.data["/a"] = (b"2", 1)
    refresher, reader = world.thread("refresher"), world.thread("reader")
    read: list[SimFuture[Any]] = []
    refresher.execute(lambda: cache.refresh("/a"))
    reader.execute(lambda: read.append(cache.get_with_stats("/a")))
    world.step(("run", refresher))  # step 1: the read is issued, not yet published
    assert cache.entries["/a"] is old and cache.key_lock("/a").holder == "refresher"
    world.step(("run", reader))
    assert read == [old]
    world.step(("run", refresher))  # step 2
    assert cache.entries["/a"] is not old and cache.key_lock("/a").holder is None
    world.run()
    assert cache.snapshot() == {"/a": (2, 1)}


def test_mutation_of_the_key_waits_for_the_refresh(world: World) -> None:
    store, cache, _ = zk_cache(world, batching_enabled=False)
    store.backend.tree.data["/a"] = (b"1", 0)
    settle(world, cache.get("/a"))
    refresher, other = world.thread("refresher"), world.thread("other")
    refresher.execute(lambda: cache.refresh("/a"))
    other.execute(lambda: cache.invalidate("/a"))
    world.step(("run", refresher))
    world.step(("run", other))
    assert list(world.wait_for_graph().edges(data="label")) == [("other", "refresher", "N-cache0:/a")]
    world.step(("run", refresher))
    assert "/a" in cache.entries
    world.step(("run", other))
    assert "/a" not in cache.entries  # the invalidation happened after the publication
    world.run()
    assert md_i5(world) == []


def test_close_during_a_refresh_that_overflows_the_queue_does_not_deadlock(world: World) -> None:
    """Regression: the flusher fails its batch after close while a refresh of the same key, holding the key
    lock, waits for the flush lock in an inline flush. Removing the failed entry must not wait."""
    store, cache, _ = zk_cache(world, max_operations=1)
    store.backend.tree.data["/p"] = (b"1", 0)
    a, b, c, d = (world.thread(n) for n in "abcd")
    a.execute(lambda: cache.get("/p"))
    world.step(("run", a))
    old = cache.entries["/p"]
    world.step(("advance", 5))
    world.step(("run", "N-batch-flusher"))  # holds the flush lock with the read of /p, suspended
    c.execute(lambda: store.get("/x"))
    world.step(("run", c))
    b.execute(lambda: cache.refresh("/p"))
    world.step(("run", b))  # key lock held; its read overflows read_q and waits for the flush lock
    assert cache.key_lock("/p").holder == "b" and store.flush_lock is not None
    assert ("b", "N-batch-flusher", "N-flush-lock") in world.wait_for_graph().edges(data="label")
    d.execute(store.close)
    world.step(("run", d))
    world.run()
    assert world.deadlock() is None and not world.stuck() and world.quiescent()
    assert isinstance(old.exception(), AlreadyClosedError)
    assert "/p" not in cache.entries  # the refresh published a failed read, which was then dropped
    assert md_i4(world) == [] and all(f.attempts == 1 for f in world.op_futures)


def test_refresh_and_invalidate_of_absent_entries_do_nothing(world: World) -> None:
    store, cache, _ = zk_cache(world)
    cache.refresh("/a")
    cache.invalidate("/a")
    assert store.ops == [] and cache.entries == {}


def test_accept_routes_notification_types(world: World) -> None:
    store, cache, _ = memory_cache(world)
    store.backend.tree.data["/a"] = (b"1", 0)
    settle(world, cache.get("/a"))
    world.run()
    reads = len(store.ops)
    cache.accept(Notification(NotificationType.CHILDREN_CHANGED, "/a"))
    assert len(store.ops) == reads
    cache.accept(Notification(NotificationType.MODIFIED, "/a"))
    cache.accept(Notification(NotificationType.CREATED, "/a"))
    assert len(store.ops) == reads + 2
    cache.accept(Notification(NotificationType.DELETED, "/a"))
    assert "/a" not in cache.entries


def test_notifications_keep_the_cache_coherent_across_stores(world: World) -> None:
    tree = ZkBackend(world).tree
    reader = MetadataStore(world, "R", backend=ZkBackend(world, tree))
    writer = MetadataStore(world, "W", backend=ZkBackend(world, tree))
    cache = reader.metadata_cache(JsonSerde())
    writer.put("/a", b"1")
    world.run()
    assert settle(world, cache.get("/a")) == 1
    writer.put("/a", b"2")
    world.run()
    assert cache.get_if_cached("/a") == 2
    writer.delete("/a")
    world.run()
    assert "/a" not in cache.entries
    assert md_i7(reader, cache) == []


# -- writes ------------------------------------------------------------------------------------------


def test_create_existing_reports_already_exists(world: World) -> None:
    store, cache, _ = zk_cache(world)
    store.backend.tree.data["/a"] = (b"1", 0)
    f = cache.create("/a", 2)
    world.run()
    assert isinstance(f.exception(), AlreadyExistsError)
    assert store.backend.tree.data["/a"] == (b"1", 0)


def test_create_completes_only_after_the_load(world: World) -> None:
    store, cache, _ = zk_cache(world)
    f = cache.create("/a", {"x": 1})
    world.run(until=lambda: bool(store.ops) and store.ops[0].future.done())
    assert not f.done() and cache.snapshot() == {"/a": "pending"}
    world.run()
    assert f.result() is None and cache.get_if_cached("/a") == {"x": 1}
    assert md_i7(store, cache) == []


def test_put_refreshes_on_the_completing_thread(world: World) -> None:
    _, cache, _ = zk_cache(world)
    settle(world, cache.get("/a"))  # cached absent
    refreshed_on: list[str] = []
    original = cache.refresh

    def spy(path: str) -> None:
        refreshed_on.append(current_thread_name())
        original(path)

    cache.refresh = spy  # type: ignore[method-assign]
    f = cache.put("/a", [1])
    world.run()
    assert f.result() is None
    assert refreshed_on[0] == "N-event"  # the put's own refresh runs where the put completed
    assert cache.get_if_cached("/a") == [1]


def test_write_after_close_is_rejected_on_the_worker(world: World) -> None:
    store, cache, _ = memory_cache(world)
    store.close()
    f = cache.put("/a", 1)
    assert isinstance(f.exception(), RejectedExecutionError)
    g = cache.create("/b", 1)
    assert isinstance(g.exception(), RejectedExecutionError)


def test_read_modify_update_or_create(world: World) -> None:
    store, cache, _ = memory_cache(world)
    assert settle(world, cache.read_modify_update_or_create("/c", lambda v: (v or 0) + 1)) == 1
    assert store.backend.tree.data["/c"] == (b"1", 0)
    assert settle(world, cache.read_modify_update_or_create("/c", lambda v: (v or 0) + 1)) == 2
    assert store.backend.tree.data["/c"] == (b"2", 1)


def test_delete_and_exists_go_through_the_store(world: World) -> None:
    _, cache, _ = memory_cache(world)
    settle(world, cache.create("/d", 1))
    world.run()
    assert settle(world, cache.exists("/d")) is True
    assert settle(world, cache.delete("/d")) is None
    world.run()
    assert "/d" not in cache.entries and settle(world, cache.exists("/d")) is False


# -- retry and backoff -------------------------------------------------------------------------------


def test_read_modify_update_retries_on_bad_version(world: World) -> None:
    store, cache, _ = memory_cache(world)
    tree = store.backend.tree.data
    tree["/a"] = (b"10", 0)
    conflicts = [1]

    def bump(v: int) -> int:
        if conflicts:  # a concurrent writer wins the first round
            conflicts.pop()
            tree["/a"] = (b"20", 1)
        return v + 1

    f = cache.read_modify_update("/a", bump)
    world.run()
    assert f.result() == 21 and tree["/a"] == (b"21", 2)
    assert world.now == 5  # one backoff of initial_ms on the scheduler
    assert md_i7(store, cache) == []


def test_read_modify_update_times_out_after_the_mandatory_stop(world: World) -> None:
    store, cache, _ = memory_cache(world, n=1)
    cache.retry_backoff = BackoffConfig(initial_ms=5, max_ms=10, mandatory_stop_ms=20)
    tree = store.backend.tree.data
    tree["/a"] = (b"0", 0)
    attempts: list[int] = []

    def always_conflict(v: int) -> int:
        attempts.append(world.now)
        data, version = tree["/a"]
        tree["/a"] = (data, version + 1)
        return v

    f = cache.read_modify_update("/a", always_conflict)
    world.run()
    assert attempts == [0, 5, 15, 20]  # delays 5, 10, then cut to 20 - 15 = 5
    assert isinstance(f.exception(), MetadataTimeoutError)


def test_other_errors_fail_without_retry(world: World) -> None:
    store, cache, _ = memory_cache(world)
    store.backend.tree.data["/a"] = (b"0", 0)
    f = cache.read_modify_update("/a", lambda v: 1 // 0)
    world.run()
    assert isinstance(f.exception(), ZeroDivisionError) and world.now == 0


def test_backoff_sequence_and_mandatory_stop() -> None:
    clock = [0]
    b = Backoff(BackoffConfig(), lambda: clock[0])
    delays = []
    while not b.mandatory_stop_made:
        d = b.next()
        delays.append(d)
        clock[0] += d
    assert delays[:11] == [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3000]
    assert sum(delays) == 30000 and delays[-1] == 30000 - sum(delays[:-1])
    assert b.next() == 3000  # after the stop: no more cutting


def test_backoff_cut_never_below_initial() -> None:
    clock = [0]
    b = Backoff(BackoffConfig(initial_ms=5, max_ms=100, mandatory_stop_ms=12), lambda: clock[0])
    assert b.next() == 5
    clock[0] = 11
    assert b.next() == 5 and b.mandatory_stop_made  # max(12 - 11, 5)


def test_cache_charges_serde_cost(world: World) -> None:
    store, cache, _ = memory_cache(world, costs=Costs(serde_ms=2))
    store.backend.tree.data["/a"] = (b"1", 0)
    cache.get("/a")
    world.run()
    assert store.worker is not None and store.worker.threads[0].busy_until == 2


class _Upper:
    def serialize(self, path: str, value: str) -> bytes:
        return value.upper().encode()

    def deserialize(self, path: str, data: bytes, stat: Stat) -> str:
        return data.decode().lower()


def test_custom_serde(world: World) -> None:
    store = MetadataStore(world, backend=MemoryBackend(world))
    cache = store.metadata_cache(_Upper())
    settle(world, cache.create("/s", "abc"))
    assert store.backend.tree.data["/s"] == (b"ABC", 0)
    assert settle(world, cache.get("/s")) == "abc"


@pytest.mark.parametrize("threading", ["pip453", "legacy"])
def test_bad_version_is_not_retried_by_plain_put(world: World, threading: str) -> None:
    store, _, _ = zk_cache(world, threading=threading)
    store.backend.tree.data["/a"] = (b"1", 0)
    f = store.put("/a", b"2", 7)
    world.run()
    assert isinstance(f.exception(), BadVersionError)
