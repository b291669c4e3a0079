"""One operation of the dispatcher scope on a thawed state (spec keyshared.md §4.3–§4.6).

A step thaws the state into a mutable `Dispatch`, runs the operation as §4.4–§4.6 specify, and
freezes it back; this keeps the dispatch passes readable and lets the §4.6 interleavings (an ack or
flow at a point of a pass) run in the middle of a pass, as they do in the reference.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar, overload

from models.core import Json
from models.keyshared.ring import Ring
from models.keyshared.state import (
    JUMP_RELEASED,
    NORMAL,
    PROMOTED,
    REPLAY,
    RESET_BACK,
    UNBLOCKED_IN_PASS,
    UNKNOWN_HASH,
    Consumer,
    Draining,
    KSState,
)

Obj = TypeVar("Obj")
T = TypeVar("T")

_INT_MAX = 2**31 - 1
_MAX_READS = 1000  # run_until_quiescent's guard, as the reference's default


class IllegalStateError(RuntimeError):
    """The tracker's IllegalStateException; unreachable while KS-I2 holds."""


class DispatchModel(Protocol):
    """What an operation reads from its model: the configuration and the cached rings (`KeySharedModel`)."""

    @property
    def variant_is(self) -> tuple[bool, bool, bool]: ...
    @property
    def key_hashes(self) -> tuple[int, ...]: ...
    @property
    def look_ahead(self) -> tuple[int, int]: ...
    @property
    def read_batch_size(self) -> int: ...
    @property
    def exempt_nacked_p(self) -> bool: ...
    @property
    def filter_acked_on_complete(self) -> bool: ...
    @property
    def async_flow(self) -> bool: ...
    @property
    def remove_counts_queued(self) -> bool: ...
    def ring(self, consumers: Sequence[Consumer | ThawedConsumer]) -> Ring: ...
    def ring_of(self, state: KSState) -> Ring: ...


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


class ThawedConsumer:
    """One consumer of a thawed state, mutable for the length of a step. `pending` and `held` stay sorted
    tuples, rebuilt where a step changes them: they hold a few positions and most steps only read them."""

    __slots__ = ("frozen", "held", "id", "name", "name_index", "pending", "permits", "unacked")

    def __init__(self, c: Consumer) -> None:
        self.frozen = c
        self.id, self.name, self.name_index, self.permits, self.pending, self.held, self.unacked = c

    def freeze(self) -> Consumer:
        """The consumer as it is now: the same tuple when the step changed nothing of it."""
        c = self.frozen
        if (self.permits == c.permits and self.pending is c.pending and self.held is c.held
                and self.unacked == c.unacked):
            return c
        return Consumer(c.id, c.name, c.name_index, self.permits, self.pending, self.held, self.unacked)


def may_go(
    permits: Mapping[int, int],
    owner: Callable[[int], int | None],
    drainer: Mapping[int, int],
    hash_of: Callable[[int], int],
    replay: Sequence[int],
    unread: Sequence[int],
) -> bool:
    """KS-S1's premise: some unacknowledged entry may go to a connected consumer with permits (`permits`: consumer
    id -> available permits). A replay entry may go to its hash's owner; an unread entry too, unless an entry of its
    hash waits in replay (that one goes first). Either not while another consumer drains the hash."""
    queued = {hash_of(p) for p in replay}
    for position in (*replay, *(p for p in unread if hash_of(p) not in queued)):
        h = hash_of(position)
        c = owner(h)
        if c is not None and permits.get(c, 0) > 0 and drainer.get(h, c) == c:
            return True
    return False


def _added(positions: tuple[int, ...], position: int) -> tuple[int, ...]:
    """The sorted `positions` with `position`."""
    return positions if position in positions else tuple(sorted((*positions, position)))


def _removed(positions: tuple[int, ...], position: int) -> tuple[int, ...]:
    """The sorted `positions` without `position`."""
    return tuple([p for p in positions if p != position]) if position in positions else positions


class Dispatch:
    """One operation on a thawed state; the methods follow §4.4–§4.6 and the reference step by step.

    `messages`, `acked`, `nacked` and `joined` stay tuples (read far more often than written, and rebuilt
    where written); the fields few steps use are `_Thawed`.
    """

    # The state's fields in slots; the rest in __dict__ when a step sets them (past 30 attributes an
    # instance dict stops sharing its keys, and building one cost more than a short step).
    __slots__ = (
        "__dict__",
        "acked",
        "classic",
        "cons",
        "delivered",
        "joined",
        "last_sent",
        "md",
        "messages",
        "min_replayed",
        "model",
        "nacked",
        "normal_read",
        "pinned",
        "pip282",
        "pip379",
        "queued",
        "read_pos",
        "replay",
        "replay_read",
        "rewind",
        "scheduled",
        "settled",
        "skip",
        "source",
        "stuck",
        "total",
    )
    # What a step starts from whatever the state: class defaults until the step sets them.
    batch_level = 0
    unblocked_while_batching = False
    unblocks = 0
    pass_depth = 0
    deferred_prune = False
    hook: tuple[str, int, tuple[str, int, int]] | None = None  # (stage, index, inner of interleaved_read)
    released_blocked = False

    def __init__(self, model: DispatchModel, s: KSState) -> None:
        self.model = model
        self.source = s
        self.pip379, self.classic, self.pip282 = model.variant_is
        # One unpacking of the state (its draining, sent, broken and events are _Thawed).
        (
            self.messages, consumers, self.read_pos, self.md, self.acked, replay, _, self.scheduled, self.skip,
            self.stuck, self.joined, self.last_sent, _, self.normal_read, self.replay_read, self.min_replayed,
            self.rewind, self.nacked, self.settled, self.pinned, self.queued, self.total, _, _,
        ) = s
        self.cons = [ThawedConsumer(c) for c in consumers]
        self.replay = dict(replay)
        self.delivered: list[Json] = []

    ring = _Thawed["Dispatch", Ring](lambda d: d.model.ring_of(d.source))
    tracker = _Thawed["Dispatch", dict[int, list[int]]](
        lambda d: {e.hash: [e.owner, e.ref_count, e.blocked] for e in d.source.draining}
    )
    sent = _Thawed["Dispatch", set[int]](lambda d: set(d.source.sent))
    broken = _Thawed["Dispatch", set[str]](lambda d: set(d.source.broken))
    events = _Thawed["Dispatch", set[str]](lambda d: set())
    reached = _Thawed["Dispatch", set[tuple[str, int]]](lambda d: set())  # (stage, index) passed without a hook

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
            self.queued,
            self.total,
            tuple(sorted(self.broken)) if "broken" in thawed else s.broken,
            tuple(sorted(self.events)) if "events" in thawed else (),
        ))

    # ------------------------------------------------------------------ helpers

    def hash_of(self, position: int) -> int:
        return self.model.key_hashes[self.messages[position]]

    def is_acked(self, position: int) -> bool:
        return position <= self.md or position in self.acked

    def consumer(self, cid: int) -> ThawedConsumer:
        return next(c for c in self.cons if c.id == cid)

    def select(self, h: int) -> ThawedConsumer | None:
        slot = self.ring.owners.get(h)
        return None if slot is None else self.cons[slot]

    def owner_ids(self) -> dict[int, int]:
        return {h: self.cons[slot].id for h, slot in self.ring.owners.items()}

    def reselect(self) -> None:
        self.ring = self.model.ring(self.cons)

    @staticmethod
    def available(c: ThawedConsumer) -> int:
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
        """MessageRedeliveryController.add: True if `position` was not queued. A hash given for a position queued
        without one (a redelivery request's) is recorded then (`hashesToBeBlocked.putIfAbsent`, 66-78 at
        90cba329a1, since #19167, 7431381682), so the replay filter knows it from the next read on."""
        if position in self.replay:
            if self.replay[position] == UNKNOWN_HASH:
                self.replay[position] = h
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

    def should_block(self, c: ThawedConsumer, h: int) -> bool:
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

    def remove_pending(self, c: ThawedConsumer, positions: Sequence[int], batch: bool) -> int:
        """PendingAcksMap removals with the pip379 remove handler (one batch when `batch`); the messages removed
        (one per entry: the model has no batch messages), which the caller takes off the consumer's counter."""
        if self.pip379 and batch and positions:
            self.start_batch()
        removed = 0
        for position in positions:
            removed += position in c.pending
            c.pending = _removed(c.pending, position)
            if self.pip379:
                self.reduce_ref_count(c.id, self.hash_of(position), False)
        if self.pip379 and batch and positions:
            self.end_batch()
        return removed

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

    def joined_limit(self, c: ThawedConsumer, read_type: str) -> int | None:
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

    def flow(self, c: ThawedConsumer, n: int) -> None:
        """Consumer.flowPermits, then the dispatcher's consumerFlow: the consumer's permits, then the total. Upstream
        queues the second half on the broker's executor (`async_flow`: `flow_update` runs it); else one step."""
        c.permits += n
        if self.model.async_flow:
            self.queued = (*self.queued, (c.id, n))
        else:
            self.total += n

    def flow_update(self) -> None:
        """The oldest queued internalConsumerFlow: the total grows by its permits, unless its consumer left."""
        (cid, n), self.queued = self.queued[0], self.queued[1:]
        if cid:
            self.total += n

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
        self.cons.append(ThawedConsumer(Consumer(cid, name, index, permits, (), (), 0)))
        self.total += permits  # the join's permits reach the dispatcher as its first flow (consumerFlow)
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
            # removeConsumer: the leaver's available permits leave the total (#24885 fixed this line's omission
            # in the non-persistent dispatcher), queued flows included unless the fix counts them out.
            queued = sum(n for q, n in self.queued if q == cid) if self.model.remove_counts_queued else 0
            self.total -= c.permits - queued
        else:
            self.replay.clear()
            self.tracker.clear()
            self.total = 0  # clearComponentsAfterRemovedAllConsumers
        if self.queued:  # its queued flows now find it gone
            self.queued = tuple([(0 if q == cid else q, n) for q, n in self.queued])
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
            # Consumer.applyPendingAckCompletions: the ack owner's counter loses what its pending ack still counted.
            holder.unacked -= self.remove_pending(holder, [position], batch=False)
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
            # removePendingAcksUpToPositionAndDecrementUnacked (#25581, 5168fcb36c; #25592, 138595f625)
            x.unacked -= self.remove_pending(x, [p for p in x.pending if p <= md], batch=True)
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
            # redeliverUnacknowledgedMessages(epoch): forEachAndClear, then the total it counted (#25589, 9e1bae353a)
            c.unacked -= self.remove_pending(c, released, batch=True)
        else:
            released = [p for p in positions if p in c.pending]
            for position in released:
                # redeliverUnacknowledgedMessages(ids): each removeAndGetRemainingUnacked that found one
                c.unacked -= self.remove_pending(c, [position], batch=False)
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
            self.flow(c, value)
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
        if self.model.filter_acked_on_complete:
            positions = tuple([p for p in positions if not self.is_acked(p)])
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

    def can_dispatch(self, c: ThawedConsumer, position: int, h: int, read_type: str) -> tuple[bool, bool]:
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
            c: ThawedConsumer | None = None
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
        self, c: ThawedConsumer, positions: Sequence[int], permits: int, read_type: str, hashes: set[int] | None
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
                c.unacked += 1  # Consumer.sendMessages: incrementUnackedMessages
                self.total -= 1  # the dispatch pass takes what it sent off totalAvailablePermits
                sent.append(position)
                self.deliver(c, position, h)
        return sent

    def deliver(self, c: ThawedConsumer, position: int, h: int) -> None:
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
