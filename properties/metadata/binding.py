"""Bind the metadata-store model (`models.metadata`) to its reference (`reference_impl.metadata`).

`MetadataReference` drives one `World` with one store (zk or memory backend, as configured) and one
cache through the model's actions: a client action submits the call to that client's thread and runs
the segment at once, `run(thread)` and `advance` are the world's own choices, `close` is called by
the harness between steps (it never blocks). `vars` projects the reference onto exactly the model's
variables, and `violations` checks the model's invariants (MD-I1..I5, MD-I7) on the reference's logs
(serde, notifications, flushes), on the harness's ledger and on the threads' states, so a reference
bug is caught even where the model agrees with it.

**Rule for `violations`: the expected answer never comes from the code under test.** Where a check
needs to know where work belongs, it computes it from the spec: MD-I1's worker is
`<N>-worker-OrderedExecutor-<choose_thread_index(p, n)>-0` from the model's own `choose_thread_index`
(never `store.worker.choose_thread`), MD-I2's thread is `<N>-event` (legacy `<N>`) from the store name
(never `store.event_executor`), and MD-I7 decodes the tree's bytes itself. MD-I1 and MD-I2 are also
judged on the queues: a serde or notification task queued on the wrong thread is reported when it
is submitted, since the model, which queues it right, never runs the wrong thread to execute it.
MD-I2 is judged as well by the harness's own listener, registered on the store after the caches':
each notification that reaches it must reach it on the event thread, so a store that delivers
around the World's notification log (calling listeners itself, inline) is still caught.
MD-I4 and MD-I5 are judged on the **ledger**, the harness's own record of the future each client call
got back, so a store that loses an op and its own record of it (no op, no registration) is still
caught; the World's registry of op futures only adds the ops the store makes on its own behalf
(cache reads, refreshes, a callback's get), which no harness record can list. MD-I5's wait-for graph
is `wait_for`: a blocked thread's edge goes where the spec says its op is completed, not to the
`completer` the store wrote on the future. The logs are the World's instrumentation of what ran where
(each record is written by the simulated thread that did the work); which thread is blocked on what,
`can_progress()` and `quiescent()` are the scheduler's, which the harness drives and whose own
behaviour is tested separately.

`bench` measures the cost properties (MD-I6, MD-P1) the zero-cost model leaves out, on the spec's loads.

A world whose tasks are suspended holds their greenlets; the adapter disposes it when it is closed
or garbage-collected (`weakref.finalize`), so suspended tasks unwind at a known point, and its
closures never capture the adapter itself, so dropping the adapter is enough. The world starts no
OS thread, so the conformance engine may fork its workers after replaying metadata walks.
"""

from __future__ import annotations

import functools
import itertools
import re
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from models.core import Action, Json, Observation, Param
from models.metadata import (
    CLOSED_ERROR,
    CURRENT,
    EXPLORE_CONFIGS,
    HYPOTHESIS_CONFIG,
    HYPOTHESIS_MEMORY_CONFIG,
    REJECTED_ERROR,
    MetadataModel,
    choose_thread_index,
    client_label,
)
from models.metadata_locks import DEFAULT_CONFIG as LOCKS_DEFAULT_CONFIG
from models.metadata_locks import MetadataLocksModel
from properties.engines.lockstep import DIVERGENCE, BaseImplementation, Implementation
from properties.engines.mechanism import Mechanism, Property
from properties.metadata import coverage as metadata_coverage
from properties.metadata import protocol as metadata_protocol
from properties.metadata.guards import GUARDS
from properties.metadata.locks import MetadataLocksReference
from properties.metadata.proofs import proofs
from reference_impl.metadata import (
    Costs,
    GetResult,
    JsonSerde,
    MemoryBackend,
    MetadataStore,
    Notification,
    RecordingSerde,
    SimFuture,
    Stat,
    ThreadState,
    World,
    ZkBackend,
    current_thread_name,
    join,
)

_PATH_IN_LABEL = re.compile(r"\((/[^),]*)\)")
"""The path in a task label such as `async:get(/a)` or `serialize(/a)`."""


def cycle_edges(graph: nx.DiGraph) -> list[list[str]]:
    """The wait-for edges that lie on a cycle, sorted: the same canonical form as the model's `deadlock`."""
    edges = list(graph.edges(data="label"))
    if not edges:
        return []
    component = {}
    for i, nodes in enumerate(nx.strongly_connected_components(graph)):
        if len(nodes) > 1:
            component.update(dict.fromkeys(nodes, i))
    return sorted([u, v, label] for u, v, label in edges if u == v or component.get(u, -1) == component.get(v, -2))


@functools.lru_cache(maxsize=64)
def _cached_model(config: tuple[tuple[str, Param], ...], variant: str) -> MetadataModel:
    return MetadataModel(dict(config), variant)


def make_model(config: Mapping[str, Param] | None, variant: str) -> MetadataModel:
    """The model for `config` and `variant`; models are immutable, so one is shared per configuration."""
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (config or {}).items()))
    return _cached_model(frozen, variant)


class MetadataReference(BaseImplementation):
    """The reference store, cache and client threads, stepped by model actions."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        self.model = make_model(config, variant)
        m = self.model
        self.world = world = World(seed=0)
        self._finalizer = weakref.finalize(self, world.dispose)
        backend = MemoryBackend(world) if m.memory else ZkBackend(world)
        for p, node in zip(m.paths, m.initial_tree, strict=True):
            if node is not None:
                backend.tree.data[p] = (str(node[0]).encode(), node[1])
        self.store = MetadataStore(
            world,
            m.name,
            backend=backend,
            threading="legacy" if variant == "legacy" else "pip453",
            batching_enabled=m.batching,
            max_delay_ms=m.period,
            max_operations=m.max_operations,
            num_serdes_threads=m.n_workers,
        )
        self.serde: RecordingSerde[Any] = RecordingSerde(JsonSerde())
        self.cache = self.store.metadata_cache(self.serde)
        self.heard: list[str] = []
        """The harness's own listener's record: the thread each notification reached it on (MD-I2)."""
        self.store.register_listener(functools.partial(_hear, self.heard))
        self.clients = [world.thread(f"client-{c}") for c in range(len(m.clients))]
        self.ledger: list[SimFuture[Any]] = []
        """The harness's own record: the future each client call got back, in call order (MD-I4, MD-I5)."""
        self.read_through: set[str] = set()
        """The harness's own record: the paths a client read through the cache (MD-I8)."""
        self.cycle: list[list[str]] = []
        self.disagreement = ""
        self._states: list[ThreadState] | None = None
        self.broken: set[str] = set()
        """The lock-level invariants a step broke (MD-LK1, MD-LK2), judged on the ledger of each step."""
        self.backend = None if m.memory else world.get_thread(f"{m.name}-backend")
        self.closed_by_harness = False
        """The harness's own record that it called close (MD-I10 never reads `store.closed`)."""
        self.raw_calls: list[tuple[SimFuture[Any], str]] = []
        """The harness's own record: each raw store call's future (get, put, delete) and the client that made it
        (MD-I9)."""
        self.late_calls: list[SimFuture[Any]] = []
        """The futures of the raw store calls (and a store callback's get) made in this step after close (MD-I10)."""
        self._tree_at_close: dict[str, tuple[bytes, int]] = {}
        """The data tree when the harness closed the store (MD-I10: the memory backend changes nothing after)."""

    def close(self) -> None:
        """Dispose the world: unwind its suspended tasks now rather than whenever the GC frees them."""
        self._finalizer()

    # -- Implementation ----------------------------------------------------------------------------
    def apply(self, action: Action) -> Observation:
        """Step the world; a choice the reference does not offer is a divergence it reports, not a crash."""
        w = self.world
        self.disagreement = ""
        before = self._ledger()
        runner: str | None = None
        if action.name in ("run", "advance"):
            offered = [arg for kind, arg in w.choices() if kind == action.name]
            names = [t if isinstance(t, int) else t.name for t in offered]
            wanted = str(action["thread"]) if action.name == "run" else None
            if (wanted not in names) if action.name == "run" else len(offered) != 1:
                self.disagreement = f"the reference does not offer {action} (it offers {names})"
            else:
                w.step((action.name, wanted if wanted is not None else offered[0]))
                runner = wanted
        elif action.name == "close":
            if not self.closed_by_harness:
                self._tree_at_close = dict(self.store.backend.tree.data)
            self.store.close()
            self.closed_by_harness = True
        else:
            client = self.clients[int(action["c"])]  # type: ignore[arg-type]
            client.execute(self._call(action, client.name), label=client_label(action))
            w.step(("run", client))
            runner = client.name
        self._judge_locks(runner, before)
        self._judge_close(before)
        self._states = None
        self.cycle = cycle_edges(w.wait_for_graph()) if _blocked(self.threads()) else []
        return None

    def _call(self, action: Action, client: str) -> Callable[[], object]:
        """The client call, which files the future it gets back in the ledger (a raw store call also in
        `raw_calls`, and in `late_calls` after close); it closes over the store, the cache and the ledgers, never
        over the adapter."""
        store, cache, ledger, raw, late = self.store, self.cache, self.ledger, self.raw_calls, self.late_calls
        closed = self.closed_by_harness
        p = str(action["p"])
        q = str(action.get("q", p))
        if action.name in ("cache_get", "callback"):
            self.read_through.add(p)

        def blocking(_: object) -> object:
            return join(store.get(q))

        calls: dict[str, Callable[[], SimFuture[Any] | None]] = {
            "get": lambda: store.get(p),
            "put": lambda: store.put(p, str(len(store.ops) + 1).encode()),
            "delete": lambda: store.delete(p),
            "cache_get": lambda: cache.get(p),
            "refresh": lambda: cache.refresh(p),
            "callback": lambda: cache.get(p).then_apply(blocking),
            "store_callback": lambda: store.get(p).then_apply(blocking),
        }
        call = calls[action.name]

        def filed() -> None:
            got = call()
            if got is not None:
                ledger.append(got)
            if got is not None and action.name in ("get", "put", "delete", "store_callback"):
                if action.name != "store_callback":
                    raw.append((got, client))
                if closed:
                    late.append(got)

        return filed

    # -- the lock ledger (MD-LK1, MD-LK2) ---------------------------------------------------------------
    def _ledger(self) -> tuple[dict[str, SimFuture[Any]], dict[str, str | None], list[str]]:
        """Before a step: each cached path's entry (by identity), who holds each key lock, the backend's tasks."""
        backend = self.backend
        tasks = [] if backend is None else [*backend.queued, *([backend.running] if backend.running else [])]
        return dict(self.cache.entries), {p: lock.holder for p, lock in self.cache._key_locks.items()}, tasks

    def _judge_locks(self, runner: str | None,
                     before: tuple[dict[str, SimFuture[Any]], dict[str, str | None], list[str]]) -> None:
        """MD-LK1: with PIP-453 batching, a batch reaches the backend only from the thread holding the flush lock
        (the flusher holds it from the first batch to the last, yielding between them). MD-LK2: a path's cache
        entry is replaced or removed only by the thread holding that path's key lock, or while no other thread holds
        it (Caffeine's per-key lock: a refresh holds it across its read). A miss publishing a new entry is left
        out: the reference publishes it in one step without the lock, which a refresh can meet only after the
        closing store failed the entry it held the lock for."""
        if runner is None:
            return
        entries, holders, tasks = before
        after_entries, _, after_tasks = self._ledger()
        for path in entries:  # an entry replaced or removed: a miss publishes a new one atomically, lock or not
            if entries[path] is after_entries.get(path):
                continue
            lock = self.cache._key_locks.get(path)
            if {holders.get(path), lock.holder if lock is not None else None} - {None, runner}:
                self.broken.add("MD-LK2")
        dispatched = [t for t in after_tasks if t not in tasks]
        flush_lock = self.store.flush_lock
        if self.model.pip453 and self.model.batching and dispatched and (
                flush_lock is None or flush_lock.holder != runner):
            self.broken.add("MD-LK1")

    def _judge_close(self, before: tuple[dict[str, SimFuture[Any]], dict[str, str | None], list[str]]) -> None:
        """MD-I10, on the harness's own records: after the harness closed the store, a raw store call fails within
        its own step with the closed error, and no op reaches the backend: no batch is queued on the zk backend's
        thread after close (the ones queued before may still run, as upstream's ZooKeeper client answers what it was
        sent), and the memory backend, which applies an op inside the call, changes no node."""
        late, self.late_calls[:] = list(self.late_calls), []
        if any(not f.done() or type(f.exception()).__name__ != CLOSED_ERROR for f in late):
            self.broken.add("MD-I10")
        if not self.closed_by_harness:
            return
        if [t for t in self._ledger()[2] if t not in before[2]]:
            self.broken.add("MD-I10")
        if self.model.memory and self.store.backend.tree.data != self._tree_at_close:
            self.broken.add("MD-I10")

    def threads(self) -> list[ThreadState]:
        """The threads' states since the last step, taken once: `vars` and `violations` both read them."""
        if self._states is None:
            self._states = self.world.thread_states()
        return self._states

    def vars(self) -> dict[str, Json]:
        w, store = self.world, self.store
        threads: dict[str, Json] = {}
        for t in self.threads():
            if t.queued or t.current is not None:
                threads[t.name] = {
                    "queue": list(t.queued),
                    "task": t.current or "",
                    "at": t.suspended_at or "",
                    "wait": t.blocked_on or "",
                }
        timers = [tm.deadline for tm in w._timers]
        key_locks = {p: lock.holder for p, lock in self.cache._key_locks.items() if lock.holder is not None}
        return {
            "now": w.now,
            "closed": store.closed,
            "threads": threads,
            "read_q": [op.id for op in store.read_q],
            "write_q": [op.id for op in store.write_q],
            "ops": [[op.future.label, _outcome(op.future)] for op in store.ops],
            "tree": {p: [int(data), version] for p, (data, version) in store.backend.tree.data.items()},
            "cache": {p: _entry(f) for p, f in self.cache.entries.items()},
            "flush_lock": (store.flush_lock.holder or "") if store.flush_lock is not None else "",
            "flush_in_progress": store.flush_in_progress,
            "key_locks": key_locks,  # type: ignore[dict-item]
            "flush_timer": timers[0] if timers else -1,
            "deadlock": self.cycle,  # type: ignore[dict-item]
            "stuck": w.stuck(),
        }

    def violations(self) -> list[str]:
        w, store, m = self.world, self.store, self.model
        # MD-I10 first: a call the closed store took in hangs at quiescence too (MD-I4), and the cause outranks it
        out = [DIVERGENCE] if self.disagreement else []
        out += ["MD-I10"] if "MD-I10" in self.broken else []
        states = self.threads()
        if m.pip453 and not (_md_i1(m, self.serde) and _serde_queued_right(m, states)):
            out.append("MD-I1")
        event = event_thread(m)
        if not (_md_i2(w, m) and _notifications_queued_right(m, states) and all(t == event for t in self.heard)):
            out.append("MD-I2")
        if not _md_i3(w):
            out.append("MD-I3")
        quiescent = w.quiescent()
        futures = [*self.ledger, *w.op_futures]
        if any(f.attempts > 1 for f in futures) or (quiescent and not all(f.done() for f in futures)):
            out.append("MD-I4")
        blocked = _blocked(states)
        if (blocked and cycle_edges(wait_for(m, states))) or (
            not w.can_progress() and (blocked or not all(f.done() for f in futures))
        ):
            out.append("MD-I5")
        if quiescent and not store.closed and not _md_i7(store, self.cache):
            out.append("MD-I7")
        if not set(self.cache.entries) <= self.read_through:
            out.append("MD-I8")  # an entry nobody read: a refresh is a computeIfPresent, it never creates one
        if not _md_i9(m, [*((f, f.submitted_on) for f in w.op_futures), *self.raw_calls]):
            out.append("MD-I9")
        return out + sorted(self.broken - {"MD-I10"})


def _blocked(states: list[ThreadState]) -> bool:
    return any(t.blocked_on is not None for t in states)


def wait_for(model: MetadataModel, states: list[ThreadState]) -> nx.DiGraph:
    """The wait-for graph by the spec's rules, not by the futures' own `completer`: a thread blocked on a lock
    waits for its holder (the scheduler's record); one blocked on an op future (a callback's join) waits
    for the thread the spec completes ops on, `<N>-event` (legacy `<N>`) on zk, and on the memory backend
    for itself, since a memory op is completed by its caller before the call returns."""
    locks = {model.flush_lock_name, *model.key_lock_names}
    g = nx.DiGraph()
    for t in states:
        if t.blocked_on is None:
            continue
        op_completer = t.name if model.memory else event_thread(model)
        target = t.waiting_for if t.blocked_on in locks else op_completer
        if target is not None:
            g.add_edge(t.name, target, label=t.blocked_on)
    return g


def _md_i9(model: MetadataModel, futures: list[tuple[SimFuture[Any], str | None]]) -> bool:
    """Each done op future was completed (and its non-async callbacks ran) where the merged code completes it:
    the backend's answer on `<N>-event` (legacy `<N>`: ZKMetadataStore's `safeExecuteCallbacks` posts it to the
    event executor), or on the memory backend on the thread that submitted the op; a rejected completion task's
    RejectedExecutionError on the backend's callback thread (the handler of `safeExecuteCallback`); the closed error
    never on the backend's thread, nor with PIP-453 on the event thread (it is raised by the caller, the closer or
    the flush that met the closed store). `futures` pairs each future with its submitter."""
    event, backend = event_thread(model), f"{model.name}-backend"
    for f, submitter in futures:
        if not f.done():
            continue
        on, error = f.completed_on, f.exception()
        name = type(error).__name__ if error is not None else ""
        if name == CLOSED_ERROR:
            right = on != backend and (on != event or not model.pip453)
        elif name == REJECTED_ERROR:
            right = on == backend
        else:
            right = on == (submitter if model.memory else event)
        if not right:
            return False
    return True


def _outcome(f: SimFuture[Any]) -> Json:
    if not f.done():
        return "pending"
    error = f.exception()
    if error is not None:
        return type(error).__name__
    value = f.result()
    if value is None:
        return "absent" if f.label.startswith("get(") else "deleted"
    if isinstance(value, GetResult):
        return [int(value.value), value.stat.version]
    assert isinstance(value, Stat)
    return value.version


def _entry(f: SimFuture[Any]) -> Json:
    if not f.done():
        return "pending"
    if f.failed():
        return "failed"
    r = f.result()
    return "absent" if r is None else [r.value, r.stat.version]


def worker_of(model: MetadataModel, path: str) -> str:
    """The thread the spec assigns `path`'s serde to (§2.1), computed without the reference's executor."""
    return f"{model.name}-worker-OrderedExecutor-{choose_thread_index(path, model.n_workers)}-0"


def _md_i1(model: MetadataModel, serde: RecordingSerde[Any]) -> bool:
    """Every serde of p on p's worker by the spec's hash, and p's serde tasks start in submission order."""
    last: dict[str, int] = {}
    for r in serde.records:
        if r.thread != worker_of(model, r.path) or r.task is None or r.task < last.get(r.path, -1):
            return False
        last[r.path] = r.task
    return True


def _serde_queued_right(model: MetadataModel, states: list[ThreadState]) -> bool:
    """MD-I1 one step early: a cache serde task (`serialize(p)`, or `async:get(p)`, the decode continuation;
    only the cache submits async continuations) sits only on p's worker by the spec's hash, and a worker
    holds no task of another path."""
    prefix = f"{model.name}-worker-"
    for t in states:
        for label in (*t.queued, *((t.current,) if t.current else ())):
            path = _PATH_IN_LABEL.search(label)
            serde = label.startswith(("async:", "serialize("))
            if (serde or t.name.startswith(prefix)) and (path is None or worker_of(model, path.group(1)) != t.name):
                return False
    return True


def event_thread(model: MetadataModel) -> str:
    """The thread the spec delivers notifications on (§4.1): `<N>-event`, legacy `<N>`."""
    return model.name if model.variant == "legacy" else f"{model.name}-event"


def _notifications_queued_right(model: MetadataModel, states: list[ThreadState]) -> bool:
    """MD-I2 one step early: a notification task (`notify:...`) is only ever queued on the event thread."""
    event = event_thread(model)
    return all(
        t.name == event
        for t in states
        for label in (*t.queued, *((t.current,) if t.current else ()))
        if label.startswith("notify:")
    )


def _hear(heard: list[str], _: Notification) -> None:
    """The harness's listener: notes which thread delivered the notification to it."""
    heard.append(current_thread_name())


def _md_i2(world: World, model: MetadataModel) -> bool:
    """Delivered on `<N>-event` (legacy `<N>`), one at a time, in arrival order."""
    event = event_thread(model)
    started = sorted((r for r in world.notification_log if r.start_seq is not None), key=lambda r: r.start_seq)
    if any(r.thread != event for r in started):
        return False
    return all(
        a.arrival_seq < b.arrival_seq and a.end_seq is not None and b.start_seq is not None and a.end_seq < b.start_seq
        for a, b in itertools.pairwise(started)
    )


def _md_i3(world: World) -> bool:
    """No two flushes overlap, and read batches come before write batches."""
    records = sorted(world.flush_log, key=lambda r: r.start_seq)
    if any(a.end_seq is None or a.end_seq > b.start_seq for a, b in itertools.pairwise(records)):
        return False
    return all([k for k, _ in r.batches] == sorted(k for k, _ in r.batches) for r in records)


def _md_i7(store: MetadataStore, cache: Any) -> bool:
    tree = store.backend.tree.data
    for path, f in cache.entries.items():
        if not f.done() or f.failed():
            continue
        r = f.result()
        node = tree.get(path)
        if (r is None) != (node is None) or (r is not None and node is not None and (r.stat.version, r.value) != (
            node[1], int(node[0])
        )):
            return False
    return True


def _percentile(values: list[int], q: int) -> int:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, -(-q * len(ordered) // 100) - 1)]


def _load(
    threading: str, paths: list[str], puts: list[int], *, serde_ms: int, workers: int = 1, schedule: str = "fixed_rate",
    until: int | None = None,
) -> dict[str, Any]:
    """Cold-cache loads of `paths` at t=0 and one put of "/w" at each time in `puts`, FIFO-scheduled (§6a)."""
    with World() as w:
        client = w.scheduled_thread("client")
        backend = ZkBackend(w)
        for p in paths:
            backend.tree.data[p] = (b"0", 0)
        store = MetadataStore(
            w, "N", backend=backend, threading="legacy" if threading == "legacy" else "pip453", max_delay_ms=5,
            num_serdes_threads=workers, flush_schedule=schedule,  # type: ignore[arg-type]
            costs=Costs(serde_ms=serde_ms),
        )
        drained = [0]

        class EndOfSerde(JsonSerde):
            """Notes when each deserialize ends: its segment's start plus the cost charged so far."""

            def deserialize(self, path: str, data: bytes, stat: Stat) -> Any:
                drained[0] = max(drained[0], w.now + w._segment_cost)
                return super().deserialize(path, data, stat)

        cache = store.metadata_cache(EndOfSerde())
        client.schedule(lambda: [cache.get(p) for p in paths], 0)
        for t in puts:
            client.schedule(lambda: store.put("/w", b"1"), t)
        if until is None:
            w.run()
        else:
            w.run_until_time(until)
        waits = [wait for _, wait in store.queue_waits]
        hold = max((r.end - r.start for r in w.flush_log if r.end is not None), default=0)
        return {
            "waits": waits,
            "hold": hold,
            "bound": max(store.config.max_delay_ms, hold) + hold,
            "periodic_starts": [r.start for r in w.flush_log if r.periodic],
            "drained": drained[0],
        }


def bench(_folder: Path) -> dict[str, object]:
    """§4.5/§6: queue waits (virtual ms) of the same load through legacy and pip453, and §6c's flush burst.

    `canonical` is §6a (ten cold cache loads at t=0, a put at t=6, serde 2 ms); `burst` is 100 cold
    loads at t=0 (serde 1 ms) with a put every 5 ms while the backlog drains, with 1 and 4 serde
    threads for pip453 (`serde_drained` is when the last deserialize ended). MD-I6 is `max wait <= max(P, L)
    + L`. `stall` runs §6c: the legacy canonical load up to t=30 with fixed rate and fixed delay; MD-P1 holds
    when periodic flushes start >= P apart.
    """
    out: dict[str, object] = {}
    canonical = [f"/l{i}" for i in range(10)]
    burst = [f"/persistent/public/default/t{i}" for i in range(100)]
    loads = {
        "canonical": (canonical, [6], 2, [("legacy", 1), ("pip453", 1)]),
        "burst": (burst, list(range(1, 100, 5)), 1, [("legacy", 1), ("pip453", 1), ("pip453", 4)]),
    }
    for load, (paths, puts, serde_ms, runs) in loads.items():
        for threading, workers in runs:
            r = _load(threading, paths, puts, serde_ms=serde_ms, workers=workers)
            name = f"{load}_{threading}" + (f"_{workers}w" if threading == "pip453" else "")
            waits = r["waits"]
            for q in (50, 90, 99):
                out[f"{name}_wait_p{q}_ms"] = _percentile(waits, q)
            out[f"{name}_wait_max_ms"] = max(waits)
            out[f"{name}_serde_drained_ms"] = r["drained"]
            out[f"{name}_MD-I6"] = f"{'holds' if max(waits) <= r['bound'] else 'EXCEEDED'} (bound {r['bound']})"
    for schedule in ("fixed_rate", "fixed_delay"):
        r = _load("legacy", canonical, [6], serde_ms=2, schedule=schedule, until=30)
        starts = r["periodic_starts"]
        out[f"stall_{schedule}_flush_starts"] = " ".join(map(str, starts))
        out[f"stall_{schedule}_max_burst"] = max(starts.count(t) for t in starts)
        out[f"stall_{schedule}_MD-P1"] = "holds" if all(b - a >= 5 for a, b in itertools.pairwise(starts)) else "fails"
    return out


def make_scope_model(config: Mapping[str, Param] | None, variant: str) -> MetadataModel | MetadataLocksModel:
    """`scope: locks` selects the batched store at lock granularity (models/metadata_locks.py), else the store."""
    if config is not None and config.get("scope") == "locks":
        return MetadataLocksModel(config, variant)
    return make_model(config, variant)


def make_reference(config: Mapping[str, Param] | None, variant: str) -> Implementation:
    if config is not None and config.get("scope") == "locks":
        return MetadataLocksReference(config, variant)
    return MetadataReference(config, variant)


# The batched store's lock scope (models/metadata_locks.py), replayed on the upstream-granularity reference
# (reference_impl/metadata/lock_level.py): `locks` races two puts' inline flushes with a periodic one (MD-LK1's
# monitor), `locks-close` one put and a periodic flush with close (the finding: an op enqueued across close is never
# completed, and the drain polls while a flush consumes), `locks-close-fix` the same on the fix.
LOCKS_FINDING = "docs/findings/metadata-close-lost-op.md"
_CLOSE: dict[str, Param] = {"close": True, "other": ()}
LOCKS_EXPLORE_CONFIGS: dict[str, Mapping[str, Param]] = {
    "locks": LOCKS_DEFAULT_CONFIG,
    "locks-close": {**LOCKS_DEFAULT_CONFIG, **_CLOSE},
    "locks-close-fix": {**LOCKS_DEFAULT_CONFIG, **_CLOSE, "order": "fixed"},
}
LOCKS_FINDINGS: dict[str, Mapping[str, str]] = {"locks-close": {"MD-LK3": LOCKS_FINDING, "MD-LK4": LOCKS_FINDING}}
"""What each lock configuration must break (see Mechanism.findings); `locks` and the fix break nothing."""


MECHANISM = Mechanism(
    name="metadata",
    spec="docs/spec/metadata.md",
    limits={"workers": (1, 64), "clients": (0, 16), "max_ops": (0, 1_000), "max_operations": (0, 10**6),
            "max_delay_ms": (0, 10**6), "flushes": (0, 1_000)},
    make_model=make_scope_model,
    make_reference=make_reference,
    current=CURRENT,
    twins={"legacy": "MD-I5", "blocking_callback": "MD-I5"},
    guards=GUARDS,
    reference_judges={"metadata": ("MD-I1", "MD-I2", "MD-I3", "MD-I4", "MD-I5", "MD-I7", "MD-I8", "MD-I9",
                                   "MD-I10", "MD-LK1", "MD-LK2"),
                       "metadata/locks": ("MD-LK1", "MD-LK3", "MD-LK4", "MD-I10")},
    beyond_model={
        "MD-I1-W": Property("the Z3 worker pool is well formed: a path's submitted tasks share a worker, a worker "
                            "runs one task at a time and starts its tasks in submission order", ("z3",)),
        "MD-I6": Property("with batching, every op waits in the queue at most max(P, L) + L, and pip453 no longer "
                          "than legacy on the same load", ("bench",)),
        "MD-I8": Property("the cache holds only paths a client read through it: a refresh reloads an entry that is "
                          "cached and never creates one", ("reference",)),
        "MD-I9": Property("every op future is completed, and its non-async callbacks run, on the thread the merged "
                          "PIP-453 code names for it: the backend's answer on <N>-event, a memory op on its caller, "
                          "a rejected completion on the backend's thread, the closed error off the event thread",
                          ("reference",)),
        "MD-I10": Property("after close, a store call fails within its step with AlreadyClosedError and no op "
                           "reaches the backend that was not handed to it before close", ("reference",)),
        "MD-LK2": Property("a path's cache entry is replaced or removed only by the thread holding that path's key "
                          "lock, or while no other thread holds it", ("reference",)),
        "MD-P1": Property("successive periodic flushes start at least P apart (a diagnostic: a fixed-rate schedule "
                          "breaks it after a stall, a fixed-delay one does not)", ("bench",)),
    },
    quick_configs=("small", "memory"),  # the store and the memory store
    # the store's `small` first (the configuration the engines' tests take as representative), then the lock
    # scope's (a few hundred states each), then the rest of the store's
    explore_configs={"small": EXPLORE_CONFIGS["small"], **LOCKS_EXPLORE_CONFIGS, **EXPLORE_CONFIGS},
    findings=LOCKS_FINDINGS,
    hypothesis_configs={"default": HYPOTHESIS_CONFIG, "memory": HYPOTHESIS_MEMORY_CONFIG},
    proofs=proofs,
    bench=bench,
    interesting=metadata_coverage.INTERESTING,
    not_offered=metadata_coverage.NOT_OFFERED,
    vocabularies=metadata_protocol.VOCABULARIES,
    scope_of=metadata_protocol.scope_of,
)
