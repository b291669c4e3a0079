"""Key_Shared draining hashes (PIP-379) and its predecessors as a pure transition system (docs/spec/keyshared.md).

The state is one subscription on one ledger: the published log (a key per entry), the connected
consumers in join order (name, name index, permits, pending acks, and the client-side record of what
each one holds), the cursor (read position, mark-delete, individual acks), the replay queue, the
draining tracker (pip379), the recently-joined map (classic, pip282), pip282's last-sent bookkeeping,
the read flags, and the storage reads in flight. Positions are entry ids of ledger 1.

The ring is not state: it is a pure function of the consumers' (name, name index) in join order,
since the selected consumer of every point is its earliest-joined claimer (KS-I8). It is computed with
the exact sticky-key hash, so a configuration with `points=3` reproduces the spec's rings; only the
owners of the configured keys' hashes matter to the dispatcher, and impacted ranges are taken
pointwise at those hashes (KS-I9).

A step thaws the state into a mutable `_Dispatch`, runs the operation as §4.4–§4.6 specify, and
freezes it back; this keeps the dispatch passes readable and lets the §4.6 interleavings (an ack or
flow at a point of a pass) run in the middle of a pass, as they do in the reference.

Besides the dispatcher, the model is the harness's client: `held` is what each consumer was
delivered and has not acked, released or lost by disconnecting (KS-I1 is checked on it, not on the
pending acks), and per-key order (KS-I4) is checked at each delivery on what the consumer received.
Transition properties (KS-I4, KS-I5a, KS-I6) leave their name in `broken`, so that they can be checked
as state invariants by every engine.
What a step did that no variable shows (a ring point promoted, an unblock inside a pass, a draining
hash back with its drainer) is named in `events`, reset at every step, so that coverage can tell
those corners were reached.

Liveness needs a fairness assumption that `AG EF` cannot state directly: without it, acking the
blocking message or changing the consumers is always a way out. `settle(stubborn)` commits the rest
of the run to a fixed set of consumers with no more publishing or negative acks, where the consumer
`stubborn` (0: nobody) never acks what it holds at that moment (`pinned`). From every state, a
settled state must stay reachable in which only the pinned messages and messages of their hashes are
left (KS-I5b, no stuck subscription), and no hash is draining or queued but a pinned one (KS-I5-hash).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar, overload

import mmh3

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param, configured

Obj = TypeVar("Obj")
T = TypeVar("T")

VARIANTS = ("pip379", "classic", "pip282")
ACTION_NAMES = (
    "add",
    "remove",
    "publish",
    "flow",
    "ack",
    "redeliver",
    "redeliver_all",
    "read",
    "fire",
    "run",
    "begin_read",
    "complete_read",
    "interleaved_read",
    "settle",
    "skip",
    "clear_backlog",
    "expire",
    "reset",
)
# The cursor jumps: mark-delete (or, for reset, the whole cursor) moves without a client ack. Only
# configurations that list them take them; see `_Dispatch.jump` and `_Dispatch.reset` for upstream's calls.
JUMPS = ("skip", "clear_backlog", "expire", "reset")
NORMAL, REPLAY = "Normal", "Replay"
STAGES = ("replay_filter", "dispatch")
# What a step did that the variables do not show, named in the state's `events` for coverage: a
# leaver's ring point passed to the consumer that collided there; an ack or flow run inside a pass
# released a blocking draining entry; a draining entry went away because its hash came back to the
# consumer draining it (the ADD pass of §4.5, or the lazy removal of §4.3).
PROMOTED, UNBLOCKED_IN_PASS, CAME_BACK = "promoted", "unblocked_in_pass", "came_back"
# A cursor jump's pending-ack cleanup released a draining entry; a reset moved the cursor back over
# messages that were acknowledged (they are unacknowledged again).
JUMP_RELEASED, RESET_BACK = "jump_released", "reset_back"
UNKNOWN_HASH = 0  # a replay entry re-added by a redelivery request carries no hash (STICKY_KEY_HASH_NOT_SET)
_INT_MAX = 2**31 - 1
_MAX_READS = 1000  # run_until_quiescent's guard, as the reference's default

DEFAULT_CONFIG: dict[str, Param] = {
    "names": ("consumer1", "consumer2", "consumer3"),
    "keys": ("4", "0", "5"),
    "max_consumers": 3,  # connected at once
    "same_name": True,  # whether a name may join while a consumer of that name is connected
    "max_messages": 6,
    "add_permits": (0, 1, 2),  # permits a consumer may join with
    "flow": (1,),  # permits one flow may grant
    "max_permits": 3,  # flow is enabled while it keeps permits at most this
    "points": 3,
    "range_max": 65535,
    "read_batch_size": 100,
    "look_ahead_per_consumer": 4000,
    "look_ahead_per_subscription": 40000,
    # The kinds of steps the harness takes (read is always possible); begin_read brings complete_read.
    "actions": tuple(a for a in ACTION_NAMES if a != "complete_read" and a not in JUMPS),
    "skip": (1,),  # how many messages one `skip` may skip
    "interleave": 2,  # interleaved_read runs its ack or flow at point 1..interleave of a pass (§4.6)
    # Two spec gaps where pip379 breaks KS-I4 as written; the defaults are the spec, the gate's
    # configurations (properties/keyshared/binding.py) turn both off, and the corpus keeps both counterexamples.
    # (A) §4.4 lets the harness run anything between begin_read and complete_read. A disconnect while a
    # Replay read is in flight queues the leaver's messages, yet the read still delivers later messages
    # of their hashes: the #12885 retry only compares the first queued position with the one seen when
    # a read began, so a position queued above it passes, and a Normal read begun in the gap resets it.
    "disconnect_during_replay_read": True,
    # (B) A negative ack queues its positions without a hash (upstream's TODO in
    # redeliverUnacknowledgedMessages), so the replay filter lets such a p through while an earlier q
    # of its hash stays queued (e.g. q released by the disconnect of the consumer that nacked p). The
    # spec exempts only a q released by a negative ack; this also exempts a p released by one.
    "exempt_nacked_p": False,
}


def sticky_hash(key: str, range_max: int) -> int:
    """The sticky-key hash of §2 on [1, range_max] (never 0)."""
    return (mmh3.hash(key.encode("utf-8"), 0, signed=False) & 0x7FFFFFFF) % range_max + 1


def ring_points(name: str, index: int, points: int, range_max: int) -> list[int]:
    """§4.1: the ring points of a consumer with this name and name index, in point-index order."""
    return [sticky_hash(f"{name}\x00{index}\x00{i}", range_max) for i in range(points)]


def claims(join: Sequence[tuple[str, int]], points: int, range_max: int) -> dict[int, list[int]]:
    """Per ring point, the join slots claiming it in join order (KS-I8: the first is selected)."""
    out: dict[int, list[int]] = {}
    for slot, (name, index) in enumerate(join):
        for point in ring_points(name, index, points, range_max):
            out.setdefault(point, []).append(slot)
    return out


class Ring(NamedTuple):
    """The ring of one join order: owner slot per key hash, and the snapshot as (start, end, slot)."""

    owners: dict[int, int]
    ranges: tuple[tuple[int, int, int], ...]
    promoting: frozenset[int] = frozenset()  # slots whose leaving passes a point to a consumer colliding there


def build_ring(join: Sequence[tuple[str, int]], points: int, range_max: int, hashes: Sequence[int]) -> Ring:
    """§4.1: each point selects its earliest-joined claimer; the snapshot tiles [1, range_max]."""
    claimed = claims(join, points, range_max)
    selected = {point: slots[0] for point, slots in claimed.items()}
    if not selected:
        return Ring({}, ())
    ring = sorted(selected)
    owners = {}
    for h in hashes:
        at = bisect.bisect_left(ring, h)
        owners[h] = selected[ring[at if at < len(ring) else 0]]
    ranges: list[tuple[int, int, int]] = []
    start = 1
    for point in ring:
        slot = selected[point]
        if ranges and ranges[-1][2] == slot:
            ranges[-1] = (ranges[-1][0], point, slot)
        else:
            ranges.append((start, point, slot))
        start = point + 1
    if ring[-1] < range_max:
        first = selected[ring[0]]
        if ranges[-1][2] == first:
            ranges[-1] = (ranges[-1][0], range_max, first)
        else:
            ranges.append((ring[-1] + 1, range_max, first))
    return Ring(owners, tuple(ranges), frozenset(slots[0] for slots in claimed.values() if len(set(slots)) > 1))


class Consumer(NamedTuple):
    id: int
    name: str
    name_index: int
    permits: int
    pending: tuple[int, ...]  # broker side: positions with a pending ack (their hash is the entry's)
    held: tuple[int, ...]  # client side: delivered and not since acked or released


class Draining(NamedTuple):
    hash: int
    owner: int
    ref_count: int
    blocked: bool  # blocked_count > 0: only whether it blocked matters (§4.3)


class KSState(NamedTuple):
    messages: tuple[int, ...]  # key index of each entry
    consumers: tuple[Consumer, ...]  # join order
    read_position: int
    mark_delete: int
    acked: tuple[int, ...]  # individually acked above mark-delete
    replay: tuple[tuple[int, int], ...]  # (position, hash or UNKNOWN_HASH), ascending
    draining: tuple[Draining, ...]
    scheduled_read: bool
    skip_next_replay: bool  # skip_next_replay_to_trigger_look_ahead (pip379, pip282)
    stuck_on_replays: bool  # is_dispatcher_stuck_on_replays (classic)
    recently_joined: tuple[tuple[int, int], ...]  # (consumer id, join position) in map order
    last_sent: int | None  # pip282
    sent: tuple[int, ...]  # pip282 individually_sent_positions
    normal_read: tuple[int, ...] | None  # in flight
    replay_read: tuple[int, ...] | None
    min_replayed: int | None  # only meaningful while a read is in flight
    rewind: bool  # should_rewind_before_reading_or_replaying
    nacked: tuple[int, ...]  # client: released by a redelivery request since their last delivery, unacked
    settled: bool
    pinned: tuple[int, ...]
    broken: tuple[str, ...]
    events: tuple[str, ...]  # what the last step did that no variable shows (EVENTS), for coverage


# Field indexes of KSState, for the state key built as a plain tuple.
_CONSUMERS, _DRAINING, _SCHEDULED, _JOINED = (
    KSState._fields.index(f) for f in ("consumers", "draining", "scheduled_read", "recently_joined")
)


class IllegalStateError(RuntimeError):
    """The tracker's IllegalStateException; unreachable while KS-I2 holds."""


class _Thawed(Generic[Obj, T]):
    """A field of a thawed state that is only built when a step first uses it.

    Most steps touch a few fields: thawing every field into sets and dicts, and sorting every one of
    them back, was most of what a step cost. The value is stored in the instance's `__dict__`, which
    then shadows this (non-data) descriptor, so later reads are plain attribute reads; `freeze` keeps
    the state's own tuple for a field that is not in `__dict__`.
    """

    def __init__(self, thaw: Callable[[Obj], T]) -> None:
        self.thaw = thaw
        self.name = ""

    def __set_name__(self, owner: type[Obj], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type[Obj]) -> _Thawed[Obj, T]: ...
    @overload
    def __get__(self, obj: Obj, owner: type[Obj]) -> T: ...
    def __get__(self, obj: Obj | None, owner: type[Obj]) -> _Thawed[Obj, T] | T:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.thaw(obj)
        return value


class _Consumer:
    """One consumer of a thawed state, mutable for the length of a step. `pending` and `held` stay sorted
    tuples, rebuilt where a step changes them: they hold a few positions and most steps only read them."""

    __slots__ = ("frozen", "held", "id", "name", "name_index", "pending", "permits")

    def __init__(self, c: Consumer) -> None:
        self.frozen = c
        self.id, self.name, self.name_index, self.permits, self.pending, self.held = c

    def freeze(self) -> Consumer:
        """The consumer as it is now: the same tuple when the step changed nothing of it."""
        c = self.frozen
        if self.permits == c.permits and self.pending is c.pending and self.held is c.held:
            return c
        return Consumer(c.id, c.name, c.name_index, self.permits, self.pending, self.held)


def _added(positions: tuple[int, ...], position: int) -> tuple[int, ...]:
    """The sorted `positions` with `position`."""
    return positions if position in positions else tuple(sorted((*positions, position)))


def _removed(positions: tuple[int, ...], position: int) -> tuple[int, ...]:
    """The sorted `positions` without `position`."""
    return tuple([p for p in positions if p != position]) if position in positions else positions


class _Dispatch:
    """One operation on a thawed state; the methods follow §4.4–§4.6 and the reference step by step.

    `messages`, `acked`, `nacked` and `joined` stay tuples (read far more often than written, and rebuilt
    where written); the fields few steps use are `_Thawed`.
    """

    # The state's fields in slots; the rest in __dict__ when a step sets them (past 30 attributes an
    # instance dict stops sharing its keys, and building one cost more than a short step).
    __slots__ = (
        "__dict__", "acked", "classic", "cons", "delivered", "joined", "last_sent", "md", "messages",
        "min_replayed", "model", "nacked", "normal_read", "pinned", "pip282", "pip379", "read_pos", "replay",
        "replay_read", "rewind", "scheduled", "settled", "skip", "source", "stuck",
    )
    # What a step starts from whatever the state: class defaults until the step sets them.
    batch_level = 0
    unblocked_while_batching = False
    unblocks = 0
    pass_depth = 0
    deferred_prune = False
    hook: tuple[str, int, tuple[str, int, int]] | None = None  # (stage, index, inner of interleaved_read)
    released_blocked = False

    def __init__(self, model: KeySharedModel, s: KSState) -> None:
        self.model = model
        self.source = s
        self.pip379, self.classic, self.pip282 = model.variant_is
        # One unpacking of the state (its draining, sent, broken and events are _Thawed).
        (
            self.messages, consumers, self.read_pos, self.md, self.acked, replay, _, self.scheduled, self.skip,
            self.stuck, self.joined, self.last_sent, _, self.normal_read, self.replay_read, self.min_replayed,
            self.rewind, self.nacked, self.settled, self.pinned, _, _,
        ) = s
        self.cons = [_Consumer(c) for c in consumers]
        self.replay = dict(replay)
        self.delivered: list[Json] = []

    ring = _Thawed["_Dispatch", Ring](lambda d: d.model.ring_of(d.source))
    tracker = _Thawed["_Dispatch", dict[int, list[int]]](
        lambda d: {e.hash: [e.owner, e.ref_count, e.blocked] for e in d.source.draining}
    )
    sent = _Thawed["_Dispatch", set[int]](lambda d: set(d.source.sent))
    broken = _Thawed["_Dispatch", set[str]](lambda d: set(d.source.broken))
    events = _Thawed["_Dispatch", set[str]](lambda d: set())
    reached = _Thawed["_Dispatch", set[tuple[str, int]]](lambda d: set())  # (stage, index) passed without a hook

    def freeze(self) -> KSState:
        """The immutable state after the operation; KS-I5a is judged here, once the operation is over."""
        if self.released_blocked and not self.scheduled:
            self.broken.add("KS-I5a")
        s, thawed = self.source, self.__dict__
        in_flight = self.normal_read is not None or self.replay_read is not None
        # Positional, through _make: a call with 22 keywords cost more than the rest of freeze.
        return KSState._make((
            self.messages,
            tuple([c.freeze() for c in self.cons]),
            self.read_pos,
            self.md,
            self.acked,
            tuple(sorted(self.replay.items())) if self.replay else (),
            tuple([Draining(h, e[0], e[1], bool(e[2])) for h, e in sorted(self.tracker.items())])
            if "tracker" in thawed else s.draining,
            self.scheduled,
            self.skip,
            self.stuck,
            self.joined,
            self.last_sent,
            tuple(sorted(self.sent)) if "sent" in thawed else s.sent,
            self.normal_read,
            self.replay_read,
            self.min_replayed if in_flight else None,
            self.rewind,
            tuple(sorted({p for p in self.nacked if not self.is_acked(p)})) if self.nacked else (),
            self.settled,
            self.pinned,
            tuple(sorted(self.broken)) if "broken" in thawed else s.broken,
            tuple(sorted(self.events)) if "events" in thawed else (),
        ))

    # ------------------------------------------------------------------ helpers

    def hash_of(self, position: int) -> int:
        return self.model.key_hashes[self.messages[position]]

    def is_acked(self, position: int) -> bool:
        return position <= self.md or position in self.acked

    def consumer(self, cid: int) -> _Consumer:
        return next(c for c in self.cons if c.id == cid)

    def select(self, h: int) -> _Consumer | None:
        slot = self.ring.owners.get(h)
        return None if slot is None else self.cons[slot]

    def owner_ids(self) -> dict[int, int]:
        return {h: self.cons[slot].id for h, slot in self.ring.owners.items()}

    def reselect(self) -> None:
        self.ring = self.model.ring(self.cons)

    @staticmethod
    def available(c: _Consumer) -> int:
        return max(c.permits, 0)

    def look_ahead_limit(self) -> int:
        count = len(self.cons)
        per_consumer, per_subscription = self.model.look_ahead
        if per_consumer <= 0:
            limit = per_subscription
        else:
            limit = per_consumer * count
            if 0 < per_subscription < limit:
                limit = per_subscription
        return limit if limit > 0 else _INT_MAX  # max_unacked_* are 0 (unbounded) in the model

    def replay_add(self, position: int, h: int) -> bool:
        if position in self.replay:
            return False
        self.replay[position] = h
        return True

    def add_message_to_replay(self, position: int, h: int) -> bool:
        """addMessageToReplay: only a position the cursor has not acknowledged is queued (a cursor jump may
        have passed a pending ack or a read in flight); the add handler's own add is `replay_add`."""
        return not self.is_acked(position) and self.replay_add(position, h)

    def replay_has_hash(self, h: int) -> bool:
        return any(v == h for v in self.replay.values())

    # ------------------------------------------------------------------ tracker (pip379)

    def add_entry(self, owner: int, h: int) -> None:
        entry = self.tracker.setdefault(h, [owner, 0, False])
        if entry[0] != owner:
            raise IllegalStateError(f"hash {h} is drained by {entry[0]}, not {owner}")
        entry[1] += 1

    def reduce_ref_count(self, owner: int, h: int, closing: bool) -> None:
        entry = self.tracker.get(h)
        if entry is None:
            return
        if entry[0] != owner:
            raise IllegalStateError(f"hash {h} is drained by {entry[0]}, not {owner}")
        entry[1] -= 1
        if entry[1] > 0:
            return
        del self.tracker[h]
        if entry[2]:
            self.released_blocked = True
            if not closing:
                if self.batch_level > 0:
                    self.unblocked_while_batching = True
                else:
                    self.unblock()

    def should_block(self, c: _Consumer, h: int) -> bool:
        entry = self.tracker.get(h)
        if entry is None:
            return False
        if entry[0] != c.id:
            entry[2] = True
            return True
        del self.tracker[h]  # lazy removal: the hash came back to its draining consumer
        return False

    def start_batch(self) -> None:
        self.batch_level += 1

    def end_batch(self) -> None:
        self.batch_level -= 1
        if self.batch_level == 0 and self.unblocked_while_batching:
            self.unblocked_while_batching = False
            self.unblock()

    def unblock(self) -> None:
        """The pip379 unblocking handler (given a hash or -1): it schedules a read."""
        self.unblocks += 1
        self.scheduled = True

    def remove_pending(self, c: _Consumer, positions: Sequence[int], batch: bool) -> None:
        """PendingAcksMap removals with the pip379 remove handler (one batch when `batch`)."""
        if self.pip379 and batch and positions:
            self.start_batch()
        for position in positions:
            c.pending = _removed(c.pending, position)
            if self.pip379:
                self.reduce_ref_count(c.id, self.hash_of(position), False)
        if self.pip379 and batch and positions:
            self.end_batch()

    def register_draining(self, before: Mapping[int, int], after: Mapping[int, int], skip: int) -> None:
        """REMOVE (lost a hash it holds: add entries) for everyone first, then ADD (got it back)."""
        for x in self.cons:
            if x.id != skip:
                for position in x.pending:
                    h = self.hash_of(position)
                    if before.get(h) == x.id and after.get(h) != x.id:
                        self.add_entry(x.id, h)
        for x in self.cons:
            if x.id != skip:
                for position in x.pending:
                    h = self.hash_of(position)
                    entry = self.tracker.get(h)
                    if after.get(h) == x.id and before.get(h) != x.id and entry is not None and entry[0] == x.id:
                        self.reduce_ref_count(x.id, h, False)

    def check_bystanders(self, before: Mapping[int, int], after: Mapping[int, int], cid: int, added: bool) -> None:
        """KS-I6 at the configured hashes: only the joining (leaving) consumer gains (loses) hashes."""
        for h, owner in after.items() if added else before.items():
            other = before.get(h) if added else after.get(h)
            if other != owner and owner != cid:
                self.broken.add("KS-I6")

    # ------------------------------------------------------------------ recently joined (classic, pip282)

    def put_joined(self, cid: int, position: int) -> None:
        joined = list(self.joined)
        for i, (existing, _) in enumerate(joined):
            if existing == cid:
                joined[i] = (cid, position)
                break
        else:
            joined.append((cid, position))
        if len(joined) > 1 and joined[-2][1] > joined[-1][1]:
            joined.sort(key=lambda item: item[1])
        self.joined = tuple(joined)

    def prune(self) -> None:
        if self.pip379:
            return
        bound = self.md + 1 if self.classic else self.md
        pruned = 0
        while pruned < len(self.joined) and self.joined[pruned][1] <= bound:
            pruned += 1
        if pruned:
            self.joined = self.joined[pruned:]
            self.scheduled = True

    def joined_limit(self, c: _Consumer, read_type: str) -> int | None:
        self.prune()
        limit = next((p for cid, p in self.joined if cid == c.id), None)
        if limit is None:
            return None
        if read_type == REPLAY and self.joined and self.joined[0][1] < limit:
            limit = self.joined[0][1]
        return limit

    def last_sent_now(self) -> int | None:
        if self.last_sent is not None and self.md > self.last_sent:
            self.last_sent = self.md
        return self.last_sent

    # ------------------------------------------------------------------ consumers

    def add(self, cid: int, name: str, permits: int) -> None:
        if not self.cons:
            if self.normal_read is not None or self.replay_read is not None:
                self.rewind = True
            else:
                self.read_pos = self.md + 1
            self.replay.clear()
        used = {c.name_index for c in self.cons if c.name == name}
        index = next(i for i in itertools.count() if i not in used)
        before = self.owner_ids()
        self.cons.append(_Consumer(Consumer(cid, name, index, permits, (), ())))
        self.reselect()
        after = self.owner_ids()
        self.check_bystanders(before, after, cid, added=True)
        if self.pip379:
            self.register_draining(before, after, cid)
            return
        join = self.read_pos if self.classic else self.last_sent_now()
        if join is not None and len(self.cons) > 1 and self.read_pos - self.md > 1 and not self.rewind:
            self.put_joined(cid, join)

    def remove(self, cid: int) -> None:
        c = self.consumer(cid)
        if self.cons.index(c) in self.ring.promoting:
            self.events.add(PROMOTED)
        before = self.owner_ids()
        self.cons.remove(c)
        self.reselect()
        after = self.owner_ids()
        self.check_bystanders(before, after, cid, added=False)
        added = False
        if self.cons:
            if self.pip379:
                self.start_batch()
            for position in c.pending:
                h = self.hash_of(position)
                added = self.add_message_to_replay(position, h) or added
                if self.pip379:
                    self.reduce_ref_count(cid, h, True)
            if self.pip379:
                self.end_batch()
        else:
            self.replay.clear()
            self.tracker.clear()
        if self.pip379:
            self.register_draining(before, after, cid)
        else:
            self.joined = tuple([item for item in self.joined if item[0] != cid])
            if len(self.cons) == 1:
                self.joined = ()
            elif not self.cons and self.pip282:
                self.last_sent = None
                self.sent.clear()
            self.prune()
        if added:
            self.scheduled = True

    # ------------------------------------------------------------------ acks and redelivery

    def ack(self, cid: int, position: int) -> None:
        c = self.consumer(cid)
        c.held = _removed(c.held, position)
        holder = c if position in c.pending else next((x for x in self.cons if position in x.pending), None)
        if holder is not None:
            self.remove_pending(holder, [position], batch=False)
        if self.is_acked(position):
            return
        acked = {*self.acked, position}
        md = self.md
        while md + 1 in acked:
            md += 1
            acked.discard(md)
        self.acked = tuple(sorted(acked))
        if md == self.md:
            return
        self.md = md
        self.mark_delete_moved()

    def mark_delete_moved(self) -> None:
        """What follows a mark-delete move (an ack's or a jump's): the read position catches up, every
        consumer's pending acks and the replay queue lose what is at or below it, then the variant's hook."""
        md = self.md
        self.read_pos = max(self.read_pos, md + 1)
        for x in self.cons:
            self.remove_pending(x, [p for p in x.pending if p <= md], batch=True)
        for position in [p for p in self.replay if p <= md]:
            del self.replay[position]
        if self.pip379:
            self.scheduled = True
        elif self.pass_depth:
            self.deferred_prune = True
        else:
            self.prune()

    # ------------------------------------------------------------------ cursor jumps

    def jump(self, md: int) -> None:
        """skip, clear_backlog and expire: mark-delete moves to `md` without a client ack.

        Upstream (apache/pulsar, PersistentSubscription.skipMessages / clearBacklog and
        PersistentMessageExpiryMonitor) moves the managed cursor's mark-delete (ManagedCursorImpl:
        asyncSkipEntries, asyncClearBacklog, asyncMarkDelete), which drops the individual acks at or below
        it and moves the read position past it, then calls the dispatcher's markDeletePositionMoveForward
        hook (PR #25592): every consumer's PendingAcksMap.removeAllUpTo(mark-delete), whose remove handler
        releases draining ref counts, and redeliveryMessages.removeAllUpTo(mark-delete); the Key_Shared
        dispatcher then reschedules a read (its override of the hook at 0fc5c702, offset ~31,000 of
        PersistentStickyKeyDispatcherMultipleConsumers.java). Draining hashes, the replay queue and the
        recently-joined map therefore follow exactly what an ack moving mark-delete there would do. The
        clients are not told: a consumer still holds what it was delivered (upstream issue #25627).
        """
        if md <= self.md:
            return
        draining = set(self.tracker) if self.pip379 else set()
        self.md = md
        self.acked = tuple([p for p in self.acked if p > md])
        self.mark_delete_moved()
        if draining - set(self.tracker):
            self.events.add(JUMP_RELEASED)

    def skip_target(self, n: int) -> int:
        """ManagedCursorImpl.asyncSkipEntries(n, IndividualDeletedEntries.Exclude): the n-th entry after
        mark-delete that is not individually acked (or the last entry, if fewer are left)."""
        position, left = self.md, n
        while left and position + 1 < len(self.messages):
            position += 1
            if position not in self.acked:
                left -= 1
        return position

    def reset(self, position: int) -> None:
        """PersistentSubscription.resetCursor: every consumer is disconnected first (as `remove`, in join
        order), then ManagedCursorImpl's reset puts the read position at `position`, mark-delete just
        before it, and forgets the individual acks; the dispatcher's cursorIsReset does nothing the
        model shows. Consumers join again afterwards and are read from `position`."""
        for c in list(self.cons):
            self.remove(c.id)
        if position <= self.md or any(p >= position for p in self.acked):
            self.events.add(RESET_BACK)
        self.md, self.acked, self.read_pos = position - 1, (), position

    def redeliver(self, cid: int, positions: Sequence[int] | None) -> None:
        c = self.consumer(cid)
        nacked = list(c.held) if positions is None else list(positions)
        c.held = tuple([p for p in c.held if p not in nacked])
        self.nacked = (*self.nacked, *nacked)  # sorted and deduplicated by freeze
        if positions is None:
            released = list(c.pending)
            self.remove_pending(c, released, batch=True)
        else:
            released = [p for p in positions if p in c.pending]
            for position in released:
                self.remove_pending(c, [position], batch=False)
        added = False
        for position in released:
            if not self.is_acked(position):
                added = self.replay_add(position, UNKNOWN_HASH) or added
        if added:
            self.scheduled = True

    # ------------------------------------------------------------------ reads

    def interleave(self, stage: str, index: int) -> None:
        """§4.6: the harness's ack or flow at (stage, index) of a pass, at most once per read."""
        hook = self.hook
        if hook is None:
            self.reached.add((stage, index))
            return
        if index == 0 or (stage, index) != hook[:2]:
            return
        self.hook = None
        name, cid, value = hook[2]
        c = next((x for x in self.cons if x.id == cid), None)
        if c is None:
            return
        if name == "flow":
            c.permits += value
        elif value in c.held:
            position = value
            unblocks = self.unblocks
            self.ack(c.id, position)
            if self.unblocks > unblocks:
                self.events.add(UNBLOCKED_IN_PASS)

    def end_pass(self) -> None:
        self.pass_depth -= 1
        if not self.pass_depth and self.deferred_prune:
            self.deferred_prune = False
            self.prune()

    def begin_read(self) -> tuple[str, tuple[int, ...]] | None:
        if not self.cons:
            return None
        count = min(sum(self.available(c) for c in self.cons), self.model.read_batch_size)
        if count <= 0:
            return None
        replay = [] if self.replay_read is not None else self.to_replay_now(count)
        if replay:
            op = (REPLAY, tuple(replay))
            self.replay_read = op[1]
        else:
            normal = [] if self.normal_read is not None else self.read_entries(count)
            if not normal:
                return None
            op = (NORMAL, tuple(normal))
            self.normal_read = op[1]
        self.min_replayed = min(self.replay) if self.replay else None
        return op

    def to_replay_now(self, count: int) -> list[int]:
        while True:
            if self.classic and self.stuck:
                self.stuck = False
                return []
            if not self.classic and self.skip:
                self.skip = False
                return []
            collected = self.classic_replay_filter(count) if self.classic else self.replay_filter(count)
            acked = [p for p in collected if self.is_acked(p)]
            for position in acked:
                self.replay.pop(position, None)
            live = [p for p in collected if not self.is_acked(p)]
            if live or not acked:
                return live

    def replay_filter(self, count: int) -> list[int]:
        permits: dict[int, int] = {}
        blocked: set[int] = set()
        collected: list[int] = []
        self.pass_depth += 1
        for seen, position in enumerate(sorted(self.replay)):
            if len(collected) >= count:
                break
            self.interleave("replay_filter", seen)
            if position not in self.replay:
                continue
            h = self.replay[position]
            if h == UNKNOWN_HASH:
                collected.append(position)
                continue
            if h in blocked:
                continue
            c = self.select(h)
            if (
                c is None
                or permits.setdefault(c.id, self.available(c)) <= 0
                or not self.can_dispatch(c, position, h, REPLAY)[0]
            ):
                if self.pip379:
                    blocked.add(h)
                continue
            permits[c.id] -= 1
            collected.append(position)
        self.end_pass()
        return collected

    def classic_replay_filter(self, count: int) -> list[int]:
        candidates = sorted(self.replay)[:count]
        accepted: list[int] = []
        groups: dict[int, list[int]] = {}
        self.pass_depth += 1
        for index, position in enumerate(candidates):
            self.interleave("replay_filter", index)
            if position not in self.replay:
                continue
            h = self.replay[position]
            if h == UNKNOWN_HASH:
                accepted.append(position)
                continue
            c = self.select(h)
            if c is not None:
                groups.setdefault(c.id, []).append(position)
        for cid, positions in groups.items():
            c = self.consumer(cid)
            permits = self.available(c)
            if permits:
                accepted.extend(positions[: self.classic_allowed(c, positions, permits, REPLAY, None)])
        self.end_pass()
        return sorted(accepted)

    def read_entries(self, count: int) -> list[int]:
        if self.classic:
            joined = {cid for cid, _ in self.joined}
            if not any(self.available(c) > 0 and c.id not in joined for c in self.cons):
                return []
        else:
            limit = self.look_ahead_limit()
            if len(self.replay) >= limit:
                return []
            count = min(count, max(limit - len(self.replay), 1))
        positions: list[int] = []
        position = self.read_pos
        while len(positions) < count and position < len(self.messages):
            if not self.is_acked(position):
                positions.append(position)
            position += 1
        if positions:
            self.read_pos = positions[-1] + 1
        return positions

    def complete_read(self, read_type: str) -> None:
        if read_type == NORMAL:
            positions, self.normal_read = self.normal_read, None
        else:
            positions, self.replay_read = self.replay_read, None
        assert positions is not None
        if self.rewind:
            if self.normal_read is None and self.replay_read is None:
                self.rewind = False
                self.read_pos = self.md + 1
            return
        if not self.cons:
            if read_type == NORMAL:
                self.read_pos = self.md + 1
            return
        if self.replay and self.min_replayed is not None and min(self.replay) < self.min_replayed:
            if read_type == NORMAL:
                for position in positions:
                    self.add_message_to_replay(position, self.hash_of(position))
            return
        if self.classic:
            self.classic_dispatch(positions, read_type)
        else:
            self.per_entry_dispatch(positions, read_type)

    def can_dispatch(self, c: _Consumer, position: int, h: int, read_type: str) -> tuple[bool, bool]:
        """(dispatchable, blocked by hash) for pip379 and pip282."""
        if self.pip282:
            limit = self.joined_limit(c, read_type)
            if limit is not None and position > limit:
                return False, False
        if read_type == NORMAL and self.replay_has_hash(h):
            return False, True
        if self.pip379 and self.should_block(c, h):
            return False, True
        return True, False

    def per_entry_dispatch(self, positions: Sequence[int], read_type: str) -> None:
        groups: dict[int, list[int]] = {}
        permits: dict[int, int] = {}
        already_blocked: set[int] = set()
        blocked_by_hash: dict[int, None] = {}
        with_entries: set[int] = set()
        self.pass_depth += 1
        if self.pip282:
            self.last_sent_now()
            if self.last_sent is None:
                self.last_sent = self.md
        look_ahead_allowed = len(self.replay) < self.look_ahead_limit()
        for index, position in enumerate(positions):
            self.interleave("dispatch", index)
            h = self.hash_of(position)
            c: _Consumer | None = None
            dispatch = by_hash = False
            if h not in already_blocked:
                c = self.select(h)
                if c is not None:
                    with_entries.add(c.id)
                    if permits.setdefault(c.id, self.available(c)) > 0:
                        dispatch, by_hash = self.can_dispatch(c, position, h, read_type)
            if dispatch and c is not None:
                permits[c.id] -= 1
                groups.setdefault(c.id, []).append(position)
                continue
            if by_hash and c is not None:
                blocked_by_hash[c.id] = None
            self.add_message_to_replay(position, h)
            if self.pip379:
                already_blocked.add(h)
        if look_ahead_allowed and not groups:
            trigger = read_type == NORMAL and any(permits[cid] > 0 for cid in blocked_by_hash)
            trigger = trigger or any(c.id not in with_entries and self.available(c) > 0 for c in self.cons)
            if trigger:
                self.skip = True
        sent = self.send(groups, read_type)
        if self.pip282:
            assert self.last_sent is not None
            pending = self.sent | {p for p in sent if p > self.last_sent}
            while self.last_sent + 1 in pending or self.last_sent + 1 <= self.md:
                self.last_sent += 1
            self.sent = {p for p in pending if p > self.last_sent}
        self.end_pass()

    def classic_allowed(
        self, c: _Consumer, positions: Sequence[int], permits: int, read_type: str, hashes: set[int] | None
    ) -> int:
        count = min(len(positions), permits)
        if count == 0:
            return 0
        if read_type == NORMAL and hashes is not None and any(self.replay_has_hash(h) for h in hashes):
            return 0
        limit = self.joined_limit(c, read_type)
        if limit is None:
            return count
        return next((i for i in range(count) if positions[i] >= limit), count)

    def classic_dispatch(self, positions: Sequence[int], read_type: str) -> None:
        groups: dict[int, list[int]] = {}
        hashes: dict[int, set[int]] = {}
        any_sent = False
        self.pass_depth += 1
        for position in positions:
            h = self.hash_of(position)
            c = self.select(h)
            if c is None:
                self.add_message_to_replay(position, h)
                continue
            groups.setdefault(c.id, []).append(position)
            hashes.setdefault(c.id, set()).add(h)
        for index, (cid, group) in enumerate(groups.items()):
            self.interleave("dispatch", index)
            c = self.consumer(cid)
            allowed = self.classic_allowed(c, group, self.available(c), read_type, hashes[cid])
            for position in group[allowed:]:
                self.add_message_to_replay(position, self.hash_of(position))
            if allowed:
                any_sent = bool(self.send({cid: group[:allowed]}, read_type)) or any_sent
        if not any_sent and not self.joined:
            self.stuck = True
        self.end_pass()

    def send(self, groups: Mapping[int, Sequence[int]], read_type: str) -> list[int]:
        """Per entry: the pending ack (pip379's add handler may refuse it), the delivery, a permit."""
        sent: list[int] = []
        for cid, positions in groups.items():
            c = self.consumer(cid)
            if read_type == REPLAY:
                for position in positions:
                    self.replay.pop(position, None)
            for position in positions:
                h = self.hash_of(position)
                if self.pip379:
                    entry = self.tracker.get(h)
                    if entry is not None and entry[0] != cid:
                        self.replay_add(position, h)
                        continue
                c.pending = _added(c.pending, position)
                c.permits -= 1
                sent.append(position)
                self.deliver(c, position, h)
        return sent

    def deliver(self, c: _Consumer, position: int, h: int) -> None:
        """The client receives `position`: KS-I4 against what it holds, then it holds it."""
        exempt = self.model.exempt_nacked_p and position in self.nacked
        for earlier in range(0 if exempt else position):
            if (
                self.hash_of(earlier) == h
                and not self.is_acked(earlier)
                and earlier not in c.held
                and earlier not in self.nacked
            ):
                self.broken.add("KS-I4")
        if position in self.nacked:
            self.nacked = tuple([p for p in self.nacked if p != position])
        c.held = _added(c.held, position)
        self.delivered.append([c.id, position])

    def read_more(self) -> None:
        op = self.begin_read()
        if op is not None:
            self.complete_read(op[0])

    def progress_key(self) -> Hashable:
        return (
            len(self.delivered),
            self.read_pos,
            self.md,
            tuple(sorted(self.replay.items())),
            self.scheduled,
            self.skip,
            self.stuck,
            self.joined,
            self.last_sent,
            tuple(sorted(self.sent)),
        )

    def run(self) -> None:
        seen = {self.progress_key()}
        for _ in range(_MAX_READS):
            if self.scheduled:
                self.scheduled = False
            self.read_more()
            key = self.progress_key()
            if key in seen:
                return
            seen.add(key)


# The parameters of each action, in the (sorted) order of Action.of.
_PARAMS: dict[str, tuple[str, ...]] = {
    "add": ("consumer", "name", "permits"),
    "remove": ("consumer",),
    "publish": ("key",),
    "flow": ("consumer", "n"),
    "ack": ("consumer", "position"),
    "redeliver": ("consumer", "position"),
    "redeliver_all": ("consumer",),
    "read": (),
    "fire": (),
    "run": (),
    "begin_read": (),
    "complete_read": ("kind",),
    "interleaved_read": ("index", "inner", "stage"),
    "settle": ("stubborn",),
    "skip": ("n",),
    "clear_backlog": (),
    "expire": ("position",),
    "reset": ("position",),
}


class _Actions(dict[tuple[Any, ...], Action]):
    """Every action the model offered, built once: (name, *arguments in parameter order) -> Action.

    The explorer asks for the same few hundred actions in every state; building and hashing them was
    most of what `enabled` and `step` cost. `args` gives an offered action's arguments back by
    identity, and `by_fields` finds the offered action equal to one built elsewhere (a trace's).
    """

    def __init__(self) -> None:
        super().__init__()
        self.args: dict[int, tuple[Any, ...]] = {}
        self.by_fields: dict[tuple[str, tuple[tuple[str, Param], ...]], Action] = {}

    def __missing__(self, key: tuple[Any, ...]) -> Action:
        name = key[0]
        action = self[key] = Action(name, tuple(zip(_PARAMS[name], key[1:], strict=True)))
        self.args[id(action)] = key[1:]
        self.by_fields[(name, action.params)] = action
        return action


class _InJoinOrder(dict[int, list[int]]):
    """n -> [1, ..., n]: the consumer ids of a state whose ids are already numbered in join order."""

    def __missing__(self, n: int) -> list[int]:
        ids = self[n] = list(range(1, n + 1))
        return ids


class KeySharedModel:
    """The Key_Shared dispatcher of one variant, with the harness's client record; see the module doc."""

    mechanism = "keyshared"

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "pip379") -> None:
        self.variant = variant
        self.variant_is = (variant == "pip379", variant == "classic", variant == "pip282")
        self.config: Mapping[str, Param] = configured(self.mechanism, variant, VARIANTS, config, DEFAULT_CONFIG)
        cfg = self.config
        self.names = tuple(str(n) for n in _tuple(cfg["names"]))
        self.keys = tuple(str(k) for k in _tuple(cfg["keys"]))
        self.max_consumers = _cfg_int(cfg, "max_consumers")
        self.max_messages = _cfg_int(cfg, "max_messages")
        self.same_name = bool(cfg["same_name"])
        self.add_permits = _ints(cfg, "add_permits")
        self.flows = _ints(cfg, "flow")
        self.max_permits = _cfg_int(cfg, "max_permits")
        self.points = _cfg_int(cfg, "points")
        self.range_max = _cfg_int(cfg, "range_max")
        self.read_batch_size = _cfg_int(cfg, "read_batch_size")
        self.look_ahead = (_cfg_int(cfg, "look_ahead_per_consumer"), _cfg_int(cfg, "look_ahead_per_subscription"))
        self.kinds = frozenset(str(a) for a in _tuple(cfg["actions"]))
        if not self.kinds <= set(ACTION_NAMES):
            raise ValueError(f"unknown keyshared action(s): {', '.join(sorted(self.kinds - set(ACTION_NAMES)))}")
        # The steps this configuration can take: read always, complete_read with begin_read.
        self.action_names: Sequence[str] = tuple(
            a for a in ACTION_NAMES
            if a in self.kinds or a == "read" or (a == "complete_read" and "begin_read" in self.kinds)
        )
        self._flag_unread = not self.kinds & {"fire", "run"}
        self.jumps = bool(self.kinds & set(JUMPS))
        self.skips = _ints(cfg, "skip")
        self.disconnect_during_replay_read = bool(cfg["disconnect_during_replay_read"])
        self.exempt_nacked_p = bool(cfg["exempt_nacked_p"])
        self.interleave = _cfg_int(cfg, "interleave")
        self.key_hashes = tuple(sticky_hash(k, self.range_max) for k in self.keys)
        self._hashes = tuple(sorted(set(self.key_hashes)))
        self._rings: dict[tuple[tuple[str, int], ...], Ring] = {}
        self._ring_of: tuple[KSState | None, Ring] = (None, Ring({}, ()))
        self._key_of: tuple[KSState | None, Hashable] = (None, None)
        self._in_join_order = _InJoinOrder()
        self._actions = _Actions()
        # The engines ask for the enabled actions and then step each of them from the same state.
        self._last_enabled: tuple[KSState | None, set[int]] = (None, set())
        self._offered: dict[Hashable, tuple[tuple[Action, ...], set[int]]] = {}
        # ... and `read` first: its result, deliveries and the points its passes reached, from that state.
        self._read_from: tuple[KSState | None, KSState, list[Json], set[tuple[str, int]]] = (
            None, self.initial(), [], set()
        )
        self.invariants: Sequence[Invariant[KSState]] = (
            Invariant("KS-I1", self._one_holder, "at most one connected consumer holds a position of each hash"),
            Invariant("KS-I2", self._tracker_consistent, "tracker entries match the drainer's pending acks"),
            Invariant("KS-I4", lambda s: "KS-I4" not in s.broken, "nobody gets p before an unacked q < p of its hash"),
            Invariant("KS-I5a", lambda s: "KS-I5a" not in s.broken, "a released blocking entry schedules a read"),
            Invariant("KS-I6", lambda s: "KS-I6" not in s.broken, "a join or leave moves no bystander's hash"),
            Invariant("KS-I7", self._no_hash_zero, "hash 0 is never tracked or queued as known"),
            # What must hold after a cursor jump, declared where a configuration takes jumps (the pipeline's
            # compiled replay mirrors the invariants above only).
            *((Invariant("KS-J1", self._nothing_replayed_below, "nothing is queued for replay at or below "
                         "mark-delete"),
               Invariant("KS-J2", self._each_once, "every unacknowledged message is in exactly one place: "
                         "pending at one consumer, queued for replay, in a read in flight, or not yet read"))
              if self.jumps else ()),
        )
        # Liveness is judged on settled runs, so it needs the `settle` step.
        self.liveness: Sequence[Liveness[KSState]] = (
            Liveness("KS-I5b", self._nothing_stuck, "under a fixed set of consumers, every unpinned hash drains"),
            Liveness("KS-I5-hash", self._nothing_blocked, "no hash stays draining or queued but a pinned one"),
        ) if "settle" in self.kinds else ()

    # ------------------------------------------------------------------ ring

    def ring(self, consumers: Sequence[Consumer | _Consumer]) -> Ring:
        join = tuple([(c.name, c.name_index) for c in consumers])
        ring = self._rings.get(join)
        if ring is None:
            ring = self._rings[join] = build_ring(join, self.points, self.range_max, self._hashes)
        return ring

    def ring_of(self, state: KSState) -> Ring:
        """The ring of a state's consumers; the last state's is kept, as every action from it asks."""
        last, ring = self._ring_of
        if last is not state:
            ring = self.ring(state.consumers)
            self._ring_of = (state, ring)
        return ring

    def owner(self, state: KSState, h: int) -> int | None:
        """Id of the consumer `select(h)` returns, or None on an empty ring."""
        slot = self.ring(state.consumers).owners.get(h)
        return None if slot is None else state.consumers[slot].id

    # ------------------------------------------------------------------ properties

    def hash_of(self, state: KSState, position: int) -> int:
        return self.key_hashes[state.messages[position]]

    def _one_holder(self, s: KSState) -> bool:
        """PIP-379's contract: a key's messages are unacknowledged at one consumer at a time. A message the
        cursor acknowledged (a jump passed it) no longer counts, though its consumer may still hold it."""
        holder: dict[int, int] = {}
        md, acked = s.mark_delete, s.acked
        for c in s.consumers:
            for position in c.held:
                if position > md and position not in acked and (
                    holder.setdefault(self.key_hashes[s.messages[position]], c.id) != c.id
                ):
                    return False
        return True

    @staticmethod
    def _nothing_replayed_below(s: KSState) -> bool:
        return all(p > s.mark_delete for p, _ in s.replay)

    @staticmethod
    def _each_once(s: KSState) -> bool:
        """Conservation over the unacknowledged messages: none is lost or handed out twice (a read in flight
        across a jump may still deliver what the jump passed, as upstream does). Not judged while no consumer
        is connected
        (the last one's leaving drops pending acks and the queue, and the first one's joining rewinds) or
        while a rewind waits for a read in flight."""
        if not s.consumers or s.rewind:
            return True
        places: dict[int, int] = {}
        for c in s.consumers:
            for p in c.pending:
                places[p] = places.get(p, 0) + 1
        for p, _ in s.replay:
            places[p] = places.get(p, 0) + 1
        for p in s.normal_read or ():
            places[p] = places.get(p, 0) + 1
        acked = set(s.acked)
        return all(
            places.get(p, 0) + (p >= s.read_position) == 1
            for p in range(s.mark_delete + 1, len(s.messages)) if p not in acked
        )

    def _tracker_consistent(self, s: KSState) -> bool:
        if not s.consumers:
            return not s.draining
        by_id = {c.id: c for c in s.consumers}
        for d in s.draining:
            c = by_id.get(d.owner)
            if d.hash == 0 or c is None or self.owner(s, d.hash) == d.owner:
                return False
            if d.ref_count < 1 or d.ref_count != sum(1 for p in c.pending if self.hash_of(s, p) == d.hash):
                return False
        return True

    def _no_hash_zero(self, s: KSState) -> bool:
        return all(1 <= d.hash <= self.range_max for d in s.draining) and all(
            h == UNKNOWN_HASH or 1 <= h <= self.range_max for _, h in s.replay
        )

    def _unacked(self, s: KSState) -> list[int]:
        acked = set(s.acked)
        return [p for p in range(s.mark_delete + 1, len(s.messages)) if p not in acked]

    def _nothing_stuck(self, s: KSState) -> bool:
        pinned_hashes = {self.hash_of(s, p) for p in s.pinned}
        return s.settled and all(p in s.pinned or self.hash_of(s, p) in pinned_hashes for p in self._unacked(s))

    def _nothing_blocked(self, s: KSState) -> bool:
        pinned_hashes = {self.hash_of(s, p) for p in s.pinned}
        unacked = set(self._unacked(s))
        return (
            s.settled
            and all(d.hash in pinned_hashes for d in s.draining)
            and all(self.hash_of(s, p) in pinned_hashes for p, _ in s.replay if p in unacked)
        )

    # ------------------------------------------------------------------ transition system

    def initial(self) -> KSState:
        return KSState(
            messages=(),
            consumers=(),
            read_position=0,
            mark_delete=-1,
            acked=(),
            replay=(),
            draining=(),
            scheduled_read=False,
            skip_next_replay=False,
            stuck_on_replays=False,
            recently_joined=(),
            last_sent=None,
            sent=(),
            normal_read=None,
            replay_read=None,
            min_replayed=None,
            rewind=False,
            nacked=(),
            settled=False,
            pinned=(),
            broken=(),
            events=(),
        )

    def enabled(self, state: KSState) -> Sequence[Action]:
        # All that the offered actions depend on: states that agree on it share one (immutable) tuple.
        signature = (
            state.scheduled_read,
            state.settled,
            state.pinned,
            state.normal_read is None,
            state.replay_read is None,
            len(state.messages) < self.max_messages,
            tuple([(c.id, c.name, c.permits, c.held) for c in state.consumers]),
            (state.mark_delete, len(state.messages), state.acked) if self.jumps else (),
        )
        offered = self._offered.get(signature)
        if offered is None:
            out = self._enabled(state)
            offered = self._offered[signature] = (out, {id(a) for a in out})
        self._last_enabled = (state, offered[1])
        return offered[0]

    def _enabled(self, state: KSState) -> tuple[Action, ...]:
        kinds, act = self.kinds, self._actions
        out: list[Action] = [act[("read",)]]  # always possible, so no state is a deadlock
        if "run" in kinds:
            out.append(act[("run",)])
        if state.scheduled_read and "fire" in kinds:
            out.append(act[("fire",)])
        consumers = state.consumers
        # The acks and flows, as interleaved_read's `inner` (name, consumer, position or n): their own keys.
        inner: list[tuple[str, int, int]] = []
        flow, ack, pinned = "flow" in kinds, "ack" in kinds, state.pinned
        for c in consumers:
            if flow:
                inner.extend(("flow", c.id, n) for n in self.flows if c.permits + n <= self.max_permits)
            if ack:
                inner.extend(("ack", c.id, p) for p in c.held if p not in pinned)
        out.extend([act[k] for k in inner])
        if "begin_read" in kinds:
            if state.normal_read is None or state.replay_read is None:
                out.append(act[("begin_read",)])
            if state.normal_read is not None:
                out.append(act[("complete_read", NORMAL)])
            if state.replay_read is not None:
                out.append(act[("complete_read", REPLAY)])
        if not state.settled:
            self._unsettled(state, out, inner)
        return tuple(out)

    def _unsettled(self, state: KSState, out: list[Action], inner: list[tuple[str, int, int]]) -> None:
        """The actions a settled run gives up: consumer changes, publishing, nacks, interleaved reads."""
        kinds, consumers, act = self.kinds, state.consumers, self._actions
        if "add" in kinds and len(consumers) < self.max_consumers:
            used = {c.id for c in consumers}
            cid = next(i for i in itertools.count(1) if i not in used)
            connected = {c.name for c in consumers}
            out.extend([
                act[("add", cid, n, p)]
                for n in self.names
                if self.same_name or n not in connected
                for p in self.add_permits
            ])
        if "remove" in kinds and (self.disconnect_during_replay_read or state.replay_read is None):
            out.extend([act[("remove", c.id)] for c in consumers])
        if "publish" in kinds and len(state.messages) < self.max_messages:
            out.extend([act[("publish", k)] for k in self.keys])
        for c in consumers:
            if "redeliver" in kinds:
                out.extend([act[("redeliver", c.id, p)] for p in c.held])
            if "redeliver_all" in kinds and c.held:
                out.append(act[("redeliver_all", c.id)])
        if "interleaved_read" in kinds and consumers:
            out.extend([
                act[("interleaved_read", i, a, stage)]
                for stage in STAGES
                for i in range(1, self.interleave + 1)
                for a in inner
            ])
        if "settle" in kinds and consumers:  # fairness needs someone to deliver to
            out.append(act[("settle", 0)])
            out.extend([act[("settle", c.id)] for c in consumers if c.held])
        if self.jumps:
            self._jumps(state, out)

    def _jumps(self, state: KSState, out: list[Action]) -> None:
        """The cursor jumps: skip, clear_backlog and expire while something is left to acknowledge (expire to
        any entry above mark-delete: upstream skips a target at or below it, PR #24881); reset to any entry or
        the end, forward or back, while no read is in flight (the subscription is fenced and its consumers
        disconnected first; the model does not take a reset between a read's start and its completion)."""
        kinds, act, md, count = self.kinds, self._actions, state.mark_delete, len(state.messages)
        if any(p not in state.acked for p in range(md + 1, count)):
            if "skip" in kinds:
                out.extend([act[("skip", n)] for n in self.skips])
            if "clear_backlog" in kinds:
                out.append(act[("clear_backlog",)])
        if "expire" in kinds:
            out.extend([act[("expire", p)] for p in range(md + 1, count)])
        if "reset" in kinds and state.normal_read is None and state.replay_read is None:
            out.extend([act[("reset", p)] for p in range(count + 1)])

    def step(self, state: KSState, action: Action) -> tuple[KSState, Observation]:
        last, offered = self._last_enabled
        if last is not state:
            self.enabled(state)
            offered = self._last_enabled[1]
        # The engines step the very objects `enabled` returned; a trace's action is matched by value.
        same = action if id(action) in offered else self._actions.by_fields.get((action.name, action.params))
        if same is None or id(same) not in offered:
            raise ActionNotEnabled(action, f"{len(state.consumers)} consumer(s), {len(state.messages)} message(s)")
        args = self._actions.args[id(same)]
        name = action.name
        read = self._read_from
        if name == "interleaved_read" and read[0] is state and (args[2], args[0]) not in read[3]:
            # The plain read from this state never reached the hook's point, so this read is that one.
            return read[1], {"delivered": list(read[2])}
        d = _Dispatch(self, state)
        observation: dict[str, Json] = {}
        if name == "add":
            cid, joiner, permits = args
            d.add(cid, joiner, permits)
        elif name == "remove":
            d.remove(args[0])
        elif name == "publish":
            d.messages += (self.keys.index(args[0]),)
        elif name == "flow":
            cid, n = args
            d.consumer(cid).permits += n
        elif name == "ack":
            cid, position = args
            d.ack(cid, position)
        elif name == "redeliver":
            cid, position = args
            d.redeliver(cid, [position])
        elif name == "redeliver_all":
            d.redeliver(args[0], None)
        elif name == "read":
            d.read_more()
        elif name == "fire":
            d.scheduled = False
            d.read_more()
        elif name == "run":
            d.run()
        elif name == "begin_read":
            op = d.begin_read()
            observation["read"] = [op[0], list(op[1])] if op is not None else ["None", []]
        elif name == "complete_read":
            d.complete_read(args[0])
        elif name == "interleaved_read":
            index, inner, stage = args
            d.hook = (stage, index, inner)
            d.read_more()
        elif name == "settle":
            stubborn = args[0]
            d.settled = True
            d.pinned = d.consumer(stubborn).held if stubborn else ()
        elif name == "skip":
            d.jump(d.skip_target(args[0]))
        elif name == "clear_backlog":
            d.jump(len(d.messages) - 1)
        elif name == "expire":
            d.jump(args[0])
        else:  # reset
            d.reset(args[0])
        observation["delivered"] = d.delivered
        after = d.freeze()
        if state.draining and any(self._came_back(after, e) for e in state.draining):
            after = after._replace(events=tuple(sorted({*after.events, CAME_BACK})))
        if name == "read":
            self._read_from = (state, after, d.delivered, d.reached)
        return after, observation

    def _came_back(self, after: KSState, entry: Draining) -> bool:
        """The entry is gone, and its hash is with its drainer again (still connected)."""
        connected = any(c.id == entry.owner for c in after.consumers)
        return (connected and self.owner(after, entry.hash) == entry.owner
                and all(d.hash != entry.hash for d in after.draining))

    def key(self, state: KSState) -> Hashable:
        """The state up to symmetry: consumer ids are labels, so they are renumbered in join order; and
        without `fire` or `run`, nothing reads `scheduled_read` (KS-I5a is already judged in `broken`).
        The last state's key is kept: most interleaved_read steps give the same state object in a row."""
        last, key = self._key_of
        if last is not state:
            key = self._symmetric(state)
            self._key_of = (state, key)
        return key

    def _symmetric(self, state: KSState) -> Hashable:
        """The key itself: the state when it is already canonical, else a tuple of its canonical fields."""
        consumers = state.consumers
        in_order = [c[0] for c in consumers] == self._in_join_order[len(consumers)]
        if in_order and not (self._flag_unread and state.scheduled_read):
            return state
        # A plain tuple: it equals (and hashes as) the KSState of the same fields, and is cheaper to build.
        fields: list[object] = list(state)
        if self._flag_unread:
            fields[_SCHEDULED] = False
        if not in_order:
            fields[_CONSUMERS] = tuple([(slot, *c[1:]) for slot, c in enumerate(consumers, start=1)])
            if state.draining or state.recently_joined:
                ids = {c.id: slot for slot, c in enumerate(consumers, start=1)}
                fields[_DRAINING] = tuple([(d[0], ids[d[1]], *d[2:]) for d in state.draining])
                fields[_JOINED] = tuple([(ids[cid], p) for cid, p in state.recently_joined])
        return tuple(fields)

    def vars(self, state: KSState) -> dict[str, Json]:
        ids = [c.id for c in state.consumers]
        return {
            "messages": [self.keys[k] for k in state.messages],
            "consumers": [[c.id, c.name, c.name_index, c.permits] for c in state.consumers],
            "pending": [[c.id, list(c.pending)] for c in state.consumers],
            "held": [[c.id, list(c.held)] for c in state.consumers],
            "ring": [[start, end, ids[slot]] for start, end, slot in self.ring(state.consumers).ranges],
            "read_position": state.read_position,
            "mark_delete": state.mark_delete,
            "acked": list(state.acked),
            "replay": [[p, h] for p, h in state.replay],
            "draining": [[d.hash, d.owner, d.ref_count, d.blocked] for d in state.draining],
            "recently_joined": [[cid, p] for cid, p in state.recently_joined],
            "last_sent": [] if state.last_sent is None else [state.last_sent],
            "sent": list(state.sent),
            "scheduled_read": state.scheduled_read,
            "skip_next_replay": state.skip_next_replay,
            "stuck_on_replays": state.stuck_on_replays,
            "reads_in_flight": [
                [kind, list(positions)]
                for kind, positions in ((NORMAL, state.normal_read), (REPLAY, state.replay_read))
                if positions is not None
            ],
            "rewind_pending": state.rewind,
            "nacked": list(state.nacked),
            "settled": state.settled,
            "pinned": list(state.pinned),
            "events": list(state.events),
        }


def _tuple(value: Param) -> tuple[Param, ...]:
    if not isinstance(value, tuple):
        raise ValueError(f"expected a list in the keyshared config, got {value!r}")
    return value


def _ints(config: Mapping[str, Param], key: str) -> tuple[int, ...]:
    values = _tuple(config[key])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError(f"keyshared config {key!r} must list integers, got {values!r}")
    return tuple(v for v in values if isinstance(v, int))


def _cfg_int(config: Mapping[str, Param], key: str) -> int:
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"keyshared config {key!r} must be an integer, got {value!r}")
    return value
