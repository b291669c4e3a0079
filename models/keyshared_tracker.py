"""Key_Shared at the tracker scope: `PendingAcksMap` and `DrainingHashesTracker` (spec keyshared.md §4.2, §4.3).

`models/keyshared.py` checks the whole dispatcher; this scope checks the two classes a port of PIP-379
must get right, small enough to explore completely in seconds. It is the PIP-379 dispatcher reduced
to the calls it makes on them (§4.5): each consumer's pending-acks map with the add handler
(`handle_adding_pending_ack`) and the remove handler (`reduce_ref_count`, batches forwarded) installed,
one tracker whose unblocking handler the harness observes, and an owner per configured hash standing
in for the selector.

**State**: per hash its owner; per consumer its pending acks `position -> hash` and whether its map is
closed; the tracker's entries `hash -> (consumer, ref_count, blocked)` (`blocked` is
`blocked_count > 0`: only that matters to the tracker, and a count would make the space infinite),
`batch_level` and `unblocked_while_batching`; and the positions the add handler refused, which wait
for replay until they are added. Positions are entry ids of ledger 1, each with a fixed sticky hash
(`position_hashes`), as a message has one key. Consumers are numbered from 1.

**Actions** (snake_case Java names; the harness keeps the dispatcher's discipline, §4.5):

- ``add_pending_ack_if_allowed(consumer, position, hash)``: a send, so only to the hash's owner and
  only for a position nobody holds;
- ``remove(consumer, position)``: an individual ack of a held position (the remove handler releases);
- ``remove_all_up_to(consumer, position)``: a mark-delete move that removes at least one position;
- ``for_each_and_clear(consumer)``: redeliver everything; ``for_each_and_close(consumer)``: the consumer
  disconnects (closing removals: never an unblock);
- ``should_block_sticky_key_hash(consumer, hash)``: the dispatcher's check for the hash's owner;
- ``move_hash(hash, consumer)``: the selector moves the hash to an open consumer, and
  `register_draining_hashes` runs for it: the old owner's pending acks of it become `add_entry` calls
  (REMOVE), then each of the new owner's pending acks of it a `reduce_ref_count` if it drains it (ADD);
- ``start_batch()`` (up to `max_batch_level`) and ``end_batch()``: the tracker's batches, nested
  around the map's own.

**Observations**: ``unblocked`` (the unblocking handler's arguments during the step, in call order)
and the call's result: ``added`` / ``blocked`` (bools), ``removed`` (a bool for `remove`, the
`[position, hash]` pairs visited in order for the batch removals).

Under that discipline a hash is held by at most one consumer (KS-I1) and an entry's consumer never
owns its hash (KS-I2), so the branches of §4.3 that only a broken caller reaches never run here:
`add_entry` on another consumer's entry and `reduce_ref_count` by a non-owner (IllegalStateError),
hash 0 (ValueError; the configuration has no 0), and the lazy removal when the entry's own consumer
asks `should_block_sticky_key_hash` (S3 checks it on the reference). The per-consumer draining stats
are left out (`cleared_total` grows without bound), and with them `consumer_removed`, which only drops
them. The variant names the dispatcher; these classes are PIP-379's whatever it is, so every variant
behaves alike here and the historical twins are caught at the dispatcher scope.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param, configured

VARIANTS = ("pip379", "classic", "pip282")
ACTION_NAMES = (
    "add_pending_ack_if_allowed",
    "remove",
    "remove_all_up_to",
    "for_each_and_clear",
    "for_each_and_close",
    "should_block_sticky_key_hash",
    "move_hash",
    "start_batch",
    "end_batch",
)
UNBLOCKED_IN_BATCH = -1  # the argument of the one unblocking call at the end of an outermost batch

DEFAULT_CONFIG: dict[str, Param] = {
    "scope": "tracker",
    "consumers": 2,
    # Entry i of ledger 1 has sticky hash position_hashes[i]: those of keys "4", "4" and "0" (§6).
    "position_hashes": (11707, 11707, 4850),
    "max_batch_level": 1,  # how deep the harness nests start_batch()
}

EXPLORE_CONFIG: dict[str, Param] = dict(DEFAULT_CONFIG)
"""Two consumers, two hashes (one with two messages), one explicit batch: ~1,500 states, explored in a second."""

HYPOTHESIS_CONFIG: dict[str, Param] = {
    **DEFAULT_CONFIG,
    "consumers": 3,
    "position_hashes": (11707, 11707, 4850, 35071),  # keys "4", "4", "0", "5"
    "max_batch_level": 2,
}
"""Three consumers, so a hash can move on while it drains, three hashes, and nested batches."""


def _cfg_int(config: Mapping[str, Param], name: str) -> int:
    value = config[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"keyshared tracker config {name} must be an int, got {value!r}")
    return value


class Drain(NamedTuple):
    """A tracker entry: `consumer` drains `hash`; `blocked` once it held another consumer back."""

    hash: int
    consumer: int
    ref_count: int
    blocked: bool


class TrackerState(NamedTuple):
    owners: tuple[int, ...]  # the owner of each of the model's hashes (sorted), a consumer id
    pending: tuple[tuple[tuple[int, int], ...], ...]  # per consumer: sorted (position, hash)
    closed: tuple[bool, ...]  # per consumer
    draining: tuple[Drain, ...]  # sorted by hash
    batch_level: int
    unblocked_while_batching: bool
    replay: tuple[tuple[int, int], ...]  # positions the add handler refused, with their hash, sorted


@dataclass
class _Entry:
    consumer: int
    ref_count: int
    blocked: bool


class _Step:
    """One action on a thawed state: the map, its handlers and the tracker, as §4.2, §4.3 and §4.5 say."""

    def __init__(self, model: KeySharedTrackerModel, s: TrackerState) -> None:
        self.hashes = model.hashes
        self.owners = list(s.owners)
        self.pending = [dict(p) for p in s.pending]
        self.closed = list(s.closed)
        self.entries = {d.hash: _Entry(d.consumer, d.ref_count, d.blocked) for d in s.draining}
        self.batch_level = s.batch_level
        self.unblocked_while_batching = s.unblocked_while_batching
        self.replay = dict(s.replay)
        self.unblocked: list[Json] = []

    def freeze(self) -> TrackerState:
        return TrackerState(
            owners=tuple(self.owners),
            pending=tuple(tuple(sorted(p.items())) for p in self.pending),
            closed=tuple(self.closed),
            draining=tuple(Drain(h, e.consumer, e.ref_count, e.blocked) for h, e in sorted(self.entries.items())),
            batch_level=self.batch_level,
            unblocked_while_batching=self.unblocked_while_batching,
            replay=tuple(sorted(self.replay.items())),
        )

    # ------------------------------------------------------------------ PendingAcksMap (§4.2)

    def add_pending_ack_if_allowed(self, consumer: int, position: int, sticky_hash: int) -> bool:
        if self.closed[consumer - 1] or not self.handle_adding(consumer, position, sticky_hash):
            return False
        self.pending[consumer - 1][position] = sticky_hash
        self.replay.pop(position, None)  # the dispatcher sent it again: it no longer waits
        return True

    def remove(self, consumer: int, position: int) -> bool:
        sticky_hash = self.pending[consumer - 1].pop(position)
        self.reduce_ref_count(sticky_hash, self.closed[consumer - 1])
        return True

    def remove_all_up_to(self, consumer: int, position: int) -> list[Json]:
        """One batch around the removals, since at least one position goes."""
        doomed = sorted(item for item in self.pending[consumer - 1].items() if item[0] <= position)
        return self._drain(consumer, doomed)

    def for_each_and_clear(self, consumer: int) -> list[Json]:
        return self._drain(consumer, sorted(self.pending[consumer - 1].items()))

    def for_each_and_close(self, consumer: int) -> list[Json]:
        self.closed[consumer - 1] = True
        return self._drain(consumer, sorted(self.pending[consumer - 1].items()))

    def _drain(self, consumer: int, doomed: list[tuple[int, int]]) -> list[Json]:
        self.start_batch()
        for position, sticky_hash in doomed:
            del self.pending[consumer - 1][position]
            self.reduce_ref_count(sticky_hash, self.closed[consumer - 1])
        self.end_batch()
        return [[position, sticky_hash] for position, sticky_hash in doomed]

    # ------------------------------------------------------------------ the dispatcher's handlers (§4.5)

    def handle_adding(self, consumer: int, position: int, sticky_hash: int) -> bool:
        """Refuse a hash another consumer drains; the refused position goes to replay."""
        entry = self.entries.get(sticky_hash)
        if entry is not None and entry.consumer != consumer:
            self.replay[position] = sticky_hash
            return False
        return True

    def move_hash(self, sticky_hash: int, consumer: int) -> None:
        """register_draining_hashes for one moved hash: all REMOVE work, then all ADD work."""
        at = self.hashes.index(sticky_hash)
        before, self.owners[at] = self.owners[at], consumer
        for held in self.pending[before - 1].values():
            if held == sticky_hash:
                self.add_entry(before, sticky_hash)
        for held in self.pending[consumer - 1].values():
            entry = self.entries.get(sticky_hash)
            if held == sticky_hash and entry is not None and entry.consumer == consumer:
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
        """Asked for the hash's owner, which never drains it: an entry always blocks."""
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

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "pip379") -> None:
        self.variant = variant
        self.config: Mapping[str, Param] = configured("keyshared (tracker scope)", variant, VARIANTS, config,
                                                      DEFAULT_CONFIG)
        if self.config["scope"] != "tracker":
            raise ValueError(f"the tracker model needs scope 'tracker', got {self.config['scope']!r}")
        self.consumers = _cfg_int(self.config, "consumers")
        self.max_batch_level = _cfg_int(self.config, "max_batch_level")
        raw = self.config["position_hashes"]
        if not isinstance(raw, tuple) or not all(isinstance(h, int) and not isinstance(h, bool) for h in raw):
            raise ValueError("keyshared tracker config position_hashes must be a tuple of ints")
        self.position_hashes: tuple[int, ...] = tuple(h for h in raw if isinstance(h, int))
        if self.consumers < 1 or self.max_batch_level < 0 or not all(0 < h <= 65535 for h in self.position_hashes):
            raise ValueError("keyshared tracker config needs consumers >= 1, max_batch_level >= 0 and hashes in "
                             "[1, 65535]")
        self.hashes = tuple(sorted(set(self.position_hashes)))
        self.positions = tuple(range(len(self.position_hashes)))
        self.ids = tuple(range(1, self.consumers + 1))
        self.action_names: Sequence[str] = ACTION_NAMES
        self.invariants: Sequence[Invariant[TrackerState]] = (
            Invariant("KS-I1", self._one_holder, "at most one consumer holds a position of each hash"),
            Invariant("KS-I2", self._tracker_consistent, "tracker entries match the drainer's pending acks"),
            Invariant("KS-I3", lambda s: s.batch_level > 0 or not s.unblocked_while_batching,
                      "an unblocking inside a batch is reported when the outermost batch ends"),
        )
        self.liveness: Sequence[Liveness[TrackerState]] = ()
        # The engines ask for the enabled actions and then step each of them from the same state.
        self._last_enabled: tuple[TrackerState | None, frozenset[Action]] = (None, frozenset())

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
        )

    def terminal_ok(self, state: TrackerState) -> bool:
        """Every consumer gone (and no explicit batch configured): a legitimate end, not a deadlock."""
        return all(state.closed)

    def enabled(self, state: TrackerState) -> Sequence[Action]:
        held = {p for pending in state.pending for p, _ in pending}
        owner = dict(zip(self.hashes, state.owners, strict=True))
        out: list[Action] = []
        for position, h in enumerate(self.position_hashes):
            if position not in held:
                out.append(Action.of("add_pending_ack_if_allowed", consumer=owner[h], position=position, hash=h))
        for cid, pending in zip(self.ids, state.pending, strict=True):
            out.extend(Action.of("remove", consumer=cid, position=p) for p, _ in pending)
            if pending:  # a mark-delete position that removes something
                out.extend(Action.of("remove_all_up_to", consumer=cid, position=p) for p in self.positions
                           if p >= pending[0][0])
        for cid, closed in zip(self.ids, state.closed, strict=True):
            if not closed:
                out.append(Action.of("for_each_and_clear", consumer=cid))
                out.append(Action.of("for_each_and_close", consumer=cid))
        for h in self.hashes:
            if not state.closed[owner[h] - 1]:
                out.append(Action.of("should_block_sticky_key_hash", consumer=owner[h], hash=h))
            out.extend(Action.of("move_hash", hash=h, consumer=cid) for cid in self.ids
                       if cid != owner[h] and not state.closed[cid - 1])
        if state.batch_level < self.max_batch_level:
            out.append(Action.of("start_batch"))
        if state.batch_level > 0:
            out.append(Action.of("end_batch"))
        return out

    def step(self, state: TrackerState, action: Action) -> tuple[TrackerState, Observation]:
        if self._last_enabled[0] != state:
            self._last_enabled = (state, frozenset(self.enabled(state)))
        if action not in self._last_enabled[1]:
            raise ActionNotEnabled(action, "not offered in this state (see KeySharedTrackerModel.enabled)")
        s = _Step(self, state)
        name = action.name
        observation: dict[str, Json] = {}
        if name == "add_pending_ack_if_allowed":
            observation["added"] = s.add_pending_ack_if_allowed(_int(action, "consumer"), _int(action, "position"),
                                                                _int(action, "hash"))
        elif name == "remove":
            observation["removed"] = s.remove(_int(action, "consumer"), _int(action, "position"))
        elif name == "remove_all_up_to":
            observation["removed"] = s.remove_all_up_to(_int(action, "consumer"), _int(action, "position"))
        elif name == "for_each_and_clear":
            observation["removed"] = s.for_each_and_clear(_int(action, "consumer"))
        elif name == "for_each_and_close":
            observation["removed"] = s.for_each_and_close(_int(action, "consumer"))
        elif name == "should_block_sticky_key_hash":
            observation["blocked"] = s.should_block_sticky_key_hash(_int(action, "hash"))
        elif name == "move_hash":
            s.move_hash(_int(action, "hash"), _int(action, "consumer"))
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
            "pending": [[cid, [[p, h] for p, h in pending]] for cid, pending in zip(self.ids, state.pending,
                                                                                    strict=True)],
            "draining": [[d.hash, d.consumer, d.ref_count, d.blocked] for d in state.draining],
            "batch_level": state.batch_level,
            "unblocked_while_batching": state.unblocked_while_batching,
            "replay": [[p, h] for p, h in state.replay],
        }

    # ------------------------------------------------------------------ invariants

    def _one_holder(self, s: TrackerState) -> bool:
        holders: dict[int, int] = {}
        for cid, pending in zip(self.ids, s.pending, strict=True):
            for _, h in pending:
                if holders.setdefault(h, cid) != cid:
                    return False
        return True

    def _tracker_consistent(self, s: TrackerState) -> bool:
        """KS-I2 with the owner map as the selector; with every consumer gone the tracker is empty."""
        if all(s.closed):
            return not s.draining
        owner = dict(zip(self.hashes, s.owners, strict=True))
        for d in s.draining:
            count = sum(1 for _, h in s.pending[d.consumer - 1] if h == d.hash)
            if d.hash == 0 or s.closed[d.consumer - 1] or owner.get(d.hash) == d.consumer:
                return False
            if not d.ref_count == count >= 1:
                return False
        return True


def _int(action: Action, name: str) -> int:
    value = action[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{action}: parameter {name} must be an int")
    return value
