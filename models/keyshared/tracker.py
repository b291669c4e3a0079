"""Key_Shared at the tracker scope: `PendingAcksMap` and `DrainingHashesTracker` (spec keyshared.md §4.2, §4.3).

`models/keyshared/dispatcher.py` checks the whole dispatcher; this scope checks the two classes a port of PIP-379
must get right, small enough to explore completely in seconds. It is the PIP-379 dispatcher reduced
to the calls it makes on them (§4.5): each consumer's pending-acks map with the add handler
(`handle_adding_pending_ack`) and the remove handler (`reduce_ref_count`, batches forwarded) installed,
one tracker whose unblocking handler the harness observes, and an owner per configured hash standing
in for the selector.

**Positions**: position p is entry p of ledger `position_ledgers[p]` (all of ledger 1 when that is
empty) and has the fixed sticky hash `position_hashes[p]`, as a message has one key; maps order
positions by (ledger, entry), so with two ledgers entry order and map order differ. Hash 0
(STICKY_KEY_HASH_NOT_SET) may be configured: it has no owner, the add handler rejects it and the
tracker ignores it (KS-I7). An add carries one of `batch_sizes` as the entry's remaining-unacked count.

**State**: per hash its owner; per consumer its pending acks `position -> remaining unacked` (the hash
is the position's) and whether its map is closed; the tracker's entries `hash -> (consumer, ref_count,
blocked)` (`blocked` is `blocked_count > 0`: only that matters to the tracker, and a count would make
the space infinite), `batch_level` and `unblocked_while_batching`; the positions the add handler
refused, which wait for replay until they are added; and `events`, what the last step did that no
variable shows (EVENTS), for coverage. Consumers are numbered from 1.

**Actions** (snake_case Java names; the harness keeps the dispatcher's discipline, §4.5):

- ``add_pending_ack_if_allowed(consumer, position, batch_size, hash)``: a send to the hash's owner of a
  position no other consumer holds (one the owner holds is overwritten); a hash-0 position may go to any
  open consumer, and the add handler throws IllegalArgumentException;
- ``remove(consumer, position)``: an individual ack of a held position (the remove handler releases);
  ``remove(consumer, position, batch_size, hash)``: the 4-argument form, which removes only if the stored
  value is exactly (batch_size, hash); ``remove_and_get_remaining_unacked(consumer, position)``;
- ``remove_all_up_to(consumer, position)``: a mark-delete move to (ledger, entry) of `position` that
  removes at least one position;
- ``for_each_and_clear(consumer)``: redeliver everything; ``for_each_and_close(consumer)``: the consumer
  disconnects (closing removals: never an unblock);
- ``should_block_sticky_key_hash(consumer, hash)``: the dispatcher's check for the hash's owner (for hash
  0, any open consumer);
- ``move_hash(hash, consumer)``: the selector moves the hash to an open consumer, and
  `register_draining_hashes` runs for it: the old owner's pending acks of it become `add_entry` calls
  (REMOVE), then each of the new owner's pending acks of it a `reduce_ref_count` if it drains it (ADD);
- ``start_batch()`` (up to `max_batch_level`) and ``end_batch()``: the tracker's batches, nested
  around the map's own.

**Observations**: ``unblocked`` (the unblocking handler's arguments during the step, in call order)
and the call's result: ``added`` / ``blocked`` (bools), ``removed`` (a bool for `remove`, the
remaining count or -1 for `remove_and_get_remaining_unacked`, the `[ledger, entry, hash]` triples
visited in order for the batch removals), or ``error`` (the Java exception's simple name).

Under that discipline a hash is held by at most one consumer (KS-I1) and an entry's consumer never
owns its hash (KS-I2), so the branches of §4.3 that only a broken caller reaches never run here:
`add_entry` on another consumer's entry and `reduce_ref_count` by a non-owner (IllegalStateError),
and the lazy removal when the entry's own consumer asks `should_block_sticky_key_hash` (S3 checks it
on the reference; models/keyshared/locks.py interleaves it). The per-consumer draining stats are left
out (`cleared_total` grows without bound), and with them `consumer_removed`, which only drops them.
The variant names the dispatcher; these classes are PIP-379's whatever it is, so every variant
behaves alike here and the historical twins are caught at the dispatcher scope.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

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

VARIANTS = ("pip379", "classic", "pip282")
ACTION_NAMES = (
    "add_pending_ack_if_allowed",
    "remove",
    "remove_and_get_remaining_unacked",
    "remove_all_up_to",
    "for_each_and_clear",
    "for_each_and_close",
    "should_block_sticky_key_hash",
    "move_hash",
    "start_batch",
    "end_batch",
)
UNBLOCKED_IN_BATCH = -1  # the argument of the one unblocking call at the end of an outermost batch
STICKY_KEY_HASH_NOT_SET = 0
PENDING_ACK_NOT_FOUND = -1
ILLEGAL_ARGUMENT = "IllegalArgumentException"

# What a step did that the variables do not show, named in the state's `events` for coverage.
OVERWROTE = "overwrote"  # an add replaced a pending ack the consumer already held
KEPT_MISMATCH = "kept_mismatch"  # a 4-argument remove left a pending ack whose stored value differs
HASH_NOT_SET = "hash_not_set"  # the add handler threw on hash 0
ACROSS_LEDGERS = "across_ledgers"  # remove_all_up_to on a map holding positions of two ledgers
EVENTS = (OVERWROTE, KEPT_MISMATCH, HASH_NOT_SET, ACROSS_LEDGERS)

DEFAULT_CONFIG: dict[str, Param] = {
    "scope": "tracker",
    "consumers": 2,
    # Entry i has sticky hash position_hashes[i]: those of keys "4", "4" and "0" (§6).
    "position_hashes": (11707, 11707, 4850),
    "position_ledgers": (),  # entry i's ledger; empty: all of ledger 1
    "batch_sizes": (1,),  # the remaining-unacked counts an add may carry
    "max_batch_level": 1,  # how deep the harness nests start_batch()
}

EXPLORE_CONFIG: dict[str, Param] = dict(DEFAULT_CONFIG)
"""Two consumers, two hashes (one with two messages), one explicit batch: 1,530 states, explored in a second."""

WIDE_EXPLORE_CONFIG: dict[str, Param] = {
    **DEFAULT_CONFIG,
    # Entry 0 in ledger 2 and entry 1 in ledger 1, both of key "4": map order is entry 1, then entry 0.
    # Entry 2 has no sticky hash.
    "position_hashes": (11707, 11707, 0),
    "position_ledgers": (2, 1, 1),
    "batch_sizes": (1, 2),
    "max_batch_level": 0,
}
"""The widened vocabulary (552 states), kept apart so that both configurations stay small enough to replay
every transition: two ledgers out of entry order, batches of two, overwrites, the 4-argument remove, hash 0."""

HYPOTHESIS_CONFIG: dict[str, Param] = {
    **DEFAULT_CONFIG,
    "consumers": 3,
    "position_hashes": (11707, 11707, 4850, 35071, 0),  # keys "4", "4", "0", "5" and no key
    "position_ledgers": (2, 1, 1, 2, 1),
    "batch_sizes": (1, 3),
    "max_batch_level": 2,
}
"""Three consumers, so a hash can move on while it drains, three hashes, two ledgers, and nested batches."""


class Drain(NamedTuple):
    """A tracker entry: `consumer` drains `hash`; `blocked` once it held another consumer back."""

    hash: int
    consumer: int
    ref_count: int
    blocked: bool


class TrackerState(NamedTuple):
    owners: tuple[int, ...]  # the owner of each of the model's nonzero hashes (sorted), a consumer id
    pending: tuple[tuple[tuple[int, int], ...], ...]  # per consumer: (position, remaining) in map order
    closed: tuple[bool, ...]  # per consumer
    draining: tuple[Drain, ...]  # sorted by hash
    batch_level: int
    unblocked_while_batching: bool
    replay: tuple[int, ...]  # positions the add handler refused, in map order
    events: tuple[str, ...]  # what the last step did that no variable shows (EVENTS), sorted


@dataclass(slots=True)
class _Entry:
    consumer: int
    ref_count: int
    blocked: bool


class _Step:
    """One action on a thawed state: the map, its handlers and the tracker, as §4.2, §4.3 and §4.5 say."""

    def __init__(self, model: KeySharedTrackerModel, s: TrackerState) -> None:
        self.model = model
        self.hashes = model.hashes
        self.owners = list(s.owners)
        self.pending = [dict(p) for p in s.pending]
        self.closed = list(s.closed)
        self.entries = {d.hash: _Entry(d.consumer, d.ref_count, d.blocked) for d in s.draining}
        self.batch_level = s.batch_level
        self.unblocked_while_batching = s.unblocked_while_batching
        self.replay = set(s.replay)
        self.unblocked: list[Json] = []
        self.events: set[str] = set()

    def freeze(self) -> TrackerState:
        order = self.model.order
        return TrackerState._make((  # positionally: keywords cost more than the rest of freeze
            tuple(self.owners),
            tuple([tuple(sorted(p.items(), key=lambda item: order[item[0]])) for p in self.pending]),
            tuple(self.closed),
            tuple([Drain(h, e.consumer, e.ref_count, e.blocked) for h, e in sorted(self.entries.items())]),
            self.batch_level,
            self.unblocked_while_batching,
            tuple(sorted(self.replay, key=order.__getitem__)),
            tuple(sorted(self.events)),
        ))

    def _hash(self, position: int) -> int:
        return self.model.position_hashes[position]

    def _triple(self, position: int) -> list[Json]:
        return [self.model.ledgers[position], position, self._hash(position)]

    # ------------------------------------------------------------------ PendingAcksMap (§4.2)

    def add_pending_ack_if_allowed(self, consumer: int, position: int, batch_size: int) -> Json:
        """Closed first, then the add handler, then insert or overwrite."""
        if self.closed[consumer - 1]:
            return False
        sticky_hash = self._hash(position)
        if sticky_hash == STICKY_KEY_HASH_NOT_SET:
            self.events.add(HASH_NOT_SET)
            return ILLEGAL_ARGUMENT
        if not self.handle_adding(consumer, position, sticky_hash):
            return False
        if position in self.pending[consumer - 1]:
            self.events.add(OVERWROTE)
        self.pending[consumer - 1][position] = batch_size
        self.replay.discard(position)  # the dispatcher sent it again: it no longer waits
        return True

    def remove(self, consumer: int, position: int, batch_size: int | None) -> bool:
        """Without `batch_size` the 2-argument form; with it, only an exact (batch_size, hash) match goes."""
        if batch_size is not None and self.pending[consumer - 1][position] != batch_size:
            self.events.add(KEPT_MISMATCH)
            return False
        self.remove_and_get_remaining_unacked(consumer, position)
        return True

    def remove_and_get_remaining_unacked(self, consumer: int, position: int) -> int:
        remaining = self.pending[consumer - 1].pop(position)
        self.reduce_ref_count(self._hash(position), self.closed[consumer - 1])
        return remaining

    def remove_all_up_to(self, consumer: int, position: int) -> list[Json]:
        """One batch around the removals, since at least one position goes."""
        order = self.model.order
        held = self.pending[consumer - 1]
        if len({self.model.ledgers[p] for p in held}) > 1:
            self.events.add(ACROSS_LEDGERS)
        return self._drain(consumer, [p for p in held if order[p] <= order[position]])

    def for_each_and_clear(self, consumer: int) -> list[Json]:
        return self._drain(consumer, list(self.pending[consumer - 1]))

    def for_each_and_close(self, consumer: int) -> list[Json]:
        self.closed[consumer - 1] = True
        return self._drain(consumer, list(self.pending[consumer - 1]))

    def _drain(self, consumer: int, doomed: list[int]) -> list[Json]:
        doomed.sort(key=self.model.order.__getitem__)
        self.start_batch()
        for position in doomed:
            del self.pending[consumer - 1][position]
            self.reduce_ref_count(self._hash(position), self.closed[consumer - 1])
        self.end_batch()
        return [self._triple(position) for position in doomed]

    # ------------------------------------------------------------------ the dispatcher's handlers (§4.5)

    def handle_adding(self, consumer: int, position: int, sticky_hash: int) -> bool:
        """Refuse a hash another consumer drains; the refused position goes to replay."""
        entry = self.entries.get(sticky_hash)
        if entry is not None and entry.consumer != consumer:
            self.replay.add(position)
            return False
        return True

    def move_hash(self, sticky_hash: int, consumer: int) -> None:
        """register_draining_hashes for one moved hash: all REMOVE work, then all ADD work."""
        at = self.hashes.index(sticky_hash)
        before, self.owners[at] = self.owners[at], consumer
        for held in self.pending[before - 1]:
            if self._hash(held) == sticky_hash:
                self.add_entry(before, sticky_hash)
        for held in self.pending[consumer - 1]:
            entry = self.entries.get(sticky_hash)
            if self._hash(held) == sticky_hash and entry is not None and entry.consumer == consumer:
                self.reduce_ref_count(sticky_hash, False)

    # ------------------------------------------------------------------ DrainingHashesTracker (§4.3)

    def add_entry(self, consumer: int, sticky_hash: int) -> None:
        self.entries.setdefault(sticky_hash, _Entry(consumer, 0, False)).ref_count += 1

    def reduce_ref_count(self, sticky_hash: int, closing: bool) -> None:
        """The caller is the entry's consumer (it holds the hash), so the owner check never fails here."""
        entry = self.entries.get(sticky_hash)
        if entry is None:
            return
        entry.ref_count -= 1
        if entry.ref_count > 0:
            return
        del self.entries[sticky_hash]
        if not closing and entry.blocked:
            if self.batch_level > 0:
                self.unblocked_while_batching = True
            else:
                self.unblocked.append(sticky_hash)

    def should_block_sticky_key_hash(self, sticky_hash: int) -> bool:
        """Asked for the hash's owner, which never drains it: an entry always blocks (hash 0 has none)."""
        entry = self.entries.get(sticky_hash)
        if entry is None:
            return False
        entry.blocked = True
        return True

    def start_batch(self) -> None:
        self.batch_level += 1

    def end_batch(self) -> None:
        self.batch_level -= 1
        if self.batch_level == 0 and self.unblocked_while_batching:
            self.unblocked_while_batching = False
            self.unblocked.append(UNBLOCKED_IN_BATCH)


class KeySharedTrackerModel:
    """The tracker scope of keyshared, for one variant (they all behave alike here)."""

    mechanism = "keyshared"
    symmetric_key = threaded = None
    """No values are alike (`Model.symmetric_key`), and the actions are no threads' steps (`Model.threaded`)."""

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "pip379") -> None:
        self.variant = variant
        self.config: Mapping[str, Param] = configured("keyshared (tracker scope)", variant, VARIANTS, config,
                                                      DEFAULT_CONFIG)
        if self.config["scope"] != "tracker":
            raise ValueError(f"the tracker model needs scope 'tracker', got {self.config['scope']!r}")
        read = ConfigReader("keyshared tracker", self.config)
        self.consumers = read.integer("consumers")
        self.max_batch_level = read.integer("max_batch_level")
        self.position_hashes = read.integers("position_hashes")
        self.batch_sizes = read.integers("batch_sizes")
        self.ledgers = read.integers("position_ledgers") or (1,) * len(self.position_hashes)
        if self.consumers < 1 or self.max_batch_level < 0 or not all(0 <= h <= 65535 for h in self.position_hashes):
            raise ValueError("keyshared tracker config needs consumers >= 1, max_batch_level >= 0 and hashes in "
                             "[0, 65535]")
        if len(self.ledgers) != len(self.position_hashes) or not all(ledger >= 0 for ledger in self.ledgers):
            raise ValueError("keyshared tracker config position_ledgers needs one ledger id >= 0 per position")
        if not self.batch_sizes or not all(b >= 1 for b in self.batch_sizes):
            raise ValueError("keyshared tracker config batch_sizes needs at least one size >= 1")
        self.hashes = tuple(sorted(set(self.position_hashes) - {STICKY_KEY_HASH_NOT_SET}))
        self.positions = tuple(range(len(self.position_hashes)))
        self.order = {p: (self.ledgers[p], p) for p in self.positions}  # the maps' (ledger, entry) order
        self.ids = tuple(range(1, self.consumers + 1))
        self.action_names: Sequence[str] = ACTION_NAMES
        self.invariants: Sequence[Invariant[TrackerState]] = (
            Invariant("KS-I1", self._one_holder, "at most one consumer holds a position of each hash"),
            Invariant("KS-I2", self._tracker_consistent, "tracker entries match the drainers' pending acks"),
            Invariant("KS-I3", lambda s: s.batch_level > 0 or not s.unblocked_while_batching,
                      "an unblocking inside a batch is reported when the outermost batch ends"),
        )
        self.liveness: Sequence[Liveness[TrackerState]] = ()
        # The engines ask for the enabled actions and then step each of them from the same state.
        self._last_enabled: tuple[TrackerState | None, Sequence[Action], set[int]] = (None, (), set())

    def initial(self) -> TrackerState:
        """Hash i (in sorted order) starts with consumer i mod n + 1."""
        return TrackerState(
            owners=tuple(self.ids[i % self.consumers] for i in range(len(self.hashes))),
            pending=((),) * self.consumers,
            closed=(False,) * self.consumers,
            draining=(),
            batch_level=0,
            unblocked_while_batching=False,
            replay=(),
            events=(),
        )

    def terminal_ok(self, state: TrackerState) -> bool:
        """Every consumer gone (and no explicit batch configured): a legitimate end, not a deadlock."""
        return all(state.closed)

    def enabled(self, state: TrackerState) -> Sequence[Action]:
        holder = {p: cid for cid, pending in zip(self.ids, state.pending, strict=True) for p, _ in pending}
        owner = dict(zip(self.hashes, state.owners, strict=True))
        open_ids = [cid for cid in self.ids if not state.closed[cid - 1]]
        out: list[Action] = []
        # With one batch size an overwrite changes nothing and the 4-argument remove always matches (the
        # stored value is that size and the position's hash), so both are offered only with several.
        several = len(self.batch_sizes) > 1
        for position, h in enumerate(self.position_hashes):
            targets = open_ids if h == STICKY_KEY_HASH_NOT_SET else [owner[h]]
            out.extend(Action.of("add_pending_ack_if_allowed", consumer=cid, position=position, batch_size=size,
                                 hash=h)
                       for cid in targets if holder.get(position) in (None, cid if several else None)
                       for size in self.batch_sizes)
        for cid, pending in zip(self.ids, state.pending, strict=True):
            for p, _ in pending:
                out.append(Action.of("remove", consumer=cid, position=p))
                out.extend(Action.of("remove", consumer=cid, position=p, batch_size=size,
                                     hash=self.position_hashes[p]) for size in self.batch_sizes if several)
                out.append(Action.of("remove_and_get_remaining_unacked", consumer=cid, position=p))
            if pending:  # a mark-delete position that removes something
                first = self.order[pending[0][0]]
                out.extend(Action.of("remove_all_up_to", consumer=cid, position=p) for p in self.positions
                           if self.order[p] >= first)
        for cid in open_ids:
            out.append(Action.of("for_each_and_clear", consumer=cid))
            out.append(Action.of("for_each_and_close", consumer=cid))
            if STICKY_KEY_HASH_NOT_SET in self.position_hashes:
                out.append(Action.of("should_block_sticky_key_hash", consumer=cid, hash=STICKY_KEY_HASH_NOT_SET))
        for h in self.hashes:
            if not state.closed[owner[h] - 1]:
                out.append(Action.of("should_block_sticky_key_hash", consumer=owner[h], hash=h))
            out.extend(Action.of("move_hash", hash=h, consumer=cid) for cid in open_ids if cid != owner[h])
        if state.batch_level < self.max_batch_level:
            out.append(Action.of("start_batch"))
        if state.batch_level > 0:
            out.append(Action.of("end_batch"))
        self._last_enabled = (state, out, {id(a) for a in out})
        return out

    def step(self, state: TrackerState, action: Action) -> tuple[TrackerState, Observation]:
        last, offered, ids = self._last_enabled
        if last is not state:
            offered = self.enabled(state)
            ids = self._last_enabled[2]
        # The engines step the very objects `enabled` returned (kept alive here); a trace's are compared.
        if id(action) not in ids and action not in offered:
            raise ActionNotEnabled(action, "not offered in this state (see KeySharedTrackerModel.enabled)")
        s = _Step(self, state)
        name = action.name
        observation: dict[str, Json] = {}
        if name == "add_pending_ack_if_allowed":
            added = s.add_pending_ack_if_allowed(int_param(action, "consumer"), int_param(action, "position"),
                                                 int_param(action, "batch_size"))
            observation["error" if added == ILLEGAL_ARGUMENT else "added"] = added
        elif name == "remove":
            size = int_param(action, "batch_size") if action.get("batch_size") is not None else None
            observation["removed"] = s.remove(int_param(action, "consumer"), int_param(action, "position"), size)
        elif name == "remove_and_get_remaining_unacked":
            observation["removed"] = s.remove_and_get_remaining_unacked(int_param(action, "consumer"),
                                                                        int_param(action, "position"))
        elif name == "remove_all_up_to":
            observation["removed"] = s.remove_all_up_to(int_param(action, "consumer"), int_param(action, "position"))
        elif name == "for_each_and_clear":
            observation["removed"] = s.for_each_and_clear(int_param(action, "consumer"))
        elif name == "for_each_and_close":
            observation["removed"] = s.for_each_and_close(int_param(action, "consumer"))
        elif name == "should_block_sticky_key_hash":
            observation["blocked"] = s.should_block_sticky_key_hash(int_param(action, "hash"))
        elif name == "move_hash":
            s.move_hash(int_param(action, "hash"), int_param(action, "consumer"))
        elif name == "start_batch":
            s.start_batch()
        else:
            s.end_batch()
        observation["unblocked"] = s.unblocked
        return s.freeze(), observation

    def key(self, state: TrackerState) -> Hashable:
        return state

    def vars(self, state: TrackerState) -> dict[str, Json]:
        return {
            "consumers": [[cid, f"consumer{cid}", closed] for cid, closed in zip(self.ids, state.closed, strict=True)],
            "owners": [[h, cid] for h, cid in zip(self.hashes, state.owners, strict=True)],
            "pending": [[cid, [[self.ledgers[p], p, r, self.position_hashes[p]] for p, r in pending]]
                        for cid, pending in zip(self.ids, state.pending, strict=True)],
            "draining": [[d.hash, d.consumer, d.ref_count, d.blocked] for d in state.draining],
            "batch_level": state.batch_level,
            "unblocked_while_batching": state.unblocked_while_batching,
            "replay": [[self.ledgers[p], p, self.position_hashes[p]] for p in state.replay],
            "events": list(state.events),
        }

    # ------------------------------------------------------------------ invariants

    def _one_holder(self, s: TrackerState) -> bool:
        holders: dict[int, int] = {}
        for cid, pending in zip(self.ids, s.pending, strict=True):
            for p, _ in pending:
                if holders.setdefault(self.position_hashes[p], cid) != cid:
                    return False
        return True

    def _tracker_consistent(self, s: TrackerState) -> bool:
        """KS-I2 both ways, with the owner map as the selector: the entries are exactly one (C, H, n) per
        connected consumer C holding n >= 1 pending acks of a nonzero hash H it does not own; with every
        consumer gone the tracker is empty."""
        owner = dict(zip(self.hashes, s.owners, strict=True))
        expected: dict[int, tuple[int, int]] = {}
        for cid, pending in zip(self.ids, s.pending, strict=True):
            for p, _ in pending:
                h = self.position_hashes[p]
                if h != STICKY_KEY_HASH_NOT_SET and owner[h] != cid and not s.closed[cid - 1]:
                    expected[h] = (cid, expected.get(h, (cid, 0))[1] + 1)
        return {d.hash: (d.consumer, d.ref_count) for d in s.draining} == expected

