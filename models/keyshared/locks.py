"""Key_Shared's DrainingHashesTracker at upstream's lock granularity: two to four threads, every interleaving.

`models/keyshared/tracker.py` makes each tracker method atomic. Upstream does not: a method is a few steps
separated by the tracker's read/write lock, the PendingAcksMap locks and the entry's atomics, and the
steps of the dispatcher thread and of a connection thread interleave. This model follows upstream's source
(apache/pulsar 0063cdd8 `DrainingHashesTracker.java`, 01df066a `PendingAcksMap.java`, 2b258c8c
`PersistentStickyKeyDispatcherMultipleConsumers.java`; `reference_impl/keyshared/lock_level.py` cites the
lines) and splits it where the deterministic scheduler of `reference_impl.concurrent` does: before every
lock acquisition and every atomic access (a release is no point: see `reference_impl/concurrent/executors.py`).

Each thread runs a script of operations, each compiled (`program`) into instructions. An instruction with a
label is a scheduling point: a step runs the thread's next labelled instruction and then every unlabelled
one after it, up to its next label (across operations), so the label a thread shows between steps is the
Java operation it is about to perform (``"reduceRefCount: tracker.writeLock.lock"``), exactly the label the
reference's thread shows. By default consumer 1 starts with `pending` pending acks of one hash (`HASH`) and owns
it, and consumer 2 joins and leaves; a wider configuration (`hashes`, `present`, `pending2`, `acker2`) has two
hashes, each given to its most preferred connected consumer (`Layout.owner`: the consistent-hash ring reduced
to a preference per hash), consumers 1 and 2 each owning one and holding pending acks of it, and a third
consumer that joins and leaves. Below, for the default scope:

- The **dispatcher** thread (under the dispatcher's monitor, never contended here) runs ``join 2``
  (consumer 2 joins and takes the hash: the REMOVE part of ``registerDrainingHashes`` walks consumer 1's map
  with ``forEach`` under its read lock, an ``addEntry`` per pending ack), ``leave 2`` (consumer 2 leaves and
  the hash goes back: its map is closed by ``forEachAndClose``, a handler batch, then the ADD part walks
  consumer 1's map: ``getEntry`` and, if consumer 1 drains the entry, ``reduceRefCount``), ``leave 1``
  (consumer 1 leaves: its pending acks are released with ``closing`` true inside a batch, and the hash
  goes to consumer 2) and ``block`` (the dispatch's ``shouldBlockStickyKeyHash`` for the hash's owner).
- The **acker** thread (consumer 1's connection) runs ``ack N`` (``PendingAcksMap.remove``: the write lock,
  then ``reduceRefCount`` inside it) and ``ack-up-to N`` (``removeAllUpTo``: the read lock to look, then the
  write lock and a handler batch).
- Wider: ``join C`` takes every hash that prefers C from its owner (one REMOVE part, one ``forEach``, per
  loser), ``leave C`` hands each of C's hashes to the next in line (one ADD part per heir), ``block H``
  dispatches hash H, and **acker2** acks consumer 2's pending acks as the acker does consumer 1's.

`order` selects the tracker's code: ``current``; ``locked-block`` (the fix the finding proposes:
``shouldBlockStickyKeyHash`` counts the block under the write lock, only while the entry is still mapped);
``pre23854`` (before apache/pulsar#23854: every tracker method ``synchronized``, the handler and the stats
called inside the monitor); ``unserialized`` (the current tracker with callers that take no PendingAcksMap
lock: the map lock is the atomicity switch the current order relies on, dropped).

Invariants, raised as flags by the step that breaks them: LK-1 no ref count is ever negative; LK-2 no entry is
removed by ``reduceRefCount`` while needed (its ref count above 0, or, unless the consumer is leaving, the
consumer still holding a pending ack the client has not acked, of a hash it no longer owns); LK-3 the entry
``reduceRefCount`` removes is the one it decremented; LK-4 no unblocking handler call and no stats update while
the thread holds the tracker's lock (the #23854 rule); LK-5 no null dereference (``removed.isBlocking()`` on
null); LK-6 no dispatch is blocked by an entry that is already removed by a removal that decided not to call
the unblocking handler (a lost wake-up).
A configuration may leave invariants ``unchecked`` (Hypothesis ends a run at its first failure).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from models.core import (
    Action,
    ActionNotEnabled,
    Footprint,
    Invariant,
    Json,
    Liveness,
    Observation,
    Param,
    Threaded,
    configured,
)

ORDERS = ("current", "locked-block", "pre23854", "unserialized")
VARIANTS = ("pip379", "classic", "pip282")
THREADS = ("dispatcher", "acker")
WITH_MEMBERSHIP = (*THREADS, "membership")
"""The threads when consumers join and leave on a thread of their own (a connection's), under the monitor."""
ACTION_NAMES = (*WITH_MEMBERSHIP, "acker2")
"""Every thread a configuration may have: `acker2` is consumer 2's connection, when it holds pending acks."""
HASH = 1
"""The first sticky hash of the scope (0 means "not set" upstream); a wider configuration has hashes 1 and 2."""
SECOND = 10
"""Consumer 2's pending acks at the start are entries SECOND, SECOND + 1, ... (consumer 1's are 0, 1, ...)."""
INVARIANTS = (
    ("LK-1", "no ref count is ever negative"),
    ("LK-2", "no entry is removed by reduceRefCount while needed (its ref count above 0, or its consumer, not "
             "leaving, holding a pending ack the client has not acked of a hash it no longer owns)"),
    ("LK-3", "the entry reduceRefCount removes is the one it decremented"),
    ("LK-4", "no unblocking call or stats update under the tracker lock (#23854)"),
    ("LK-5", "no null dereference of the removed entry"),
    ("LK-6", "no dispatch is blocked by an entry already removed without an unblocking call (lost wake-up)"),
)
DONE = "done"

DEFAULT_CONFIG: dict[str, Param] = {
    "scope": "locks",
    "order": "current",
    "pending": 2,  # consumer 1's pending acks at the start: entries 0 .. pending-1 of hash 1, or one hash per entry
    "dispatcher": ("join 2", "block", "leave 2", "block"),
    "acker": ("ack 0", "ack 1"),
    "membership": (),  # joins and leaves on a thread of their own (then the dispatcher thread only dispatches)
    "unchecked": (),  # invariants left out (see the module doc)
    "hashes": ((2, 1),),  # per hash, the consumers the selector prefers for it, most preferred first
    "present": (1,),  # the consumers connected at the start
    "pending2": (),  # consumer 2's pending acks at the start, one hash per entry (entries SECOND, SECOND + 1, ...)
    "acker2": (),  # consumer 2's connection thread's script, like the acker's
}

# An entry's removal, as far as a blocked dispatch cares: not yet decided, decided to call the unblocking
# handler (now or at the batch's end), decided not to (the entry was not blocking), or exempt (removed with
# `closing` or lazily by its own drainer: nobody is owed a wake-up).
UNDECIDED, UNBLOCKS, SILENT, EXEMPT = range(4)


class Entry(NamedTuple):
    """A DrainingHashEntry; threads keep references to entries the map no longer holds."""

    consumer: int
    incarnation: int  # which consumer object (a consumer that leaves and joins again is a new object)
    ref_count: int
    blocked: int
    removal: int  # UNDECIDED, UNBLOCKS, SILENT or EXEMPT
    hash: int  # the sticky hash it drains


class Registers(NamedTuple):
    """A thread's locals: the entry it read, the one it removed, its flags and its forEach's remaining acks."""

    entry: int = -1
    removed: int = -1
    notify: bool = False
    added: bool = False
    closing: bool = False
    raised: bool = False  # an exception is unwinding through a finally block
    blocked: bool = False  # the dispatch's verdict
    items: tuple[int, ...] = ()


class Thread(NamedTuple):
    op: int  # index of the current operation in the thread's script
    pc: int  # index of its next instruction
    regs: Registers


class LocksState(NamedTuple):
    """Per hash its owner and tracker slot, per consumer its object, map and stats; the locks; the ghosts."""

    owners: tuple[int, ...]  # each hash's owner
    incarnations: tuple[int, ...]  # each consumer's object (bumped by a join)
    pending: tuple[tuple[int, ...], ...]  # each consumer's pending acks (entry ids)
    closed: tuple[bool, ...]
    slots: tuple[int, ...]  # for each hash, the entry the tracker's map holds, -1 if none
    entries: tuple[Entry, ...]
    batch_level: int
    unblocked_while_batching: bool
    stats: tuple[tuple[int, ...] | None, ...]  # each consumer's stats hashes, None if absent
    tracker_lock: int  # the thread holding the tracker's write lock (the monitor before #23854), -1 if free
    dispatcher_lock: int  # the thread holding the dispatcher's monitor (with a membership thread), -1 if free
    map_writer: tuple[int, ...]
    map_readers: tuple[tuple[int, ...], ...]
    unblocked: tuple[int, ...]  # the unblocking handler's calls, in order (the hash, or -1 after a batch)
    replay: tuple[int, ...]  # entry ids the closed consumers' maps handed to redelivery
    blocks: tuple[bool, ...]  # each finished dispatch's verdict: blocked or not
    acked: tuple[int, ...]  # ghost: the entry ids the client has acked (an ack is sent before it is processed)
    threads: tuple[Thread, ...]
    broken: tuple[str, ...]


class Instruction(NamedTuple):
    """One instruction: a labelled one is a scheduling point; `arg` is a consumer, an entry id or a value."""

    label: str | None
    code: str
    arg: int = 0
    target: int = -1  # where a conditional instruction jumps
    hash: int = 0  # the sticky hash it works on; 0: the hash of the pending ack the thread's loop is at
    consumer: int = 0  # an acker's consumer, where `arg` is an entry id
    hashes: int = 0  # the hashes (a bit each) whose tracker state it may touch: for partial-order reduction


class _Assembler:
    """Builds one operation's instructions from upstream's methods, in the order the source runs them."""

    def __init__(self, order: str, held: Mapping[int, int]) -> None:
        self.order = order
        self.held = held
        """Per consumer, the hashes (a bit each) of its pending acks at the start: all its map will ever hold."""
        self.drainers = tuple(c for c, mask in held.items() if mask)
        """The consumers that may drain a hash (those holding pending acks at the start)."""
        self.mask = sum(held.values()) | 1 << HASH
        """The hashes the instructions emitted now may touch (narrowed inside a loop over a map, or for one hash)."""
        self.code: list[Instruction] = []
        self.pre = order == "pre23854"
        self.serialized = order != "unserialized"
        self.catching: list[int] | None = None
        """Inside a handler batch: the instructions that may throw, whose `finally` ends the batch."""

    def emit(self, label: str | None, code: str, arg: int = 0, *, hash: int = 0, consumer: int = 0) -> int:
        self.code.append(Instruction(label, code, arg, -1, hash, consumer, 1 << hash if hash else self.mask))
        return len(self.code) - 1

    @contextmanager
    def touching(self, mask: int) -> Iterator[None]:
        """Instructions emitted inside touch only the hashes of `mask`."""
        outer, self.mask = self.mask, mask
        try:
            yield
        finally:
            self.mask = outer

    def jump_to_here(self, *sources: int) -> None:
        for i in sources:
            self.code[i] = self.code[i]._replace(target=len(self.code))

    def tracker_label(self, method: str, write: bool) -> str:
        if self.pre:
            return f"{method}: tracker.lock"
        return f"{method}: tracker.{'writeLock' if write else 'readLock'}.lock"

    def map_lock(self, method: str, consumer: int, write: bool) -> None:
        if self.serialized:
            self.emit(f"{method}: map[{consumer}].{'writeLock' if write else 'readLock'}.lock",
                      "map write" if write else "map read", consumer)

    def map_unlock(self, consumer: int, write: bool) -> None:
        if self.serialized:
            self.emit(None, "map write off" if write else "map read off", consumer)

    # -- DrainingHashesTracker ------------------------------------------------------------------------------
    def reduce_ref_count(self, consumer: int, h: int) -> None:
        """reduceRefCount(consumer, h, closing), `closing` in the register the caller set (`h` 0: the hash of the
        pending ack the caller's loop is at)."""
        with self.touching(1 << h if h else self.mask):
            self._reduce_ref_count(consumer, h)

    def _reduce_ref_count(self, consumer: int, h: int) -> None:
        m = "reduceRefCount"
        if self.pre:
            self.emit(self.tracker_label(m, True), "monitor", 0)
            none = self.emit(None, "get or return", hash=h)
            zero = self.emit(None, "decrement or return")
        else:
            self.emit(self.tracker_label(m, False), "read entry", hash=h)
            none = self.emit(None, "return if none")
            self.emit(f"{m}: entry.refCount.decrementAndGet", "decrement")
            zero = self.emit(None, "return unless zero")
            self.emit(self.tracker_label(m, True), "tracker write")
        throws = self.emit(None, "remove by key", consumer, hash=h)
        if self.catching is not None:
            self.catching.append(throws)
        if self.pre:
            self.emit(None, "read blocking")
        else:
            closing = self.emit(None, "skip if closing")
            self.emit(f"{m}: entry.blockedCount.get", "read blocking")
            self.jump_to_here(closing)
            self.emit(None, "tracker write off")
        self.stats(m, consumer, "clear", h)
        self.notify(m, h)
        if self.pre:
            self.emit(None, "tracker write off")
        self.jump_to_here(none, zero)
        self.emit(None, "end call")

    def add_entry(self, consumer: int, h: int) -> None:
        m = "addEntry"
        self.emit(self.tracker_label(m, True), "monitor" if self.pre else "tracker write")
        self.emit(None, "get or create", consumer, hash=h)
        if self.pre:
            self.stats(m, consumer, "add", h)
            self.emit(None, "increment")
            self.emit(None, "tracker write off")
        else:
            self.emit(None, "tracker write off")
            self.emit(f"{m}: entry.refCount.incrementAndGet", "increment")
            self.stats(m, consumer, "add", h)
        self.emit(None, "end call")

    def stats(self, method: str, consumer: int, kind: str, h: int) -> None:
        """A stats update under the consumer's stats lock, if the stats are there (`add`: if the entry is new)."""
        skip = self.emit(None, "skip unless added" if kind == "add" else "skip unless stats", consumer)
        self.emit(f"{method}: stats[{consumer}].writeLock.lock", f"stats {kind}", consumer, hash=h)
        self.jump_to_here(skip)

    def notify(self, method: str, h: int) -> None:
        """The unblocking handler's call with the hash `h` (0: the loop's), or -1 (a batch's end)."""
        skip = self.emit(None, "skip unless notify")
        self.emit(f"{method}: stickyKeyHashUnblocked", "notify", -1 if h == -1 else 0, hash=max(h, 0))
        self.jump_to_here(skip)

    def should_block(self, h: int) -> None:
        """The dispatch's shouldBlockStickyKeyHash(owner, h). Its lazy removal clears the drainer's stats: the
        drainer is the owner, one of the consumers that hold pending acks (a branch each, their locks' labels
        differ)."""
        with self.touching(1 << h):
            self._should_block(h)

    def _should_block(self, h: int) -> None:
        m = "shouldBlockStickyKeyHash"
        if self.pre:
            self.emit(self.tracker_label(m, False), "monitor", 0)
            none = self.emit(None, "get or return", hash=h)
        else:
            self.emit(self.tracker_label(m, False), "read entry", hash=h)
            none = self.emit(None, "return if none")
        other = self.emit(None, "skip unless owner drains", hash=h)
        if not self.pre:
            self.emit(self.tracker_label(m, True), "tracker write")
        self.emit(None, "remove if same", hash=h)
        if not self.pre:
            self.emit(None, "tracker write off")
        cleared = []
        for c in self.drainers:
            skip = self.emit(None, "skip unless owner is", c, hash=h) if len(self.drainers) > 1 else -1
            self.stats(m, c, "clear", h)
            cleared.append(self.emit(None, "jump"))
            if skip >= 0:
                self.jump_to_here(skip)
        self.jump_to_here(*cleared)
        done = self.emit(None, "jump")
        self.jump_to_here(other)
        if self.order == "locked-block":
            self.emit(self.tracker_label(m, True), "tracker write")
            gone = self.emit(None, "return unless still mapped", hash=h)
            self.emit(f"{m}: entry.blockedCount.incrementAndGet", "block", hash=h)
            self.emit(None, "tracker write off")
            self.jump_to_here(gone)
        else:
            self.emit(None if self.pre else f"{m}: entry.blockedCount.incrementAndGet", "block", hash=h)
        self.jump_to_here(done)
        if self.pre:
            self.emit(None, "tracker write off")
        self.jump_to_here(none)
        self.emit(None, "end dispatch")

    def start_batch(self) -> None:
        self.emit(self.tracker_label("startBatch", True), "start batch")
        self.catching = []

    def end_batch(self) -> None:
        """endBatch, in the `finally` of the batch: an exception thrown inside the batch comes here, then goes on."""
        assert self.catching is not None
        self.jump_to_here(*self.catching)
        self.catching = None
        self.emit(self.tracker_label("endBatch", True), "end batch")
        if not self.pre:
            self.emit(None, "tracker write off")
        self.notify("endBatch", -1)
        if self.pre:
            self.emit(None, "tracker write off")
        self.emit(None, "rethrow")

    # -- PendingAcksMap and the dispatcher ------------------------------------------------------------------
    def for_each(self, consumer: int, hashes: tuple[int, ...], body: Callable[[], None]) -> None:
        """forEach over the consumer's pending acks: `body` for each ack of one of `hashes` (the updated ranges),
        under the map's read lock."""
        self.map_lock("forEach", consumer, write=False)
        empty = self.emit(None, "for init", consumer)
        start = len(self.code)
        other = self.emit(None, "skip unless hash in", _mask(hashes))
        with self.touching(self.held.get(consumer, 0) & _mask(hashes)):
            body()
        self.jump_to_here(other)
        self.code.append(Instruction(None, "for next", consumer, start))
        self.jump_to_here(empty)
        self.map_unlock(consumer, write=False)

    def register_adding(self, consumer: int, hashes: tuple[int, ...]) -> None:
        """registerDrainingHashes' ADD part for `consumer`, which gained `hashes`."""

        def body() -> None:
            self.emit(self.tracker_label("getEntry", False), "read entry")
            skip = self.emit(None, "skip unless drainer", consumer)
            self.emit(None, "closing", 0)
            self.reduce_ref_count(consumer, 0)
            self.jump_to_here(skip)

        self.for_each(consumer, hashes, body)

    def remove_consumer(self, consumer: int, heirs: tuple[tuple[int, int], ...]) -> None:
        """removeConsumer: the selector gives the leaver's hashes to their heirs (`heirs`: (hash, heir) pairs), the
        leaver's map is closed in a batch (`closing` true), then the ADD part for each heir, and the leaver's stats
        are dropped."""
        for h, heir in heirs:
            self.emit(None, "switch owner", heir, hash=h)
        self.map_lock("forEachAndClose", consumer, write=True)
        self.emit(None, "close", consumer)
        self.start_batch()
        empty = self.emit(None, "for init", consumer)
        start = len(self.code)
        self.emit(None, "to replay", consumer)
        self.emit(None, "closing", 1)
        with self.touching(self.held.get(consumer, 0)):
            self.reduce_ref_count(consumer, 0)
        self.code.append(Instruction(None, "for next", consumer, start))
        self.jump_to_here(empty)
        self.end_batch()
        self.emit(None, "clear", consumer)
        self.map_unlock(consumer, write=True)
        for heir in sorted({heir for _, heir in heirs}):
            self.register_adding(heir, tuple(h for h, c in heirs if c == heir))
        self.emit(None, "consumer removed", consumer)

    def join(self, consumer: int, losers: tuple[tuple[int, int], ...]) -> None:
        """The consumer joins (a new object) and takes hashes from their owners (`losers`: (hash, loser) pairs):
        registerDrainingHashes' REMOVE part for each loser."""
        self.emit(None, "join", consumer)
        for h, _ in losers:
            self.emit(None, "switch owner", consumer, hash=h)
        for loser in sorted({loser for _, loser in losers}):
            self.for_each(loser, tuple(h for h, c in losers if c == loser), functools.partial(self.add_entry, loser, 0))

    def ack(self, consumer: int, entry_id: int, h: int) -> None:
        """PendingAcksMap.remove(l, e) on the consumer's connection: the handler runs inside the write lock."""
        self.emit(None, "client acks", entry_id, consumer=consumer)
        self.map_lock("remove", consumer, write=True)
        absent = self.emit(None, "pop or skip", entry_id, consumer=consumer)
        self.reduce_ref_count(consumer, h)
        self.jump_to_here(absent)
        self.map_unlock(consumer, write=True)

    def ack_up_to(self, consumer: int, entry_id: int) -> None:
        """removeAllUpTo: look under the read lock, then remove under the write lock in a handler batch."""
        self.emit(None, "client acks up to", entry_id, consumer=consumer)
        if self.serialized:
            self.map_lock("removeAllUpTo", consumer, write=False)
            nothing = self.emit(None, "look", entry_id, consumer=consumer)
            self.map_unlock(consumer, write=False)
        self.map_lock("removeAllUpTo", consumer, write=True)
        empty = self.emit(None, "doomed", entry_id, consumer=consumer)
        self.start_batch()
        start = len(self.code)
        gone = self.emit(None, "skip if gone", consumer=consumer)  # unserialized: a concurrent close took it
        self.emit(None, "closing", 2, consumer=consumer)  # the map's closed flag
        with self.touching(self.held.get(consumer, 0)):
            self.reduce_ref_count(consumer, 0)
        self.jump_to_here(gone)
        self.code.append(Instruction(None, "drop next", consumer, start, 0, consumer))
        self.end_batch()
        self.jump_to_here(empty)
        self.map_unlock(consumer, write=True)
        if self.serialized:
            self.jump_to_here(nothing)
        self.emit(None, "end op")


def _mask(hashes: tuple[int, ...]) -> int:
    """The hashes as bits (bit h for hash h)."""
    return functools.reduce(int.__or__, (1 << h for h in hashes), 0)


class Objects(NamedTuple):
    """What `_access` needs of the configuration: who may drain each hash, how many consumers, and whether the
    order can throw (a null removal, only without the map locks)."""

    drainers: Mapping[int, tuple[int, ...]]  # per hash, the consumers that may drain it
    consumers: int
    throws: bool


def _access(ins: Instruction, objects: Objects) -> tuple[frozenset[str], frozenset[str]]:
    """What one instruction reads and writes, by shared object, as finely as the state is: `tlock` (the holder of
    the tracker's write lock or monitor; a read-lock acquisition, momentary here, reads it), `slot<h>` (the
    tracker's map at hash h), `batch` (batch level and unblockedWhileBatching), `entries` (the list new entries
    are appended to), `ref<h>`/`blk<h>` (the ref counts, and the blocked counts and removal marks, of hash h's
    entries), `map<c>` (consumer c's PendingAcksMap: lock, acks, closed flag), `stats<c>`, `owner<h>`, `inc<c>`
    (consumer c's object), `acked<c>` (what c's client acked), `unblocked` (the handler's calls, in order),
    `dispatcher` (its monitor), `replay` and `blocks`. The flags a step raises are computed from what it reads;
    LK-4 reads whether the step's own thread holds the tracker lock, which no other thread can change."""
    code, c, who = ins.code, ins.arg, ins.consumer
    hashes = [h for h in (1, 2) if ins.hashes >> h & 1]

    def per_hash(*names: str) -> tuple[str, ...]:
        return tuple(f"{name}{h}" for h in hashes for name in names)

    drainers = sorted({d for h in hashes for d in objects.drainers.get(h, ())})
    everyone = range(1, objects.consumers + 1)
    unwinds = ("tlock", "dispatcher", *(f"map{x}" for x in everyone)) if objects.throws else ()
    reads: dict[str, tuple[str, ...]] = {
        "map read": (f"map{c}",), "read entry": ("tlock", *per_hash("slot")), "get or return": per_hash("slot"),
        "closing": (f"map{who}",) if c == 2 else (), "read blocking": ("batch", *per_hash("blk")),
        "skip unless stats": (f"stats{c}",), "start batch": ("tlock",),
        "skip unless owner drains": (*per_hash("owner"), *(f"inc{x}" for x in everyone)),
        "skip unless owner is": per_hash("owner"), "return unless still mapped": per_hash("slot"),
        "block": (*per_hash("slot"), *per_hash("blk")), "for init": (f"map{c}",),
        "skip unless drainer": (f"inc{c}",), "look": (f"map{who}",), "doomed": (f"map{who}",),
        "skip if gone": (f"map{who}",), "return unless zero": per_hash("ref"),
        "remove by key": (*per_hash("owner", "ref"), *(f"{o}{d}" for d in drainers for o in ("inc", "map", "acked"))),
        "get or create": (f"inc{c}",),
    }
    writes: dict[str, tuple[str, ...]] = {
        "map read": (f"map{c}",), "map read off": (f"map{c}",), "map write": (f"map{c}",),
        "map write off": (f"map{c}",), "tracker write": ("tlock",), "monitor": ("tlock",),
        "tracker write off": ("tlock",), "get or return": ("tlock",), "decrement": per_hash("ref"),
        "decrement or return": ("tlock", *per_hash("ref")), "remove by key": (*per_hash("slot", "blk"), *unwinds),
        "read blocking": ("batch", *per_hash("blk")), "stats add": (f"stats{c}",), "stats clear": (f"stats{c}",),
        "notify": ("unblocked",), "get or create": ("entries", f"stats{c}", *per_hash("slot")),
        "increment": per_hash("ref"), "remove if same": per_hash("slot", "blk"),
        "return unless still mapped": ("tlock",), "block": per_hash("blk"), "end dispatch": ("blocks",),
        "start batch": ("batch",), "end batch": ("tlock", "batch"), "switch owner": per_hash("owner"),
        "join": (f"inc{c}", f"map{c}"), "close": (f"map{c}",), "to replay": ("replay",), "clear": (f"map{c}",),
        "consumer removed": (f"stats{c}",), "pop or skip": (f"map{who}",), "look": (f"map{who}",),
        "drop next": (f"map{who}",), "client acks": (f"acked{who}",), "client acks up to": (f"acked{who}",),
        "rethrow": unwinds, "dispatcher lock": ("dispatcher",), "dispatcher unlock": ("dispatcher",),
    }
    return frozenset(reads.get(code, ())), frozenset(writes.get(code, ()))


def _successors(programs: tuple[tuple[Instruction, ...], ...], op: int, pc: int) -> list[tuple[int, int]]:
    """Where control may go after an instruction: its fall-through and its target, or the next operation's start."""
    ins = programs[op][pc]
    nexts = [ins.target] if ins.code == "jump" else [n for n in (pc + 1, ins.target) if n >= 0]
    out = [(op, n) for n in nexts if n < len(programs[op])]
    if any(n >= len(programs[op]) for n in nexts) and op + 1 < len(programs):
        out.append((op + 1, 0))
    return out


def _waits(ins: Instruction, held: frozenset[str]) -> bool:
    """Whether the instruction acquires a lock of `held` (see `KeySharedLocksModel.held`), so waits while it is held."""
    code = ins.code
    if code in ("read entry", "tracker write", "monitor", "start batch", "end batch"):
        return "tlock" in held
    if code == "dispatcher lock":
        return "dispatcher" in held
    if code == "map read":
        return f"map{ins.arg}" in held
    return code == "map write" and bool({f"map{ins.arg}", f"map{ins.arg}:read"} & held)


def _reach(programs: tuple[tuple[Instruction, ...], ...], op: int, pc: int, step: bool,
           objects: Objects, held: frozenset[str] = frozenset()) -> Footprint:
    """The union of the accesses of every instruction reachable from (op, pc): for one `step`, up to the next
    labels (a step runs across the end of an operation into the next one's unlabelled start); else to the end,
    or to an acquisition of a lock of `held`, which waits there while another thread holds it."""
    reads: set[str] = set()
    writes: set[str] = set()
    seen: set[tuple[int, int]] = set()
    todo = [(op, pc)]
    while todo:
        at = todo.pop()
        if at in seen or (step and at != (op, pc) and programs[at[0]][at[1]].label is not None):
            continue
        seen.add(at)
        if held and _waits(programs[at[0]][at[1]], held):
            continue
        r, w = _access(programs[at[0]][at[1]], objects)
        reads |= r
        writes |= w
        todo.extend(_successors(programs, *at))
    return frozenset(reads), frozenset(writes)


SYNCHRONIZED = {"join": "addConsumer", "leave": "removeConsumer", "block": "trySendMessagesToConsumers"}
"""The dispatcher's synchronized method each dispatcher-side operation runs in."""

Moves = tuple[tuple[int, int], ...]
"""The hashes a membership change moves: (hash, the consumer that loses it) for a join, (hash, its heir) for a
leave."""


class Layout(NamedTuple):
    """The configuration's consumers and hashes, parsed once (the model's and the reference's)."""

    prefer: tuple[tuple[int, ...], ...]  # per hash (hash h at index h - 1), the consumers preferred for it, in order
    consumers: int  # consumer ids are 1 .. consumers
    present: tuple[int, ...]  # connected at the start
    acks: tuple[tuple[int, ...], ...]  # per consumer, its pending acks (entry ids) at the start
    hash_of: Mapping[int, int]  # each pending ack's hash

    @property
    def hashes(self) -> tuple[int, ...]:
        return tuple(range(1, len(self.prefer) + 1))

    def owner(self, h: int, present: set[int] | tuple[int, ...]) -> int | None:
        """The selector's choice for hash `h`: its most preferred connected consumer (consistent hashing gives a
        hash to the first consumer clockwise on the ring, so a join takes hashes only from their owners and a leave
        gives its hashes to the next in line)."""
        return next((c for c in self.prefer[h - 1] if c in present), None)

    def owners(self) -> tuple[int, ...]:
        return tuple(int(self.owner(h, self.present) or 0) for h in self.hashes)

    @property
    def held(self) -> dict[int, int]:
        """Per consumer, the hashes (a bit each) of its pending acks at the start: all its map will ever hold."""
        return {c + 1: _mask(tuple(self.hash_of[e] for e in acks)) for c, acks in enumerate(self.acks)}


def layout(config: Mapping[str, Param]) -> Layout:
    """The consumers, hashes and pending acks of a lock configuration (`hashes`, `present`, `pending`,
    `pending2`), or a ValueError saying what is wrong."""
    prefer = config["hashes"]
    if (not isinstance(prefer, tuple) or not 1 <= len(prefer) <= 2
            or not all(isinstance(p, tuple) and p and all(isinstance(c, int) and 1 <= c <= 3 for c in p)
                       and len(set(p)) == len(p) for p in prefer)):
        raise ValueError("keyshared lock config hashes must be one or two tuples of consumer ids (1..3), most "
                         "preferred first")
    prefers = tuple(tuple(c for c in p if isinstance(c, int)) for p in prefer if isinstance(p, tuple))
    consumers = max(2, *(max(p) for p in prefers))
    present = config["present"]
    if not isinstance(present, tuple) or not all(isinstance(c, int) and 1 <= c <= consumers for c in present):
        raise ValueError(f"keyshared lock config present must be a tuple of consumer ids (1..{consumers})")
    acks: list[tuple[int, ...]] = [() for _ in range(consumers)]
    hash_of: dict[int, int] = {}
    for consumer, key, first in ((1, "pending", 0), (2, "pending2", SECOND)):
        value = config[key]
        held = (HASH,) * value if isinstance(value, int) and not isinstance(value, bool) else value
        if (not isinstance(held, tuple) or len(held) > 4
                or not all(isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= len(prefers) for h in held)):
            raise ValueError(f"keyshared lock config {key}: 0 to 4 pending acks (a count of hash 1's, or one hash "
                             f"each, of 1..{len(prefers)})")
        if held and consumer not in present:
            raise ValueError(f"keyshared lock config {key}: consumer {consumer} holds pending acks but is not present")
        acks[consumer - 1] = tuple(range(first, first + len(held)))
        hash_of.update(zip(acks[consumer - 1], (int(h) for h in held if isinstance(h, int)), strict=True))
    result = Layout(prefers, consumers, tuple(int(c) for c in present if isinstance(c, int)), tuple(acks), hash_of)
    owners = result.owners()
    if 0 in owners:
        raise ValueError("keyshared lock config: every hash needs a present consumer at the start")
    if any(owners[hash_of[e] - 1] != c + 1 for c, held in enumerate(acks) for e in held):
        raise ValueError("keyshared lock config: a consumer's pending acks at the start are of hashes it owns (else "
                         "the tracker would already hold draining entries for them)")
    return result


def compile_op(order: str, op: str, moves: Moves, scope: Layout, consumer: int = 0,
               monitor: bool = False) -> tuple[Instruction, ...]:
    """One script operation as instructions (see `_Assembler`); `moves` are the hashes a membership change moves,
    `consumer` an acker's; with `monitor`, a dispatcher-side operation runs inside the dispatcher's monitor (its
    `synchronized` method)."""
    asm = _Assembler(order, scope.held)
    word, _, arg = op.partition(" ")
    if monitor and word in SYNCHRONIZED:
        asm.emit(f"{SYNCHRONIZED[word]}: dispatcher.lock", "dispatcher lock")
    if word == "join":
        asm.join(int(arg), moves)
    elif word == "leave":
        asm.remove_consumer(int(arg), moves)
    elif word == "block":
        asm.should_block(int(arg or HASH))
    elif word == "ack":
        asm.ack(consumer, int(arg), scope.hash_of[int(arg)])
    elif word == "ack-up-to":
        asm.ack_up_to(consumer, int(arg))
    else:
        raise ValueError(f"keyshared lock config: unknown operation {op!r}")
    if monitor and word in SYNCHRONIZED:
        asm.emit(None, "dispatcher unlock")
    asm.emit(None, "end op")
    return tuple(asm.code)


def moves(script: tuple[str, ...], scope: Layout) -> tuple[Moves, ...]:
    """The hashes each membership change moves. Only one thread changes membership, so this is known before any
    interleaving; a script that joins a present consumer, loses one that is gone or leaves a hash without a
    consumer is refused."""
    present, out = set(scope.present), []
    for op in script:
        word, _, arg = op.partition(" ")
        c = int(arg) if arg.isdigit() else 0
        before = {h: scope.owner(h, present) for h in scope.hashes}
        if word == "join" and c not in present:
            present.add(c)
            out.append(tuple((h, int(before[h] or 0)) for h in scope.hashes if scope.owner(h, present) != before[h]))
        elif word == "leave" and c in present and len(present) > 1:
            present.discard(c)
            heirs = tuple((h, scope.owner(h, present)) for h in scope.hashes if before[h] == c)
            if any(heir is None for _, heir in heirs):
                raise ValueError(f"keyshared lock config: {op!r} leaves a hash no other present consumer takes")
            out.append(tuple((h, int(heir or 0)) for h, heir in heirs))
        elif word == "block":
            out.append(())
        else:
            raise ValueError(f"keyshared lock config: {op!r} with consumers {sorted(present)} present (a join needs "
                             "its consumer gone, a leave needs it present and another one)")
    return tuple(out)


def _script(config: Mapping[str, Param], name: str, scope: Layout, acker: int = 0) -> tuple[str, ...]:
    """A thread's script: a dispatcher's or the membership thread's (`join C`, `leave C`, `block`, `block H`), or
    consumer `acker`'s (`ack N` and `ack-up-to N`, N one of its pending acks at the start)."""
    script = config[name]
    ops = [op for op in script if isinstance(op, str)] if isinstance(script, tuple) else []
    if not isinstance(script, tuple) or len(ops) != len(script):
        raise ValueError(f"keyshared lock config {name} must be a tuple of operations")
    consumers = range(1, scope.consumers + 1)
    for op in ops:
        word, _, arg = op.partition(" ")
        if acker:
            ok = word in ("ack", "ack-up-to") and arg.isdigit() and int(arg) in scope.acks[acker - 1]
            choices = f"'ack N', 'ack-up-to N' (N one of {list(scope.acks[acker - 1])})"
        else:
            ok = (word in ("join", "leave") and arg.isdigit() and int(arg) in consumers) or (
                word == "block" and (not arg or (arg.isdigit() and int(arg) in scope.hashes)))
            choices = "'join C', 'leave C', 'block' or 'block H'"
        if not ok:
            raise ValueError(f"keyshared lock config {name}: {op!r} is not one of {choices}")
    return tuple(ops)


class KeySharedLocksModel:
    """The dispatcher, the ackers and maybe a membership thread; every interleaving of upstream's lock-separated
    steps."""

    mechanism = "keyshared"
    symmetric_key = None
    """No values are alike (`Model.symmetric_key`)."""

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "pip379") -> None:
        self.variant = variant
        self.config: Mapping[str, Param] = configured("keyshared (lock scope)", variant, VARIANTS, config,
                                                      DEFAULT_CONFIG)
        order, unchecked = self.config["order"], self.config["unchecked"]
        if self.config["scope"] != "locks":
            raise ValueError(f"keyshared lock config needs scope 'locks', got {self.config['scope']!r}")
        if order not in ORDERS:
            raise ValueError(f"keyshared lock config needs order in {ORDERS}")
        names = [name for name, _ in INVARIANTS]
        if not isinstance(unchecked, tuple) or not set(unchecked) <= set(names):
            raise ValueError(f"keyshared lock config unchecked must be a tuple of invariant names ({', '.join(names)})")
        self.order = str(order)
        self.layout = scope = layout(self.config)
        membership = _script(self.config, "membership", scope)
        if any(op.startswith("block") for op in membership):
            raise ValueError("keyshared lock config membership: only joins and leaves (the dispatcher dispatches)")
        self.monitored = bool(membership)
        dispatcher = _script(self.config, "dispatcher", scope)
        if membership and not all(op.startswith("block") for op in dispatcher):
            raise ValueError("keyshared lock config dispatcher: only 'block' with a membership thread")
        acker, acker2 = _script(self.config, "acker", scope, 1), _script(self.config, "acker2", scope, 2)
        named = [("dispatcher", dispatcher, 0, moves(dispatcher, scope)), ("acker", acker, 1, ((),) * len(acker))]
        if acker2:
            named.append(("acker2", acker2, 2, ((),) * len(acker2)))
        if membership:
            named.append(("membership", membership, 0, moves(membership, scope)))
        self.scripts = tuple(script for _, script, _, _ in named)
        self.programs = tuple(
            tuple(compile_op(self.order, op, moved, scope, consumer, self.monitored)
                  for op, moved in zip(script, moving, strict=True))
            for _, script, consumer, moving in named)
        self.action_names: Sequence[str] = ACTION_NAMES if acker2 else WITH_MEMBERSHIP  # acker2: a wider scope's
        self.threads: Sequence[str] = tuple(name for name, _, _, _ in named)
        self.invariants: Sequence[Invariant[LocksState]] = tuple(
            Invariant(name, _unbroken(name), text) for name, text in INVARIANTS if name not in unchecked)
        self.liveness: Sequence[Liveness[LocksState]] = ()
        self._initial = self._prime()

    @property
    def threaded(self) -> Threaded[LocksState]:
        """A model of threads (`Model.threaded`): it declares every step's footprint, the futures, where a thread
        is, the locks it holds and the threads it waits for."""
        return self

    @functools.cached_property
    def _steps(self) -> tuple[tuple[tuple[Footprint, ...], ...], ...]:
        """Per thread, operation and pc, what that step touches (computed on first use: only reductions ask)."""
        return self._footprints(step=True)

    @functools.cached_property
    def _objects(self) -> Objects:
        scope = self.layout
        return Objects({h: tuple(c for c, mask in scope.held.items() if mask >> h & 1) for h in scope.hashes},
                       scope.consumers, self.order == "unserialized")

    def _footprints(self, step: bool) -> tuple[tuple[tuple[Footprint, ...], ...], ...]:
        return tuple(tuple(tuple(_reach(programs, op, pc, step, self._objects) for pc in range(len(program)))
                           for op, program in enumerate(programs)) for programs in self.programs)

    @functools.cached_property
    def _futures(self) -> dict[tuple[int, int, int, frozenset[str]], Footprint]:
        """Per thread, operation, pc and locks others hold, what the rest of its program may touch (on demand)."""
        return {}

    def _names(self, threads: list[int]) -> list[Json]:
        return [self.threads[i] for i in threads]

    def footprint(self, state: LocksState, thread: str) -> Footprint:
        """What the thread's next step reads and writes (see `_access`), for partial-order reduction."""
        i = self.threads.index(thread)
        t = state.threads[i]
        return self._steps[i][t.op][t.pc] if t.op < len(self.programs[i]) else (frozenset(), frozenset())

    def future(self, state: LocksState, thread: str, held: frozenset[str] = frozenset()) -> Footprint:
        """What any of the thread's remaining steps may read and write (its next one included) before it acquires a
        lock of `held` (locks other threads hold, as `held` names them: while they hold them, it cannot)."""
        i = self.threads.index(thread)
        t = state.threads[i]
        if t.op == len(self.programs[i]):
            return frozenset(), frozenset()
        key = (i, t.op, t.pc, held)
        known = self._futures.get(key)
        if known is None:
            known = self._futures[key] = _reach(self.programs[i], t.op, t.pc, False, self._objects, held)
        return known

    def position(self, state: LocksState, thread: str) -> tuple[int, int]:
        """Where the thread is (its operation and pc): its footprint and futures depend on nothing else."""
        t = state.threads[self.threads.index(thread)]
        return t.op, t.pc

    def waits_for(self, state: LocksState, thread: str) -> frozenset[str]:
        """The threads holding what the thread's next step waits for (empty: it may run, or it is done): only they
        can let it go on."""
        i = self.threads.index(thread)
        instruction = self.next_instruction(state, i)
        return frozenset(self.threads[j] for j in _holders(state, i, instruction)) if instruction else frozenset()

    def held(self, state: LocksState, thread: str) -> frozenset[str]:
        """The locks the thread holds that keep other threads out: `tlock` (the tracker's write lock or monitor),
        `map<c>` (a map's write lock), `map<c>:read` (its read lock: writers wait) and `dispatcher`."""
        i = self.threads.index(thread)
        out = {f"map{c + 1}" for c, writer in enumerate(state.map_writer) if writer == i}
        out |= {f"map{c + 1}:read" for c, readers in enumerate(state.map_readers) if i in readers}
        out |= {name for name, holder in (("tlock", state.tracker_lock), ("dispatcher", state.dispatcher_lock))
                if holder == i}
        return frozenset(out)

    def _prime(self) -> LocksState:
        idle = Thread(0, 0, Registers())
        n, scope = self.layout.consumers, self.layout
        start = LocksState(scope.owners(), (0,) * n, scope.acks, (False,) * n, (-1,) * len(scope.hashes), (), 0,
                           False, (None,) * n, -1, -1, (-1,) * n, ((),) * n, (), (), (), (),
                           (idle,) * len(self.threads), ())
        for i in range(len(self.threads)):
            start = _Run(self, start, i, first=False).result()
        return start

    def initial(self) -> LocksState:
        return self._initial

    def terminal_ok(self, state: LocksState) -> bool:
        return all(t.op == len(self.programs[i]) for i, t in enumerate(state.threads))

    def next_instruction(self, state: LocksState, i: int) -> Instruction | None:
        t = state.threads[i]
        return None if t.op == len(self.programs[i]) else self.programs[i][t.op][t.pc]

    def next_label(self, state: LocksState, i: int) -> str:
        instruction = self.next_instruction(state, i)
        return DONE if instruction is None else str(instruction.label)

    def enabled(self, state: LocksState) -> Sequence[Action]:
        out = []
        for i, name in enumerate(self.threads):
            instruction = self.next_instruction(state, i)
            if instruction is not None and not _blocked(state, i, instruction):
                out.append(Action.of(name, step=str(instruction.label)))
        return out

    def step(self, state: LocksState, action: Action) -> tuple[LocksState, Observation]:
        i = self.threads.index(action.name) if action.name in self.threads else -1
        instruction = self.next_instruction(state, i) if i >= 0 else None
        if (instruction is None or _blocked(state, i, instruction)
                or action != Action.of(action.name, step=str(instruction.label))):  # what `enabled` offers, for it
            raise ActionNotEnabled(action, "not offered in this state (see KeySharedLocksModel.enabled)")
        return _Run(self, state, i, first=True).result(), None

    def key(self, state: LocksState) -> Hashable:
        return state

    def vars(self, state: LocksState) -> dict[str, Json]:
        draining: list[Json] = [[h + 1, state.entries[slot].consumer, state.entries[slot].ref_count,
                                 state.entries[slot].blocked] for h, slot in enumerate(state.slots) if slot != -1]
        owner: dict[str, Json] = ({"owner": state.owners[0]} if len(state.owners) == 1 else
                                  {"owners": [[h + 1, c] for h, c in enumerate(state.owners)]})
        return {
            **owner,
            "pending": [[c + 1, list(p)] for c, p in enumerate(state.pending)],
            "closed": list(state.closed),
            "draining": draining,
            "batch_level": state.batch_level,
            "unblocked_while_batching": state.unblocked_while_batching,
            "stats": [[c + 1, list(hashes)] for c, hashes in enumerate(state.stats) if hashes is not None],
            "locks": {"tracker": self._names([state.tracker_lock] if state.tracker_lock != -1 else []),
                      **{f"map[{c + 1}]": self._names(([state.map_writer[c]] if state.map_writer[c] != -1 else [])
                                                      + list(state.map_readers[c])) for c in range(len(state.closed))},
                      **({"dispatcher": self._names([state.dispatcher_lock] if state.dispatcher_lock != -1 else [])}
                         if self.monitored else {})},
            "unblocked": list(state.unblocked),
            "replay": list(state.replay),
            "blocks": list(state.blocks),
            "threads": [[name, self.next_label(state, i)] for i, name in enumerate(self.threads)],
            "broken": list(state.broken),
        }


def _unbroken(name: str) -> Callable[[LocksState], bool]:
    return lambda s: name not in s.broken


def _holders(state: LocksState, i: int, instruction: Instruction) -> tuple[int, ...]:
    """The threads whose holds keep thread i from its next instruction (none: it may run)."""
    code = instruction.code
    if code in ("read entry", "tracker write", "monitor", "start batch", "end batch"):
        return () if state.tracker_lock in (-1, i) else (state.tracker_lock,)
    if code == "dispatcher lock":
        return () if state.dispatcher_lock in (-1, i) else (state.dispatcher_lock,)
    if code in ("map read", "map write"):  # a writer waits for the readers too
        c = instruction.arg - 1
        writer = () if state.map_writer[c] in (-1, i) else (state.map_writer[c],)
        readers = state.map_readers[c] if code == "map write" and state.map_writer[c] != i else ()
        return writer + tuple(readers)
    return ()


def _blocked(state: LocksState, i: int, instruction: Instruction) -> bool:
    """Whether the thread's next instruction is an acquisition another thread's hold forbids."""
    return bool(_holders(state, i, instruction))


class _Run:
    """One step of one thread on a thawed state: its labelled instruction, then the unlabelled ones after it."""

    def __init__(self, model: KeySharedLocksModel, s: LocksState, i: int, first: bool) -> None:
        self.model, self.i, self.hash_of = model, i, model.layout.hash_of
        self.owners, self.incarnations = list(s.owners), list(s.incarnations)
        self.pending, self.closed = [list(p) for p in s.pending], list(s.closed)
        self.slots, self.entries = list(s.slots), list(s.entries)
        self.batch_level, self.unblocked_while_batching = s.batch_level, s.unblocked_while_batching
        self.stats = list(s.stats)
        self.tracker_lock, self.map_writer = s.tracker_lock, list(s.map_writer)
        self.dispatcher_lock = s.dispatcher_lock
        self.map_readers = [list(r) for r in s.map_readers]
        self.unblocked, self.replay, self.blocks = list(s.unblocked), list(s.replay), list(s.blocks)
        self.acked = set(s.acked)
        self.threads = list(s.threads)
        self.broken = set(s.broken)
        t = s.threads[i]
        self.op, self.pc, self.regs = t.op, t.pc, t.regs
        programs = model.programs[i]
        while self.op < len(programs):
            program = programs[self.op]
            instruction = program[self.pc]
            if instruction.label is not None and not first:
                break
            first = False
            self.jump: int | None = None
            self.execute(instruction)
            if self.jump == -2:  # an exception unwound the operation
                self.op, self.pc, self.regs = self.op + 1, 0, Registers()
                continue
            self.pc = self.pc + 1 if self.jump is None else self.jump
            if self.pc >= len(program):
                self.op, self.pc, self.regs = self.op + 1, 0, Registers()
        self.threads[i] = Thread(self.op, self.pc, self.regs)

    def result(self) -> LocksState:
        return LocksState(
            tuple(self.owners), tuple(self.incarnations), tuple(tuple(p) for p in self.pending), tuple(self.closed),
            tuple(self.slots), tuple(self.entries), self.batch_level, self.unblocked_while_batching,
            tuple(self.stats), self.tracker_lock, self.dispatcher_lock, tuple(self.map_writer),
            tuple(tuple(r) for r in self.map_readers), tuple(self.unblocked), tuple(self.replay),
            tuple(self.blocks), tuple(sorted(self.acked)), tuple(self.threads),
            tuple(sorted(self.broken)))

    # -- helpers ------------------------------------------------------------------------------------------------
    def _hash(self, ins: Instruction) -> int:
        """The instruction's hash: its own, or that of the pending ack the thread's loop is at."""
        return ins.hash or self.hash_of[self.regs.items[0]]

    def _set(self, index: int, entry: Entry) -> None:
        self.entries[index] = entry
        if entry.ref_count < 0:
            self.broken.add("LK-1")

    def _regs(self, **changes: Any) -> None:
        self.regs = self.regs._replace(**changes)

    def _mine(self, index: int, consumer: int) -> bool:
        entry = self.entries[index]
        return entry.consumer == consumer and entry.incarnation == self.incarnations[consumer - 1]

    def _outside_lock(self) -> None:
        if self.tracker_lock == self.i:
            self.broken.add("LK-4")

    def _throw(self, handler: int) -> None:
        """A NullPointerException in reduceRefCount: its own lock is released; a batch's `finally` (at `handler`)
        runs next, or the exception leaves the operation."""
        if self.tracker_lock == self.i:
            self.tracker_lock = -1
        if handler < 0:
            self._unwind()
        else:
            self._regs(raised=True)
            self.jump = handler

    def _unwind(self) -> None:
        """An exception escapes the operation: its finally blocks release every lock the thread holds."""
        if self.tracker_lock == self.i:
            self.tracker_lock = -1
        if self.dispatcher_lock == self.i:
            self.dispatcher_lock = -1
        for c in range(len(self.map_writer)):
            if self.map_writer[c] == self.i:
                self.map_writer[c] = -1
            if self.i in self.map_readers[c]:
                self.map_readers[c].remove(self.i)
        self.jump = -2

    def _remove_by_key(self, ins: Instruction) -> None:
        """drainingHashes.remove(stickyHash) and, unless closing, the removed entry's isBlocking (LK-2, LK-3, LK-5)."""
        h, regs = self._hash(ins), self.regs
        removed = self.slots[h - 1]
        self.slots[h - 1] = -1
        self._regs(removed=removed)
        if removed == -1:
            if not regs.closing:
                self.broken.add("LK-5")  # removed.isBlocking() on null
                self._throw(ins.target)
            return
        if removed != regs.entry:
            self.broken.add("LK-3")
        gone = self.entries[removed]
        holds = gone.incarnation == self.incarnations[gone.consumer - 1] and any(
            e not in self.acked and self.hash_of[e] == gone.hash for e in self.pending[gone.consumer - 1])
        if gone.ref_count > 0 or (not regs.closing and self.owners[gone.hash - 1] != gone.consumer and holds):
            self.broken.add("LK-2")  # (a closing removal hands its consumer's pending acks to replay)
        if regs.closing:
            self.entries[removed] = gone._replace(removal=EXEMPT)

    def _stats(self, ins: Instruction) -> None:
        self._outside_lock()
        h, hashes = self._hash(ins), self.stats[ins.arg - 1]
        if hashes is not None:  # else consumerRemoved dropped them meanwhile: the update goes to a detached object
            kept = tuple(x for x in hashes if x != h)
            self.stats[ins.arg - 1] = tuple(sorted((*kept, h))) if ins.code == "stats add" else kept

    def _get_or_create(self, ins: Instruction) -> None:
        h, consumer = self._hash(ins), ins.arg
        slot = self.slots[h - 1]
        if slot == -1:
            self.entries.append(Entry(consumer, self.incarnations[consumer - 1], 0, 0, UNDECIDED, h))
            slot = self.slots[h - 1] = len(self.entries) - 1
            self._regs(added=True)
            if self.stats[consumer - 1] is None:
                self.stats[consumer - 1] = ()
        elif not self._mine(slot, consumer):
            raise AssertionError("addEntry for a consumer that does not drain the hash: outside the scope")
        self._regs(entry=slot)

    def execute(self, ins: Instruction) -> None:
        code, arg, regs = ins.code, ins.arg, self.regs
        if code == "map read":
            self.map_readers[arg - 1].append(self.i)
        elif code == "map read off":
            self.map_readers[arg - 1].remove(self.i)
        elif code == "map write":
            self.map_writer[arg - 1] = self.i
        elif code == "map write off":
            self.map_writer[arg - 1] = -1
        elif code in ("tracker write", "monitor"):
            self.tracker_lock = self.i
        elif code == "tracker write off":
            self.tracker_lock = -1
        elif code == "read entry":  # getEntry: the read lock (the monitor before #23854) taken and released
            self._regs(entry=self.slots[self._hash(ins) - 1])
        elif code == "get or return":  # inside the pre-#23854 monitor
            slot = self.slots[self._hash(ins) - 1]
            self._regs(entry=slot)
            if slot == -1:
                self.tracker_lock = -1
                self.jump = ins.target
        elif code == "return if none":
            if regs.entry == -1:
                self.jump = ins.target
        elif code in ("decrement", "decrement or return"):
            entry = self.entries[regs.entry]
            self._set(regs.entry, entry._replace(ref_count=entry.ref_count - 1))
            if code == "decrement or return" and entry.ref_count - 1 != 0:
                self.tracker_lock = -1
                self.jump = ins.target
        elif code == "return unless zero":
            if self.entries[regs.entry].ref_count != 0:
                self.jump = ins.target
        elif code == "remove by key":
            self._remove_by_key(ins)
        elif code == "skip if closing":
            if regs.closing:
                self.jump = ins.target
        elif code == "read blocking":
            if regs.removed == -1 or regs.closing:
                return
            gone = self.entries[regs.removed]
            if gone.blocked > 0:
                if self.batch_level > 0:
                    self.unblocked_while_batching = True
                else:
                    self._regs(notify=True)
            self.entries[regs.removed] = gone._replace(removal=UNBLOCKS if gone.blocked > 0 else SILENT)
        elif code == "skip unless stats":
            if self.stats[arg - 1] is None:
                self.jump = ins.target
        elif code == "skip unless added":
            if not regs.added:
                self.jump = ins.target
        elif code in ("stats add", "stats clear"):
            self._stats(ins)
        elif code == "skip unless notify":
            if not regs.notify:
                self.jump = ins.target
        elif code == "notify":
            self._outside_lock()
            self.unblocked.append(-1 if arg == -1 else self._hash(ins))
            self._regs(notify=False)
        elif code == "end call":
            self._regs(entry=-1, removed=-1, notify=False, added=False)
        elif code == "get or create":
            self._get_or_create(ins)
        elif code == "increment":
            entry = self.entries[regs.entry]
            self._set(regs.entry, entry._replace(ref_count=entry.ref_count + 1))
        elif code == "skip unless owner drains":
            if not self._mine(regs.entry, self.owners[ins.hash - 1]):
                self.jump = ins.target
        elif code == "skip unless owner is":
            if self.owners[ins.hash - 1] != arg:
                self.jump = ins.target
        elif code == "remove if same":  # remove(stickyKeyHash, entry): only the entry it read
            if self.slots[ins.hash - 1] == regs.entry:
                self.slots[ins.hash - 1] = -1
                self.entries[regs.entry] = self.entries[regs.entry]._replace(removal=EXEMPT)
        elif code == "jump":
            self.jump = ins.target
        elif code == "return unless still mapped":
            if self.slots[ins.hash - 1] != regs.entry:
                self.tracker_lock = -1
                self.jump = ins.target
        elif code == "block":
            entry = self.entries[regs.entry]
            self.entries[regs.entry] = entry._replace(blocked=entry.blocked + 1)
            if self.slots[ins.hash - 1] != regs.entry and entry.removal == SILENT:
                self.broken.add("LK-6")  # blocked by an entry gone without an unblocking call
            self._regs(blocked=True)
        elif code == "end dispatch":
            self.blocks.append(regs.blocked)
            self._regs(entry=-1, blocked=False)
        elif code == "start batch":  # the lock is taken and released within the step: no point inside
            self.batch_level += 1
        elif code == "end batch":
            self.tracker_lock = self.i
            self.batch_level -= 1
            if self.batch_level == 0 and self.unblocked_while_batching:
                self.unblocked_while_batching = False
                self._regs(notify=True)
        elif code == "for init":
            items = tuple(self.pending[arg - 1])
            self._regs(items=items)
            if not items:
                self.jump = ins.target
        elif code == "skip unless hash in":
            if not arg >> self.hash_of[regs.items[0]] & 1:
                self.jump = ins.target
        elif code == "for next":
            items = regs.items[1:]
            self._regs(items=items)
            if items:
                self.jump = ins.target
        elif code == "skip unless drainer":
            if regs.entry == -1 or not self._mine(regs.entry, arg):
                self.jump = ins.target
        elif code == "closing":
            self._regs(closing=bool(arg == 1 or (arg == 2 and self.closed[ins.consumer - 1])))
        elif code == "switch owner":
            self.owners[ins.hash - 1] = arg
        elif code == "join":
            self.incarnations[arg - 1] += 1
            self.pending[arg - 1], self.closed[arg - 1] = [], False
        elif code == "close":
            self.closed[arg - 1] = True
        elif code == "to replay":
            self.replay.append(regs.items[0])
        elif code == "clear":
            self.pending[arg - 1] = []
        elif code == "consumer removed":
            self.stats[arg - 1] = None
        else:
            self._acker(ins)

    def _acker(self, ins: Instruction) -> None:
        """The acker's instructions on its consumer's map, the dispatcher's monitor, and the end of an operation."""
        code, arg, regs = ins.code, ins.arg, self.regs
        mine = self.pending[ins.consumer - 1] if ins.consumer else []
        if code == "pop or skip":
            if arg in mine:
                mine.remove(arg)
                self._regs(closing=self.closed[ins.consumer - 1])
            else:
                self.jump = ins.target
        elif code == "look":
            if not any(e <= arg for e in mine):
                self.map_readers[ins.consumer - 1].remove(self.i)
                self.jump = ins.target
        elif code == "doomed":
            items = tuple(e for e in mine if e <= arg)
            self._regs(items=items)
            if not items:
                self.jump = ins.target
        elif code == "skip if gone":
            if regs.items[0] not in mine:
                self.jump = ins.target
        elif code == "drop next":
            if regs.items[0] in mine:
                mine.remove(regs.items[0])
            items = regs.items[1:]
            self._regs(items=items)
            if items:
                self.jump = ins.target
        elif code == "dispatcher lock":
            self.dispatcher_lock = self.i
        elif code == "dispatcher unlock":
            self.dispatcher_lock = -1
        elif code == "rethrow":
            if regs.raised:
                self._unwind()
        elif code == "client acks":
            self.acked.add(arg)
        elif code == "client acks up to":
            self.acked.update(e for e in self.model.layout.acks[ins.consumer - 1] if e <= arg)
        elif code == "end op":
            self._regs(items=())
        else:
            raise AssertionError(f"unknown instruction {code!r}")
