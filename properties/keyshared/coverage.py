"""Key_Shared's interesting states: draining and blocked hashes, ring collisions and promotions, the
dispatcher's corner events, (tracker scope) the pending-acks maps' corners, and (lock scope) the races
of the tracker's threads.

Events name what a step did that no variable shows; the models export their names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from models.core import Json, Param
from models.keyshared import CAME_BACK, JUMP_RELEASED, PROMOTED, RESET_BACK, UNBLOCKED_IN_PASS, claims, sticky_hash
from models.keyshared.lock_state import HASH
from models.keyshared.state import DEFAULT_CONFIG
from models.keyshared.tracker import ACROSS_LEDGERS, HASH_NOT_SET, KEPT_MISMATCH, OVERWROTE
from properties.engines.coverage import as_int, as_list
from properties.engines.mechanism import Interesting, Predicate, Vars


def _blocked(_: Mapping[str, Param], v: Vars) -> bool:
    """A draining hash held a dispatch back (the entry's blocked flag is its fourth field)."""
    return any(as_list(d)[3:4] == [True] for d in as_list(v.get("draining")))


def _same_name(_: Mapping[str, Param], v: Vars) -> bool:
    names = [as_list(c)[1] for c in as_list(v.get("consumers"))]
    return len(names) != len(set(names))


def _ring(c: Mapping[str, Param]) -> tuple[int, int]:
    """(points, range_max) of a configuration, defaults filled in."""
    return as_int(c.get("points", DEFAULT_CONFIG["points"])), as_int(c.get("range_max", DEFAULT_CONFIG["range_max"]))


def _collided(c: Mapping[str, Param], v: Vars) -> bool:
    """Two connected consumers claim one ring point: the second waits in the point's colliding list."""
    if "ring" not in v:  # the tracker scope has no ring
        return False
    join = [(str(as_list(x)[1]), as_int(as_list(x)[2])) for x in as_list(v["consumers"])]
    return any(len(set(slots)) > 1 for slots in claims(join, *_ring(c)).values())


def _past_draining(c: Mapping[str, Param], v: Vars) -> bool:
    """Mark-delete passed a message of a hash that is still draining (the drainer holds a later one)."""
    if "mark_delete" not in v:  # the tracker scope has no cursor
        return False
    range_max = _ring(c)[1]
    draining = {as_int(as_list(d)[0]) for d in as_list(v["draining"])}
    passed = as_list(v["messages"])[: as_int(v["mark_delete"]) + 1]
    return any(sticky_hash(str(key), range_max) in draining for key in passed)


def _held_past(_: Mapping[str, Param], v: Vars) -> bool:
    """A cursor jump passed a message a consumer still holds (the client was not told, upstream #25627)."""
    if "mark_delete" not in v:
        return False
    md = as_int(v["mark_delete"])
    return any(as_int(p) <= md for held in as_list(v["held"]) for p in as_list(as_list(held)[1]))


def _event(name: str) -> Predicate:
    return lambda _, v: name in as_list(v.get("events"))


def _stubborn(_: Mapping[str, Param], v: Vars) -> bool:
    """Settled with a consumer that never acks again while a hash drains towards it: the liveness case."""
    return v.get("settled") is True and bool(as_list(v.get("pinned"))) and bool(as_list(v["draining"]))


def _tracker_pending(v: Vars) -> list[list[Json]]:
    """The tracker scope's pending acks, `[ledger, entry, remaining, hash]` (the dispatcher's hold entry ids)."""
    if "owners" not in v:
        return []
    return [as_list(p) for held in as_list(v["pending"]) for p in as_list(as_list(held)[1])]


def _two_ledgers(_: Mapping[str, Param], v: Vars) -> bool:
    """One consumer holds pending acks of two ledgers (tracker scope)."""
    if "owners" not in v:
        return False
    return any(len({as_int(as_list(p)[0]) for p in as_list(as_list(held)[1])}) > 1 for held in as_list(v["pending"]))


class _Locks:
    """The lock scope's variables, as far as the marks read them (absent in the other scopes)."""

    def __init__(self, v: Vars) -> None:
        self.labels = {as_list(t)[0]: as_list(t)[1] for t in as_list(v.get("threads"))}
        self.locks = v.get("locks")
        self.draining = [as_list(d) for d in as_list(v.get("draining"))]
        self.unblocked = as_list(v.get("unblocked"))
        self.broken = as_list(v.get("broken"))

    def held(self, lock: str) -> list[Json]:
        return as_list(self.locks[lock]) if isinstance(self.locks, dict) else []

    def waits(self, suffix: str, lock: str) -> bool:
        """A thread is about to take `lock` (its next label ends with `suffix`) while the other holds it."""
        return any(str(label).endswith(suffix) and self.held(lock) and name not in self.held(lock)
                   for name, label in self.labels.items())


def _locks(order: str, holds: Callable[[_Locks], bool]) -> Predicate:
    """A lock-scope mark, counted only in configurations of `order`: what upstream's current order reaches is
    not covered by a twin's or the fix's configuration reaching it."""
    return lambda c, v: c.get("order") == order and "threads" in v and holds(_Locks(v))


LOCK_MARKS = (
    Interesting("a dispatch was blocked by a mapped draining entry",
                _locks("current", lambda s: any(as_int(d[3]) > 0 for d in s.draining))),
    Interesting("a dispatch was blocked by an entry already removed (the lost wake-up)",
                _locks("current", lambda s: "LK-6" in s.broken)),
    Interesting("an entry's removal saw a blocked dispatch and called the unblocking handler",
                _locks("current", lambda s: HASH in s.unblocked)),
    Interesting("a handler batch ended with an unblocking call (-1)",
                _locks("current", lambda s: -1 in s.unblocked)),
    Interesting("a reduceRefCount read isBlocking after removing its entry",
                _locks("current", lambda s: "reduceRefCount: entry.blockedCount.get" in s.labels.values())),
    Interesting("a thread waited for the PendingAcksMap lock the other held",
                _locks("current", lambda s: s.waits("map[1].writeLock.lock", "map[1]"))),
    Interesting("a getEntry waited for the write lock the other thread held",
                _locks("current", lambda s: s.waits("tracker.readLock.lock", "tracker"))),
    Interesting("an addEntry found the entry already mapped",
                _locks("current", lambda s: s.labels.get("dispatcher") == "addEntry: entry.refCount.incrementAndGet"
                       and any(as_int(d[2]) > 0 for d in s.draining))),
    Interesting("the fix's locked check came after the entry it read was removed",
                _locks("locked-block", lambda s: s.labels.get("dispatcher") ==
                       "shouldBlockStickyKeyHash: tracker.writeLock.lock" and not s.draining)),
)
"""The lock scope's marks (models/keyshared/locks.py). Not among them, because upstream's order never reaches
them (the explorer shows it): a reduceRefCount decrementing while the other thread holds the write lock, and the
lazy removal in shouldBlockStickyKeyHash; only the unserialized twin reaches them."""


INTERESTING = (
    Interesting("a hash is draining", lambda _, v: bool(as_list(v.get("draining")))),
    Interesting("a draining hash blocked a dispatch", _blocked),
    Interesting("a message awaits replay", lambda _, v: bool(as_list(v.get("replay")))),
    Interesting("a read is in flight", lambda _, v: bool(as_list(v.get("reads_in_flight")))),
    Interesting("two consumers share a name", _same_name),
    Interesting("a stubborn consumer pins a draining hash", _stubborn),
    Interesting("two consumers collided on a ring point", _collided),
    Interesting("a collided consumer was promoted", _event(PROMOTED)),
    Interesting("mark-delete moved past a draining entry", _past_draining),
    Interesting("a hash was unblocked during a pass", _event(UNBLOCKED_IN_PASS)),
    Interesting("a draining hash came back to its draining consumer", _event(CAME_BACK)),
    Interesting("a draining hash released by a cursor jump", _event(JUMP_RELEASED)),
    Interesting("a cursor jump passed a message a consumer still holds", _held_past),
    Interesting("a cursor reset went back over acknowledged messages", _event(RESET_BACK)),
    Interesting("a consumer holds pending acks of two ledgers", _two_ledgers),
    Interesting("a pending ack counts a batch of several messages",
                lambda _, v: any(as_int(p[2]) > 1 for p in _tracker_pending(v))),
    Interesting("a pending ack was overwritten", _event(OVERWROTE)),
    Interesting("a 4-argument remove kept a pending ack of another value", _event(KEPT_MISMATCH)),
    Interesting("the add handler rejected hash 0", _event(HASH_NOT_SET)),
    Interesting("remove_all_up_to ran over a map of two ledgers", _event(ACROSS_LEDGERS)),
    *LOCK_MARKS,
)
