"""Key_Shared's DrainingHashesTracker at upstream's lock granularity: two to four threads, every interleaving.

`models/keyshared/tracker.py` makes each tracker method atomic. Upstream does not: a method is a few steps
separated by the tracker's read/write lock, the PendingAcksMap locks and the entry's atomics, and the
steps of the dispatcher thread and of a connection thread interleave. This model follows upstream's source
(apache/pulsar 0063cdd8 `DrainingHashesTracker.java`, 01df066a `PendingAcksMap.java`, 2b258c8c
`PersistentStickyKeyDispatcherMultipleConsumers.java`, with the points 90cba329a1 added: the map's volatile size
and the log lines' reads; `reference_impl/keyshared/lock_level.py` cites the lines) and splits it where the
deterministic scheduler of `reference_impl.concurrent` does: before every lock acquisition and every atomic
access (a release is no point: see `reference_impl/concurrent/executors.py`).

Each thread runs a script of operations, each compiled (`compile_op`) into instructions. An instruction with a
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

This module holds the model and its step runner; the state and the configuration's defaults are in
``lock_state.py``, the compiled programs (instructions, layout, scripts) in ``lock_program.py``, and what
each instruction touches, which the partial-order reduction reads, in ``lock_footprints.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

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
from models.keyshared.lock_footprints import Objects, reach
from models.keyshared.lock_program import Instruction, compile_op, layout, moves, thread_script
from models.keyshared.lock_state import (
    ACTION_NAMES,
    DEFAULT_CONFIG,
    DONE,
    EXEMPT,
    INVARIANTS,
    ORDERS,
    SILENT,
    UNBLOCKS,
    UNDECIDED,
    VARIANTS,
    WITH_MEMBERSHIP,
    Entry,
    LocksState,
    Registers,
    Thread,
)


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
        membership = thread_script(self.config, "membership", scope)
        if any(op.startswith("block") for op in membership):
            raise ValueError("keyshared lock config membership: only joins and leaves (the dispatcher dispatches)")
        self.monitored = bool(membership)
        dispatcher = thread_script(self.config, "dispatcher", scope)
        if membership and not all(op.startswith("block") for op in dispatcher):
            raise ValueError("keyshared lock config dispatcher: only 'block' with a membership thread")
        acker, acker2 = thread_script(self.config, "acker", scope, 1), thread_script(self.config, "acker2", scope, 2)
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
        return tuple(tuple(tuple(reach(programs, op, pc, step, self._objects) for pc in range(len(program)))
                           for op, program in enumerate(programs)) for programs in self.programs)

    @functools.cached_property
    def _futures(self) -> dict[tuple[int, int, int, frozenset[str]], Footprint]:
        """Per thread, operation, pc and locks others hold, what the rest of its program may touch (on demand)."""
        return {}

    def _names(self, threads: list[int]) -> list[Json]:
        return [self.threads[i] for i in threads]

    def footprint(self, state: LocksState, thread: str) -> Footprint:
        """What the thread's next step reads and writes (see `lock_footprints`), for partial-order reduction."""
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
            known = self._futures[key] = reach(self.programs[i], t.op, t.pc, False, self._objects, held)
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
        elif code == "skip if added":
            if regs.added:
                self.jump = ins.target
        elif code in ("read count", "size"):  # a volatile read for a log line, the map's size: nothing reads them
            pass
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
        elif code == "drop":
            mine.remove(regs.items[0])
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
