"""Invariant checks of spec §5, computed from the reference's observable state (for the tests only).

Where a check needs to know where work belongs, it computes the answer from the spec (the model's
`choose_thread_index`, the `<N>-event` / `<N>` thread names), never from the reference's own routing.
"""

from __future__ import annotations

import itertools
from typing import Any

from models.metadata import choose_thread_index
from reference_impl.metadata import (
    FlushRecord,
    MetadataCache,
    MetadataStore,
    NotificationRecord,
    RecordingSerde,
    World,
)


def md_i1(store: MetadataStore, serde: RecordingSerde[Any]) -> list[str]:
    """Serde of path p runs on choose_thread(p), and p's serde tasks start in submission order."""
    assert store.worker is not None
    n = len(store.worker.threads)
    errors = []
    last_task: dict[str, int] = {}
    for r in serde.records:
        expected = f"{store.name}-worker-OrderedExecutor-{choose_thread_index(r.path, n)}-0"
        if r.thread != expected:
            errors.append(f"{r} not on {expected}")
        if r.task is None or r.task < last_task.get(r.path, -1):
            errors.append(f"{r} out of submission order")
        else:
            last_task[r.path] = r.task
    return errors


def md_i2(world: World, store: MetadataStore) -> list[str]:
    """Delivered on the event thread, serially, in arrival order."""
    recs: list[NotificationRecord] = [
        r for r in world.notification_log if r.store == store.name and r.start_seq is not None
    ]
    event = store.name if store.threading == "legacy" else f"{store.name}-event"
    errors = [f"{r} not on {event}" for r in recs if r.thread != event]
    recs.sort(key=lambda r: r.start_seq or 0)
    for a, b in itertools.pairwise(recs):
        if a.arrival_seq > b.arrival_seq:
            errors.append(f"{b} delivered after the later {a}")
        if a.end_seq is None or b.start_seq is None or a.end_seq > b.start_seq:
            errors.append(f"{a} overlaps {b}")
    return errors


def md_i3(world: World, store: MetadataStore) -> list[str]:
    """Flushes never overlap; read batches precede write batches."""
    recs: list[FlushRecord] = sorted((r for r in world.flush_log if r.store == store.name), key=lambda r: r.start_seq)
    errors = []
    for a, b in itertools.pairwise(recs):
        if a.end_seq is None or a.end_seq > b.start_seq:
            errors.append(f"flush {a.flush_id} overlaps flush {b.flush_id}")
    for r in recs:
        kinds = [k for k, _ in r.batches]
        if kinds != sorted(kinds):  # "read" < "write"
            errors.append(f"flush {r.flush_id} dispatched a write batch before a read batch: {kinds}")
    return errors


def md_i4(world: World) -> list[str]:
    """No second completion attempt; at quiescence every op future is done."""
    errors = [f"{f} completed {f.attempts} times" for f in world.op_futures if f.attempts > 1]
    if world.quiescent():
        errors += [f"{f} still pending at quiescence" for f in world.op_futures if not f.done()]
    return errors


def md_i5(world: World) -> list[str]:
    errors = []
    if world.deadlock() is not None:
        errors.append(f"deadlock {world.deadlock()}")
    if world.stuck():
        errors.append("stuck")
    return errors


def md_i7(store: MetadataStore, cache: MetadataCache[Any]) -> list[str]:
    """At quiescence every completed entry matches the tree (value and version), or both are absent."""
    tree = store.backend.tree.data
    serde = cache.serde.inner if isinstance(cache.serde, RecordingSerde) else cache.serde  # do not log checks
    errors = []
    for path, f in cache.entries.items():
        if not f.done() or f.failed():
            continue
        r = f.result()
        node = tree.get(path)
        if r is None and node is None:
            continue
        if r is None or node is None:
            errors.append(f"{path}: cache {r} vs tree {node}")
        elif r.stat.version != node[1] or r.value != serde.deserialize(path, node[0], r.stat):
            errors.append(f"{path}: cache {(r.value, r.stat.version)} vs tree {node}")
    return errors


def max_wait(store: MetadataStore) -> int:
    return max(w for _, w in store.queue_waits)


def max_lock_hold(world: World, store: MetadataStore) -> int:
    return max((r.hold or 0 for r in world.flush_log if r.store == store.name), default=0)


def periodic_starts(world: World, store: MetadataStore) -> list[int]:
    return [r.start for r in world.flush_log if r.store == store.name and r.periodic]


def md_p1(world: World, store: MetadataStore) -> bool:
    """Diagnostic: successive periodic flush starts are at least P apart."""
    starts = periodic_starts(world, store)
    return all(b - a >= store.config.max_delay_ms for a, b in itertools.pairwise(starts))
