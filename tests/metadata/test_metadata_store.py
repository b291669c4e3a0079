"""Store operations on both backends, batching, flush, faults and close (spec §4.1, §4.2, §4.4, §4.5, §8)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from reference_impl.metadata import (
    BROKER_CONF_KEYS,
    CLOSING_MESSAGE,
    AlreadyClosedError,
    BackoffConfig,
    BadVersionError,
    Costs,
    InvalidPathError,
    MemoryBackend,
    MetadataStore,
    MetadataStoreConfig,
    MetadataStoreError,
    NotFoundError,
    Notification,
    NotificationType,
    RejectedExecutionError,
    SimFuture,
    World,
    ZkBackend,
    current_thread_name,
)

from .checks import md_i2, md_i3, md_i4

CREATED, MODIFIED, DELETED, CHILDREN = (
    NotificationType.CREATED,
    NotificationType.MODIFIED,
    NotificationType.DELETED,
    NotificationType.CHILDREN_CHANGED,
)


def zk_store(world: World, **kw: Any) -> MetadataStore:
    return MetadataStore(world, "N", backend=ZkBackend(world), **kw)


def zk(store: MetadataStore) -> ZkBackend:
    assert isinstance(store.backend, ZkBackend)
    return store.backend


def settle(world: World, f: SimFuture[Any]) -> Any:
    world.run(until=f.done)
    return f.result()


def error_of(world: World, f: SimFuture[Any]) -> BaseException | None:
    world.run(until=f.done)
    return f.exception()


# -- §8 configuration -------------------------------------------------------------------------------


def test_defaults_match_broker_conf() -> None:
    c = MetadataStoreConfig()
    assert (c.num_serdes_threads, c.batching_enabled, c.max_delay_ms, c.max_operations, c.max_size_kb) == (
        1,
        True,
        5,
        1000,
        128,
    )
    b = BackoffConfig()
    assert (b.initial_ms, b.max_ms, b.mandatory_stop_ms) == (5, 3000, 30000)


def test_broker_conf_mapping() -> None:
    assert BROKER_CONF_KEYS == {
        "metadataStoreSerDesThreads": "num_serdes_threads",
        "metadataStoreBatchingEnabled": "batching_enabled",
        "metadataStoreBatchingMaxDelayMillis": "max_delay_ms",
        "metadataStoreBatchingMaxOperations": "max_operations",
        "metadataStoreBatchingMaxSizeKb": "max_size_kb",
    }
    c = MetadataStoreConfig.from_broker_conf(
        {
            "metadataStoreSerDesThreads": "5",
            "metadataStoreBatchingEnabled": "FALSE",
            "metadataStoreBatchingMaxDelayMillis": "0",
            "metadataStoreBatchingMaxOperations": " 7 ",
            "metadataStoreBatchingMaxSizeKb": "64",
            "brokerServicePort": "6650",
        }
    )
    assert c == MetadataStoreConfig(5, False, 0, 7, 64)
    assert MetadataStoreConfig.from_broker_conf({}) == MetadataStoreConfig()
    assert MetadataStoreConfig.from_broker_conf({"metadataStoreBatchingEnabled": "yes"}).batching_enabled is False


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_serdes_threads": 0},
        {"max_operations": 0},
        {"max_size_kb": 0},
        {"max_delay_ms": -1},
        {"max_delay_ms": 0},  # batching enabled: a zero period cannot be scheduled
        {"max_delay_ms": -1, "batching_enabled": False},
    ],
)
def test_validation_rejects(world: World, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        MetadataStoreConfig(**kwargs)
    with pytest.raises(ValueError):
        zk_store(world, **kwargs)


def test_zero_delay_is_valid_without_batching(world: World) -> None:
    store = zk_store(world, max_delay_ms=0, batching_enabled=False)
    assert store.flush_handle is None and store.flusher is None


def test_unknown_variant_names_are_rejected(world: World) -> None:
    with pytest.raises(ValueError):
        zk_store(world, threading="pip999")
    with pytest.raises(ValueError):
        MetadataStore(world, "M", backend=ZkBackend(world), flush_schedule="cron")  # type: ignore[arg-type]


# -- §4.1 threads ------------------------------------------------------------------------------------


def test_thread_layout_per_variant() -> None:
    with World() as w:
        MetadataStore(w, "N", backend=ZkBackend(w), num_serdes_threads=2)
        assert [t.name for t in w.threads] == [
            "N-event",
            "N-scheduler",
            "N-worker-OrderedExecutor-0-0",
            "N-worker-OrderedExecutor-1-0",
            "N-batch-flusher",
            "N-backend",
        ]
    with World() as w:
        MetadataStore(w, "N", backend=ZkBackend(w), threading="legacy", num_serdes_threads=3)
        assert [t.name for t in w.threads] == ["N", "N-backend"]
    with World() as w:
        s = MetadataStore(w, "N", backend=MemoryBackend(w))
        assert [t.name for t in w.threads] == ["N-event", "N-scheduler", "N-worker-OrderedExecutor-0-0"]
        assert not s.batching and s.flush_handle is None


# -- §4.2 validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["", "a", "/a/", " ", "//"])
def test_invalid_paths_fail_at_once_without_an_op(world: World, path: str) -> None:
    store = zk_store(world)
    f = store.get(path)
    assert isinstance(f.exception(), InvalidPathError)
    assert store.ops == [] and not store.read_q


@pytest.mark.parametrize("path", ["/", "/a", "/a/b", "/ a"])
def test_valid_paths_are_enqueued(world: World, path: str) -> None:
    store = zk_store(world)
    f = store.exists(path)
    assert not f.done() and list(store.read_q) == store.ops and store.ops[0].path == path


# -- batching, next_batch, flush ---------------------------------------------------------------------


def test_first_flush_at_p_reads_before_writes_and_queue_wait(world: World) -> None:
    store = zk_store(world)
    client = world.scheduled_thread("client")
    client.schedule(lambda: store.put("/a", b"1"), 1)
    client.schedule(lambda: store.get("/a"), 2)
    world.run()
    [flush] = [r for r in world.flush_log if r.batches]
    assert (flush.thread, flush.start, flush.periodic) == ("N-batch-flusher", 5, True)
    assert flush.batches == [("read", (1,)), ("write", (0,))]
    assert store.queue_waits == [(1, 3), (0, 4)]
    assert store.ops[1].future.result() is None  # the read was dispatched first: it saw no node
    put, get = store.ops
    assert put.issued_seq < get.issued_seq
    assert get.completed_seq is not None and put.completed_seq is not None
    assert get.completed_seq < put.completed_seq  # per-path completion order differs from issue order
    assert store.ops[0].future.result().version == 0


def test_batching_disabled_dispatches_at_once_on_the_calling_thread(world: World) -> None:
    store = zk_store(world, batching_enabled=False)
    client = world.thread("client")
    client.execute(lambda: store.put("/a", b"1"))
    world.step(("run", client))
    assert store.queue_waits == [(0, 0)] and store.ops[0].dispatched_at == 0
    assert world.get_thread("N-backend").queued == ("backend[0]",)
    assert world.flush_log == []


def test_next_batch_limits(world: World) -> None:
    big = zk_store(world)
    small = MetadataStore(world, "S", backend=ZkBackend(world), max_operations=3, max_size_kb=1)
    for i in range(5):
        big.get(f"/r{i}")
    assert [len(small.next_batch(big.read_q)) for _ in range(3)] == [3, 2, 0]
    big.put("/a", b"x" * 1000)  # size 1002
    big.put("/b", b"x" * 30)  # size 32: 1034 > 1024, so it starts the next batch
    big.put("/c", b"x" * 2000)  # oversized, forms its own batch
    big.delete("/dddd")  # size 5
    big.get("/g")  # reads add no size
    assert [[op.path for op in small.next_batch(big.write_q)] for _ in range(5)] == [
        ["/a"],
        ["/b"],
        ["/c"],
        ["/dddd"],
        [],
    ]
    assert [op.path for op in small.next_batch(big.read_q)] == ["/g"]


def test_batch_size_counts_utf16_code_units(world: World) -> None:
    store = zk_store(world, max_size_kb=1)
    store.put("/\U0001f600", b"x" * 1019)  # path is 3 UTF-16 units: size 1022
    store.delete("/é")  # 2 units: 1024, not above the limit
    store.delete("/z")  # 1026 > 1024
    assert [op.size for op in store.write_q] == [1022, 2, 2]
    assert [op.path for op in store.next_batch(store.write_q)] == ["/\U0001f600", "/é"]


def test_size_triggered_flush_pip453_runs_inline_under_the_lock(world: World) -> None:
    store = zk_store(world, max_operations=2)
    client = world.thread("client")
    client.execute(lambda: [store.get(f"/p{i}") for i in range(3)])
    world.step(("run", client))
    assert store.flush_lock is not None and store.flush_lock.holder == "client"
    [rec] = world.flush_log
    assert (rec.thread, rec.periodic, rec.end) == ("client", False, None)
    world.run()
    assert rec.batches == [("read", (0, 1)), ("read", (2,))] and store.flush_lock.holder is None
    assert all(op.future.done() for op in store.ops)


def test_size_triggered_flush_legacy_is_a_task_guarded_by_a_flag(world: World) -> None:
    store = zk_store(world, threading="legacy", max_operations=2)
    client = world.thread("client")
    client.execute(lambda: [store.get(f"/p{i}") for i in range(4)])
    world.step(("run", client))
    assert store.flush_in_progress
    assert world.get_thread("N").queued == ("N:size-flush",)  # one task although two overflows
    world.run()
    assert not store.flush_in_progress
    rec = world.flush_log[0]
    assert (rec.thread, rec.periodic, rec.start) == ("N", False, 0)
    assert rec.batches == [("read", (0, 1)), ("read", (2, 3))]


def test_periodic_and_inline_flushes_exclude_each_other(world: World) -> None:
    store = zk_store(world, max_operations=1)
    client = world.scheduled_thread("client")
    store.get("/early")
    client.schedule(lambda: [store.get("/x"), store.get("/y")], 5)
    world.step(("advance", 5))
    world.step(("run", world.get_thread("N-batch-flusher")))  # holds the lock, suspended
    world.step(("run", client))  # overflow: inline flush blocks on the lock
    assert ("client", "N-batch-flusher", "N-flush-lock") in world.wait_for_graph().edges(data="label")
    world.run("random")
    assert md_i3(world, store) == []
    assert [r.thread for r in world.flush_log if not r.periodic] == ["client"]
    assert md_i4(world) == [] and world.quiescent()
    assert all(op.future.done() for op in store.ops)


def test_lock_hold_and_flush_cost(world: World) -> None:
    store = zk_store(world, costs=Costs(flush_batch_ms=3))
    store.get("/a")
    store.put("/a", b"1")
    world.run()
    rec = world.flush_log[0]
    assert (rec.start, rec.end, rec.hold) == (5, 11, 6)  # two batches of 3 ms each


# -- backend semantics -------------------------------------------------------------------------------


@pytest.fixture(params=["zk", "memory"])
def any_store(request: pytest.FixtureRequest, world: World) -> MetadataStore:
    backend = ZkBackend(world) if request.param == "zk" else MemoryBackend(world)
    return MetadataStore(world, "N", backend=backend)


def test_put_versions_and_conditions(world: World, any_store: MetadataStore) -> None:
    s = any_store
    first = settle(world, s.put("/a", b"1"))
    assert (first.version, first.first_version) == (0, True)
    assert settle(world, s.put("/a", b"2")).version == 1
    assert isinstance(error_of(world, s.put("/a", b"3", -1)), BadVersionError)
    assert isinstance(error_of(world, s.put("/a", b"3", 0)), BadVersionError)
    assert isinstance(error_of(world, s.put("/missing", b"3", 0)), BadVersionError)
    assert settle(world, s.put("/a", b"3", 1)).version == 2
    assert settle(world, s.put("/b", b"x", -1)).version == 0
    got = settle(world, s.get("/a"))
    assert (got.value, got.stat.version, got.stat.first_version) == (b"3", 2, False)
    assert settle(world, s.get("/nope")) is None
    assert settle(world, s.exists("/a")) is True and settle(world, s.exists("/nope")) is False


def test_delete_conditions(world: World, any_store: MetadataStore) -> None:
    s = any_store
    assert isinstance(error_of(world, s.delete("/a")), NotFoundError)
    settle(world, s.put("/a", b"1"))
    assert isinstance(error_of(world, s.delete("/a", 3)), BadVersionError)
    assert settle(world, s.delete("/a", 0)) is None
    assert s.backend.tree.data == {}


def test_get_children(world: World, any_store: MetadataStore) -> None:
    s = any_store
    for p in ("/a", "/a/y", "/a/x", "/a/x/deep", "/b"):
        settle(world, s.put(p, b""))
    assert settle(world, s.get_children("/a")) == ["x", "y"]
    assert settle(world, s.get_children("/")) == ["a", "b"]
    assert settle(world, s.get_children("/none")) == []


def test_each_op_in_a_batch_gets_its_own_outcome(world: World) -> None:
    s = zk_store(world)
    s.backend.tree.data["/a"] = (b"0", 0)
    ok = s.put("/a", b"1", 0)
    bad = s.put("/a", b"2", 0)  # same batch, sees version 1
    world.run()
    assert ok.result().version == 1 and isinstance(bad.exception(), BadVersionError)


def notifications(world: World, store: MetadataStore) -> list[tuple[NotificationType, str]]:
    seen: list[tuple[NotificationType, str]] = []
    store.register_listener(lambda n: seen.append((n.type, n.path)))
    return seen


def test_zk_notifications_parent_only_and_before_completion(world: World) -> None:
    s = zk_store(world)
    seen = notifications(world, s)
    s.put("/a/b/c", b"1")
    s.put("/top", b"1")
    world.run(until=lambda: bool(world.get_thread("N-event").queued))
    assert world.get_thread("N-event").queued == (
        "notify:Created(/a/b/c)",
        "notify:ChildrenChanged(/a/b)",
        "notify:Created(/top)",
        "complete[0, 1]",
    )
    world.run()
    s.put("/top", b"2")
    s.delete("/a/b/c")
    world.run()
    assert seen == [
        (CREATED, "/a/b/c"),
        (CHILDREN, "/a/b"),
        (CREATED, "/top"),  # a top-level node has no parent notification
        (MODIFIED, "/top"),
        (DELETED, "/a/b/c"),
        (CHILDREN, "/a/b"),
    ]
    assert md_i2(world, s) == []


def test_memory_applies_synchronously_and_notifies_every_ancestor(world: World) -> None:
    s = MetadataStore(world, "N", backend=MemoryBackend(world))
    seen = notifications(world, s)
    f = s.put("/a/b/c", b"1")
    assert f.done() and f.result().version == 0
    assert world.get_thread("N-event").queued == (
        "notify:Created(/a/b/c)",
        "notify:ChildrenChanged(/a/b)",
        "notify:ChildrenChanged(/a)",
    )
    s.put("/a/b/c", b"2")
    s.delete("/a/b/c")
    world.run()
    assert seen[3:] == [(MODIFIED, "/a/b/c"), (DELETED, "/a/b/c"), (CHILDREN, "/a/b"), (CHILDREN, "/a")]
    assert s.queue_waits == [] and world.flush_log == []


def test_shared_tree_notifies_every_store(world: World) -> None:
    tree = ZkBackend(world).tree
    s1 = MetadataStore(world, "S1", backend=ZkBackend(world, tree))
    s2 = MetadataStore(world, "S2", backend=ZkBackend(world, tree))
    seen1, seen2 = notifications(world, s1), notifications(world, s2)
    s1.put("/x", b"1")
    world.run()
    assert seen1 == seen2 == [(CREATED, "/x")]
    assert {r.thread for r in world.notification_log} == {"S1-event", "S2-event"}


def test_listener_errors_are_logged_and_skipped(world: World) -> None:
    s = MetadataStore(world, "N", backend=MemoryBackend(world))
    calls: list[str] = []

    def broken(n: Notification) -> None:
        calls.append("broken")
        raise RuntimeError("listener bug")

    s.register_listener(broken)
    s.register_listener(lambda n: calls.append(current_thread_name()))
    s.put("/a", b"1")
    world.run()
    assert calls == ["broken", "N-event"]
    assert [(n.path, str(e)) for n, e in s.listener_errors] == [("/a", "listener bug")]
    assert world.uncaught == []


# -- faults ------------------------------------------------------------------------------------------


def test_connection_loss_retries_each_op_alone_after_100ms(world: World) -> None:
    s = zk_store(world)
    zk(s).inject("connection_loss")
    a, b = s.get("/a"), s.put("/b", b"1")
    world.run()
    assert a.result() is None and b.result().version == 0
    assert world.now == 105
    assert s.queue_waits == [(0, 5), (1, 5)]  # not recorded again on the resend
    assert s.ops[0].completed_seq is not None and s.ops[1].completed_seq is not None


def test_error_fault_fails_the_whole_batch(world: World) -> None:
    s = zk_store(world)
    zk(s).inject("error")
    a, b = s.get("/a"), s.get("/b")
    world.run()
    assert all(isinstance(f.exception(), MetadataStoreError) for f in (a, b))
    assert s.backend.tree.data == {}
    with pytest.raises(ValueError):
        zk(s).inject("meteor")  # type: ignore[arg-type]


# -- §4.4 close --------------------------------------------------------------------------------------


def test_close_fails_queued_ops_in_fifo_order_and_is_idempotent(world: World) -> None:
    s = zk_store(world)
    order: list[int] = []
    futures: list[SimFuture[Any]] = [s.put("/w", b"1"), s.get("/r1"), s.get("/r2"), s.delete("/w")]
    for i, f in enumerate(futures):
        f.add_done_callback(partial(lambda i, _f: order.append(i), i))
    s.close()
    s.close()
    assert order == [1, 2, 0, 3]  # read_q first, then write_q
    assert all(str(f.exception()) == CLOSING_MESSAGE for f in futures)
    assert isinstance(futures[0].exception(), AlreadyClosedError)
    assert s.flush_handle is not None and s.flush_handle.cancelled
    assert s.flusher is not None and s.flusher.is_shutdown
    assert all(t.is_shutdown for t in world.threads if t.name != "N-backend")
    late = s.get("/late")
    assert isinstance(late.exception(), AlreadyClosedError) and len(s.ops) == 4
    world.run()
    assert md_i4(world) == [] and world.quiescent()


def test_in_flight_op_completion_rejected_after_close(world: World) -> None:
    s = zk_store(world, batching_enabled=False)
    f = s.get("/a")  # dispatched at once; the backend task is queued
    s.close()
    world.run()
    assert isinstance(f.exception(), RejectedExecutionError)
    assert f.attempts == 1


def test_in_flight_op_whose_completion_was_posted_completes_normally(world: World) -> None:
    s = zk_store(world, batching_enabled=False)
    f = s.put("/a", b"1")
    world.step(("run", world.get_thread("N-backend")))  # posts the notification and completion
    s.close()
    world.run()
    assert f.result().version == 0
    [rec] = world.notification_log
    assert rec.thread == "N-event" and not rec.dropped


def test_notification_after_close_is_dropped(world: World) -> None:
    tree = ZkBackend(world).tree
    closed = MetadataStore(world, "C", backend=ZkBackend(world, tree), batching_enabled=False)
    open_ = MetadataStore(world, "O", backend=ZkBackend(world, tree), batching_enabled=False)
    closed.close()
    f = open_.put("/a", b"1")
    world.run()
    assert f.result().version == 0
    assert {(r.store, r.dropped) for r in world.notification_log} == {("C", True), ("O", False)}


def test_dispatch_after_close_fails_with_already_closed(world: World) -> None:
    s = zk_store(world)
    f = s.get("/a")
    world.step(("advance", 5))
    world.step(("run", world.get_thread("N-batch-flusher")))  # batch taken, flush suspended
    assert not s.read_q and not f.done()
    s.close()
    world.run()
    assert isinstance(f.exception(), AlreadyClosedError) and str(f.exception()) != CLOSING_MESSAGE
    assert s.queue_waits == [] and f.attempts == 1


def test_connection_loss_retry_after_close(world: World) -> None:
    s = zk_store(world)
    zk(s).inject("connection_loss")
    f = s.get("/a")
    world.run(until=lambda: bool(world._timers) and world._timers[-1].label == "connection-loss-retry")
    s.close()  # the one-shot retry timer still fires on the shut-down scheduler, then finds the store closed
    world.run()
    assert isinstance(f.exception(), AlreadyClosedError)


def test_connection_loss_retry_rejected_when_scheduler_is_down(world: World) -> None:
    s = zk_store(world, batching_enabled=False)
    zk(s).inject("connection_loss")
    f = s.get("/a")
    s.close()
    world.run()
    assert isinstance(f.exception(), RejectedExecutionError)


def test_legacy_close(world: World) -> None:
    s = zk_store(world, threading="legacy")
    f = s.get("/a")
    s.close()
    assert str(f.exception()) == CLOSING_MESSAGE
    assert world.get_thread("N").is_shutdown and s.flush_handle is not None and s.flush_handle.cancelled
    world.run()
    assert world.quiescent() and world.now == 0
