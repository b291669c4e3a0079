"""Key_Shared's interesting states: draining and blocked hashes, ring collisions and promotions, the
dispatcher's corner events, and (tracker scope) the pending-acks maps' corners.

Events name what a step did that no variable shows; the models export their names.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Json, Param
from models.keyshared import CAME_BACK, DEFAULT_CONFIG, PROMOTED, UNBLOCKED_IN_PASS, claims, sticky_hash
from models.keyshared_tracker import ACROSS_LEDGERS, HASH_NOT_SET, KEPT_MISMATCH, OVERWROTE
from properties.engines.coverage import as_int, as_list
from properties.engines.mechanism import Interesting, Predicate, Vars


def _blocked(_: Mapping[str, Param], v: Vars) -> bool:
    """A draining hash held a dispatch back (the entry's blocked flag is its fourth field)."""
    return any(as_list(d)[3:4] == [True] for d in as_list(v["draining"]))


def _same_name(_: Mapping[str, Param], v: Vars) -> bool:
    names = [as_list(c)[1] for c in as_list(v["consumers"])]
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


INTERESTING = (
    Interesting("a hash is draining", lambda _, v: bool(as_list(v["draining"]))),
    Interesting("a draining hash blocked a dispatch", _blocked),
    Interesting("a message awaits replay", lambda _, v: bool(as_list(v["replay"]))),
    Interesting("a read is in flight", lambda _, v: bool(as_list(v.get("reads_in_flight")))),
    Interesting("two consumers share a name", _same_name),
    Interesting("a stubborn consumer pins a draining hash", _stubborn),
    Interesting("two consumers collided on a ring point", _collided),
    Interesting("a collided consumer was promoted", _event(PROMOTED)),
    Interesting("mark-delete moved past a draining entry", _past_draining),
    Interesting("a hash was unblocked during a pass", _event(UNBLOCKED_IN_PASS)),
    Interesting("a draining hash came back to its draining consumer", _event(CAME_BACK)),
    Interesting("a consumer holds pending acks of two ledgers", _two_ledgers),
    Interesting("a pending ack counts a batch of several messages",
                lambda _, v: any(as_int(p[2]) > 1 for p in _tracker_pending(v))),
    Interesting("a pending ack was overwritten", _event(OVERWROTE)),
    Interesting("a 4-argument remove kept a pending ack of another value", _event(KEPT_MISMATCH)),
    Interesting("the add handler rejected hash 0", _event(HASH_NOT_SET)),
    Interesting("remove_all_up_to ran over a map of two ledgers", _event(ACROSS_LEDGERS)),
)
