"""The lock scope's programs: upstream's operations compiled into instructions (see `models/keyshared/locks.py`).

`_Assembler` emits one operation's instructions in the order upstream's source runs them, labelling each
scheduling point with the Java operation it performs; `compile_op` is its entry point. `layout` parses the
configuration's consumers, hashes and pending acks (`Layout`: who owns a hash, who holds what), `moves` the hashes
each membership change moves, and `thread_script` checks a thread's script. A program is data: the model runs it
(`locks.py`), the partial-order reduction reads what it touches (`lock_footprints.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

from models.core import Param
from models.keyshared.lock_state import HASH, SECOND


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

    def size_decrement(self, method: str, consumer: int) -> None:
        """`size--` on the map's volatile size (#26019): a read, then a write; pre-#23854 maps have no such field."""
        if not self.pre:
            self.emit(f"{method}: map[{consumer}].size.get", "size", consumer)
            self.emit(f"{method}: map[{consumer}].size.set", "size", consumer)

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
        else:
            done = self.emit(None, "jump")
            self.jump_to_here(zero)
            self.emit(f"{m}: entry.refCount.get", "read count")  # the log line's attribute (#25535)
            self.jump_to_here(done, none)
        self.emit(None, "end call")

    def add_entry(self, consumer: int, h: int) -> None:
        m = "addEntry"
        self.emit(self.tracker_label(m, True), "monitor" if self.pre else "tracker write")
        self.emit(None, "get or create", consumer, hash=h)
        if not self.pre:
            created = self.emit(None, "skip if added")
            self.emit(f"{m}: entry.refCount.get", "read count")  # the log line's attribute (#25535)
            self.jump_to_here(created)
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
            self.emit(f"{m}: entry.refCount.get", "read count")  # the log line's attribute
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
        if not self.pre:
            self.emit(f"forEachAndClose: map[{consumer}].size.set", "size", consumer)  # size = 0 (#26019)
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
        self.size_decrement("remove", consumer)
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
        if not self.pre:  # entryMapIterator.remove(), then size-- (#26019)
            self.emit(None, "drop", consumer=consumer)
        self.size_decrement("removeAllUpTo", consumer)
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


def thread_script(config: Mapping[str, Param], name: str, scope: Layout, acker: int = 0) -> tuple[str, ...]:
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
