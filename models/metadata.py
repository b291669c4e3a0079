"""The executable spec of the metadata-store threading model (PIP-453, `docs/spec/metadata.md`).

A pure transition system at the granularity of the spec's atomic segments (§2.0): `run(thread)` runs
one segment of one simulated thread, `advance` moves the virtual clock to the next timer, client
actions (`get`, `put`, `delete`, `cache_get`, `refresh`, `callback`, `store_callback`) submit a call
to a client thread and run that segment at once, and `close` closes the store from the harness. It
is written from the spec, independently of `reference_impl/metadata/`, so the two run in lockstep.

Scope: one store on the zk backend (batched or not) or the memory backend, with one `MetadataCache`,
and every cost 0, so time passes only through the periodic flush and fixed rate and fixed delay
coincide. The cost properties (MD-I6's queue-wait bound, MD-P1's flush spacing after a stall) need
costs and are measured by the bench on the reference (`properties.metadata.binding.bench`). Not
modelled: faults, retries, read-modify-update; `max_size_kb` never limits a batch at these sizes.

The memory backend (§4.2, upstream `LocalMemoryMetadataStore`) has no batching, no flusher and no
backend thread: an op is applied inside the segment that calls it, on the calling thread (a client,
the event thread's refresh, a worker running a callback), its notifications (Created, Modified or
Deleted, then ChildrenChanged for every proper ancestor) are queued on the event thread, and its
future is completed there and then, so its non-async callbacks run at once on the caller and a
`join` on it never waits. Races only it has: a write completes before its notification is
delivered, and a notification's refresh holds the new value, read on the event thread, while
clients still get the old entry.

How a segment is modelled: a running task is a *continuation*, a tuple of small instructions
(`_FLUSH`, `_NEXT`, `_SETTLE`, `_JOIN`, ...). A segment pops instructions until one suspends the
thread (a `yield_point`, a `join` on a pending op, a held lock). Completing a future pushes its
callbacks' instructions in front of the rest, which is how `CompletableFuture` runs non-async
continuations inside the completing segment, so a callback that blocks suspends everything after
it. States are immutable nested tuples. `key` drops the absolute clock (every other time is
relative) and treats the client threads as a multiset (clients are interchangeable).

Properties: MD-I1 (a path's decode tasks only on its worker), MD-I2 (notification tasks only on the
event thread), MD-I3 (one flush at a time), MD-I4 (exactly-once completion, all done at
quiescence), MD-I5 (no deadlock: no wait-for cycle and never stuck; the cycle is the `deadlock`
variable, in the wait-for labels of the reference), MD-I7 (cache coherent at quiescence while open),
and the liveness MD-L1 (quiescence with every op done stays reachable).

Variants (§6): `pip453` (current), `legacy` (one scheduled thread `<N>` does everything and the
cache decodes inline, so a blocking callback on a cache read runs on, and deadlocks, `<N>`) and
`blocking_callback` (pip453 plus `store_callback`, the PIP's own example: a callback on a raw
`store.get` that joins another get, which runs on and blocks `<N>-event`).

Config keys (see `EXPLORE_CONFIGS`): ``store`` (name N), ``paths``, ``initial`` (paths present at
t=0, value 0, version 0), ``workers`` (num_serdes_threads), ``clients``, ``max_ops`` (budget of
client calls), ``ops`` (client actions offered), ``batching``, ``max_operations``, ``max_delay_ms``
(P), ``close`` (offer `close`: while calls are left, and, being idempotent, as the step taken when
nothing else can happen, so no state is terminal), ``backend`` (``"zk"`` or ``"memory"``; the memory
store ignores ``batching``, as the reference does).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

from models.core import (
    Action,
    ActionNotEnabled,
    ConfigReader,
    Invariant,
    Json,
    Liveness,
    Observation,
    Param,
    configured,
    int_param,
)

VARIANTS = ("pip453", "legacy", "blocking_callback")
CURRENT = "pip453"
BACKENDS = ("zk", "memory")
CLIENT_OPS = ("get", "put", "delete", "cache_get", "refresh", "callback", "store_callback")
ACTION_NAMES = (*CLIENT_OPS, "run", "advance", "close")

EXPLORE_CONFIG: dict[str, Param] = {
    "store": "N",
    "paths": ("/a", "/c"),
    "initial": ("/a",),
    "workers": 2,
    "clients": 2,
    "max_ops": 2,
    "ops": ("put", "cache_get", "callback", "store_callback"),
    "batching": True,
    "max_operations": 1000,
    "max_delay_ms": 5,
    "close": True,
    "backend": "zk",
}
"""2 paths on 2 workers ("/a" maps to worker 1, "/c" to 0), 2 clients, 2 calls, close at any point."""

EXPLORE_CONFIGS: dict[str, dict[str, Param]] = {
    "small": EXPLORE_CONFIG,
    "unbatched": {
        **EXPLORE_CONFIG, "ops": ("get", "delete", "cache_get", "refresh", "callback", "store_callback"),
        "batching": False,
    },
    "memory": {
        **EXPLORE_CONFIG, "backend": "memory", "paths": ("/a", "/a/b/c"), "max_ops": 3,
        "ops": ("put", "delete", "cache_get", "refresh"),
    },
    "size_flush": {
        **EXPLORE_CONFIG, "ops": ("put", "cache_get", "refresh", "callback", "store_callback"), "max_operations": 1,
    },
}
"""The explorer's configurations: batching on, batching off, the memory backend (ops applied on the caller;
"/a/b/c" on worker 0 has two ancestors to notify, "/a" is one of them) and inline size-triggered flushes (PIP-453),
the largest last: `check` replays them in this order, so a bug the small ones show is found in seconds."""

HYPOTHESIS_CONFIG: dict[str, Param] = {
    **EXPLORE_CONFIG,
    "paths": ("/a", "/b", "/c"),
    "max_ops": 5,
    "ops": CLIENT_OPS,
    "max_operations": 2,
}
"""3 paths ("/a" and "/b" share a worker), 2 clients, 5 calls, size flushes, every client action."""

HYPOTHESIS_MEMORY_CONFIG: dict[str, Param] = {
    **HYPOTHESIS_CONFIG, "backend": "memory", "paths": ("/a", "/a/b", "/a/b/c"), "max_operations": 1000,
}
"""The memory backend with every client action: "/a" is the parent of "/a/b" and an ancestor of "/a/b/c"."""

DEFAULT_CONFIG: dict[str, Param] = {**EXPLORE_CONFIG, "ops": CLIENT_OPS}

# Instruction opcodes (the first element of each instruction tuple).
_FLUSH, _NEXT, _DISPATCH, _FLUSH_END, _YIELD, _SETTLE, _JOIN, _NEWOP, _READ_GET, _READ_REF = range(10)
_RAWCB, _CGET, _REFRESH, _ACQ_KEY, _REFRESH2, _PUBLISH, _INVALIDATE, _INVAL2, _DELIVER, _DECODE = range(10, 20)
_BACKEND = 20

_EXTERNAL = -2  # the harness's own context (close is called between steps)
_ABSENT, _FAILED_AT_ONCE = -1, -2  # cache entry markers (otherwise the op id of the entry's read)
_DROP = -1  # the cache's drop-if-failed listener on an entry future
_PENDING = None
_READ = -1  # an op's role: the source of a cache read (else -2 plain, or q >= 0: a raw blocking callback)
_PLAIN = -2
CLOSED_ERROR, REJECTED_ERROR, NOT_FOUND_ERROR = "AlreadyClosedError", "RejectedExecutionError", "NotFoundError"


def java_string_hash(s: str) -> int:
    """Java `String.hashCode` over UTF-16 code units, signed 32-bit."""
    data = s.encode("utf-16-le")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | (data[i + 1] << 8))) & 0xFFFF_FFFF
    return h - (1 << 32) if h & 0x8000_0000 else h


def choose_thread_index(key: str, n: int) -> int:
    """BookKeeper 4.18.0 `chooseThread`: sign-extend, unsigned shift right by 1, modulo n."""
    return 0 if n == 1 else ((java_string_hash(key) & 0xFFFF_FFFF_FFFF_FFFF) >> 1) % n


def client_label(action: Action) -> str:
    """The label of the client task an action submits; the reference adapter uses the same one."""
    if action.name in ("callback", "store_callback"):
        return f"{action.name}({action['p']},{action['q']})"
    return f"{action.name}({action['p']})"


class Th(NamedTuple):
    """One simulated thread: queued tasks, the started task, its continuation and why it paused."""

    queue: tuple[tuple[Any, ...], ...]
    task: tuple[Any, ...] | None
    cont: tuple[tuple[Any, ...], ...]
    at: str  # the yield label it paused at, or ""
    wait: tuple[Any, ...] | None  # ("op", k) | ("flush",) | ("key", p) while it waits


class Op(NamedTuple):
    """A store op and, when it is the source of a cache read, the entry future `D` built on it."""

    kind: str
    path: int
    role: int  # _PLAIN, _READ or the path index q of a raw blocking callback
    outcome: tuple[str, Any] | None  # ("ok", result) | ("err", error name); None while pending
    d: tuple[str, Any] | None  # the entry future: None pending, ("ok", (value, version) | None), ("err", name)
    listeners: tuple[int, ...]  # on a pending D: _DROP or q >= 0 (a get whose callback joins get(q))


class MDState(NamedTuple):
    now: int
    closed: bool
    budget: int
    threads: tuple[Th, ...]
    timer: int  # periodic flush: > 0 armed (deadline - now), 0 fired (queued or running), -1 none
    ops: tuple[Op, ...]
    read_q: tuple[int, ...]
    write_q: tuple[int, ...]
    entries: tuple[int, ...]  # per path: _ABSENT, _FAILED_AT_ONCE or the op id of the read
    tree: tuple[tuple[int, int] | None, ...]  # per path: (value, version)
    lock: int  # flush-lock holder (pip453), -1 if free
    flag: bool  # flush_in_progress (legacy)
    keys: tuple[int, ...]  # per path: holder of the cache's key lock, -1 if free
    flushing: int  # ghost: flushes in progress (MD-I3)
    dup: bool  # ghost: an op future was completed twice (MD-I4)


_IDLE = Th((), None, (), "", None)
_ADVANCE, _CLOSE = Action("advance"), Action("close")


class _Segment:
    """A mutable working copy of a state while one action runs; `freeze` makes the next state."""

    def __init__(self, model: MetadataModel, s: MDState) -> None:
        self.m = model
        self.now = s.now
        self.closed = s.closed
        self.budget = s.budget
        self.threads = list(s.threads)
        self.timer = s.timer
        self.ops = list(s.ops)
        self.read_q = list(s.read_q)
        self.write_q = list(s.write_q)
        self.entries = list(s.entries)
        self.tree = list(s.tree)
        self.lock = s.lock
        self.flag = s.flag
        self.keys = list(s.keys)
        self.flushing = s.flushing
        self.dup = s.dup
        self.me = _EXTERNAL
        self.stack: list[tuple[Any, ...]] = []
        self.at = ""
        self.wait: tuple[Any, ...] | None = None

    def freeze(self) -> MDState:
        return MDState(
            self.now, self.closed, self.budget, tuple(self.threads), self.timer, tuple(self.ops),
            tuple(self.read_q), tuple(self.write_q), tuple(self.entries), tuple(self.tree), self.lock,
            self.flag, tuple(self.keys), self.flushing, self.dup,
        )

    # -- executing -------------------------------------------------------------------------------
    def run(self, me: int, cont: Sequence[tuple[Any, ...]]) -> bool:
        """Run `cont` on thread `me` until it suspends (True) or ends (False)."""
        self.me = me
        self.stack = list(reversed(cont))
        self.at, self.wait = "", None
        stack = self.stack
        while stack:
            if self.exec(stack.pop()):
                return True
        return False

    def push(self, *instrs: tuple[Any, ...]) -> None:
        """Run `instrs` next, in order, before the rest of the continuation."""
        self.stack.extend(reversed(instrs))

    def submit(self, thread: int, task: tuple[Any, ...]) -> None:
        th = self.threads[thread]
        self.threads[thread] = Th((*th.queue, task), th.task, th.cont, th.at, th.wait)

    def rejects(self, thread: int) -> bool:
        """Whether a submission to `thread` is rejected: every store thread but the backend shuts at close."""
        return self.closed and thread != self.m.backend

    def exec(self, ins: tuple[Any, ...]) -> bool:
        """Execute one instruction; True when the thread suspends."""
        op = ins[0]
        m = self.m
        if op == _SETTLE:
            self.settle(ins[1], ins[2])
        elif op == _NEWOP:
            self.new_op(ins[1], ins[2], ins[3], len(ins) > 4)
        elif op == _JOIN:
            k = ins[1]
            if k >= 0 and self.ops[k].outcome is _PENDING:
                self.stack.append(ins)
                self.wait = ("op", k)
                return True
        elif op == _FLUSH:
            if m.pip453:
                if self.lock not in (-1, self.me):
                    self.stack.append(ins)
                    self.wait = ("flush",)
                    return True
                self.lock = self.me
            self.flushing += 1
            self.push((_NEXT, 0))
        elif op == _NEXT:
            q = self.write_q if ins[1] else self.read_q
            if q:
                batch = tuple(q[: m.max_operations])
                del q[: m.max_operations]
                self.push((_DISPATCH, batch, ins[1]))
                self.at = "flush:next_batch"
                return True
            if ins[1] == 0:
                self.push((_NEXT, 1))
            else:
                self.flush_end()
        elif op == _DISPATCH:
            self.push((_YIELD, "flush:dispatched"), (_NEXT, ins[2]))
            self.dispatch(ins[1])
        elif op == _YIELD:
            self.at = ins[1]
            return True
        elif op == _DECODE:
            self.decode(ins[1], ins[2])
        elif op == _BACKEND:
            self.backend(ins[1])
        elif op == _READ_GET:
            p, listener, k = ins[1], ins[2], ins[3]
            d = self.register_read(p, k)
            if k < 0:  # the store is closed: the entry published on the miss fails at once
                self.publish(p, d)
            self.listen(d, listener)
        elif op == _READ_REF:
            p = ins[1]
            d = self.register_read(p, ins[2])
            self.push((_YIELD, f"refresh({m.paths[p]})"), (_PUBLISH, p, d))
        elif op == _PUBLISH:
            p = ins[1]
            if self.entries[p] != _ABSENT:
                self.publish(p, ins[2])
            self.keys[p] = -1
        elif op == _RAWCB:
            q, k = ins[1], ins[2]
            if k >= 0:
                o = self.ops[k]
                if o.outcome is _PENDING:
                    self.ops[k] = Op(o.kind, o.path, q, o.outcome, o.d, o.listeners)
                elif o.outcome[0] == "ok":
                    self.push((_NEWOP, "get", q, (_JOIN,)))
        elif op == _CGET:
            p, listener = ins[1], ins[2]
            if self.entries[p] != _ABSENT:
                self.listen(self.entries[p], listener)
            else:
                self.push((_NEWOP, "get", p, (_READ_GET, p, listener), "publish"))
        elif op in (_REFRESH, _INVALIDATE):
            p = ins[1]
            if self.entries[p] != _ABSENT:
                self.push((_ACQ_KEY, p), (_REFRESH2 if op == _REFRESH else _INVAL2, p))
        elif op == _ACQ_KEY:
            p = ins[1]
            if self.keys[p] not in (-1, self.me):
                self.stack.append(ins)
                self.wait = ("key", p)
                return True
            assert self.keys[p] == -1, "the model never re-enters a key lock"
            self.keys[p] = self.me
        elif op == _REFRESH2:
            p = ins[1]
            if self.entries[p] != _ABSENT:
                self.push((_NEWOP, "get", p, (_READ_REF, p)))
            else:
                self.keys[p] = -1
        elif op == _INVAL2:
            self.entries[ins[1]] = _ABSENT
            self.keys[ins[1]] = -1
        elif op == _DELIVER:
            kind, p = ins[1], m.index.get(ins[2])
            if p is not None and kind in ("Created", "Modified"):
                self.push((_REFRESH, p))
            elif p is not None and kind == "Deleted":
                self.push((_INVALIDATE, p))
        else:
            raise AssertionError(f"unknown instruction {ins!r}")
        return False

    # -- store -----------------------------------------------------------------------------------
    def new_op(self, kind: str, p: int, then: tuple[Any, ...] | None, publish: bool = False) -> None:
        """`store.<kind>(path)`: a closed store fails at once (no op); else enqueue or dispatch.

        `publish`: a cache miss publishes its entry (whose id is the op's) before the op may flush inline.
        """
        m = self.m
        if self.closed:
            if then is not None:
                self.push((*then, -1))
            return
        k = len(self.ops)
        self.ops.append(Op(kind, p, _PLAIN, _PENDING, _PENDING, ()))
        if publish:
            self.publish(p, k)
        after: list[tuple[Any, ...]] = [] if then is None else [(*then, k)]
        if m.memory:
            self.apply_now(k)
        elif not m.batching:
            self.dispatch((k,))
        else:
            q = self.read_q if kind == "get" else self.write_q
            q.append(k)
            if len(q) > m.max_operations:
                if m.pip453:
                    after.insert(0, (_FLUSH,))
                elif not self.flag:
                    self.flag = True
                    self.submit(m.flusher, ("size_flush",))
        self.push(*after)

    def apply_now(self, k: int) -> None:
        """Memory backend (§4.2): apply op k on this thread, queue its notifications, complete it here.

        Only an open store gets here (`new_op` fails a closed store's call first), so the event thread
        accepts the notifications.
        """
        outcome, notes = self.apply(k)
        for kind, path in notes:
            self.submit(self.m.event, ("notify", kind, path))
        self.settle(k, outcome)

    def dispatch(self, batch: tuple[int, ...]) -> None:
        if self.closed:
            self.push(*[(_SETTLE, k, ("err", CLOSED_ERROR)) for k in batch])
            return
        self.submit(self.m.backend, ("backend", batch))

    def flush_end(self) -> None:
        self.flushing -= 1
        if self.m.pip453:
            self.lock = -1
        else:
            self.flag = False

    def apply(self, k: int) -> tuple[tuple[str, Any], list[tuple[str, str]]]:
        """Apply op k to the tree as if alone: its outcome and the notifications it causes (§4.2)."""
        m = self.m
        o = self.ops[k]
        node = self.tree[o.path]
        path = m.paths[o.path]
        if o.kind == "get":
            return ("ok", node), []
        if o.kind == "put":
            version = 0 if node is None else node[1] + 1
            self.tree[o.path] = (k + 1, version)
            notes = [("Created" if node is None else "Modified", path)]
            if node is None:
                notes.extend(("ChildrenChanged", parent) for parent in m.parents[o.path])
            return ("ok", version), notes
        if node is None:
            return ("err", NOT_FOUND_ERROR), []
        self.tree[o.path] = None
        return ("ok", None), [("Deleted", path), *(("ChildrenChanged", parent) for parent in m.parents[o.path])]

    def backend(self, batch: tuple[int, ...]) -> None:
        """Zk backend: apply each op as if alone, post its notifications, then one completion task (§4.2)."""
        m = self.m
        outcomes: list[tuple[int, tuple[str, Any]]] = []
        notes: list[tuple[str, str]] = []
        for k in batch:
            outcome, caused = self.apply(k)
            outcomes.append((k, outcome))
            notes.extend(caused)
        if not self.rejects(m.event):
            for kind, path in notes:
                self.submit(m.event, ("notify", kind, path))
            self.submit(m.event, ("complete", tuple(outcomes)))
        else:
            self.push(*[(_SETTLE, k, ("err", REJECTED_ERROR)) for k in batch])

    def settle(self, k: int, outcome: tuple[str, Any]) -> None:
        """Complete op future k; its callbacks run now, on this thread."""
        o = self.ops[k]
        if o.outcome is not _PENDING:
            self.dup = True
            return
        self.ops[k] = Op(o.kind, o.path, o.role, outcome, o.d, o.listeners)
        if o.role == _READ:
            if outcome[0] == "err":
                self.fail_d(k, outcome[1])
            elif not self.m.pip453:
                self.decode(k, outcome[1])
            elif self.rejects(self.m.workers[o.path]):
                self.fail_d(k, REJECTED_ERROR)
            else:
                self.submit(self.m.workers[o.path], ("decode", k, outcome[1], o.path))
        elif o.role >= 0 and outcome[0] == "ok":
            self.push((_NEWOP, "get", o.role, (_JOIN,)))

    # -- cache -----------------------------------------------------------------------------------
    def register_read(self, p: int, k: int) -> int:
        """`store.get(p).then_compose[_async](decode)`: the entry future D (its id is k)."""
        if k < 0:
            return _FAILED_AT_ONCE
        o = self.ops[k]
        self.ops[k] = o = Op(o.kind, o.path, _READ, o.outcome, o.d, o.listeners)
        if o.outcome is not _PENDING:  # the source completed during an inline flush
            if o.outcome[0] == "err":
                self.fail_d(k, o.outcome[1])
            elif not self.m.pip453:
                self.decode(k, o.outcome[1])
            elif self.rejects(self.m.workers[p]):
                self.fail_d(k, REJECTED_ERROR)
            else:
                self.submit(self.m.workers[p], ("decode", k, o.outcome[1], p))
        return k

    def decode(self, k: int, result: tuple[int, int] | None) -> None:
        """Deserialize the read's bytes (none for an absent node) and complete D with it."""
        o = self.ops[k]
        self.ops[k] = Op(o.kind, o.path, o.role, o.outcome, ("ok", result), ())
        self.push(*[(_NEWOP, "get", q, (_JOIN,)) for q in o.listeners if q >= 0])

    def fail_d(self, k: int, error: str) -> None:
        o = self.ops[k]
        self.ops[k] = Op(o.kind, o.path, o.role, o.outcome, ("err", error), ())
        if _DROP in o.listeners:
            self.drop_if_failed(o.path, k)

    def drop_if_failed(self, p: int, d: int) -> None:
        """Caffeine drops a failed entry, unless another thread holds the key lock (then skipped)."""
        if self.entries[p] == d and self.keys[p] in (-1, self.me):
            self.entries[p] = _ABSENT

    def d_state(self, d: int) -> tuple[str, Any] | None:
        return ("err", CLOSED_ERROR) if d == _FAILED_AT_ONCE else self.ops[d].d

    def publish(self, p: int, d: int) -> None:
        self.entries[p] = d
        state = self.d_state(d)
        if state is _PENDING:
            o = self.ops[d]
            self.ops[d] = Op(o.kind, o.path, o.role, o.outcome, o.d, (*o.listeners, _DROP))
        elif state[0] == "err":
            self.drop_if_failed(p, d)

    def listen(self, d: int, q: int) -> None:
        """`entry.then_apply(value)` (and, for q >= 0, `.then_apply(_ -> join(store.get(q)))`)."""
        state = self.d_state(d)
        if state is _PENDING:
            if q >= 0:
                o = self.ops[d]
                self.ops[d] = Op(o.kind, o.path, o.role, o.outcome, o.d, (*o.listeners, q))
        elif state[0] == "ok" and q >= 0:
            self.push((_NEWOP, "get", q, (_JOIN,)))


class MetadataModel:
    """The metadata store's threads, ops, cache and locks; see the module docstring."""

    mechanism = "metadata"
    terminal_ok = symmetric_key = threaded = None
    """No optional member of `Model`: a state without an enabled action is a deadlock, no values are alike, and
    the actions are no threads' steps."""
    action_names: Sequence[str] = ACTION_NAMES

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = CURRENT) -> None:
        cfg = configured(self.mechanism, variant, VARIANTS, config, DEFAULT_CONFIG)
        read = ConfigReader(self.mechanism, cfg)
        self.config: Mapping[str, Param] = cfg
        self.variant = variant
        self.pip453 = variant != "legacy"
        self.name = read.string("store")
        self.paths = read.strings("paths")
        if not self.paths or len(set(self.paths)) != len(self.paths):
            raise ValueError("paths must be distinct and at least one")
        for path in self.paths:
            if path == "/" or not path.startswith("/") or path.endswith("/"):
                raise ValueError(f"invalid path {path!r}")
        self.index = {p: i for i, p in enumerate(self.paths)}
        initial = read.strings("initial")
        if not set(initial) <= set(self.paths):
            raise ValueError("initial paths must be among the paths")
        self.initial_tree = tuple((0, 0) if p in initial else None for p in self.paths)
        n_workers, n_clients = read.integer("workers"), read.integer("clients")
        self.n_workers = n_workers
        self.max_ops, self.max_operations = read.integer("max_ops"), read.integer("max_operations")
        self.period = read.integer("max_delay_ms")
        backend = read.string("backend")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}")
        self.memory = backend == "memory"
        self.batching = read.flag("batching") and not self.memory  # the memory store never batches (§4.2)
        self.offer_close = read.flag("close")
        self.ops_offered = read.strings("ops")
        if n_workers < 1 or n_clients < 1 or self.max_operations < 1 or self.max_ops < 0:
            raise ValueError("workers, clients and max_operations must be >= 1, max_ops >= 0")
        if self.period < 0 or (self.batching and self.period == 0):
            raise ValueError("max_delay_ms must be >= 0, and > 0 with batching")
        if not set(self.ops_offered) <= set(CLIENT_OPS):
            raise ValueError(f"ops must be among {CLIENT_OPS}")
        self.parents = tuple(tuple(_ancestors(p, every=self.memory)) for p in self.paths)

        names: list[str] = []
        if self.pip453:
            names.append(f"{self.name}-event")
            names.extend(f"{self.name}-worker-OrderedExecutor-{i}-0" for i in range(n_workers))
            if self.batching:
                names.append(f"{self.name}-batch-flusher")
            self.event = 0
            self.workers = tuple(1 + choose_thread_index(p, n_workers) for p in self.paths)
            self.flusher = len(names) - 1 if self.batching else -1
        else:
            names.append(self.name)
            self.event = self.flusher = 0
            self.workers = ()
        self.backend = -1 if self.memory else len(names)  # the memory store has no backend thread
        if not self.memory:
            names.append(f"{self.name}-backend")
        self.clients = tuple(range(len(names), len(names) + n_clients))
        names.extend(f"client-{c}" for c in range(n_clients))
        self.thread_names = tuple(names)
        self.thread_index = {n: i for i, n in enumerate(names)}
        self.flush_lock_name = f"{self.name}-flush-lock"
        self.key_lock_names = tuple(f"{self.name}-cache0:{p}" for p in self.paths)

        self.invariants: Sequence[Invariant[MDState]] = [
            Invariant("MD-I1", self._md_i1, "pip453: a path's deserialize tasks run only on choose_thread(path)"),
            Invariant("MD-I2", self._md_i2, "notifications are delivered on the event thread in arrival order"),
            Invariant("MD-I3", self._md_i3, "at most one flush is in progress"),
            Invariant("MD-I4", self._md_i4, "no op future completes twice; at quiescence every op future is done"),
            Invariant(
                "MD-I5", self._md_i5,
                "no deadlock: no wait-for cycle and never stuck (the cycle is the `deadlock` variable)",
                lambda s: "wait-for cycle: " + " -> ".join(f"{a} waits on {b} ({why})" for a, b, why in self.cycle(s))
                if self.cycle(s) else "stuck: no thread can run and no timer is due",
            ),
            Invariant("MD-I7", self._md_i7, "at quiescence (store open) every completed cache entry matches the tree"),
        ]
        self._build_actions()
        self.liveness: Sequence[Liveness[MDState]] = [
            Liveness("MD-L1", self._settled, "every op future can still complete and the world reach quiescence"),
        ]

    # -- the protocol ----------------------------------------------------------------------------
    def initial(self) -> MDState:
        n = len(self.thread_names)
        return MDState(
            0, False, self.max_ops, (_IDLE,) * n, self.period if self.batching else -1, (), (), (),
            (_ABSENT,) * len(self.paths), self.initial_tree, -1, False, (-1,) * len(self.paths), 0, False,
        )

    def _build_actions(self) -> None:
        """The actions are few and fixed: build them once (refresh separately, it needs a cached path)."""
        self._run_actions = tuple(Action("run", (("thread", n),)) for n in self.thread_names)
        self._calls: list[list[Action]] = []
        self._refreshes: list[list[tuple[int, Action]]] = []
        for c in range(len(self.clients)):
            calls: list[Action] = []
            refreshes: list[tuple[int, Action]] = []
            for name in self.ops_offered:
                if name == "store_callback" and self.variant != "blocking_callback":
                    continue
                for p, path in enumerate(self.paths):
                    if name in ("callback", "store_callback"):
                        calls.extend(Action(name, (("c", c), ("p", path), ("q", q))) for q in self.paths)
                    elif name == "refresh":
                        refreshes.append((p, Action(name, (("c", c), ("p", path)))))
                    else:
                        calls.append(Action(name, (("c", c), ("p", path))))
            self._calls.append(calls)
            self._refreshes.append(refreshes)
        self._offered = {a for calls in self._calls for a in calls} | {
            a for refreshes in self._refreshes for _, a in refreshes
        }

    def enabled(self, state: MDState) -> Sequence[Action]:
        out = [self._run_actions[i] for i, th in enumerate(state.threads) if self._has_work(state, i, th)]
        if state.timer > 0:
            out.append(_ADVANCE)
        if self.offer_close and ((state.budget > 0 and not state.closed) or not out):
            out.append(_CLOSE)
        if state.budget > 0:
            threads, entries = state.threads, state.entries
            for c, i in enumerate(self.clients):
                if threads[i].task is None:
                    out.extend(self._calls[c])
                    # refresh of an uncached path is a no-op: offered on cached paths only
                    out.extend(a for p, a in self._refreshes[c] if entries[p] != _ABSENT)
        return out

    def _client_enabled(self, state: MDState, action: Action) -> bool:
        if state.budget <= 0 or action not in self._offered:
            return False
        if state.threads[self.clients[int(action["c"])]].task is not None:  # type: ignore[arg-type]
            return False
        return action.name != "refresh" or state.entries[self.index[str(action["p"])]] != _ABSENT

    def step(self, state: MDState, action: Action) -> tuple[MDState, Observation]:
        name = action.name
        seg = _Segment(self, state)
        if name == "run":
            i = self.thread_index.get(str(action.get("thread")), -1)
            if i < 0 or not self._has_work(state, i, state.threads[i]):
                raise ActionNotEnabled(action, "the thread has no runnable work")
            self._run(seg, i)
        elif name == "advance":
            if state.timer <= 0:
                raise ActionNotEnabled(action, "no timer is pending")
            self._advance(seg, state.timer)
        elif name == "close":
            if _CLOSE not in self.enabled(state):
                raise ActionNotEnabled(action, "close is offered while calls are left, or when nothing else can happen")
            self._close(seg)
        elif name in CLIENT_OPS:
            if not self._client_enabled(state, action):
                raise ActionNotEnabled(action, "the client is busy, the budget is spent or the call is not offered")
            self._client(seg, action)
        else:
            raise ActionNotEnabled(action, "unknown action")
        return seg.freeze(), None

    def key(self, state: MDState) -> Hashable:
        """Without the absolute clock, and with the (interchangeable) client threads as a multiset."""
        first = self.clients[0]
        threads = state.threads
        clients = threads[first:]
        if len(clients) > 1:
            threads = threads[:first] + tuple(sorted(clients, key=repr))
        return (state.closed, state.budget, threads, *state[4:])

    def vars(self, state: MDState) -> dict[str, Json]:
        names = self.thread_names
        threads: dict[str, Json] = {}
        for i, th in enumerate(state.threads):
            if th.task is None and not th.queue:
                continue
            threads[names[i]] = {
                "queue": [self._task_label(t) for t in th.queue],
                "task": "" if th.task is None else self._task_label(th.task),
                "at": th.at,
                "wait": self._wait_label(state, i, th) if self._blocked(state, i, th) else "",
            }
        return {
            "now": state.now,
            "closed": state.closed,
            "threads": threads,
            "read_q": list(state.read_q),
            "write_q": list(state.write_q),
            "ops": [[self._op_label(o), self._outcome(o)] for o in state.ops],
            "tree": {self.paths[p]: list(node) for p, node in enumerate(state.tree) if node is not None},
            "cache": {self.paths[p]: self._entry(state, d) for p, d in enumerate(state.entries) if d != _ABSENT},
            "flush_lock": names[state.lock] if state.lock >= 0 else "",
            "flush_in_progress": state.flag,
            "key_locks": {self.paths[p]: names[h] for p, h in enumerate(state.keys) if h >= 0},
            "flush_timer": state.now + state.timer if state.timer > 0 else -1,
            "deadlock": [list(edge) for edge in self.cycle(state)],
            "stuck": self.stuck(state),
        }

    # -- transitions -----------------------------------------------------------------------------
    def _run(self, seg: _Segment, i: int) -> None:
        th = seg.threads[i]
        task, cont, queue = th.task, th.cont, th.queue
        if task is None:
            task, queue = queue[0], queue[1:]
            cont = self._instructions(task)
            seg.threads[i] = Th(queue, th.task, th.cont, th.at, th.wait)
        suspended = seg.run(i, cont)
        th = seg.threads[i]  # the segment may have queued tasks on its own thread
        if suspended:
            seg.threads[i] = Th(th.queue, task, tuple(reversed(seg.stack)), seg.at, seg.wait)
            return
        seg.threads[i] = Th(th.queue, None, (), "", None)
        if task[0] == "periodic" and seg.timer == 0:
            seg.timer = self.period  # fixed rate and fixed delay agree when every cost is 0

    def _advance(self, seg: _Segment, dt: int) -> None:
        seg.now += dt
        seg.timer = 0
        seg.submit(self.flusher, ("periodic",))

    def _close(self, seg: _Segment) -> None:
        """§4.4: fail queued ops (on the caller), cancel the flush, shut the store's threads down."""
        if seg.closed:
            return
        seg.closed = True
        failing = [*seg.read_q, *seg.write_q]
        seg.read_q, seg.write_q = [], []
        suspended = seg.run(_EXTERNAL, [(_SETTLE, k, ("err", CLOSED_ERROR)) for k in failing])
        assert not suspended, "close never blocks"
        if seg.timer == 0:  # a fired run not yet started is removed; a running one is not rescheduled
            th = seg.threads[self.flusher]
            queue = tuple(t for t in th.queue if t[0] != "periodic")
            seg.threads[self.flusher] = Th(queue, th.task, th.cont, th.at, th.wait)
        seg.timer = -1 if self.batching else seg.timer

    def _client(self, seg: _Segment, action: Action) -> None:
        seg.budget -= 1
        c = self.clients[int_param(action, "c")]
        p = self.index[str(action["p"])]
        name = action.name
        if name in ("get", "put", "delete"):
            cont: list[tuple[Any, ...]] = [(_NEWOP, name, p, None)]
        elif name == "cache_get":
            cont = [(_CGET, p, _PLAIN)]
        elif name == "refresh":
            cont = [(_REFRESH, p)]
        else:
            q = self.index[str(action["q"])]
            cont = [(_CGET, p, q)] if name == "callback" else [(_NEWOP, "get", p, (_RAWCB, q))]
        task = ("client", client_label(action))
        if seg.run(c, cont):
            th = seg.threads[c]
            seg.threads[c] = Th(th.queue, task, tuple(reversed(seg.stack)), seg.at, seg.wait)

    @staticmethod
    def _instructions(task: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
        kind = task[0]
        if kind == "complete":
            return tuple((_SETTLE, k, outcome) for k, outcome in task[1])
        if kind == "backend":
            return ((_BACKEND, task[1]),)
        if kind == "notify":
            return ((_DELIVER, task[1], task[2]),)
        if kind == "decode":
            return ((_DECODE, task[1], task[2]),)
        return ((_FLUSH,),)  # periodic and size-triggered flushes

    # -- reading the state -----------------------------------------------------------------------
    def _blocked(self, s: MDState, i: int, th: Th) -> bool:
        w = th.wait
        if w is None:
            return False
        if w[0] == "op":
            return s.ops[w[1]].outcome is _PENDING
        holder = s.lock if w[0] == "flush" else s.keys[w[1]]
        return holder not in (-1, i)

    def _has_work(self, s: MDState, i: int, th: Th) -> bool:
        if th.task is not None:
            return not self._blocked(s, i, th)
        return bool(th.queue)

    def _wait_target(self, s: MDState, th: Th) -> int:
        w = th.wait
        assert w is not None
        if w[0] == "op":
            return self.event
        return s.lock if w[0] == "flush" else s.keys[w[1]]

    def _wait_label(self, s: MDState, i: int, th: Th) -> str:
        w = th.wait
        assert w is not None
        if w[0] == "op":
            return self._op_label(s.ops[w[1]])
        return self.flush_lock_name if w[0] == "flush" else self.key_lock_names[w[1]]

    def cycle(self, s: MDState) -> list[tuple[str, str, str]]:
        """The edges of the wait-for graph that lie on a cycle, sorted (each thread waits for one other)."""
        edges = {i: self._wait_target(s, th) for i, th in enumerate(s.threads) if self._blocked(s, i, th)}
        on_cycle = set()
        for start in edges:
            seen, node = [], start
            while node in edges and node not in seen:
                seen.append(node)
                node = edges[node]
            if node == start:
                on_cycle.add(start)
        names = self.thread_names
        return sorted(
            (names[i], names[edges[i]], self._wait_label(s, i, s.threads[i])) for i in on_cycle
        )

    def quiescent(self, s: MDState) -> bool:
        if any(th.task is not None or th.queue for th in s.threads):
            return False
        return s.timer <= 0 or not (s.read_q or s.write_q)

    def stuck(self, s: MDState) -> bool:
        threads = s.threads
        if any(self._has_work(s, i, th) for i, th in enumerate(threads)):
            return False
        if s.timer > 0 and not self._blocked(s, self.flusher, threads[self.flusher]) and (s.read_q or s.write_q):
            return False
        return any(self._blocked(s, i, th) for i, th in enumerate(threads)) or any(
            o.outcome is _PENDING for o in s.ops
        )

    def _settled(self, s: MDState) -> bool:
        return self.quiescent(s) and all(o.outcome is not _PENDING for o in s.ops)

    def _task_label(self, task: tuple[Any, ...]) -> str:
        kind = task[0]
        if kind == "client":
            return str(task[1])
        if kind == "complete":
            return f"complete{[k for k, _ in task[1]]}"
        if kind == "backend":
            return f"backend{list(task[1])}"
        if kind == "notify":
            return f"notify:{task[1]}({task[2]})"
        if kind == "decode":
            return f"async:get({self.paths[task[3]]})"
        return f"{self.name}:{'periodic-flush' if kind == 'periodic' else 'size-flush'}"

    def _op_label(self, o: Op) -> str:
        return f"{o.kind}({self.paths[o.path]})"

    @staticmethod
    def _outcome(o: Op) -> Json:
        if o.outcome is _PENDING:
            return "pending"
        status, result = o.outcome
        if status == "err":
            return str(result)
        if o.kind == "get":
            return "absent" if result is None else list(result)
        return "deleted" if o.kind == "delete" else int(result)

    def _entry(self, s: MDState, d: int) -> Json:
        state = ("err", CLOSED_ERROR) if d == _FAILED_AT_ONCE else s.ops[d].d
        if state is _PENDING:
            return "pending"
        if state[0] == "err":
            return "failed"
        return "absent" if state[1] is None else list(state[1])

    # -- properties ------------------------------------------------------------------------------
    def _md_i1(self, s: MDState) -> bool:
        if not self.pip453:
            return True  # n/a: legacy deserializes inline (§6a)
        workers = self.workers
        for i, th in enumerate(s.threads):
            for task in th.queue:
                if task[0] == "decode" and workers[task[3]] != i:
                    return False
            if th.task is not None and th.task[0] == "decode" and workers[th.task[3]] != i:
                return False
        return True

    def _md_i2(self, s: MDState) -> bool:
        event = self.event
        for i, th in enumerate(s.threads):
            if i != event and (
                any(t[0] == "notify" for t in th.queue) or (th.task is not None and th.task[0] == "notify")
            ):
                return False
        return True

    def _md_i3(self, s: MDState) -> bool:
        return s.flushing <= 1

    def _md_i4(self, s: MDState) -> bool:
        return not s.dup and (not self.quiescent(s) or all(o.outcome is not _PENDING for o in s.ops))

    def _md_i5(self, s: MDState) -> bool:
        return not self.cycle(s) and not self.stuck(s)

    def _md_i7(self, s: MDState) -> bool:
        if s.closed or not self.quiescent(s):
            return True  # after close, notifications are dropped by design (§4.4)
        for p, d in enumerate(s.entries):
            if d < 0:
                continue
            state = s.ops[d].d
            if state is not _PENDING and state[0] == "ok" and state[1] != s.tree[p]:
                return False
        return True


def _ancestors(path: str, every: bool) -> list[str]:
    """ChildrenChanged targets of a create/delete, nearest first: zk notifies the parent only, the memory
    store every proper ancestor (§4.2); `parent(p)` is `p[:p.rfind("/")]`, none once `rfind <= 0`."""
    out: list[str] = []
    i = path.rfind("/")
    while i > 0:
        path = path[:i]
        out.append(path)
        if not every:
            break
        i = path.rfind("/")
    return out

