"""The lock scope bound to the reference: upstream-granularity code stepped in lockstep with the lock model.

`KeySharedLocksReference` runs `reference_impl.keyshared.lock_level` on a preemptive `World`: the dispatcher, the
ackers (one per consumer holding pending acks) and the membership thread of the configuration's scripts, each
operation a task, every lock acquisition and atomic access a scheduling point.
A model action ``dispatcher(step=L)`` runs the dispatcher thread's next step, which must be
the operation labelled L (a thread about to do something else, or blocked, is a divergence named as such).

It judges LK-1..LK-6 from its own ledger, never from the reference's opinion: what it saw each step do to the
tracker's map and to the entry objects it has seen (which entry a step decremented, removed, counted a block
on), which thread held the tracker's lock when a step started, the unblocking calls its handler received,
what the client acked (recorded when each ack is sent, before the broker processes it), the dispatch verdicts
returned to it, and the exceptions that escaped the threads. Beyond the model's LK-6 (a dispatch blocked by an
entry already removed without a call), the ledger also owes a call for every removal, by a consumer not
leaving, of an entry that had blocked a dispatch: an operation that returns still owing it loses the wake-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial

from models.core import Action, Json, Observation, Param
from models.keyshared.lock_state import DONE, HASH
from models.keyshared.locks import KeySharedLocksModel
from properties.engines.lockstep import BaseImplementation, refusal
from reference_impl.concurrent.executors import World
from reference_impl.keyshared.lock_level import DrainingHashEntry, NullPointerException, StickyKeyDispatcher

UNBLOCKS, SILENT, READ_PENDING, EXEMPT = "unblocks", "silent", "read pending", "exempt"
"""What a removal decided, as far as a blocked dispatch cares (as `models.keyshared.lock_state` marks its entries)."""


class KeySharedLocksReference(BaseImplementation):
    """The upstream-granularity tracker of one order, its callers on simulated threads, and the ledger."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        model = KeySharedLocksModel(config, variant)  # parses and completes the configuration
        self.order, self.threads, self.monitored = model.order, tuple(model.threads), model.monitored
        self.layout = scope = model.layout
        unchecked = model.config["unchecked"]
        self.unchecked = {str(name) for name in unchecked} if isinstance(unchecked, tuple) else set()
        self.d = StickyKeyDispatcher(model.order, dict(zip(scope.hashes, scope.prefer, strict=True)), scope.present,
                                     synchronized=model.monitored)
        for c, acks in enumerate(scope.acks):
            for entry_id in acks:
                self.d.consumers[c + 1].pending_acks.put(entry_id, scope.hash_of[entry_id])
        self.world = World(preemptive=True)
        self.acked: set[int] = set()
        self.leaving: set[int] = set()
        self.blocks: list[bool] = []
        self.finished: list[str] = []  # the thread of each operation that returned, in order
        self.owed: dict[str, int] = {}  # thread -> the hash whose unblocking call its operation still owes
        self.batch_owes = False  # an open handler batch owes an unblocking call (-1) when it ends
        for name, script in zip(self.threads, model.scripts, strict=True):
            thread = self.world.thread(name)
            for op in script:
                run = self._acker_op if name.startswith("acker") else self._dispatcher_op
                thread.execute(partial(run, op, name), label=op)
        self.entries: list[DrainingHashEntry] = []  # every entry object seen, in the order first seen
        self.hash_of: dict[int, int] = {}  # id(entry) -> the hash it drains
        self.decremented: dict[str, DrainingHashEntry] = {}
        self.removed_by: dict[str, DrainingHashEntry] = {}
        self.removal: dict[int, str] = {}  # id(entry) -> what its removal decided
        self.broken: set[str] = set()
        self.disagreement = ""
        self.world.prime()
        self._see()

    # -- the threads' operations (tasks) ------------------------------------------------------------------------
    def _dispatcher_op(self, op: str, thread: str) -> None:
        word, _, arg = op.partition(" ")
        if word == "join":
            self.leaving.discard(int(arg))  # a new consumer object
            self.d.join(int(arg))
        elif word == "leave":
            self.leaving.add(int(arg))  # its pending acks go to replay: their removals owe nothing
            self.d.remove_consumer(int(arg))
        else:
            self.blocks.append(self.d.dispatch(int(arg or HASH)))
        self.finished.append(thread)

    def _acker_op(self, op: str, thread: str) -> None:
        word, _, arg = op.partition(" ")
        n, consumer = int(arg), 2 if thread == "acker2" else 1
        if word == "ack":
            self.acked.add(n)  # the client sent the ack: from now on it does not hold the message
            self.d.ack(consumer, n)
        else:
            self.acked.update(e for e in self.layout.acks[consumer - 1] if e <= n)
            self.d.ack_up_to(consumer, n)
        self.finished.append(thread)

    # -- Implementation -----------------------------------------------------------------------------------------
    def apply(self, action: Action) -> Observation:
        name, step = action.name, str(action["step"])
        refused = refusal(name, step, self._label(name), self.world.get_thread(name).enabled)
        if refused:
            self.disagreement = refused
            return None
        before = self._snapshot()
        holder = self._tracker_holder()
        uncaught, calls, finished = len(self.world.uncaught), len(self.d.unblocked), len(self.finished)
        self.world.step(("run", name))
        self._see()
        self._judge(name, step, before, holder)
        self._settle(name, len(self.d.unblocked) > calls, name in self.finished[finished:])
        for thread_name, _task, error in self.world.uncaught[uncaught:]:
            if not isinstance(error, NullPointerException):
                raise RuntimeError(f"{thread_name} raised {type(error).__name__}: {error}") from error
            self.broken.add("LK-5")
        return None

    def vars(self) -> dict[str, Json]:
        d, tracker = self.d, self.d.tracker
        consumers = range(1, self.layout.consumers + 1)
        maps = {c: d.consumers[c].pending_acks for c in consumers}
        owner: dict[str, Json] = ({"owner": d.owners[HASH]} if len(d.owners) == 1 else
                                  {"owners": [[h, d.owners[h]] for h in sorted(d.owners)]})
        return {
            **owner,
            "pending": [[c, _json(sorted(maps[c].pending_acks))] for c in consumers],
            "closed": [maps[c].closed for c in consumers],
            "draining": [[h, e.consumer.consumer_id, e.ref_count.value, e.blocked_count.value]
                         for h, e in sorted(tracker.draining_hashes.items())],
            "batch_level": tracker.batch_level,
            "unblocked_while_batching": tracker.unblocked_while_batching,
            "stats": [[cid, _json(sorted(stats.draining_hashes))]
                      for cid, stats in sorted(tracker.consumer_draining_hashes_stats_map.items())],
            "locks": {"tracker": _json(self._tracker_holders()),
                      **{f"map[{c}]": _json(maps[c].lock.holders()) for c in consumers},
                      **({"dispatcher": _json([] if self.d.monitor.holder is None else [self.d.monitor.holder])}
                         if self.monitored else {})},
            "unblocked": list(d.unblocked),
            "replay": list(d.replay),
            "blocks": list(self.blocks),
            "threads": [[name, self._label(name)] for name in self.threads],
            "broken": _json(sorted(self.broken)),
        }

    def violations(self) -> list[str]:
        """What the ledger judged broken, less what the configuration leaves unchecked (as the model does)."""
        return sorted(self.broken - self.unchecked) + (["divergence"] if self.disagreement else [])

    def close(self) -> None:
        self.world.dispose()

    # -- the ledger ---------------------------------------------------------------------------------------------
    def _label(self, name: str) -> str:
        state = next(t for t in self.world.thread_states() if t.name == name)
        return state.suspended_at or DONE

    def _tracker_holders(self) -> list[str]:
        tracker = self.d.tracker
        if self.order == "pre23854":
            return [] if tracker.monitor.holder is None else [tracker.monitor.holder]
        return list(tracker.lock.holders())

    def _tracker_holder(self) -> str | None:
        tracker = self.d.tracker
        return tracker.monitor.holder if self.order == "pre23854" else tracker.lock.writer

    def _see(self) -> None:
        for h, entry in sorted(self.d.tracker.draining_hashes.items()):
            if all(e is not entry for e in self.entries):
                self.entries.append(entry)
                self.hash_of[id(entry)] = h

    def _snapshot(self) -> tuple[dict[int, DrainingHashEntry], list[tuple[int, int]]]:
        counts = [(e.ref_count.value, e.blocked_count.value) for e in self.entries]
        return dict(self.d.tracker.draining_hashes), counts

    def _changed(self, before: list[tuple[int, int]], field: int, delta: int) -> DrainingHashEntry | None:
        """The entry whose ref count (field 0) or blocked count (field 1) moved by `delta` during the step."""
        for entry, counts in zip(self.entries, before, strict=False):
            now = (entry.ref_count.value, entry.blocked_count.value)
            if now[field] - counts[field] == delta:
                return entry
        return None

    def _judge(self, name: str, step: str, before: tuple[dict[int, DrainingHashEntry], list[tuple[int, int]]],
               holder: str | None) -> None:
        mapped_before, counts = before
        mapped = self.d.tracker.draining_hashes
        if any(e.ref_count.value < 0 for e in self.entries):
            self.broken.add("LK-1")
        if (step.endswith("stickyKeyHashUnblocked") or ": stats[" in step) and holder == name:
            self.broken.add("LK-4")
        decremented = self._changed(counts, 0, -1)
        if decremented is not None and step.startswith("reduceRefCount:"):
            self.decremented[name] = decremented
        for h, gone in sorted(mapped_before.items()):
            if mapped.get(h) is gone:
                continue
            if step.startswith("reduceRefCount:"):
                self._removed(name, h, gone)
            else:  # shouldBlockStickyKeyHash's lazy removal by the hash's own drainer
                self.removal[id(gone)] = EXEMPT
        if step == "reduceRefCount: entry.blockedCount.get":
            read = self.removed_by[name]
            self.removal[id(read)] = UNBLOCKS if counts[self._index(read)][1] > 0 else SILENT
        blocked = self._changed(counts, 1, 1)
        if (blocked is not None and step.endswith("entry.blockedCount.incrementAndGet")
                and mapped.get(self.hash_of[id(blocked)]) is not blocked and self.removal.get(id(blocked)) == SILENT):
            self.broken.add("LK-6")  # blocked by an entry gone without an unblocking call

    def _removed(self, name: str, h: int, gone: DrainingHashEntry) -> None:
        """reduceRefCount removed `gone`, hash `h`'s entry, in this step: LK-2 and LK-3, and whether a blocking read
        follows."""
        if self.decremented.get(name) is not gone:
            self.broken.add("LK-3")
        drainer = gone.consumer
        current = self.d.consumers.get(drainer.consumer_id) is drainer
        holds = current and drainer.consumer_id not in self.leaving and any(
            e not in self.acked and held == h for e, (_, held) in drainer.pending_acks.pending_acks.items())
        if gone.ref_count.value > 0 or (self.d.owners[h] != drainer.consumer_id and holds):
            self.broken.add("LK-2")
        self.removed_by[name] = gone
        if gone.blocked_count.value > 0 and drainer.consumer_id not in self.leaving:
            self.owed[name] = h  # a dispatch waits on it: an unblocking call must follow (or end its batch)
        if self.order == "pre23854":  # the blocking read ran inside the same step, under the monitor
            self.removal[id(gone)] = UNBLOCKS if gone.blocked_count.value > 0 else SILENT
        elif self._label(name) == "reduceRefCount: entry.blockedCount.get":
            self.removal[id(gone)] = READ_PENDING
        else:  # closing: no wake-up is owed
            self.removal[id(gone)] = EXEMPT

    def _settle(self, name: str, called: bool, returned: bool) -> None:
        """The unblocking calls owed (LK-6 beyond the model's race): any call wakes the dispatcher, so it pays every
        debt; a removal that defers its call to an open handler batch (it set unblockedWhileBatching) hands the
        debt to the batch, and the batch to the thread that ends it (its endBatch calls with -1); an operation
        that returns still owing a call has lost the wake-up."""
        tracker = self.d.tracker
        if called:
            self.owed.clear()
            self.batch_owes = False
        if name in self.owed and tracker.unblocked_while_batching and tracker.batch_level > 0:
            del self.owed[name]
            self.batch_owes = True
        if self.batch_owes and tracker.batch_level == 0:
            self.batch_owes = False
            self.owed[name] = -1
        if returned and self.owed.pop(name, None) is not None:
            self.broken.add("LK-6")

    def _index(self, entry: DrainingHashEntry) -> int:
        return next(i for i, e in enumerate(self.entries) if e is entry)


def _json(values: Iterable[Json]) -> list[Json]:
    return [*values]

