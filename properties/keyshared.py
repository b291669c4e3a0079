"""Key_Shared draining hashes bound to the engines: the reference adapter and the registry entry.

`KeySharedReference` drives `reference_impl.keyshared.KeySharedDispatcher` with the model's actions
and is the harness's client: it keeps its own record of what each consumer was delivered and still
holds (from the dispatcher's delivery log, acks, redelivery requests and disconnects), checks KS-I1
and KS-I4 on that record and KS-I2 on the reference's tracker, and projects the reference onto exactly
the model's variables. Interleaved acks and flows run inside the reference's own `interleave`
callback, and the storage gap is the reference's `begin_read`/`complete_read`.

A configuration with `scope: tracker` selects the smaller scope of `PendingAcksMap` and
`DrainingHashesTracker` alone (`models/keyshared_tracker.py`, `properties/keyshared_tracker.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from models.core import Action, Json, Model, Observation, Param
from models.keyshared import ACTION_NAMES, NORMAL, UNKNOWN_HASH, KeySharedModel
from models.keyshared_tracker import EXPLORE_CONFIG as TRACKER_EXPLORE_CONFIG
from models.keyshared_tracker import HYPOTHESIS_CONFIG as TRACKER_HYPOTHESIS_CONFIG
from models.keyshared_tracker import KeySharedTrackerModel
from properties import keyshared_z3
from properties.keyshared_tracker import KeySharedTrackerReference
from properties.lockstep import Implementation
from properties.registry import Mechanism
from reference_impl.keyshared import LEDGER_ID, Consumer, KeySharedDispatcher, Position, ReadOp


def _int(action: Action, name: str) -> int:
    value = action[name]
    assert isinstance(value, int) and not isinstance(value, bool)
    return value


def _entries(positions: Iterable[Position]) -> list[Json]:
    """Positions of ledger 1 as sorted entry ids, as the model's variables hold them."""
    return [p[1] for p in sorted(positions)]


class KeySharedReference:
    """The reference dispatcher of one variant plus the harness's client record."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        model = KeySharedModel(config, variant)  # the model parses and completes the configuration
        self.keys = model.keys
        self.exempt_nacked_p = model.exempt_nacked_p
        self.d = KeySharedDispatcher(
            variant,
            replica_points=model.points,
            hash_range_max=model.range_max,
            read_batch_size=model.read_batch_size,
            look_ahead_per_consumer=model.look_ahead[0],
            look_ahead_per_subscription=model.look_ahead[1],
        )
        self.consumers: dict[int, Consumer] = {}
        self.held: dict[int, set[Position]] = {}
        self.nacked: set[Position] = set()
        self.in_flight: dict[str, ReadOp] = {}
        self.settled = False
        self.pinned: tuple[int, ...] = ()
        self.seen = 0
        self.delivered: list[Json] = []
        self.out_of_order = False

    # ------------------------------------------------------------------ client record

    def _sync(self) -> None:
        """Take in the deliveries made since the last call, checking KS-I4 at each one (§5)."""
        d = self.d
        for delivery in d.deliveries[self.seen :]:
            cid, position = delivery.consumer.consumer_id, delivery.position
            held = self.held[cid]
            exempt = self.exempt_nacked_p and position in self.nacked
            for entry_id in range(0 if exempt else position[1]):
                earlier = (LEDGER_ID, entry_id)
                if (
                    d.hash_of(earlier) == delivery.hash
                    and not d.is_acked(earlier)
                    and earlier not in held
                    and earlier not in self.nacked
                ):
                    self.out_of_order = True
            self.nacked.discard(position)
            held.add(position)
            self.delivered.append([cid, position[1]])
        self.seen = len(d.deliveries)

    def _ack(self, cid: int, entry_id: int) -> None:
        self.held[cid].discard((LEDGER_ID, entry_id))
        self.d.ack(self.consumers[cid], (LEDGER_ID, entry_id))

    def _interleave(self, stage: str, index: int, hook: tuple[Param, ...]) -> bool:
        """Run the hook's ack or flow at its (stage, index); True once it ran (or was skipped there)."""
        if (stage, index) != hook[:2]:
            return False
        self._sync()
        name, cid, value = hook[2:]
        assert isinstance(cid, int) and isinstance(value, int)
        if cid in self.consumers:
            if name == "flow":
                self.d.flow(self.consumers[cid], value)
            elif (LEDGER_ID, value) in self.held[cid]:
                self._ack(cid, value)
        return True

    # ------------------------------------------------------------------ Implementation

    def apply(self, action: Action) -> Observation:
        d, name = self.d, action.name
        self.delivered = []
        observation: dict[str, Json] = {}
        if name == "add":
            cid = _int(action, "consumer")
            consumer = Consumer(str(action["name"]), cid, _int(action, "permits"))
            d.add_consumer(consumer)
            self.consumers[cid] = consumer
            self.held[cid] = set()
        elif name == "remove":
            cid = _int(action, "consumer")
            d.remove_consumer(self.consumers.pop(cid))
            del self.held[cid]
        elif name == "publish":
            d.publish(str(action["key"]))
        elif name == "flow":
            d.flow(self.consumers[_int(action, "consumer")], _int(action, "n"))
        elif name == "ack":
            self._ack(_int(action, "consumer"), _int(action, "position"))
        elif name == "redeliver":
            cid, position = _int(action, "consumer"), (LEDGER_ID, _int(action, "position"))
            self.held[cid].discard(position)
            self.nacked.add(position)
            d.redeliver_unacknowledged(self.consumers[cid], [position])
        elif name == "redeliver_all":
            cid = _int(action, "consumer")
            self.nacked |= self.held[cid]
            self.held[cid] = set()
            d.redeliver_unacknowledged(self.consumers[cid])
        elif name == "read":
            d.read_more_entries()
        elif name == "fire":
            d.fire_scheduled_read()
        elif name == "run":
            d.run_until_quiescent()
        elif name == "begin_read":
            op = d.begin_read()
            if op is not None:
                self.in_flight[op.read_type.value] = op
            observation["read"] = [op.read_type.value, [p[1] for p in op.positions]] if op else ["None", []]
        elif name == "complete_read":
            d.complete_read(self.in_flight.pop(str(action["kind"])))
        elif name == "interleaved_read":
            inner = action["inner"]
            assert isinstance(inner, tuple)
            hook = (action["stage"], action["index"], *inner)
            done = [False]

            def interleave(stage: str, index: int) -> None:
                if not done[0]:
                    done[0] = self._interleave(stage, index, hook)

            d.read_more_entries(interleave)
        else:  # settle
            stubborn = _int(action, "stubborn")
            self.settled = True
            self.pinned = tuple(sorted(p[1] for p in self.held[stubborn])) if stubborn else ()
        self._sync()
        observation["delivered"] = self.delivered
        return observation

    def vars(self) -> dict[str, Json]:
        d = self.d
        index = d.selector.consumer_name_index_tracker.get_tracked_index
        tracker = d.tracker.draining_hashes if d.tracker is not None else {}
        joined = d.recently_joined.items() if d.recently_joined is not None else []
        return {
            "messages": [d.key_of((LEDGER_ID, e)).decode("utf-8") for e in range(d.entry_count())],
            "consumers": [[c.consumer_id, c.name, index(c), c.permits] for c in d.consumers],
            "pending": [[c.consumer_id, [e for _l, e, _r, _h in c.pending_acks.items()]] for c in d.consumers],
            "held": [[c.consumer_id, _entries(self.held[c.consumer_id])] for c in d.consumers],
            "ring": [
                [a.range.start, a.range.end, a.consumer.consumer_id]
                for a in d.selector.get_consumer_hash_assignments_snapshot().assignments
            ],
            "read_position": d.read_position[1],
            "mark_delete": d.mark_delete_position[1],
            "acked": _entries(d.individually_acked),
            "replay": [[p[1], UNKNOWN_HASH if h is None else h] for p, h in d.replay_queue.items()],
            "draining": [
                [h, e.consumer.consumer_id, e.ref_count, e.blocked_count > 0] for h, e in sorted(tracker.items())
            ],
            "recently_joined": [[c.consumer_id, p[1]] for c, p in joined],
            "last_sent": [] if d.last_sent_position is None else [d.last_sent_position[1]],
            "sent": _entries(d.individually_sent_positions),
            "scheduled_read": d.scheduled_read,
            "skip_next_replay": d.skip_next_replay_to_trigger_look_ahead,
            "stuck_on_replays": d.is_dispatcher_stuck_on_replays,
            "reads_in_flight": [
                [kind, [p[1] for p in self.in_flight[kind].positions]]
                for kind in sorted(self.in_flight, key=lambda k: k != NORMAL)
            ],
            "rewind_pending": d.should_rewind_before_reading_or_replaying,
            "nacked": _entries(p for p in self.nacked if not d.is_acked(p)),
            "settled": self.settled,
            "pinned": list(self.pinned),
        }

    def violations(self) -> list[str]:
        d = self.d
        out: list[str] = []
        holders: dict[int, int] = {}
        for cid, held in self.held.items():
            for position in held:
                if holders.setdefault(d.hash_of(position), cid) != cid and "KS-I1" not in out:
                    out.append("KS-I1")
        if d.tracker is not None and not self._tracker_consistent():
            out.append("KS-I2")
        if self.out_of_order:
            out.append("KS-I4")
        return out

    def _tracker_consistent(self) -> bool:
        """KS-I2 on the reference's own tracker and pending-ack maps."""
        d = self.d
        assert d.tracker is not None
        if not d.consumers:
            return not d.tracker.draining_hashes
        for h, entry in d.tracker.draining_hashes.items():
            count = sum(1 for *_, ph in entry.consumer.pending_acks.items() if ph == h)
            if h == 0 or not entry.consumer.connected or d.selector.select(h) is entry.consumer:
                return False
            if not entry.ref_count == count >= 1:
                return False
        return True


# The gate leaves out the two spec gaps described in models/keyshared.py, where pip379 breaks KS-I4
# as the spec words it: no disconnect while a Replay read is in flight (A), and a message released by
# a negative ack is exempt from per-key order (B). The corpus keeps a counterexample for each.
GATE: dict[str, Param] = {"disconnect_during_replay_read": False, "exempt_nacked_p": True}
# Two names whose second joiner (a second "consumer1") takes key "4" from the first, keys "4" and "5"
# (consumer1's with {consumer1, consumer2}), one permit each: the smallest rings where every variant's
# bug and #21199 show. Each configuration is explored completely for pip379 in seconds.
_TWO: dict[str, Param] = {
    **GATE,
    "names": ("consumer1", "consumer2"),
    "keys": ("4", "5"),
    "max_consumers": 2,
    "max_messages": 2,
    "add_permits": (1,),
    "flow": (1,),
    "max_permits": 1,
}
EXPLORE_CONFIGS: dict[str, Mapping[str, Param]] = {
    "small": {**_TWO, "actions": ("add", "remove", "publish", "flow", "ack", "redeliver", "redeliver_all", "read",
                                  "settle")},
    "gap": {**_TWO, "actions": ("add", "remove", "publish", "flow", "ack", "read", "fire", "run", "begin_read",
                                "settle")},
    "interleave": {**_TWO, "max_messages": 3, "add_permits": (1, 2), "max_permits": 2, "interleave": 2,
                   "actions": ("add", "remove", "publish", "ack", "read", "interleaved_read")},
}
_HOT_ACTIONS = ("add", "remove", "publish", "flow", "ack", "redeliver", "read")
_HOT: dict[str, Param] = {**GATE, "names": ("consumer1", "consumer2"), "keys": ("4",), "max_messages": 5,
                          "add_permits": (2,), "max_permits": 2, "actions": _HOT_ACTIONS}
HYPOTHESIS_CONFIGS: dict[str, Mapping[str, Param]] = {
    # One hot key and few step kinds, so the historical variants' bugs are a few steps away.
    "hot": _HOT,
    # Every step kind, three consumers and the spec's keys (§6: "4" moves to consumer3, "0" is
    # consumer2's, "5" consumer1's), six messages. Settling freezes the consumers for the rest of a run
    # and pins the stubborn one's messages, so the safety invariants are also checked there.
    "spec": {**GATE, "actions": tuple(a for a in ACTION_NAMES if a != "complete_read")},
    # The hot key with settling: a stubborn consumer pinning a hash that drains towards a second
    # "consumer1" (the spec configuration's three names rarely get there).
    "settled": {**_HOT, "actions": (*_HOT_ACTIONS, "settle")},
}


def _tracker_scope(config: Mapping[str, Param] | None) -> bool:
    """`scope: tracker` selects the PendingAcksMap + DrainingHashesTracker scope (models/keyshared_tracker.py)."""
    return config is not None and config.get("scope") == "tracker"


def make_model(config: Mapping[str, Param] | None, variant: str) -> Model[Any]:
    return KeySharedTrackerModel(config, variant) if _tracker_scope(config) else KeySharedModel(config, variant)


def make_reference(config: Mapping[str, Param] | None, variant: str) -> Implementation:
    if _tracker_scope(config):
        return KeySharedTrackerReference(config, variant)
    return KeySharedReference(config, variant)


# EXPLORE_CONFIGS and HYPOTHESIS_CONFIGS are the dispatcher scope's; the registry adds the tracker
# scope's under the name "tracker" (last, so the dispatcher's stay the defaults).
MECHANISM = Mechanism(
    name="keyshared",
    spec="shared/spec/keyshared.md",
    make_model=make_model,
    make_reference=make_reference,
    current="pip379",
    twins={"classic": "KS-I1", "pip282": "KS-I1"},
    explore_configs={**EXPLORE_CONFIGS, "tracker": TRACKER_EXPLORE_CONFIG},
    hypothesis_configs={**HYPOTHESIS_CONFIGS, "tracker": TRACKER_HYPOTHESIS_CONFIG},
    proofs=keyshared_z3.proofs,
    bench=keyshared_z3.bench,
)
