"""The metadata store's port vocabulary: the store (`metadata`) and the batched store's lock scope (`metadata/locks`).

Meanings keyed by the model's own names; `brokerspec protocol` adds types and examples from the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.mechanism import ActionDoc, Vocabulary

_THREAD = "a thread name: N-event, N-batch-flusher, N-backend, N-worker-OrderedExecutor-i-0, client-c (N: the store)"
METADATA = Vocabulary(
    config={
        "store": "the store's name N (prefixes its thread names)",
        "paths": "the paths clients use",
        "initial": "paths present at t=0 (value 0, version 0)",
        "workers": "num_serdes_threads: decode workers; a path's worker is BookKeeper's chooseThread(path)",
        "clients": "client threads (client-0, ...)",
        "max_ops": "budget of client calls",
        "ops": "client actions offered",
        "batching": "the zk backend batches operations",
        "max_operations": "a batch flushes inline once it holds this many operations",
        "max_delay_ms": "P, the periodic flush interval",
        "close": "offer close",
        "backend": "zk (ops batched, answered on N-backend, completed on N-event) or memory (each op applied "
                   "and completed on the calling thread, no batching, no N-backend thread)",
    },
    vars={
        "now": "the virtual clock, ms",
        "closed": "the store is closed",
        "threads": "threads with work, by thread name (idle threads are left out)",
        "threads.*": "one thread",
        "threads.*.queue": "labels of its queued tasks, in order",
        "threads.*.queue[]": "a task label, e.g. async:get(/a), complete[0], notify:Modified(/a), N:periodic-flush",
        "threads.*.task": 'the label of the started task, "" when none',
        "threads.*.at": 'where the started task is suspended, "" when running or none',
        "threads.*.wait": 'what the blocked thread waits for (an op or lock label), "" when not blocked',
        "read_q": "op ids queued for the next batch's reads, in submission order",
        "read_q[]": "an op id (index into ops)",
        "write_q": "op ids queued for the next batch's writes, in submission order",
        "write_q[]": "an op id",
        "ops": "every store operation so far, by op id",
        "ops[]": "[label, outcome] one operation",
        "ops[].label": "kind(path), e.g. put(/a)",
        "ops[].outcome": 'pending; for get [value, version] or "absent"; for put the new version; for delete '
                         '"deleted"; or an error name',
        "ops[].outcome[]": "value, then version",
        "tree": "the backend's nodes by path",
        "tree.*": "[value, version] a node",
        "tree.*.value": "its value",
        "tree.*.version": "its version",
        "cache": "the MetadataCache's entries by path",
        "cache.*": '"pending", "failed", "absent" or [value, version]',
        "cache.*[]": "value, then version",
        "flush_lock": 'the thread holding the flush lock, "" when free',
        "flush_in_progress": "a flush is running",
        "key_locks": "per path, the thread holding its key lock",
        "key_locks.*": _THREAD,
        "flush_timer": "absolute time of the next periodic flush, -1 when none is scheduled",
        "deadlock": "the wait-for edges on a cycle (MD-I5), sorted; empty when none",
        "deadlock[]": "[waiter, holder, label] one edge",
        "deadlock[].waiter": "the blocked thread",
        "deadlock[].holder": "the thread it waits for",
        "deadlock[].label": "what it waits for",
        "stuck": "nothing can run and something still waits (a blocked thread or a pending op)",
    },
    actions={
        **{op: ActionDoc(f"client c calls {op}(p) on the store" if op in ("get", "put", "delete") else text,
                         "the client is idle, the call budget (max_ops) is not spent and the call is offered (ops)"
                         + (" and p is cached" if op == "refresh" else ""),
                         {"c": "the client index", "p": "the path", **({"q": "the path the callback reads"}
                                                                       if "callback" in op else {})})
           for op, text in (("get", ""), ("put", ""), ("delete", ""),
                            ("cache_get", "client c calls cache.get(p)"), ("refresh", "client c refreshes cached p"),
                            ("callback", "client c calls cache.get(p) with a callback that blocks on cache.get(q)"),
                            ("store_callback", "client c calls store.get(p) with a callback that blocks on "
                                               "store.get(q)"))},
        "run": ActionDoc("run one atomic segment of a thread", "the thread has runnable work (not blocked)",
                         {"thread": _THREAD}),
        "advance": ActionDoc("move the clock to the flush timer and submit the periodic flush", "a flush timer is set"),
        "close": ActionDoc("close the store: fail queued ops, cancel the flush, shut the threads down",
                           "config close, and calls are left and not closed, or nothing else can happen"),
    },
    observation={},
)

_STEP = ("the operation the thread is about to perform, as the Java method and the monitor, queue or isClosed access "
         "it touches (e.g. 'nextBatch: writeOps.poll'): one step runs it and the thread's code up to its next "
         "scheduling point (see models/metadata_locks.py)")
_SCRIPT = "'get' (an op on readOps) and 'put' (an op on writeOps), each one enqueue; ops are named '<thread>.<index>'"
METADATA_LOCKS = Vocabulary(
    config={
        "scope": '"locks": AbstractBatchedMetadataStore at upstream\'s lock granularity: two callers, the '
                 "batch flusher and a closer",
        "order": "the store's code: current (upstream, 90cba329a1) or fixed (docs/findings/metadata-close-lost-op.md)",
        "max_operations": "batchingMaxOperations: a batch's size, and the queue size past which enqueue flushes inline",
        "flushes": "how many times the clock may fire the flusher's fixed-rate task",
        "caller": f"the caller thread's script: {_SCRIPT}",
        "other": f"the other caller thread's script: {_SCRIPT}",
        "close": "the closer thread closes the store",
    },
    vars={
        "closed": "the isClosed flag",
        "read_ops": "the ops in readOps, in order",
        "read_ops[]": "an op name",
        "write_ops": "the ops in writeOps, in order",
        "write_ops[]": "an op name",
        "ops": "every op created so far, sorted by name",
        "ops[]": "[name, outcome] one op",
        "ops[].name": "'<thread>.<index in its script>'",
        "ops[].outcome": "pending, sent (its batch reached the backend) or failed (AlreadyClosedException)",
        "locks": "the store's monitor and its holder",
        "locks.*": "the holding thread, or none: at most one",
        "locks.*[]": "a thread name",
        "cancelled": "the flusher's periodic task runs no more (cancelled by close, or it threw)",
        "threads": "each thread and the operation it performs next, in the order caller, other, flusher, closer",
        "threads[]": "[thread, label]",
        "threads[].thread": "caller, other, flusher or closer",
        "threads[].label": f"{_STEP}; done when it has nothing left",
        "broken": "the invariants a step broke so far (MD-LK1, MD-LK3, MD-LK4), sorted",
        "broken[]": "an invariant name",
    },
    actions={
        **{name: ActionDoc(f"the {name} thread performs its next operation", "it has one and is not blocked on the "
                           "monitor", {"step": _STEP}) for name in ("caller", "other", "flusher", "closer")},
        "clock": ActionDoc("the flusher's fixed-rate task fires: the flusher starts a flush",
                           "the flusher is idle, its task still runs and fewer than `flushes` runs have fired"),
    },
    observation={},
)

VOCABULARIES: Mapping[str, Vocabulary] = {"metadata": METADATA, "metadata/locks": METADATA_LOCKS}
"""Each scope's meanings."""


def scope_of(config: Mapping[str, Param]) -> str:
    """`scope: locks` speaks the lock scope's vocabulary; every other configuration the store's."""
    return "metadata/locks" if config.get("scope") == "locks" else "metadata"
