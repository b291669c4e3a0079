"""The tracker scope of keyshared bound to the reference: `PendingAcksMap` + `DrainingHashesTracker`.

`KeySharedTrackerReference` plays the PIP-379 dispatcher around the reference's own classes: it
installs on each `Consumer` the add handler (`handle_adding_pending_ack`) and the remove handler
(`reduce_ref_count`, batches forwarded) as `KeySharedDispatcher` does, keeps an owner per hash where
the dispatcher has a selector, and runs `register_draining_hashes` for a moved hash. It projects the
reference onto exactly the variables of `models.keyshared.tracker` and judges it (`violations`)
against the harness's own record of what each consumer holds, kept from the calls' results and the
mark-delete order (ledger, entry), never against the maps' own opinion: KS-I1 on that record, KS-I2 by
comparing the tracker's entries with it both ways, KS-I3 on the tracker's batch flag.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Action, Json, Observation, Param
from models.keyshared.tracker import (
    ACROSS_LEDGERS,
    HASH_NOT_SET,
    ILLEGAL_ARGUMENT,
    KEPT_MISMATCH,
    OVERWROTE,
    PENDING_ACK_NOT_FOUND,
    STICKY_KEY_HASH_NOT_SET,
    KeySharedTrackerModel,
)
from properties.engines.lockstep import BaseImplementation
from reference_impl.keyshared import Consumer, DrainingHashesTracker, DrainingRemoveHandler


def _int(action: Action, name: str) -> int:
    value = action[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{action}: parameter {name} must be an int")
    return value


class _AddHandler:
    """The dispatcher's last-moment check (§4.5): a hash another consumer drains goes to replay."""

    def __init__(self, owner: KeySharedTrackerReference) -> None:
        self._owner = owner

    def handle_adding(self, consumer: Consumer, ledger_id: int, entry_id: int, sticky_key_hash: int) -> bool:
        if sticky_key_hash == 0:
            raise ValueError("Sticky key hash is not set. It is required.")
        entry = self._owner.tracker.get_entry(sticky_key_hash)
        if entry is not None and entry.consumer is not consumer:
            self._owner.replay[(ledger_id, entry_id)] = sticky_key_hash
            return False
        return True


class KeySharedTrackerReference(BaseImplementation):
    """The reference's map and tracker classes, driven by the tracker model's actions."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        model = KeySharedTrackerModel(config, variant)  # parses and completes the configuration
        initial = model.initial()
        self.ledgers = model.ledgers
        self.unblock_calls: list[int] = []
        self.tracker = DrainingHashesTracker("brokerspec-tracker", self.unblock_calls.append)
        self.consumers = {cid: Consumer(f"consumer{cid}", cid) for cid in model.ids}
        for consumer in self.consumers.values():
            consumer.set_pending_acks_add_handler(_AddHandler(self))
            consumer.set_pending_acks_remove_handler(DrainingRemoveHandler(self.tracker))
        self.owners = {h: self.consumers[cid] for h, cid in zip(model.hashes, initial.owners, strict=True)}
        self.replay: dict[tuple[int, int], int] = {}
        # The harness's record: what each consumer holds ((ledger, entry) -> (remaining, hash)), and who left.
        self.held: dict[int, dict[tuple[int, int], tuple[int, int]]] = {cid: {} for cid in model.ids}
        self.gone: set[int] = set()
        self.events: set[str] = set()

    def _move_hash(self, sticky_hash: int, target: Consumer) -> None:
        """register_draining_hashes for one hash that moves to `target`: REMOVE work first, then ADD."""
        before, self.owners[sticky_hash] = self.owners[sticky_hash], target
        tracker = self.tracker

        def lost(_ledger_id: int, _entry_id: int, _remaining: int, held: int) -> None:
            if held == sticky_hash:
                tracker.add_entry(before, sticky_hash)

        def regained(_ledger_id: int, _entry_id: int, _remaining: int, held: int) -> None:
            entry = tracker.get_entry(sticky_hash)
            if held == sticky_hash and entry is not None and entry.consumer is target:
                tracker.reduce_ref_count(target, sticky_hash, False)

        before.pending_acks.for_each(lost)
        target.pending_acks.for_each(regained)

    def apply(self, action: Action) -> Observation:
        seen = len(self.unblock_calls)
        self.events = set()
        name = action.name
        observation: dict[str, Json] = {}
        visited: list[Json] = []

        def visit(ledger_id: int, entry_id: int, _remaining: int, sticky_hash: int) -> None:
            visited.append([ledger_id, entry_id, sticky_hash])

        cid = _int(action, "consumer") if action.get("consumer") is not None else 0
        consumer = self.consumers.get(cid)
        pending = consumer.pending_acks if consumer is not None else None
        held = self.held.get(cid, {})
        position = (self.ledgers[_int(action, "position")], _int(action, "position")) \
            if action.get("position") is not None else (0, 0)
        if name == "add_pending_ack_if_allowed":
            assert pending is not None
            batch_size, sticky_hash = _int(action, "batch_size"), _int(action, "hash")
            try:
                added = pending.add_pending_ack_if_allowed(*position, batch_size, sticky_hash)
            except ValueError:
                self.events.add(HASH_NOT_SET)
                observation["error"] = ILLEGAL_ARGUMENT
            else:
                if added:
                    if position in held:
                        self.events.add(OVERWROTE)
                    held[position] = (batch_size, sticky_hash)
                    self.replay.pop(position, None)
                observation["added"] = added
        elif name == "remove":
            assert pending is not None
            if action.get("batch_size") is None:
                removed = pending.remove(*position)
            else:
                removed = pending.remove(*position, _int(action, "batch_size"), _int(action, "hash"))
                if not removed:
                    self.events.add(KEPT_MISMATCH)
            if removed:
                held.pop(position, None)
            observation["removed"] = removed
        elif name == "remove_and_get_remaining_unacked":
            assert pending is not None
            remaining = pending.remove_and_get_remaining_unacked(*position)
            if remaining != PENDING_ACK_NOT_FOUND:
                held.pop(position, None)
            observation["removed"] = remaining
        elif name == "remove_all_up_to":
            assert pending is not None
            if len({ledger for ledger, _ in held}) > 1:
                self.events.add(ACROSS_LEDGERS)
            pending.remove_all_up_to(*position, visit)
            for acked in [p for p in held if p <= position]:  # the cursor's order: ledger, then entry
                del held[acked]
            observation["removed"] = visited
        elif name == "for_each_and_clear":
            assert pending is not None
            pending.for_each_and_clear(visit)
            held.clear()
            observation["removed"] = visited
        elif name == "for_each_and_close":
            assert consumer is not None and pending is not None
            pending.for_each_and_close(visit)
            held.clear()
            self.gone.add(cid)
            self.tracker.consumer_removed(consumer)  # as the dispatcher's remove_consumer does next
            observation["removed"] = visited
        elif name == "should_block_sticky_key_hash":
            assert consumer is not None
            observation["blocked"] = self.tracker.should_block_sticky_key_hash(consumer, _int(action, "hash"))
        elif name == "move_hash":
            assert consumer is not None
            self._move_hash(_int(action, "hash"), consumer)
        elif name == "start_batch":
            self.tracker.start_batch()
        elif name == "end_batch":
            self.tracker.end_batch()
        else:
            raise ValueError(f"unknown keyshared tracker action {name!r}")
        observation["unblocked"] = list(self.unblock_calls[seen:])
        return observation

    def vars(self) -> dict[str, Json]:
        tracker = self.tracker
        return {
            "consumers": [[cid, c.name, c.pending_acks.closed] for cid, c in self.consumers.items()],
            "owners": [[h, c.consumer_id] for h, c in sorted(self.owners.items())],
            "pending": [[cid, [[ledger, entry, remaining, h] for ledger, entry, remaining, h in c.pending_acks.items()]]
                        for cid, c in self.consumers.items()],
            "draining": [
                [h, e.consumer.consumer_id, e.ref_count, e.blocked_count > 0]
                for h, e in sorted(tracker.draining_hashes.items())
            ],
            "batch_level": tracker.batch_level,
            "unblocked_while_batching": tracker.unblocked_while_batching,
            "replay": [[ledger, entry, h] for (ledger, entry), h in sorted(self.replay.items())],
            "events": list[Json](sorted(self.events)),
        }

    def violations(self) -> list[str]:
        """KS-I1..I3 judged against the harness's record, with the owner map as the selector, and KS-C5 (a
        pending-acks map is closed exactly when the harness closed it)."""
        out: list[str] = []
        holders: dict[int, int] = {}
        for cid, held in self.held.items():
            for _, h in held.values():
                if h != STICKY_KEY_HASH_NOT_SET and holders.setdefault(h, cid) != cid and "KS-I1" not in out:
                    out.append("KS-I1")
        if not self._tracker_consistent():
            out.append("KS-I2")
        if self.tracker.unblocked_while_batching and self.tracker.batch_level == 0:
            out.append("KS-I3")
        if any(c.pending_acks.closed != (cid in self.gone) for cid, c in self.consumers.items()):
            out.append("KS-C5")  # a map is closed exactly when the harness closed it (for_each_and_close)
        return out

    def _tracker_consistent(self) -> bool:
        """Both ways: exactly one entry (C, H, n) per connected C holding n >= 1 acks of a hash H it does not own."""
        expected: dict[int, tuple[Consumer, int]] = {}
        for cid, held in self.held.items():
            consumer = self.consumers[cid]
            for _, h in held.values():
                if h != STICKY_KEY_HASH_NOT_SET and cid not in self.gone and self.owners[h] is not consumer:
                    expected[h] = (consumer, expected.get(h, (consumer, 0))[1] + 1)
        actual = {h: (e.consumer, e.ref_count) for h, e in self.tracker.draining_hashes.items()}
        return actual.keys() == expected.keys() and all(
            actual[h][0] is expected[h][0] and actual[h][1] == expected[h][1] for h in actual
        )
