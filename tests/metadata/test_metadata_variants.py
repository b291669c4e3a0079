"""The variants of spec §6: each historical or buggy variant breaks its invariant on a concrete scenario
while the current variant (pip453, fixed rate on a dedicated flusher) keeps it on the same scenario."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Literal, cast

import pytest

from reference_impl.metadata import (
    Choice,
    Costs,
    JsonSerde,
    MemoryBackend,
    MetadataCache,
    MetadataStore,
    RecordingSerde,
    SimFuture,
    Stat,
    World,
    ZkBackend,
    join,
)

from .checks import (
    max_lock_hold,
    max_wait,
    md_i1,
    md_i2,
    md_i3,
    md_i4,
    md_i5,
    md_i7,
    md_p1,
    periodic_starts,
)

Schedule = Literal["fixed_rate", "fixed_delay"]


def variant(name: str) -> Literal["pip453", "legacy"]:
    assert name in ("pip453", "legacy")
    return cast(Literal["pip453", "legacy"], name)


class TimedSerde:
    """Records the virtual start time of every deserialize (the cache charges serde_ms around it)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.inner = JsonSerde()
        self.deserialize_starts: list[int] = []

    def serialize(self, path: str, value: Any) -> bytes:
        return self.inner.serialize(path, value)

    def deserialize(self, path: str, data: bytes, stat: Stat) -> Any:
        # The segment started at world.now; earlier serde calls of the same segment were charged before.
        self.deserialize_starts.append(self.world.now + self.world._segment_cost - 2)
        return self.inner.deserialize(path, data, stat)


def canonical_load(
    world: World, threading: str, flush_schedule: str = "fixed_rate"
) -> tuple[MetadataStore, MetadataCache[Any], TimedSerde, list[SimFuture[Any]]]:
    """§6(a): zk, P=5, one serde thread, serde_ms=2; /l0../l9 exist; ten gets at t=0, a put at t=6."""
    client = world.scheduled_thread("client")
    backend = ZkBackend(world)
    for i in range(10):
        backend.tree.data[f"/l{i}"] = (f'"v{i}"'.encode(), 0)
    store = MetadataStore(
        world,
        "N",
        backend=backend,
        threading=variant(threading),
        max_delay_ms=5,
        num_serdes_threads=1,
        flush_schedule=cast(Schedule, flush_schedule),
        costs=Costs(serde_ms=2),
    )
    serde = TimedSerde(world)
    cache = store.metadata_cache(serde)
    futures: list[SimFuture[Any]] = []
    client.schedule(lambda: futures.extend(cache.get(f"/l{i}") for i in range(10)), 0)
    client.schedule(lambda: futures.append(store.put("/w", b"x")), 6)
    return store, cache, serde, futures


def md_i6_holds(world: World, store: MetadataStore) -> bool:
    lock_hold = max_lock_hold(world, store)
    return max_wait(store) <= max(store.config.max_delay_ms, lock_hold) + lock_hold


# -- (a) legacy threading -----------------------------------------------------------------------------


def test_canonical_load_pip453_bounded_queue_wait(world: World) -> None:
    store, _, serde, futures = canonical_load(world, "pip453")
    world.run()
    assert store.queue_waits == [(i, 5) for i in range(10)] + [(10, 4)]
    assert [op.dispatched_at for op in store.ops] == [5] * 10 + [10]
    assert serde.deserialize_starts == list(range(5, 25, 2))
    worker = world.get_thread("N-worker-OrderedExecutor-0-0")
    assert worker.busy_until == 25
    assert max_wait(store) == 5 == max(5, 0) + 0 and md_i6_holds(world, store)
    assert [f.result() for f in futures[:10]] == [f"v{i}" for i in range(10)]
    assert futures[10].result().version == 0


def test_canonical_load_legacy_exceeds_the_queue_wait_bound(world: World) -> None:
    store, cache, serde, _ = canonical_load(world, "legacy")
    world.run()
    assert serde.deserialize_starts == list(range(5, 25, 2))  # all inline in the t=5 completion task
    assert store.queue_waits[-1] == (10, 19) and store.ops[-1].dispatched_at == 25
    assert max_lock_hold(world, store) == 0
    assert not md_i6_holds(world, store)  # MD-I6 exceeded: 19 > max(5, 0) + 0
    # MD-I1 does not apply (no workers); the others hold.
    assert store.worker is None
    assert md_i2(world, store) + md_i3(world, store) + md_i4(world) + md_i5(world) + md_i7(store, cache) == []


def test_same_load_pip453_waits_no_longer_than_legacy() -> None:
    waits = {}
    for threading in ("pip453", "legacy"):
        with World() as w:
            store, *_ = canonical_load(w, threading)
            w.run()
            waits[threading] = max_wait(store)
    assert waits == {"pip453": 5, "legacy": 19}


# -- (b) blocking callback on the event thread --------------------------------------------------------


def blocking_callback(world: World, threading: str, register_after_done: bool) -> SimFuture[Any]:
    store = MetadataStore(world, "N", backend=ZkBackend(world), threading=variant(threading))
    client = world.thread("client")
    inner: list[SimFuture[Any]] = []
    outer: list[SimFuture[Any]] = []

    def callback(_: Any) -> Any:
        q = store.get("/q")
        inner.append(q)
        return join(q)

    def issue() -> None:
        f = store.get("/p")
        if not register_after_done:
            outer.append(f.then_apply(callback))
        else:
            outer.append(f)

    def register() -> None:
        outer.append(outer.pop().then_apply(callback))

    client.execute(issue)
    world.run()
    if register_after_done:
        assert outer[0].done()
        client.execute(register)
        world.run()
    return outer[0]


@pytest.mark.parametrize(("threading", "thread"), [("pip453", "N-event"), ("legacy", "N")])
def test_blocking_callback_deadlocks(world: World, threading: str, thread: str) -> None:
    blocking_callback(world, threading, register_after_done=False)
    assert world.deadlock() == [(thread, thread, "get(/q)")]
    assert world.stuck() and not world.quiescent()


@pytest.mark.parametrize("threading", ["pip453", "legacy"])
def test_same_callback_registered_after_completion_only_waits(world: World, threading: str) -> None:
    f = blocking_callback(world, threading, register_after_done=True)
    assert f.result() is None  # /q is absent
    assert world.deadlock() is None and not world.stuck() and world.quiescent()


def test_get_q_is_answered_but_its_completion_waits_behind_the_blocked_task(world: World) -> None:
    blocking_callback(world, "pip453", register_after_done=False)
    event = {s.name: s for s in world.thread_states()}["N-event"]
    assert event.blocked_on == "get(/q)" and event.waiting_for == "N-event"
    assert event.queued == ("complete[1]",)


def cache_callback_blocks(world: World, threading: str) -> SimFuture[Any]:
    """A callback on a *cache* get that joins a store op: legacy runs it on ``<N>``, PIP-453 on a worker."""
    store = MetadataStore(world, "N", backend=ZkBackend(world), threading=variant(threading))
    store.backend.tree.data["/p"] = (b"1", 0)
    cache = store.metadata_cache(JsonSerde())
    out: list[SimFuture[Any]] = []
    client = world.thread("client")
    client.execute(lambda: out.append(cache.get("/p").then_apply(lambda v: (v, join(store.exists("/q"))))))
    world.run()
    return out[0]


def test_legacy_deadlocks_on_a_blocking_cache_callback_pip453_does_not(world: World) -> None:
    cache_callback_blocks(world, "legacy")
    assert world.deadlock() == [("N", "N", "exists(/q)")] and world.stuck()
    with World() as w:
        f = cache_callback_blocks(w, "pip453")
        assert f.result() == (1, False)
        assert w.deadlock() is None and not w.stuck() and w.quiescent()


# -- (c) fixed rate versus fixed delay ----------------------------------------------------------------


def test_fixed_rate_catches_up_in_a_burst_md_p1_fails(world: World) -> None:
    store, cache, *_ = canonical_load(world, "legacy", "fixed_rate")
    world.run_until_time(30)
    assert periodic_starts(world, store) == [5, 25, 25, 25, 25, 30]
    s0, stall, period = 5, 20, 5
    assert periodic_starts(world, store).count(25) == (s0 + stall) // period - s0 // period == 4
    assert not md_p1(world, store)
    assert md_i2(world, store) + md_i3(world, store) + md_i4(world) + md_i5(world) + md_i7(store, cache) == []


def test_fixed_delay_runs_once_then_waits_p_md_p1_holds(world: World) -> None:
    store, cache, *_ = canonical_load(world, "legacy", "fixed_delay")
    world.run_until_time(30)
    assert periodic_starts(world, store) == [5, 25, 30]
    assert md_p1(world, store)
    assert md_i2(world, store) + md_i3(world, store) + md_i4(world) + md_i5(world) + md_i7(store, cache) == []


def test_pip453_keeps_fixed_rate_on_an_unstalled_flusher(world: World) -> None:
    store, *_ = canonical_load(world, "pip453", "fixed_rate")
    world.run_until_time(30)
    assert periodic_starts(world, store) == [5, 10, 15, 20, 25, 30]
    assert md_p1(world, store)


# -- (d) pip453 under many schedules ------------------------------------------------------------------

PATHS = ("/a", "/b", "/c")


def random_client_op(rng: random.Random, store: MetadataStore, cache: MetadataCache[Any]) -> Callable[[], object]:
    path = rng.choice(PATHS)
    kind = rng.choice(["get", "put", "create", "rmu", "delete", "store_put", "store_get", "rmu_or_create"])
    n = rng.randrange(100)
    ops: dict[str, Callable[[], object]] = {
        "get": lambda: cache.get(path),
        "put": lambda: cache.put(path, n),
        "create": lambda: cache.create(path, n),
        "rmu": lambda: cache.read_modify_update(path, lambda v: v + 1),
        "rmu_or_create": lambda: cache.read_modify_update_or_create(path, lambda v: (v or 0) + 1),
        "delete": lambda: cache.delete(path),
        "store_put": lambda: store.put(path, str(n).encode()),
        "store_get": lambda: store.get(path),
    }
    return ops[kind]


def eager(rng: random.Random) -> Callable[[list[Choice]], Choice]:
    """Random among runnable threads; advance the clock only when none is (a thread never idles)."""

    def pick(options: list[Choice]) -> Choice:
        runs = [c for c in options if c[0] == "run"]
        return rng.choice(runs) if runs else options[-1]

    return pick


CONFIGS = [
    pytest.param("zk", True, 1000, "pip453", id="zk-batched"),
    pytest.param("zk", True, 2, "pip453", id="zk-size-flush"),
    pytest.param("zk", False, 1000, "pip453", id="zk-unbatched"),
    pytest.param("memory", True, 1000, "pip453", id="memory"),
    pytest.param("zk", True, 2, "legacy", id="legacy-zk"),
    pytest.param("memory", True, 1000, "legacy", id="legacy-memory"),
]


@pytest.mark.parametrize(("backend", "batching", "max_ops", "threading"), CONFIGS)
@pytest.mark.parametrize("policy", ["random", "eager"])
def test_invariants_hold_under_random_schedules(
    backend: str, batching: bool, max_ops: int, threading: str, policy: str
) -> None:
    """2 clients, 2 workers, 3 paths, 6 ops; MD-I1..I5 after every step, MD-I4/I7 at quiescence and, for
    PIP-453 with batching under an eager scheduler, MD-I6."""
    for seed in range(12):
        rng = random.Random(seed)
        with World(seed) as w:
            be = ZkBackend(w) if backend == "zk" else MemoryBackend(w)
            store = MetadataStore(
                w,
                "N",
                backend=be,
                threading=variant(threading),
                batching_enabled=batching,
                max_operations=max_ops,
                num_serdes_threads=2,
                costs=Costs(serde_ms=rng.choice([0, 1]), flush_batch_ms=rng.choice([0, 1]), backend_ms=1),
            )
            serde: RecordingSerde[Any] = RecordingSerde(JsonSerde())
            cache = store.metadata_cache(serde)
            be.tree.data["/a"] = (b"0", 0)
            for c in range(2):
                client = w.thread(f"client-{c}")
                for _ in range(3):
                    client.execute(random_client_op(rng, store, cache))
            choose = eager(rng) if policy == "eager" else (lambda options: w.rng.choice(options))
            steps = 0
            while not w.quiescent():
                options = w.choices()
                assert options, "no choice left before quiescence"
                w.step(choose(options))
                steps += 1
                errors = md_i2(w, store) + md_i3(w, store) + md_i4(w) + md_i5(w)
                if threading == "pip453":
                    errors += md_i1(store, serde)
                assert errors == [], (seed, w.history)
            assert md_i4(w) + md_i7(store, cache) == [], (seed, w.history)
            assert w.uncaught == [] and store.listener_errors == []
            assert w.op_futures and steps > 6
            if threading == "pip453" and batching and backend == "zk" and policy == "eager":
                assert md_i6_holds(w, store), (seed, store.queue_waits)


@pytest.mark.parametrize("threading", ["pip453", "legacy"])
def test_close_in_the_middle_of_random_schedules(threading: str) -> None:
    """Every op future completes exactly once, close included, and nothing deadlocks."""
    for seed in range(25):
        rng = random.Random(seed)
        with World(seed) as w:
            backend = ZkBackend(w)
            store = MetadataStore(
                w, "N", backend=backend, threading=variant(threading), max_operations=2, num_serdes_threads=2
            )
            cache = store.metadata_cache(JsonSerde())
            backend.inject("connection_loss", rng.randrange(2))
            clients = [w.thread(f"client-{c}") for c in range(2)]
            for i in range(6):
                clients[i % 2].execute(random_client_op(rng, store, cache))
            clients[rng.randrange(2)].execute(store.close)
            while not w.quiescent():
                options = w.choices()
                assert options and md_i5(w) == [], (seed, w.history)
                w.step(w.rng.choice(options))
                assert md_i4(w) == [], (seed, w.history)
            assert store.closed and all(f.done() and f.attempts == 1 for f in w.op_futures), seed
            assert w.uncaught == []
