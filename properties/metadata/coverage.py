"""The metadata store's interesting states (flushes, blocked threads, batching, caching, closing, and the
memory backend's own races), and the action its current variant leaves out on purpose.

The memory marks are states the zk backend cannot reach (tests/metadata/test_metadata_memory.py checks
that its explore configurations never do): there a write's notification is posted ahead of its
completion on the same FIFO event thread, an event-thread refresh's read is completed by that same
(suspended) thread, and only the parent of a created or deleted node hears ChildrenChanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from models.core import Json, Param
from properties.engines.coverage import as_list, records
from properties.engines.mechanism import Interesting, Predicate, Vars


def _flushing(_: Mapping[str, Param], v: Vars) -> bool:
    """Legacy marks a flush with a flag, PIP-453 with the flush lock its batch flusher holds."""
    return v["flush_in_progress"] is True or v["flush_lock"] not in ("", None)


def _blocked(_: Mapping[str, Param], v: Vars) -> bool:
    return any(t.get("wait") not in ("", None) for t in records(v["threads"]))


def _batched(_: Mapping[str, Param], v: Vars) -> bool:
    return bool(as_list(v["read_q"]) or as_list(v["write_q"]))


def _cached(_: Mapping[str, Param], v: Vars) -> bool:
    return bool(v["cache"])


def _queued(v: Vars) -> list[str]:
    """Every queued task label, on every thread."""
    return [str(label) for t in records(v["threads"]) for label in as_list(t.get("queue"))]


def _path_of(label: str) -> str:
    """The path of a label such as `put(/a)` or `notify:Modified(/a)`."""
    return label[label.index("(") + 1 : -1]


def _write_completed_before_notified(_: Mapping[str, Param], v: Vars) -> bool:
    """The last write of some path is done (not failed) while its notification still waits in a queue."""
    last: dict[str, Json] = {}
    for op in as_list(v["ops"]):
        label, outcome = as_list(op)
        if str(label).startswith(("put(", "delete(")):
            last[_path_of(str(label))] = outcome
    done = {p for p, outcome in last.items() if isinstance(outcome, int) or outcome == "deleted"}
    return any(
        label.startswith(("notify:Created(", "notify:Modified(", "notify:Deleted(")) and _path_of(label) in done
        for label in _queued(v)
    )


def _refresh_ahead_of_entry(config: Mapping[str, Param], v: Vars) -> bool:
    """The event thread is between a refresh's steps of p, a read of p issued after p's last write is already
    answered, and the entry clients get for p is not that answer (older, or still decoding)."""
    store = str(config.get("store", "N"))
    threads = v["threads"]
    event = (threads.get(f"{store}-event") or threads.get(store)) if isinstance(threads, dict) else None
    at = str(event.get("at", "")) if isinstance(event, dict) else ""
    if not at.startswith("refresh("):
        return False
    path = _path_of(at)
    answer: Json | None = None
    for label, outcome in map(as_list, as_list(v["ops"])):
        if label in (f"put({path})", f"delete({path})"):
            answer = None
        elif label == f"get({path})":
            answer = outcome
    cache = v["cache"]
    entry = cache.get(path) if isinstance(cache, dict) else None
    return (isinstance(answer, list) or answer == "absent") and entry != answer


def _grandparent_notified(_: Mapping[str, Param], v: Vars) -> bool:
    """Queued right after a Created or Deleted of p, among the ChildrenChanged it caused, one for an ancestor
    of p above its parent."""
    for t in records(v["threads"]):
        queue = [str(label) for label in as_list(t.get("queue"))]
        for i, label in enumerate(queue):
            if not label.startswith(("notify:Created(", "notify:Deleted(")):
                continue
            path = _path_of(label)
            parent = path[: path.rfind("/")]
            for caused in itertools.takewhile(lambda x: x.startswith("notify:ChildrenChanged("), queue[i + 1 :]):
                ancestor = _path_of(caused)
                if ancestor != parent and path.startswith(ancestor + "/"):
                    return True
    return False


_STORE_MARKS = (
    Interesting("a flush is in progress", _flushing),
    Interesting("a thread blocked", _blocked),
    Interesting("an operation waits in a batch queue", _batched),
    Interesting("a value is cached", _cached),
    Interesting("the store closed", lambda _, v: v["closed"] is True),
    Interesting("memory: a write completed on its caller before its notification was delivered",
                _write_completed_before_notified),
    Interesting("memory: a refresh read the new value on the event thread while clients still get the old entry",
                _refresh_ahead_of_entry),
    Interesting("memory: ChildrenChanged queued for a grandparent (every ancestor is notified)",
                _grandparent_notified),
)


def _store(mark: Interesting) -> Interesting:
    """A mark of the store's scope: the lock scope's configurations have none of its variables."""
    return Interesting(mark.name, lambda c, v: c.get("scope") != "locks" and mark.holds(c, v))


def _locks(order: str, holds: Callable[[Vars], bool]) -> Predicate:
    """A mark of the batched store's lock scope (models/metadata_locks.py), on configurations of `order`."""
    return lambda c, v: c.get("scope") == "locks" and c.get("order", "current") == order and holds(v)


def _at(thread: str, label: str) -> Callable[[Vars], bool]:
    return lambda v: [thread, label] in as_list(v.get("threads"))


def _monitor_held_by(v: Vars) -> list[Json]:
    locks = v.get("locks")
    return as_list(locks.get("AbstractBatchedMetadataStore")) if isinstance(locks, dict) else []


LOCK_MARKS = (
    Interesting("locks: a caller's inline flush waits on the monitor another flush holds",
                _locks("current", lambda v: any(_at(t, "flush: AbstractBatchedMetadataStore.lock")(v)
                                                and _monitor_held_by(v) not in ([], [t])
                                                for t in ("caller", "other")))),
    Interesting("locks: the closer's drain polled while a flush held the monitor",
                _locks("current", lambda v: "MD-LK4" in as_list(v.get("broken")))),
    Interesting("locks: an op enqueued across close is never completed",
                _locks("current", lambda v: "MD-LK3" in as_list(v.get("broken")))),
    Interesting("locks: the fix's re-check of isClosed flushed an op the drain had missed",
                _locks("fixed", lambda v: v.get("closed") is True
                       and _at("caller", "flush: AbstractBatchedMetadataStore.lock")(v))),
)
"""The lock scope's marks."""

INTERESTING = (*(_store(m) for m in _STORE_MARKS), *LOCK_MARKS)

NOT_OFFERED: Mapping[str, Mapping[str, str]] = {
    "pip453": {"store_callback": "only the blocking_callback variant offers it (the PIP's bad example)"},
}
"""By variant, the actions it never enables by design and why: exempt from action coverage."""
