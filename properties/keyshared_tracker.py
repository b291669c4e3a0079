"""The tracker scope of keyshared bound to the reference: `PendingAcksMap` + `DrainingHashesTracker`.

`KeySharedTrackerReference` plays the PIP-379 dispatcher around the reference's own classes: it
installs on each `Consumer` the add handler (`handle_adding_pending_ack`) and the remove handler
(`reduce_ref_count`, batches forwarded) as `KeySharedDispatcher` does, keeps an owner per hash where
the dispatcher has a selector, and runs `register_draining_hashes` for a moved hash. It projects the
reference onto exactly the variables of `models.keyshared_tracker` and checks KS-I1..I3 on the
reference's internals (`violations`).
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Action, Json, Observation, Param
from models.keyshared_tracker import KeySharedTrackerModel
from reference_impl.keyshared import LEDGER_ID, Consumer, DrainingHashesTracker, DrainingRemoveHandler


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
            self._owner.replay[entry_id] = sticky_key_hash
            return False
        return True


class KeySharedTrackerReference:
    """The reference's map and tracker classes, driven by the tracker model's actions."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        model = KeySharedTrackerModel(config, variant)  # parses and completes the configuration
        initial = model.initial()
        self.unblock_calls: list[int] = []
        self.tracker = DrainingHashesTracker("brokerspec-tracker", self.unblock_calls.append)
        self.consumers = {cid: Consumer(f"consumer{cid}", cid) for cid in model.ids}
        for consumer in self.consumers.values():
            consumer.set_pending_acks_add_handler(_AddHandler(self))
            consumer.set_pending_acks_remove_handler(DrainingRemoveHandler(self.tracker))
        self.owners = {h: self.consumers[cid] for h, cid in zip(model.hashes, initial.owners, strict=True)}
        self.replay: dict[int, int] = {}

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
        name = action.name
        observation: dict[str, Json] = {}
        visited: list[Json] = []

        def visit(_ledger_id: int, entry_id: int, _remaining: int, sticky_hash: int) -> None:
            visited.append([entry_id, sticky_hash])

        consumer = self.consumers[_int(action, "consumer")] if action.get("consumer") is not None else None
        pending = consumer.pending_acks if consumer is not None else None
        if name == "add_pending_ack_if_allowed":
            assert pending is not None
            position = _int(action, "position")
            added = pending.add_pending_ack_if_allowed(LEDGER_ID, position, 1, _int(action, "hash"))
            if added:
                self.replay.pop(position, None)
            observation["added"] = added
        elif name == "remove":
            assert pending is not None
            observation["removed"] = pending.remove(LEDGER_ID, _int(action, "position"))
        elif name == "remove_all_up_to":
            assert pending is not None
            pending.remove_all_up_to(LEDGER_ID, _int(action, "position"), visit)
            observation["removed"] = visited
        elif name == "for_each_and_clear":
            assert pending is not None
            pending.for_each_and_clear(visit)
            observation["removed"] = visited
        elif name == "for_each_and_close":
            assert consumer is not None and pending is not None
            pending.for_each_and_close(visit)
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
            "pending": [
                [cid, [[e, h] for _l, e, _r, h in c.pending_acks.items()]] for cid, c in self.consumers.items()
            ],
            "draining": [
                [h, e.consumer.consumer_id, e.ref_count, e.blocked_count > 0]
                for h, e in sorted(tracker.draining_hashes.items())
            ],
            "batch_level": tracker.batch_level,
            "unblocked_while_batching": tracker.unblocked_while_batching,
            "replay": [[p, h] for p, h in sorted(self.replay.items())],
        }

    def violations(self) -> list[str]:
        """KS-I1..I3 on the reference's own maps and tracker, with the owner map as the selector."""
        out: list[str] = []
        holders: dict[int, Consumer] = {}
        for consumer in self.consumers.values():
            for *_, h in consumer.pending_acks.items():
                if holders.setdefault(h, consumer) is not consumer and "KS-I1" not in out:
                    out.append("KS-I1")
        if not self._tracker_consistent():
            out.append("KS-I2")
        if self.tracker.unblocked_while_batching and self.tracker.batch_level == 0:
            out.append("KS-I3")
        return out

    def _tracker_consistent(self) -> bool:
        entries = self.tracker.draining_hashes
        if all(c.pending_acks.closed for c in self.consumers.values()):
            return not entries
        for h, entry in entries.items():
            count = sum(1 for *_, held in entry.consumer.pending_acks.items() if held == h)
            if h == 0 or entry.consumer.pending_acks.closed or self.owners.get(h) is entry.consumer:
                return False
            if not entry.ref_count == count >= 1:
                return False
        return True
