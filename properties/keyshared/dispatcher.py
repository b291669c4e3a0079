"""Key_Shared's dispatcher scope bound to the engines: the reference adapter and its configurations.

`KeySharedReference` drives `reference_impl.keyshared.KeySharedDispatcher` with the model's actions
and is the harness's client: it keeps its own record of what each consumer was delivered and still
holds (from the dispatcher's delivery log, acks, redelivery requests and disconnects), of the keys it
published (hashed by the model's own `sticky_hash`, not the reference's), of what it acked and of who
joined with which name, and judges the reference against that record only, never against the
reference's own opinion: KS-I1 and KS-I4 on what the clients hold, KS-I2 by comparing each tracker
entry with the drainer's held messages and the canonical ring, and KS-I8 by comparing the
reference's ring (points, selected and colliding consumers) and name indexes with the canonical
ring of the recorded joins. It projects the reference onto exactly the model's variables.
Interleaved acks and flows run inside the reference's own `interleave` callback, and the storage gap
is the reference's `begin_read`/`complete_read`.

The tracker scope's adapter is `properties/keyshared/tracker.py`, the lock scope's `properties/keyshared/locks.py`;
`binding` puts the three together. The broker event log (`properties/keyshared/eventlog/`) reads the current
variant, its twins and the `spec` configuration from here.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Mapping

from models.core import Action, Json, Observation, Param
from models.keyshared import (
    CAME_BACK,
    JUMP_RELEASED,
    JUMPS,
    NORMAL,
    PROMOTED,
    RESET_BACK,
    UNBLOCKED_IN_PASS,
    UNKNOWN_HASH,
    KeySharedModel,
    claims,
    sticky_hash,
)
from models.keyshared.dispatch import may_go
from models.keyshared.state import ACTION_NAMES, QUEUED
from properties.engines.lockstep import BaseImplementation
from reference_impl.keyshared import LEDGER_ID, Consumer, KeySharedDispatcher, Position, ReadOp, ReadType

CURRENT = "pip379"
"""The dispatcher Pulsar ships (PIP-379's draining hashes)."""
TWINS: Mapping[str, str] = {"classic": "KS-I1", "pip282": "KS-I1"}
"""The dispatchers it replaced, each with the invariant it breaks."""


def _int(action: Action, name: str) -> int:
    value = action[name]
    assert isinstance(value, int) and not isinstance(value, bool)
    return value


def _entries(positions: Iterable[Position]) -> list[Json]:
    """Positions of ledger 1 as sorted entry ids, as the model's variables hold them."""
    return [p[1] for p in sorted(positions)]


@functools.lru_cache(maxsize=4096)
def _sorted_claims(
    join: tuple[tuple[str, int], ...], points: int, range_max: int
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """`claims` by ascending point, cached: a walk asks for the same few join orders at every step."""
    return tuple((point, tuple(slots)) for point, slots in sorted(claims(join, points, range_max).items()))


_PASSES = frozenset({"read", "fire", "run", "complete_read", "interleaved_read"})
"""The steps that run a dispatch pass, where shouldBlockStickyKeyHash may drop an entry whose hash came back."""


class KeySharedReference(BaseImplementation):
    """The reference dispatcher of one variant plus the harness's client record."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        model = KeySharedModel(config, variant)  # the model parses and completes the configuration
        self.keys = model.keys
        self.exempt_nacked_p = model.exempt_nacked_p
        self.points, self.range_max = model.points, model.range_max
        self.d = KeySharedDispatcher(
            variant,
            replica_points=model.points,
            hash_range_max=model.range_max,
            read_batch_size=model.read_batch_size,
            look_ahead_per_consumer=model.look_ahead[0],
            look_ahead_per_subscription=model.look_ahead[1],
            filter_acked_on_complete=model.filter_acked_on_complete,
            async_flow=model.async_flow,
            remove_counts_queued=model.remove_counts_queued,
        )
        self.consumers: dict[int, Consumer] = {}
        self.held: dict[int, set[Position]] = {}
        # Per consumer, what a read in flight across a cursor jump delivered after the jump passed it: the broker
        # still keeps a pending ack of it (upstream dispatches such an entry) until the next mark-delete move's
        # removeAllUpTo, an ack, a redelivery or the consumer's departure. KS-I2 counts it as a pending ack.
        self.stale: dict[int, set[Position]] = {}
        self.nacked: set[Position] = set()
        self.in_flight: dict[str, ReadOp] = {}
        self.rewinding = False  # KS-C4: the first consumer joined while a read was in flight, not yet all completed
        self.settled = False
        self.pinned: tuple[int, ...] = ()
        self.seen = 0
        self.delivered: list[Json] = []
        self.out_of_order = False
        self.hashes: list[int] = []  # per entry id, the hash of the key the harness published
        self.published: list[str] = []  # per entry id, the key the harness published
        self.permits: dict[int, int] = {}  # per consumer: joined with + flowed - delivered, by the harness's count
        self.acked: set[int] = set()  # entry ids the clients acked above `mark_delete`
        # The mark-delete the harness expects from its own acks and cursor jumps, by the cursor's rules: acks
        # advance it over contiguous acked entries, a jump sets it, a reset puts it before the reset position.
        self.mark_delete = -1
        self.joins: list[tuple[int, str, int]] = []  # (id, name, name index) of the connected, in join order
        self.events: set[str] = set()
        self.unscheduled = False  # the last step released a blocking entry and left no read scheduled (KS-I5a)
        self.stalled = False  # the last step was a read that changed nothing while an entry may go (KS-S1)
        self.loops = "run" in model.kinds  # KS-S1 is stated where the configuration has the read-again loop
        self.look_ahead_missed = False  # the last step's dispatch pass owed a look-ahead and left none (KS-S2)

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
                    self.hashes[entry_id] == self.hashes[position[1]]
                    and not self._done(entry_id)
                    and earlier not in held
                    and earlier not in self.nacked
                ):
                    self.out_of_order = True
            self.nacked.discard(position)
            if self._done(position[1]):
                self.stale[cid].add(position)
            held.add(position)
            self.permits[cid] -= 1
            self.delivered.append([cid, position[1]])
        self.seen = len(d.deliveries)

    def _done(self, entry_id: int) -> bool:
        """The harness's record says the cursor acknowledged this entry (a client's ack or a jump past it)."""
        return entry_id <= self.mark_delete or entry_id in self.acked

    def _ack(self, cid: int, entry_id: int) -> None:
        self.held[cid].discard((LEDGER_ID, entry_id))
        for stale in self.stale.values():
            stale.discard((LEDGER_ID, entry_id))  # the ack removes the pending ack from whoever has it
        if not self._done(entry_id):
            self.acked.add(entry_id)
            moved = self.mark_delete + 1 in self.acked
            while self.mark_delete + 1 in self.acked:
                self.mark_delete += 1
                self.acked.discard(self.mark_delete)
            if moved:
                self._forget_stale()
        self.d.ack(self.consumers[cid], (LEDGER_ID, entry_id))

    def _jumped(self, mark_delete: int) -> None:
        """A skip, clear_backlog or expire: the harness's mark-delete moves there (never back)."""
        if mark_delete > self.mark_delete:
            self.mark_delete = mark_delete
            self.acked = {e for e in self.acked if e > mark_delete}
            self._forget_stale()

    def _forget_stale(self) -> None:
        """A mark-delete move: its removeAllUpTo drops every pending ack at or below it, the stale ones too."""
        for stale in self.stale.values():
            stale.clear()

    def _skip_target(self, count: int) -> int:
        """The entry `skip(count)` marks deleted, from the harness's record: the count-th entry after its
        mark-delete that no client acked, or the last entry."""
        entry_id, left = self.mark_delete, count
        while left and entry_id + 1 < len(self.hashes):
            entry_id += 1
            if entry_id not in self.acked:
                left -= 1
        return entry_id

    def _remove(self, cid: int) -> None:
        """A consumer disconnects: the ring may promote a colliding consumer; its client holds nothing more."""
        d = self.d
        leaver = self.consumers.pop(cid)
        if any(selected is leaver and any(c is not leaver for c in colliding)
               for _, selected, colliding in d.selector.ring_entries()):
            self.events.add(PROMOTED)
        self.joins = [j for j in self.joins if j[0] != cid]
        d.remove_consumer(leaver)
        del self.held[cid], self.permits[cid], self.stale[cid]

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
                self.permits[cid] += value
            elif (LEDGER_ID, value) in self.held[cid]:
                unblocks = len(self.d.unblock_calls)
                self._ack(cid, value)
                if len(self.d.unblock_calls) > unblocks:
                    self.events.add(UNBLOCKED_IN_PASS)
        return True

    # ------------------------------------------------------------------ Implementation

    def apply(self, action: Action) -> Observation:
        d, name = self.d, action.name
        self.delivered = []
        self.events = set()
        self.stalled = False
        self.look_ahead_missed = False
        draining = dict(d.tracker.draining_hashes) if d.tracker is not None else {}
        observation: dict[str, Json] = {}
        if name == "add":
            cid, joiner = _int(action, "consumer"), str(action["name"])
            consumer = Consumer(joiner, cid, _int(action, "permits"))
            self.rewinding = self.rewinding or (not self.consumers and bool(self.in_flight))
            used = {index for _, n, index in self.joins if n == joiner}
            self.joins.append((cid, joiner, next(i for i in range(len(used) + 1) if i not in used)))
            d.add_consumer(consumer)
            self.consumers[cid] = consumer
            self.held[cid] = set()
            self.stale[cid] = set()
            self.permits[cid] = _int(action, "permits")
        elif name == "remove":
            self._remove(_int(action, "consumer"))
        elif name == "publish":
            key = str(action["key"])
            self.hashes.append(sticky_hash(key, self.range_max))
            self.published.append(key)
            d.publish(key)
        elif name == "flow":
            d.flow(self.consumers[_int(action, "consumer")], _int(action, "n"))
            self.permits[_int(action, "consumer")] += _int(action, "n")
        elif name == "ack":
            self._ack(_int(action, "consumer"), _int(action, "position"))
        elif name == "redeliver":
            cid, position = _int(action, "consumer"), (LEDGER_ID, _int(action, "position"))
            self.held[cid].discard(position)
            self.stale[cid].discard(position)
            self.nacked.add(position)
            d.redeliver_unacknowledged(self.consumers[cid], [position])
        elif name == "redeliver_all":
            cid = _int(action, "consumer")
            self.nacked |= self.held[cid]
            self.held[cid] = set()
            self.stale[cid] = set()
            d.redeliver_unacknowledged(self.consumers[cid])
        elif name == "flow_update":
            d.run_queued_flow()
        elif name == "read":
            before = d._progress_key()
            op = d.begin_read()  # read_more_entries, in its two halves, so that KS-S2 sees the read's entries
            if op is not None:
                self._complete(op)
            self.stalled = self.loops and d._progress_key() == before and self._dispatchable()
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
            self._complete(self.in_flight.pop(str(action["kind"])))
            self.rewinding = self.rewinding and bool(self.in_flight)
        elif name == "interleaved_read":
            inner = action["inner"]
            assert isinstance(inner, tuple)
            hook = (action["stage"], action["index"], *inner)
            done = [False]

            def interleave(stage: str, index: int) -> None:
                if not done[0]:
                    done[0] = self._interleave(stage, index, hook)

            d.read_more_entries(interleave)
        elif name == "settle":
            stubborn = _int(action, "stubborn")
            self.settled = True
            self.pinned = tuple(sorted(p[1] for p in self.held[stubborn])) if stubborn else ()
        elif name == "reset":
            self._reset(_int(action, "position"))
        else:  # skip, clear_backlog, expire
            self._jump(name, action, draining)
        self._sync()
        after = d.tracker.draining_hashes if d.tracker is not None else {}
        came_back = {h for h, e in draining.items()
                     if h not in after and e.consumer.connected and d.selector.select(h) is e.consumer}
        if came_back:
            self.events.add(CAME_BACK)
        # KS-I5a: an entry that had blocked a dispatch and is gone (or replaced) after the step must leave a read
        # scheduled, unless a dispatch pass found its hash back with its drainer (the lazy removal needs no read).
        lazy = came_back if name in _PASSES else set()
        self.unscheduled = not d.scheduled_read and any(
            e.blocked_count > 0 and after.get(h) is not e and h not in lazy for h, e in draining.items()
        )
        observation["delivered"] = self.delivered
        return observation

    def _complete(self, op: ReadOp) -> None:
        """Complete `op` on the reference; on pip379, KS-S2 on its dispatch pass when one runs (no rewind, someone
        connected, no #12885 retry) and the replay queue can never reach the look-ahead limit."""
        d = self.d
        first = d.replay_queue.first()
        retried = first is not None and d.min_replayed_position is not None and first < d.min_replayed_position
        judged = (d.variant == "pip379" and not d.should_rewind_before_reading_or_replaying and bool(d.consumers)
                  and not retried and d.look_ahead_limit() > d.entry_count())
        positions = [p for p in op.positions if not (d.filter_acked_on_complete and d.is_acked(p))]
        sent = len(d.deliveries)
        d.complete_read(op)
        if judged and len(d.deliveries) == sent:
            self.look_ahead_missed = self._look_ahead_owed(op.read_type, positions) and not (
                d.skip_next_replay_to_trigger_look_ahead)

    def _look_ahead_owed(self, read_type: ReadType, positions: list[Position]) -> bool:
        """Whether a pass over `positions` that sent nothing must trigger the look-ahead (upstream's
        filterAndGroupEntriesForDispatching, PersistentStickyKeyDispatcherMultipleConsumers.java 514-546 at
        90cba329a1, from #23231): on a Normal read, a consumer with permits that an entry's hash selects (on pip379
        it sent nothing only because the hash was blocked); on either read, a connected consumer with permits that
        no entry's hash selects. The hashes are the harness's; the permits are unchanged, as nothing was sent."""
        d = self.d
        selected = {c for c in (d.selector.select(self.hashes[p[1]]) for p in positions) if c is not None}
        if read_type is ReadType.NORMAL and any(d.available_permits(c) > 0 for c in selected):
            return True
        return any(c not in selected and d.available_permits(c) > 0 for c in d.consumers)

    def _dispatchable(self) -> bool:
        """KS-S1's premise on the reference (models.keyshared.dispatch.may_go): nothing in flight, and an entry the
        harness has not seen acknowledged may go to a connected consumer with permits, by the reference's ring,
        replay queue, read position and draining tracker; the hashes are the harness's."""
        d = self.d
        if self.in_flight or not d.consumers:
            return False
        tracker = d.tracker.draining_hashes if d.tracker is not None else {}

        def owner(h: int) -> int | None:
            c = d.selector.select(h)
            return None if c is None else c.consumer_id

        return may_go({c.consumer_id: d.available_permits(c) for c in d.consumers}, owner,
                      {h: e.consumer.consumer_id for h, e in tracker.items()}, self.hashes.__getitem__,
                      [p[1] for p, _ in d.replay_queue.items() if not self._done(p[1])],
                      [e for e in range(d.read_position[1], len(self.hashes)) if not self._done(e)])

    def _jump(self, name: str, action: Action, draining: Mapping[int, object]) -> None:
        """skip, clear_backlog or expire on the reference's subscription, and the harness's expected mark-delete."""
        d = self.d
        if name == "skip":
            target = self._skip_target(_int(action, "n"))
            d.skip_entries(_int(action, "n"))
        elif name == "clear_backlog":
            target = len(self.hashes) - 1
            d.clear_backlog()
        else:
            target = _int(action, "position")
            d.expire_messages((LEDGER_ID, target))
        self._jumped(target)
        if set(draining) - set(d.tracker.draining_hashes if d.tracker is not None else {}):
            self.events.add(JUMP_RELEASED)

    def _reset(self, position: int) -> None:
        """The subscription disconnects every consumer (in join order), then resets the cursor to `position`."""
        consumers = [cid for cid, _, _ in self.joins]
        if position <= self.mark_delete or any(e >= position for e in self.acked):
            self.events.add(RESET_BACK)
        # The subscription's disconnects, one at a time (reset_cursor would do them too, but the harness
        # watches each for a promotion); the cursor moves once nobody is connected.
        for cid in consumers:
            self._remove(cid)
        self.d.reset_cursor((LEDGER_ID, position))
        self.mark_delete, self.acked = position - 1, set()

    def vars(self) -> dict[str, Json]:
        d = self.d
        index = d.selector.consumer_name_index_tracker.get_tracked_index
        tracker = d.tracker.draining_hashes if d.tracker is not None else {}
        joined = d.recently_joined.items() if d.recently_joined is not None else []
        return {
            "messages": [d.key_of((LEDGER_ID, e)).decode("utf-8") for e in range(d.entry_count())],
            "consumers": [[c.consumer_id, c.name, index(c), c.permits] for c in d.consumers],
            "pending": [[c.consumer_id, [e for _l, e, _r, _h in c.pending_acks.items()]] for c in d.consumers],
            "unacked": [[c.consumer_id, c.unacked_messages] for c in d.consumers],
            "total_permits": d.total_available_permits,
            "queued_flows": [[c.consumer_id if c.connected else 0, n] for c, n in d.queued_flows],
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
            "events": [event for event in sorted(self.events)],
        }

    def violations(self) -> list[str]:
        """The model's invariants judged on the harness's own record (see the module doc), and the reference's
        own: KS-I8 (the canonical ring of the recorded joins), KS-C1 (the cursor's mark-delete and individual
        acks are those the harness's acks and cursor jumps imply) and KS-C2 (the log and the permits are those
        the harness's publishes, joins, flows and the logged deliveries imply). KS-U1 holds each consumer's
        unacked counter to its own pending acks (a pending ack the cursor passed in a read in flight still counts,
        so the harness's held record is not the measure), KS-P1 the permit total to the harness's permit count."""
        out: list[str] = []
        if not self._ring_canonical():
            out.append("KS-I8")
        holders: dict[int, int] = {}
        for cid, held in self.held.items():
            for position in held:
                if (not self._done(position[1]) and holders.setdefault(self.hashes[position[1]], cid) != cid
                        and "KS-I1" not in out):
                    out.append("KS-I1")
        if self.d.tracker is not None and not self._tracker_consistent():
            out.append("KS-I2")
        if self.out_of_order:
            out.append("KS-I4")
        if self.unscheduled:
            out.append("KS-I5a")
        if self.stalled:
            out.append("KS-S1")
        if self.look_ahead_missed:
            out.append("KS-S2")
        d = self.d
        if d.mark_delete_position[1] != self.mark_delete or {p[1] for p in d.individually_acked} != self.acked:
            out.append("KS-C1")  # reference only, as KS-I8: the model's cursor is its own record
        if [d.key_of((LEDGER_ID, e)).decode("utf-8") for e in range(d.entry_count())] != self.published or any(
            c.permits != self.permits[c.consumer_id] for c in d.consumers
        ):
            out.append("KS-C2")
        if d.variant == "pip379" and (d.recently_joined is not None or d.last_sent_position is not None
                                      or d.individually_sent_positions or d.is_dispatcher_stuck_on_replays):
            out.append("KS-C3")
        # Judged in every configuration on the reference (they hold without jumps too), but stated by the
        # model only where a configuration takes jumps (the pipeline's compiled replay mirrors the others).
        if d.should_rewind_before_reading_or_replaying != self.rewinding:
            out.append("KS-C4")
        if any(c.unacked_messages < 0 or c.unacked_messages != sum(r for _l, _e, r, _h in c.pending_acks.items())
               for c in d.consumers):
            out.append("KS-U1")
        queued = sum(n for c, n in d.queued_flows if c.connected)  # the total counts them once the executor runs
        negative = d.total_available_permits < 0 and not d.queued_flows
        if negative or d.total_available_permits + queued != sum(self.permits.values()):
            out.append("KS-P1")  # against the harness's own count of every consumer's permits
        if any(p[1] <= self.mark_delete for p, _ in d.replay_queue.items()):
            out.append("KS-J1")
        if not self._each_once():
            out.append("KS-J2")
        return out

    def _each_once(self) -> bool:
        """KS-J2 on the reference: every entry the harness's record leaves unacknowledged is in exactly one of
        the reference's places (a consumer's pending acks, the replay queue, a Normal read the harness holds in
        flight, or at or past the read position). Not judged with nobody connected or a rewind waiting."""
        d = self.d
        if not d.consumers or d.should_rewind_before_reading_or_replaying:
            return True
        places: dict[int, int] = {}
        in_flight = self.in_flight.get(NORMAL)
        for entry_id in [e for c in d.consumers for _l, e, _r, _h in c.pending_acks.items()] + [
            p[1] for p, _ in d.replay_queue.items()
        ] + ([p[1] for p in in_flight.positions] if in_flight is not None else []):
            places[entry_id] = places.get(entry_id, 0) + 1
        read_from = d.read_position[1]
        return all(places.get(e, 0) + (e >= read_from) == 1
                   for e in range(self.mark_delete + 1, len(self.hashes)) if e not in self.acked)

    def _canonical_ring(self) -> list[tuple[int, int, tuple[int, ...]]]:
        """KS-I8 from the recorded joins: per point, the earliest claimer selected, the rest colliding."""
        ids = [cid for cid, _, _ in self.joins]
        join = tuple((name, index) for _, name, index in self.joins)
        return [(point, ids[slots[0]], tuple(ids[s] for s in slots[1:]))
                for point, slots in _sorted_claims(join, self.points, self.range_max)]

    def _ring_canonical(self) -> bool:
        """KS-I8: the reference's ring and name indexes are those of the recorded joins."""
        selector = self.d.selector
        ring = [(point, selected.consumer_id, tuple(c.consumer_id for c in colliding))
                for point, selected, colliding in selector.ring_entries()]
        indexes = selector.consumer_name_index_tracker.get_tracked_index
        return ring == self._canonical_ring() and all(
            indexes(self.consumers[cid]) == index for cid, _, index in self.joins
        )

    def _pending_expected(self, cid: int) -> set[Position]:
        """The pending acks the harness's record gives consumer `cid`: what it holds and the cursor has not
        acknowledged, and what it was delivered after a jump passed it."""
        return {p for p in self.held[cid] if not self._done(p[1])} | self.stale[cid]

    def _tracker_consistent(self) -> bool:
        """KS-I2, both ways: the tracker holds exactly one entry (C, H, n) for each hash H that a
        connected C holds n messages of while the canonical ring gives H to another consumer (so an
        entry never outlives its drainer's messages, and a moved hash is never forgotten). The counts
        are of pending acks, which in scope are exactly what the clients hold and the cursor has not
        acknowledged, plus what a read in flight across a jump delivered after the jump (`stale`; §5, client
        view): a pending-ack map that drops or invents a held message breaks the counting at its root."""
        tracker = self.d.tracker
        assert tracker is not None
        if any({(ledger, entry) for ledger, entry, _r, _h in c.pending_acks.items()} != self._pending_expected(cid)
               for cid, c in self.consumers.items()):
            return False
        ring = self._canonical_ring()
        points = [point for point, _, _ in ring]
        expected: dict[int, tuple[int, int]] = {}
        for cid in self.held:
            counts: dict[int, int] = {}
            for position in self._pending_expected(cid):
                counts[self.hashes[position[1]]] = counts.get(self.hashes[position[1]], 0) + 1
            for h, count in counts.items():
                at = bisect.bisect_left(points, h)
                if ring[at if at < len(ring) else 0][1] != cid and expected.setdefault(h, (cid, count)) != (cid, count):
                    return False
        actual = {h: (e.consumer.consumer_id, e.ref_count) for h, e in tracker.draining_hashes.items()}
        return actual == expected and all(
            self.consumers.get(e.consumer.consumer_id) is e.consumer for e in tracker.draining_hashes.values()
        )


# The gate leaves out the two spec gaps described in models/keyshared/state.py, where pip379 breaks KS-I4
# as the spec words it: no disconnect while a Replay read is in flight (A), and a message released by
# a negative ack is exempt from per-key order (B). The corpus keeps a counterexample for each.
GATE: dict[str, Param] = {"disconnect_during_replay_read": False, "exempt_nacked_p": True}
# Two names whose second joiner (a second "consumer1") takes key "4" from the first, keys "4" and "5"
# (consumer1's with {consumer1, consumer2}), one permit each: the smallest rings where every variant's
# bug and #21199 show. Each configuration is explored completely for pip379 in seconds.
TWO: dict[str, Param] = {
    **GATE,
    "names": ("consumer1", "consumer2"),
    "keys": ("4", "5"),
    "max_consumers": 2,
    "max_messages": 2,
    "add_permits": (1,),
    "flow": (1,),
    "max_permits": 1,
}
# Issue 22's corners, small enough to replay every transition within the conformance budget, and
# first, so that a planted bug there is found in seconds.
# "collide": a ring of 7 hashes and 2 points, where consumer1's point 3 collides with consumer2's and a
# second consumer1's point 1 with consumer2's; key "2" hashes to the shared point 3 and "0" to 7 (which
# wraps around to point 1). A leaver's shared point is promoted to the consumer colliding there.
# "ackjump": three messages and three permits, so that a drainer holds two messages of the moved key
# "4" while an earlier one is acked and mark-delete passes entries of the draining hash.
# "unblock": the moved key alone and reads with an ack inside the pass, so that the drainer's ack
# releases the hash while the replay filter or the dispatch pass is still looking at later entries.
_CORNER_ACTIONS = ("add", "publish", "ack", "read")
CORNER_CONFIGS: dict[str, Mapping[str, Param]] = {
    "collide": {**TWO, "range_max": 7, "points": 2, "keys": ("2", "0"), "actions": (*_CORNER_ACTIONS, "remove")},
    "ackjump": {**TWO, "max_messages": 3, "add_permits": (3,), "max_permits": 3, "actions": _CORNER_ACTIONS},
    "unblock": {**TWO, "keys": ("4",), "max_messages": 3, "add_permits": (1, 2), "max_permits": 2,
                "actions": (*_CORNER_ACTIONS, "interleaved_read")},
}
# The cursor jumps (issue 33), with the moved key "4" so that a draining hash is present when they run:
# "jump" skips, clears the backlog and expires over three messages (a drainer holding two of the moved
# key, individual acks for skip to step over); "reset" resets the cursor forward and back over two, with
# consumers leaving and joining again. Neither takes a read in flight across a jump; "jump-read" does (issue
# 45): one name and the moved key "4", two messages, a read begun before a skip, clear-backlog or expiry and
# completed after it, and `fire`, so that a read the jump scheduled can be spent before the drainer leaves.
# Upstream still dispatches what the jump passed, and the stale pending ack that leaves no read scheduled once
# its drainer leaves (KS-I5a, 9 steps; docs/findings/keyshared-jump-during-read.md). "jump-read-fix" is the same
# with the finding's fix, a completion that drops what the cursor acknowledged meanwhile: nothing breaks.
_JUMP_READ: dict[str, Param] = {
    **TWO, "names": ("consumer1",), "keys": ("4",), "max_messages": 2,
    "actions": ("add", "remove", "publish", "read", "fire", "begin_read", "skip"),
}
JUMP_CONFIGS: dict[str, Mapping[str, Param]] = {
    "jump": {**TWO, "max_messages": 3, "actions": (*_CORNER_ACTIONS, "skip", "clear_backlog", "expire")},
    "reset": {**TWO, "actions": (*_CORNER_ACTIONS, "remove", "reset")},
    "jump-read": _JUMP_READ,
    "jump-read-fix": {**_JUMP_READ, "filter_acked_on_complete": True},
}
JUMP_READ_FINDING = "docs/findings/keyshared-jump-during-read.md"
# Issue 45's flow order: `async_flow` splits a flow as upstream does (the consumer's permits now, the dispatcher's
# total when the executor runs the queued internalConsumerFlow, `flow_update`). Upstream's order leaves the total
# short of a leaver's queued flow (KS-P1, 4 steps: docs/findings/keyshared-permits-queued-flow.md), and the drift
# grows with every such departure, so "permits" has no finite state graph: nightly, explored with --max-states.
# "permits-fix" takes the finding's fix (a leaver takes off only what the total counted): 238 states, nothing
# broken, in the gate.
_PERMITS: dict[str, Param] = {
    **TWO, "names": ("consumer1",), "keys": ("4",), "async_flow": True, "max_messages": 1, "add_permits": (0, 1),
    "actions": ("add", "remove", "publish", "flow", "read"),
}
PERMITS_NIGHTLY: dict[str, Mapping[str, Param]] = {"permits": _PERMITS}
PERMITS_CONFIGS: dict[str, Mapping[str, Param]] = {"permits-fix": {**_PERMITS, "remove_counts_queued": True}}
PERMITS_FINDING = "docs/findings/keyshared-permits-queued-flow.md"
EXPLORE_CONFIGS: dict[str, Mapping[str, Param]] = {
    **CORNER_CONFIGS,
    **JUMP_CONFIGS,
    **PERMITS_CONFIGS,
    "small": {**TWO, "actions": ("add", "remove", "publish", "flow", "ack", "redeliver", "redeliver_all", "read",
                                  "settle")},
    "gap": {**TWO, "actions": ("add", "remove", "publish", "flow", "ack", "read", "fire", "run", "begin_read",
                                "settle")},
    "interleave": {**TWO, "max_messages": 3, "add_permits": (1, 2), "max_permits": 2, "interleave": 2,
                   "actions": ("add", "remove", "publish", "ack", "read", "interleaved_read")},
}
_HOT_ACTIONS = ("add", "remove", "publish", "flow", "ack", "redeliver", "read")
_HOT: dict[str, Param] = {**GATE, "names": ("consumer1", "consumer2"), "keys": ("4",), "max_messages": 5,
                          "add_permits": (2,), "max_permits": 2, "actions": _HOT_ACTIONS}
HYPOTHESIS_CONFIGS: dict[str, Mapping[str, Param]] = {
    # One hot key and few step kinds, so the historical variants' bugs are a few steps away.
    "hot": _HOT,
    # Every step kind but the cursor jumps, three consumers and the spec's keys (§6: "4" moves to consumer3, "0" is
    # consumer2's, "5" consumer1's), six messages. Settling freezes the consumers for the rest of a run
    # and pins the stubborn one's messages, so the safety invariants are also checked there.
    "spec": {**GATE, "actions": tuple(a for a in ACTION_NAMES if a not in QUEUED and a not in JUMPS)},
    # The hot key with settling: a stubborn consumer pinning a hash that drains towards a second
    # "consumer1" (the spec configuration's three names rarely get there).
    "settled": {**_HOT, "actions": (*_HOT_ACTIONS, "settle")},
}
