"""The pip379 Key_Shared dispatcher, compiled for the pipeline's conformance replay.

`full_verdict` reads a subscription into model actions (`partition`), builds a `KeySharedModel` for
its configuration (and so every ring again), and at every step enumerates the enabled actions,
thaws the frozen state into a step world, freezes it back and evaluates every invariant on the whole
state: about 60 µs an event. `KeySharedReplay` runs one subscription's columns on a world that lives
for the whole subscription instead:

- the dispatcher's operations (§4.4–§4.6 as `models.keyshared.dispatch.Dispatch` runs them for pip379, with no
  read in flight between steps: the log's `read` and `run` begin and complete each read at once, so
  the rewind and the #12885 retry of `complete_read` never apply), on mutable sets and dicts;
- each action checked where the model's `enabled` would offer it (the consumer holds the acked or
  nacked position, a flow keeps permits within the configuration's bound, ...), not by enumerating;
- the invariants as the model declares them: KS-I1 at each delivery (held sets only grow during a
  read and only shrink outside one, so a conflict seen when it arises is one the step ends with),
  KS-I2 on the tracker, KS-I4, KS-I5a and KS-I6 where the model records them; KS-I7 holds by
  construction (every hash is `sticky_hash`'s, in [1, range_max], and a nack queues UNKNOWN_HASH);
- the deliveries compared with the logged dispatches as (consumer, position) pairs. The model numbers
  consumers by the lowest free id and the log by connection; the map is a bijection on the connected
  consumers and the dispatcher only compares ids for equality, so the world keeps the log's ids.

Rings are the model's (`models.keyshared.claims`: each point selects its earliest-joined claimer),
cached by join order across subscriptions. The configuration a subscription needs (its keys, for the
hashes whose owners KS-I6 compares, and the permits bound of `flow`) comes from one pass that also
rejects what `partition` cannot read (the full model's step 1).

It answers where a subscription first leaves the model, or None; the pipeline sends one that leaves
it through the full model for the verdict, and `tests/pipeline/test_keyshared_replay.py` holds the two
to the same first failing step. A model it does not mirror (another variant, other invariants or
actions) is refused by `compiled`, and the pipeline then uses the full model for every subscription.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any, cast

from models.keyshared import UNKNOWN_HASH, KeySharedModel, claims, sticky_hash
from properties.keyshared.eventlog.records import (
    ACK,
    ACTIONS,
    ADD,
    DISPATCH,
    FLOW,
    PUBLISH,
    READ,
    REDELIVER,
    REDELIVER_ALL,
    REMOVE,
    RUN,
    STALL,
    base_config,
    model,
)

NULL = -(2**63)
"""A null number in the columns the replay reads (Arrow nulls filled in); never a value of a used field."""
INVARIANTS = ("KS-I1", "KS-I2", "KS-I4", "KS-I5a", "KS-I6", "KS-I7")
"""The model's invariants, as this replay checks them."""
COUNTERS = ("KS-U1", "KS-P1")
"""The model's invariants on the broker's own counters (unacked messages, the permit total). This replay keeps
no counter: each would be computed from the same records by the same rule it is checked against, so it could
not fail; the model replay and the conformance replay judge them."""
_MAX_READS = 1000  # run_until_quiescent's guard, as the model's
_INT_MAX = 2**31 - 1
_CACHE_LIMIT = 1 << 12
_WITHOUT_CONSUMER = (ADD, PUBLISH, READ, RUN)


class _Leaves(Exception):
    """The subscription leaves the model at the current step (not enabled, or the tracker's IllegalState)."""


class _Consumer:
    """A connected consumer: broker side (`permits`, `pending`) and client side (`held`)."""

    __slots__ = ("held", "id", "index", "name", "pending", "permits")

    def __init__(self, cid: int, name: str, index: int, permits: int) -> None:
        self.id, self.name, self.index, self.permits = cid, name, index, permits
        self.pending: set[int] = set()
        self.held: set[int] = set()


class KeySharedReplay:
    """The pip379 dispatcher of one configuration; `first_failure` runs one subscription on a fresh world."""

    __slots__ = (
        "acked", "batch_level", "blocked_released", "broken", "by_id", "cons", "delivered", "exempt_nacked_p",
        "hash_of", "hashes", "holder", "key_hash", "look_ahead", "max_permits", "md", "nacked", "owners",
        "owners_of", "points", "range_max", "read_batch_size", "read_pos", "replay", "rings", "same_name",
        "scheduled", "skip", "tracker", "unacked", "unblocked_while_batching",
    )

    def __init__(self, model_: KeySharedModel) -> None:
        self.points, self.range_max = model_.points, model_.range_max
        self.read_batch_size, self.look_ahead = model_.read_batch_size, model_.look_ahead
        self.same_name, self.exempt_nacked_p = model_.same_name, model_.exempt_nacked_p
        self.rings: dict[tuple[tuple[str, int], ...], tuple[list[int], list[int]]] = {}
        self.key_hash: dict[str, int] = {}
        self.reset((), 0)

    def reset(self, keys: Sequence[str], max_permits: int) -> None:
        """The model's initial state, for a subscription publishing `keys`."""
        self.hashes = sorted({self.hash(k) for k in keys})
        self.max_permits = max_permits
        self.owners_of: dict[tuple[tuple[str, int], ...], dict[int, int]] = {}
        self.owners: dict[int, int] = {}  # key hash -> slot of its consumer in `cons`
        self.hash_of: list[int] = []
        self.cons: list[_Consumer] = []
        self.by_id: dict[int, _Consumer] = {}
        self.read_pos, self.md = 0, -1
        self.acked: set[int] = set()  # every acked position (is_acked: at or below md, or acked above it)
        self.unacked: dict[int, dict[int, None]] = {}  # hash -> its published positions not acked, ascending
        self.replay: dict[int, int] = {}
        self.tracker: dict[int, list[int]] = {}  # hash -> [owner, ref count, blocked]
        self.scheduled = self.skip = False
        self.nacked: set[int] = set()
        self.holder: dict[int, list[int]] = {}  # hash -> [consumer, positions of it that consumer holds]
        self.broken = False
        self.delivered: list[tuple[int, int]] = []
        self.batch_level = 0
        self.blocked_released = self.unblocked_while_batching = False

    def hash(self, key: str) -> int:
        found = self.key_hash.get(key)
        if found is None:
            if len(self.key_hash) >= _CACHE_LIMIT:
                self.key_hash.clear()
            found = self.key_hash[key] = sticky_hash(key, self.range_max)
        return found

    # --- one subscription --------------------------------------------------------------------------

    def first_failure(self, event: Sequence[str | None], consumer: Sequence[int], position: Sequence[int],
                      key: Sequence[str | None], name: Sequence[str | None], permits: Sequence[int],
                      lo: int, hi: int) -> int | None:
        """The first step (1-based, as `full_verdict` counts actions) of rows lo..hi that leaves pip379, or None.

        Columns are plain lists, nulls `NULL` (numbers) or None (strings). A dispatch row is compared
        with the next delivery the model made; at the next action, the step must have made no more.
        """
        if not self.scan(event, consumer, position, key, name, permits, lo, hi):
            return 1  # `partition` cannot read it: the full model reports step 1
        step, seen = 0, 0
        delivered, hash_of, key_hash = self.delivered, self.hash_of, self.key_hash
        last_event: str | None = None
        last_consumer = NULL
        for i in range(lo, hi):
            e, c = event[i], consumer[i]
            if e == DISPATCH:
                if seen >= len(delivered) or delivered[seen] != (c, position[i]):
                    return step
                seen += 1
                last_event, last_consumer = e, c
                continue
            same_run = e == REDELIVER_ALL and last_event == REDELIVER_ALL and last_consumer == c
            last_event, last_consumer = e, c
            if same_run:
                continue
            if seen != len(delivered):
                return step
            step += 1
            delivered.clear()
            seen = 0
            if e == PUBLISH:  # a third of the records: nothing but the log grows
                k = cast(str, key[i])  # `scan` let no publish without a key through
                h = key_hash.get(k) or self.hash(k)
                unacked = self.unacked.get(h)
                if unacked is None:
                    self.unacked[h] = {len(hash_of): None}
                else:
                    unacked[len(hash_of)] = None
                hash_of.append(h)
                continue
            try:
                self.step(e, c, position[i], name[i], permits[i])
            except _Leaves:
                return step
            if self.broken or (self.tracker and not self.tracker_consistent()):
                return step
        return step if seen != len(delivered) else None

    def scan(self, event: Sequence[str | None], consumer: Sequence[int], position: Sequence[int],
             key: Sequence[str | None], name: Sequence[str | None], permits: Sequence[int],
             lo: int, hi: int) -> bool:
        """Whether `partition` reads rows lo..hi (it raises LogError where this says no); if so, `reset` for
        the configuration it derives: the keys, the permits bound."""
        connected: set[int] = set()
        permits_of: dict[int, int] = {}
        keys: dict[str, None] = {}
        messages = max_permits = 0
        acting = False
        for i in range(lo, hi):
            e, c = event[i], consumer[i]
            if e == REDELIVER_ALL and i > lo and event[i - 1] == REDELIVER_ALL and consumer[i - 1] == c:
                continue
            if e not in _WITHOUT_CONSUMER and c not in connected:
                return False
            if e == DISPATCH:
                if not acting or position[i] == NULL:
                    return False
                permits_of[c] -= 1
                continue
            acting = True
            if e == ADD:
                if c == NULL or name[i] is None or c in connected or permits[i] == NULL:
                    return False
                connected.add(c)
                permits_of[c] = permits[i]
            elif e == PUBLISH:
                k = key[i]
                if k is None or position[i] != messages:
                    return False
                keys[k] = None
                messages += 1
            elif e == FLOW:
                if permits[i] == NULL:
                    return False
                permits_of[c] += permits[i]
                max_permits = max(max_permits, permits_of[c])
            elif e in (ACK, REDELIVER):
                if position[i] == NULL:
                    return False
            elif e == REMOVE:
                connected.discard(c)
            elif e not in (REDELIVER_ALL, READ, RUN):
                return False
        self.reset(list(keys), max_permits)
        return True

    def step(self, e: str | None, c: int, p: int, name: str | None, n: int) -> None:
        """One logged action but a publish, as `KeySharedModel.step` takes it (`_Leaves` where the model does
        not enable it)."""
        self.blocked_released = False
        if e == READ:
            self.read_more()
        elif e == RUN:
            self.run()
        elif e == ACK:
            x = self.by_id[c]
            if p not in x.held:
                raise _Leaves
            self.ack(x, p)
        elif e == FLOW:
            x = self.by_id[c]
            if x.permits + n > self.max_permits:
                raise _Leaves
            x.permits += n
        elif e == ADD:
            assert name is not None
            if not self.same_name and any(x.name == name for x in self.cons):
                raise _Leaves
            self.add(c, name, n)
        elif e == REMOVE:
            self.remove(self.by_id[c])
        elif e == REDELIVER:
            x = self.by_id[c]
            if p not in x.held:
                raise _Leaves
            self.redeliver(x, p)
        else:  # redeliver_all
            x = self.by_id[c]
            if not x.held:
                raise _Leaves
            self.redeliver_all(x)
        if self.blocked_released and not self.scheduled:
            self.broken = True  # KS-I5a, judged once the operation is over

    # --- the ring ----------------------------------------------------------------------------------

    def reselect(self) -> None:
        """The owners (slots) of the subscription's key hashes under the consumers' join order."""
        join = tuple([(x.name, x.index) for x in self.cons])
        owners = self.owners_of.get(join)
        if owners is None:
            ring = self.rings.get(join)
            if ring is None:
                if len(self.rings) >= _CACHE_LIMIT:
                    self.rings.clear()
                selected = {point: slots[0] for point, slots in claims(join, self.points, self.range_max).items()}
                points = sorted(selected)
                ring = self.rings[join] = (points, [selected[point] for point in points])
            points, slots = ring
            owners = {}
            if points:
                for h in self.hashes:
                    at = bisect.bisect_left(points, h)
                    owners[h] = slots[at if at < len(points) else 0]
            self.owners_of[join] = owners
        self.owners = owners

    def owner_ids(self) -> dict[int, int]:
        cons = self.cons
        return {h: cons[slot].id for h, slot in self.owners.items()}

    def owner_id(self, h: int) -> int | None:
        slot = self.owners.get(h)
        return None if slot is None else self.cons[slot].id

    # --- the tracker (pip379) ----------------------------------------------------------------------

    def add_entry(self, owner: int, h: int) -> None:
        entry = self.tracker.setdefault(h, [owner, 0, 0])
        if entry[0] != owner:
            raise _Leaves  # the model's IllegalStateError
        entry[1] += 1

    def reduce_ref_count(self, owner: int, h: int, closing: bool) -> None:
        entry = self.tracker.get(h)
        if entry is None:
            return
        if entry[0] != owner:
            raise _Leaves
        entry[1] -= 1
        if entry[1] > 0:
            return
        del self.tracker[h]
        if entry[2]:
            self.blocked_released = True
            if not closing:
                if self.batch_level > 0:
                    self.unblocked_while_batching = True
                else:
                    self.scheduled = True

    def should_block(self, x: _Consumer, h: int) -> bool:
        entry = self.tracker.get(h)
        if entry is None:
            return False
        if entry[0] != x.id:
            entry[2] = 1
            return True
        del self.tracker[h]  # the hash came back to its draining consumer
        return False

    def end_batch(self) -> None:
        self.batch_level -= 1
        if self.batch_level == 0 and self.unblocked_while_batching:
            self.unblocked_while_batching = False
            self.scheduled = True

    def remove_pending(self, x: _Consumer, positions: Sequence[int], batch: bool) -> None:
        if batch and positions:
            self.batch_level += 1
        hash_of = self.hash_of
        for position in positions:
            x.pending.discard(position)
            self.reduce_ref_count(x.id, hash_of[position], False)
        if batch and positions:
            self.end_batch()

    def register_draining(self, before: dict[int, int], after: dict[int, int], skip: int) -> None:
        """Only a hash that moved can start or end draining; the order of the positions does not matter
        (each one adds to or takes from its own hash's entry)."""
        moved = {h for h in before.keys() | after.keys() if before.get(h) != after.get(h)}
        if not moved:
            return
        hash_of = self.hash_of
        for x in self.cons:
            if x.id != skip:
                for position in x.pending:
                    h = hash_of[position]
                    if h in moved and before.get(h) == x.id and after.get(h) != x.id:
                        self.add_entry(x.id, h)
        for x in self.cons:
            if x.id != skip:
                for position in x.pending:
                    h = hash_of[position]
                    if h not in moved:
                        continue
                    entry = self.tracker.get(h)
                    if after.get(h) == x.id and before.get(h) != x.id and entry is not None and entry[0] == x.id:
                        self.reduce_ref_count(x.id, h, False)

    def tracker_consistent(self) -> bool:
        """KS-I2: every entry's hash is drained by a connected consumer the ring no longer gives it to, and
        counts that consumer's pending acks of the hash."""
        if not self.cons:
            return False
        hash_of = self.hash_of
        for h, (owner, count, _) in self.tracker.items():
            x = self.by_id.get(owner)
            if h == 0 or x is None or self.owner_id(h) == owner:
                return False
            if count < 1 or count != sum(1 for p in x.pending if hash_of[p] == h):
                return False
        return True

    # --- consumers ---------------------------------------------------------------------------------

    def add(self, cid: int, name: str, permits: int) -> None:
        if not self.cons:
            self.read_pos = self.md + 1
            self.replay.clear()
        used = {x.index for x in self.cons if x.name == name}
        index = 0
        while index in used:
            index += 1
        before = self.owner_ids()
        x = _Consumer(cid, name, index, permits)
        self.cons.append(x)
        self.by_id[cid] = x
        self.reselect()
        after = self.owner_ids()
        for h, owner in after.items():  # KS-I6: only the joiner gains hashes
            if before.get(h) != owner and owner != cid:
                self.broken = True
        self.register_draining(before, after, cid)

    def remove(self, x: _Consumer) -> None:
        before = self.owner_ids()
        self.cons.remove(x)
        del self.by_id[x.id]
        self.reselect()
        after = self.owner_ids()
        for h, owner in before.items():  # KS-I6: only the leaver loses hashes
            if after.get(h) != owner and owner != x.id:
                self.broken = True
        hash_of, holder = self.hash_of, self.holder
        for position in x.held:
            holder[hash_of[position]][1] -= 1
        added = False
        if self.cons:
            self.batch_level += 1
            for position in sorted(x.pending):
                h = hash_of[position]
                if position not in self.replay:
                    added = True
                if self.replay.get(position, UNKNOWN_HASH) == UNKNOWN_HASH:
                    self.replay[position] = h  # a hash given for a position queued without one is recorded
                self.reduce_ref_count(x.id, h, True)
            self.end_batch()
        else:
            self.replay.clear()
            self.tracker.clear()
        self.register_draining(before, after, x.id)
        if added:
            self.scheduled = True

    # --- acks and redelivery -----------------------------------------------------------------------

    def release(self, x: _Consumer, position: int) -> None:
        """The client no longer holds `position`."""
        x.held.discard(position)
        self.holder[self.hash_of[position]][1] -= 1

    def ack(self, x: _Consumer, position: int) -> None:
        self.release(x, position)
        holder = x if position in x.pending else next((y for y in self.cons if position in y.pending), None)
        if holder is not None:
            self.remove_pending(holder, (position,), batch=False)
        acked = self.acked
        if position in acked:
            return
        acked.add(position)
        del self.unacked[self.hash_of[position]][position]
        md = self.md
        while md + 1 in acked:
            md += 1
        if md == self.md:
            return
        self.md = md
        self.read_pos = max(self.read_pos, md + 1)
        for y in self.cons:
            self.remove_pending(y, sorted(p for p in y.pending if p <= md), batch=True)
        if self.replay:
            for position in [p for p in self.replay if p <= md]:
                del self.replay[position]
        self.scheduled = True

    def redeliver(self, x: _Consumer, position: int) -> None:
        self.release(x, position)
        self.nacked.add(position)
        if position in x.pending:
            self.remove_pending(x, (position,), batch=False)
            if position not in self.acked and position not in self.replay:
                self.replay[position] = UNKNOWN_HASH
                self.scheduled = True

    def redeliver_all(self, x: _Consumer) -> None:
        held = list(x.held)
        for position in held:
            self.release(x, position)
        self.nacked.update(held)
        released = sorted(x.pending)
        self.remove_pending(x, released, batch=True)
        added = False
        for position in released:
            if position not in self.acked and position not in self.replay:
                self.replay[position] = UNKNOWN_HASH
                added = True
        if added:
            self.scheduled = True

    # --- reads -------------------------------------------------------------------------------------

    def look_ahead_limit(self) -> int:
        per_consumer, per_subscription = self.look_ahead
        if per_consumer <= 0:
            limit = per_subscription
        else:
            limit = per_consumer * len(self.cons)
            if 0 < per_subscription < limit:
                limit = per_subscription
        return limit if limit > 0 else _INT_MAX

    def read_more(self) -> None:
        """begin_read and complete_read at once (nothing runs between them in a logged read)."""
        if not self.cons:
            return
        count = 0
        for x in self.cons:
            if x.permits > 0:
                count += x.permits
        count = min(count, self.read_batch_size)
        if count <= 0:
            return
        replayed = self.to_replay_now(count)
        if replayed:
            self.dispatch(replayed, False)
            return
        normal = self.read_entries(count)
        if normal:
            self.dispatch(normal, True)

    def to_replay_now(self, count: int) -> list[int]:
        while True:
            if self.skip:
                self.skip = False
                return []
            collected = self.replay_filter(count) if self.replay else []
            acked = [p for p in collected if p in self.acked]
            for position in acked:
                self.replay.pop(position, None)
            live = [p for p in collected if p not in self.acked] if acked else collected
            if live or not acked:
                return live

    def replay_filter(self, count: int) -> list[int]:
        permits: dict[int, int] = {}
        blocked: set[int] = set()
        collected: list[int] = []
        replay, owners, cons = self.replay, self.owners, self.cons
        for position in sorted(replay):
            if len(collected) >= count:
                break
            h = replay[position]
            if h == UNKNOWN_HASH:
                collected.append(position)
                continue
            if h in blocked:
                continue
            slot = owners.get(h)
            if slot is None:
                blocked.add(h)
                continue
            x = cons[slot]
            left = permits.get(x.id)
            if left is None:
                left = permits[x.id] = max(x.permits, 0)
            if left <= 0 or self.should_block(x, h):
                blocked.add(h)
                continue
            permits[x.id] = left - 1
            collected.append(position)
        return collected

    def read_entries(self, count: int) -> list[int]:
        limit = self.look_ahead_limit()
        if len(self.replay) >= limit:
            return []
        count = min(count, max(limit - len(self.replay), 1))
        positions: list[int] = []
        position, end, acked = self.read_pos, len(self.hash_of), self.acked
        while len(positions) < count and position < end:
            if position not in acked:
                positions.append(position)
            position += 1
        if positions:
            self.read_pos = positions[-1] + 1
        return positions

    def dispatch(self, positions: Sequence[int], normal: bool) -> None:
        """per_entry_dispatch, then send."""
        groups: dict[int, list[int]] = {}
        permits: dict[int, int] = {}
        already_blocked: set[int] = set()
        blocked_by_hash: dict[int, None] = {}
        with_entries: set[int] = set()
        replay, owners, cons, hash_of = self.replay, self.owners, self.cons, self.hash_of
        look_ahead_allowed = len(replay) < self.look_ahead_limit()
        queued: set[int] | None = None  # the replay's hashes (replay_has_hash), once a Normal read asks
        for position in positions:
            h = hash_of[position]
            dispatch = by_hash = False
            x: _Consumer | None = None
            if h not in already_blocked:
                slot = owners.get(h)
                if slot is not None:
                    x = cons[slot]
                    with_entries.add(x.id)
                    left = permits.get(x.id)
                    if left is None:
                        left = permits[x.id] = max(x.permits, 0)
                    if left > 0:
                        if normal:
                            if queued is None:
                                queued = set(replay.values())
                            by_hash = h in queued
                        by_hash = by_hash or self.should_block(x, h)
                        dispatch = not by_hash
            if dispatch and x is not None:
                permits[x.id] -= 1
                group = groups.get(x.id)
                if group is None:
                    groups[x.id] = [position]
                else:
                    group.append(position)
                continue
            if by_hash and x is not None:
                blocked_by_hash[x.id] = None
            if replay.get(position, UNKNOWN_HASH) == UNKNOWN_HASH:
                replay[position] = h
                if queued is not None:
                    queued.add(h)
            already_blocked.add(h)
        if look_ahead_allowed and not groups:
            trigger = normal and any(permits[cid] > 0 for cid in blocked_by_hash)
            trigger = trigger or any(x.id not in with_entries and x.permits > 0 for x in cons)
            if trigger:
                self.skip = True
        for cid, group in groups.items():
            self.send(self.by_id[cid], group, normal)

    def send(self, x: _Consumer, positions: list[int], normal: bool) -> None:
        replay, tracker, hash_of = self.replay, self.tracker, self.hash_of
        if not normal:
            for position in positions:
                replay.pop(position, None)
        for position in positions:
            h = hash_of[position]
            entry = tracker.get(h)
            if entry is not None and entry[0] != x.id:
                if replay.get(position, UNKNOWN_HASH) == UNKNOWN_HASH:
                    replay[position] = h
                continue
            x.pending.add(position)
            x.permits -= 1
            self.deliver(x, position, h)

    def deliver(self, x: _Consumer, position: int, h: int) -> None:
        """The client receives `position`: KS-I4 against what it holds, KS-I1 against the other holders."""
        nacked = self.nacked
        if not (self.exempt_nacked_p and position in nacked):
            held = x.held
            for earlier in self.unacked[h]:
                if earlier >= position:
                    break
                if earlier not in held and earlier not in nacked:
                    self.broken = True  # KS-I4
                    break
        nacked.discard(position)
        if position not in x.held:
            x.held.add(position)
            owner = self.holder.get(h)
            if owner is None or owner[1] == 0:
                self.holder[h] = [x.id, 1]
            elif owner[0] == x.id:
                owner[1] += 1
            else:
                self.broken = True  # KS-I1
        self.delivered.append((x.id, position))

    def progress(self) -> tuple[Any, ...]:
        """What run_until_quiescent compares between reads (the cursor's mark-delete does not move in a run)."""
        return (len(self.delivered), self.read_pos, self.scheduled, self.skip, self.replay.copy())

    def run(self) -> None:
        seen = [self.progress()]  # a few keys a run: a list, whose dicts compare by content without hashing
        for _ in range(_MAX_READS):
            self.scheduled = False
            self.read_more()
            key = self.progress()
            if key in seen:
                return
            seen.append(key)


def compiled(variant: str) -> KeySharedReplay | None:
    """The compiled replay of `variant`'s model under the log's configuration, or None where it does not
    mirror that model (another variant, other invariants, a logged action the configuration leaves out, or
    the cursor jumps, which it does not replay)."""
    model_ = model(base_config(), variant)
    mirrored = (model_.variant_is == (True, False, False)
                and tuple(i.name for i in model_.invariants) == INVARIANTS + COUNTERS + STALL
                and set(ACTIONS) <= model_.kinds and not model_.jumps)
    return KeySharedReplay(model_) if mirrored else None
