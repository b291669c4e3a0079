"""Key_Shared's DrainingHashesTracker at lock granularity: two threads interleaving upstream's steps (issue 20, item 1).

`models/keyshared_tracker.py` makes each tracker method atomic. Upstream does not: a method is a few
steps separated by the tracker's read/write lock and by atomics on the entry, and the steps of two
threads interleave. This model splits each method as the issue describes upstream's order:

- ``reduceRefCount(c, h, closing)``: read the entry (read lock) / decrement its ref count (an atomic,
  outside the write lock) / if it reached 0, take the write lock and ``drainingHashes.remove(h)`` (by
  key, not ``remove(h, entry)``) and read ``removed.isBlocking()`` / unlock / notify the unblocking
  handler / update the consumer's stats;
- ``addEntry(c, h)``: write lock, get or create the entry / unlock / stats / increment its ref count
  (after unlocking);
- ``shouldBlockStickyKeyHash(c, h)``: read the entry / if ``c`` drains it, remove it lazily under its
  own write lock and update stats; otherwise increment its blocked count (an atomic).

The callers' locks are modelled too, as upstream's callers hold them: a consumer's PendingAcksMap
calls the remove handler inside its own lock, and ``registerDrainingHashes`` walks the map with
``forEach`` under that lock, so every ``addEntry`` and ``reduceRefCount`` for consumer 1's hash holds
`map[1]`. The dispatcher thread runs a script (`dispatcher`): ``move`` switches the hash's owner and
then runs the REMOVE (``addEntry`` per pending ack) or ADD (``reduceRefCount`` per pending ack of an
entry consumer 1 drains) part of ``registerDrainingHashes``; ``block`` is the dispatch's
``shouldBlockStickyKeyHash`` for the hash's current owner, which holds no map lock. The ack thread
acks consumer 1's pending acks of the hash one by one (``PendingAcksMap.remove``).

`order` selects the code: ``current`` (upstream today), ``pre23854`` (the unblocking callback and the
stats update run under the tracker's write lock, as before #23854), ``unserialized`` (the current
order with callers that do not hold the map lock: what that lock protects), or ``locked-block`` (the
fix the finding proposes: ``shouldBlockStickyKeyHash`` increments the blocked count under the write
lock, and only if the map still holds the entry it read). The order is a configuration key, not a
variant: the variant names the dispatcher, and the tracker is PIP-379's whichever it is (as at the
tracker scope), so every variant runs the configured order.

A ``getEntry`` takes the read lock, so it waits while the other thread holds the write lock. A
configuration may leave invariants ``unchecked``: a Hypothesis run ends at its first failure, so a
known finding (LK-6 on the current order) would end every run before the others are tested.

Invariants (checked on flags a step raises, as they are facts about a step):
LK-1 no ref count is ever negative; LK-2 an entry is never removed while its consumer still holds a
pending ack of its hash it does not own, nor with a ref count above 0; LK-3 the entry removed is the one
decremented; LK-4 no callback or stats update runs under the tracker lock (the #23854 rule); LK-5 no
null dereference (``removed == null`` then ``removed.isBlocking()``); LK-6 a dispatch blocked by an
entry is followed by an unblocking call when that entry goes (no lost wake-up).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import NamedTuple

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param, configured

ORDERS = ("current", "pre23854", "unserialized", "locked-block")
VARIANTS = ("pip379", "classic", "pip282")
ACTION_NAMES = ("dispatcher", "acker")
INVARIANTS = (
    ("LK-1", "no ref count is ever negative"),
    ("LK-2", "no entry is removed while needed (its consumer holds an ack of a hash it does not own, "
             "or its ref count is above 0)"),
    ("LK-3", "the entry removed is the one decremented"),
    ("LK-4", "no callback or stats update under the tracker lock (#23854)"),
    ("LK-5", "no null dereference of the removed entry"),
    ("LK-6", "a dispatch blocked by an entry is followed by an unblocking call when it goes"),
)
DRAINER = 1  # consumer 1 holds the pending acks; the hash moves between it and consumer 2

DEFAULT_CONFIG: dict[str, Param] = {
    "scope": "locks",
    "order": "current",
    "pending": 2,  # consumer 1's pending acks of the hash at the start (it owns the hash)
    "dispatcher": ("move 2", "block", "move 1", "block"),
    "acks": 2,  # how many of them the ack thread acks
    "unchecked": (),  # invariants left out (see the module doc)
}

# Instructions (one atomic step each). R_*: reduceRefCount; A_*: addEntry; S_*: shouldBlockStickyKeyHash.
LOCK_MAP, UNLOCK_MAP, ACK_REMOVE = "lock map", "unlock map", "ack: remove pending ack"
R_GET, R_DEC, R_LOCK_REMOVE, R_UNLOCK, R_NOTIFY, R_STATS = (
    "reduce: get entry", "reduce: decrement", "reduce: lock, remove(h), isBlocking", "reduce: unlock",
    "reduce: notify", "reduce: stats")
A_LOCK_GET, A_UNLOCK, A_STATS, A_INC = ("add: lock, get or create", "add: unlock", "add: stats", "add: increment")
S_GET, S_DECIDE, S_LOCK_REMOVE, S_UNLOCK, S_STATS = (
    "block: get entry", "block: owner check / blocked++", "block: lock, lazy remove", "block: unlock", "block: stats")
S_LOCK_DECIDE = "block: lock, owner check / blocked++ if still mapped, unlock"
SWITCH, FOR_INIT, FOR_NEXT, ADD_CHECK = "switch owner", "forEach: start", "forEach: next", "ADD: entry is mine?"
DONE = "done"
_TRACKER_LOCKING = frozenset((R_GET, S_GET, R_LOCK_REMOVE, A_LOCK_GET, S_LOCK_REMOVE, S_LOCK_DECIDE))
"""Instructions that take the tracker's lock (the read lock for a get): they wait while the other thread writes."""


def _reduce(order: str) -> tuple[str, ...]:
    if order == "pre23854":  # callback and stats under the write lock
        return R_GET, R_DEC, R_LOCK_REMOVE, R_NOTIFY, R_STATS, R_UNLOCK
    return R_GET, R_DEC, R_LOCK_REMOVE, R_UNLOCK, R_NOTIFY, R_STATS


def _add(order: str) -> tuple[str, ...]:
    if order == "pre23854":
        return A_LOCK_GET, A_STATS, A_UNLOCK, A_INC
    return A_LOCK_GET, A_UNLOCK, A_STATS, A_INC


class Entry(NamedTuple):
    """A DrainingHashEntry; threads keep references to entries the map no longer holds."""

    consumer: int
    ref_count: int
    blocked: int
    unblocks: bool  # its removal decided to call the unblocking handler


class Thread(NamedTuple):
    op: int  # index of the current operation in the thread's script
    pc: int  # index of the next instruction of that operation
    entry: int  # the entry the thread holds a reference to (an index into `entries`), -1 for null
    left: int  # forEach iterations left


class LocksState(NamedTuple):
    owner: int
    pending: int  # consumer 1's pending acks of the hash
    slot: int  # the entry the tracker's map holds for the hash, -1 if none
    entries: tuple[Entry, ...]
    tracker_lock: int  # the thread holding the write lock, -1 if free
    map_lock: int  # the thread holding consumer 1's PendingAcksMap lock, -1 if free
    threads: tuple[Thread, Thread]  # the dispatcher thread, the ack thread
    broken: tuple[str, ...]  # invariants a step broke


class KeySharedLocksModel:
    """Two threads on one hash; every interleaving of their lock-separated steps."""

    mechanism = "keyshared"

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "pip379") -> None:
        self.variant = variant
        self.config: Mapping[str, Param] = configured("keyshared (lock scope)", variant, VARIANTS, config,
                                                      DEFAULT_CONFIG)
        order, pending, acks, script, unchecked = (
            self.config[k] for k in ("order", "pending", "acks", "dispatcher", "unchecked"))
        if self.config["scope"] != "locks":
            raise ValueError(f"keyshared lock config needs scope 'locks', got {self.config['scope']!r}")
        if order not in ORDERS or not isinstance(pending, int) or not isinstance(acks, int) or not 0 <= acks <= pending:
            raise ValueError(f"keyshared lock config needs order in {ORDERS} and 0 <= acks <= pending")
        if not isinstance(script, tuple) or not all(op in ("move 1", "move 2", "block") for op in script):
            raise ValueError("keyshared lock config dispatcher must be a tuple of 'move 1', 'move 2' and 'block'")
        names = [name for name, _ in INVARIANTS]
        if not isinstance(unchecked, tuple) or not set(unchecked) <= set(names):
            raise ValueError(f"keyshared lock config unchecked must be a tuple of invariant names ({', '.join(names)})")
        self.order, self.pending, self.acks = str(order), pending, acks
        self.script = tuple(str(op) for op in script)
        self.action_names: Sequence[str] = ACTION_NAMES
        self.invariants: Sequence[Invariant[LocksState]] = tuple(
            Invariant(name, _unbroken(name), text) for name, text in INVARIANTS if name not in unchecked)
        self.liveness: Sequence[Liveness[LocksState]] = ()

    def program(self, thread: int, op: int) -> tuple[str, ...]:
        """The instructions of a thread's operation (the map lock is a no-op when unserialized)."""
        lock = () if self.order == "unserialized" else (LOCK_MAP,)
        unlock = () if self.order == "unserialized" else (UNLOCK_MAP,)
        if thread == 1:
            return (*lock, ACK_REMOVE, *_reduce(self.order), *unlock)
        if self.script[op] == "block":
            return S_GET, S_LOCK_DECIDE if self.order == "locked-block" else S_DECIDE, S_LOCK_REMOVE, S_UNLOCK, S_STATS
        body = _add(self.order) if self.script[op] == "move 2" else (ADD_CHECK, *_reduce(self.order))
        return (SWITCH, *lock, FOR_INIT, *body, FOR_NEXT, *unlock)

    def ops(self, thread: int) -> int:
        return len(self.script) if thread == 0 else self.acks

    def initial(self) -> LocksState:
        idle = Thread(0, 0, -1, 0)
        return LocksState(DRAINER, self.pending, -1, (), -1, -1, (idle, idle), ())

    def terminal_ok(self, state: LocksState) -> bool:
        return all(t.op == self.ops(i) for i, t in enumerate(state.threads))

    def _next(self, state: LocksState, i: int) -> str:
        t = state.threads[i]
        return DONE if t.op == self.ops(i) else self.program(i, t.op)[t.pc]

    def enabled(self, state: LocksState) -> Sequence[Action]:
        out = []
        for i, name in enumerate(ACTION_NAMES):
            instruction = self._next(state, i)
            if instruction == DONE:
                continue
            if instruction == LOCK_MAP and state.map_lock != -1:
                continue
            if instruction in _TRACKER_LOCKING and state.tracker_lock not in (-1, i):
                continue
            out.append(Action.of(name, step=instruction))
        return out

    def step(self, state: LocksState, action: Action) -> tuple[LocksState, Observation]:
        if action not in self.enabled(state):
            raise ActionNotEnabled(action, "not offered in this state (see KeySharedLocksModel.enabled)")
        return _Run(self, state, ACTION_NAMES.index(action.name)).result(), None

    def key(self, state: LocksState) -> Hashable:
        return state

    def vars(self, state: LocksState) -> dict[str, Json]:
        return {
            "owner": state.owner,
            "pending": state.pending,
            "slot": state.slot,
            "entries": [[e.consumer, e.ref_count, e.blocked, e.unblocks] for e in state.entries],
            "tracker_lock": state.tracker_lock,
            "map_lock": state.map_lock,
            "threads": [[self._next(state, i), t.entry, t.left] for i, t in enumerate(state.threads)],
            "broken": list(state.broken),
        }


def _unbroken(name: str) -> Callable[[LocksState], bool]:
    return lambda s: name not in s.broken


class _Run:
    """One instruction of one thread on a thawed state."""

    def __init__(self, model: KeySharedLocksModel, s: LocksState, i: int) -> None:
        self.model, self.i = model, i
        self.owner, self.pending, self.slot = s.owner, s.pending, s.slot
        self.entries = list(s.entries)
        self.tracker_lock, self.map_lock = s.tracker_lock, s.map_lock
        self.threads = list(s.threads)
        self.broken = set(s.broken)
        t = s.threads[i]
        self.t = t
        program = model.program(i, t.op)
        self.jump: int | None = None  # the pc to continue at, or None for the next instruction
        self.execute(program[t.pc], program)
        pc = t.pc + 1 if self.jump is None else self.jump
        t = self.t
        self.threads[i] = t._replace(pc=pc) if pc < len(program) else Thread(t.op + 1, 0, -1, 0)

    def result(self) -> LocksState:
        return LocksState(self.owner, self.pending, self.slot, tuple(self.entries), self.tracker_lock,
                          self.map_lock, (self.threads[0], self.threads[1]), tuple(sorted(self.broken)))

    def _skip_to(self, program: tuple[str, ...], instruction: str) -> None:
        self.jump = program.index(instruction, self.t.pc)

    def _entry(self) -> Entry:
        return self.entries[self.t.entry]

    def _set_entry(self, entry: Entry) -> None:
        self.entries[self.t.entry] = entry
        if entry.ref_count < 0:
            self.broken.add("LK-1")

    def _outside_lock(self) -> None:
        if self.tracker_lock == self.i:
            self.broken.add("LK-4")

    def _end_of_call(self, program: tuple[str, ...]) -> None:
        """Leave the current tracker call: on to the forEach's next iteration, the map's unlock, or the end."""
        after = [program.index(x) for x in (FOR_NEXT, UNLOCK_MAP) if x in program]
        self.jump = after[0] if after else len(program)

    def execute(self, instruction: str, program: tuple[str, ...]) -> None:
        t = self.t
        if instruction == LOCK_MAP:
            self.map_lock = self.i
        elif instruction == UNLOCK_MAP:
            self.map_lock = -1
        elif instruction == ACK_REMOVE:
            self.pending -= 1
        elif instruction == SWITCH:
            self.owner = 2 if self.model.script[t.op] == "move 2" else DRAINER
        elif instruction == FOR_INIT:
            if self.pending == 0:
                self.jump = program.index(FOR_NEXT) + 1
            else:
                self.t = t._replace(left=self.pending)
        elif instruction == FOR_NEXT:
            if t.left > 1:
                self.t = t._replace(left=t.left - 1, entry=-1)
                self.jump = program.index(FOR_INIT) + 1
        elif instruction == ADD_CHECK:  # registerDrainingHashes ADD: reduce only an entry consumer 1 drains
            if self.slot == -1 or self.entries[self.slot].consumer != DRAINER:
                self._end_of_call(program)
        elif instruction in (R_GET, S_GET):  # getEntry under the read lock
            if self.slot == -1:
                self._end_of_call(program)
            else:
                self.t = t._replace(entry=self.slot)
        elif instruction == R_DEC:
            entry = self._entry()
            self._set_entry(entry._replace(ref_count=entry.ref_count - 1))
            if entry.ref_count - 1 != 0:
                self._end_of_call(program)
        elif instruction == R_LOCK_REMOVE:
            self.tracker_lock = self.i
            removed = self.slot
            self.slot = -1
            if removed == -1:
                self.broken.add("LK-5")  # removed.isBlocking() on null
                return
            if removed != t.entry:
                self.broken.add("LK-3")
            gone = self.entries[removed]
            if gone.ref_count > 0 or (self.owner != gone.consumer and self.pending > 0):
                self.broken.add("LK-2")
            self.entries[removed] = gone._replace(unblocks=gone.blocked > 0)  # not closing, and blocking
            self.t = t._replace(entry=removed)
        elif instruction in (R_UNLOCK, A_UNLOCK, S_UNLOCK):
            self.tracker_lock = -1
        elif instruction in (R_NOTIFY, R_STATS, A_STATS, S_STATS):
            self._outside_lock()
            if instruction == S_STATS:
                self._end_of_call(program)
        elif instruction == A_LOCK_GET:
            self.tracker_lock = self.i
            if self.slot == -1:
                self.entries.append(Entry(DRAINER, 0, 0, False))
                self.slot = len(self.entries) - 1
            self.t = t._replace(entry=self.slot)
        elif instruction == A_INC:
            entry = self._entry()
            self._set_entry(entry._replace(ref_count=entry.ref_count + 1))
        elif instruction == S_DECIDE:
            entry = self._entry()
            if entry.consumer != self.owner:  # another consumer drains it: blocked
                self._set_entry(entry._replace(blocked=entry.blocked + 1))
                if self.slot != t.entry and not entry.unblocks:
                    self.broken.add("LK-6")  # blocked by an entry already gone without an unblocking call
                self.jump = len(program)
        elif instruction == S_LOCK_DECIDE:  # one critical section: nothing else can run inside it
            entry = self._entry()
            if entry.consumer != self.owner:
                if self.slot == t.entry:  # removed meanwhile: the hash no longer drains, so do not block
                    self._set_entry(entry._replace(blocked=entry.blocked + 1))
                self.jump = len(program)
            else:
                self.tracker_lock = self.i  # held on into the lazy removal
        elif instruction == S_LOCK_REMOVE:  # the hash came back to its drainer: remove(h), whatever it holds
            self.tracker_lock = self.i
            self.slot = -1
        else:
            raise AssertionError(f"unknown instruction {instruction!r}")
