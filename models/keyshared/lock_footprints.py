"""What the lock scope's instructions touch, for partial-order reduction (see `models/keyshared/locks.py`).

`reach` is the union of what a thread may read and write from a point of its program: up to its next scheduling
point (a step's footprint) or to its end or a lock other threads hold (its future). It reads the compiled
programs only, never a state, so the model computes each once per position.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from models.core import Footprint
from models.keyshared.lock_program import Instruction


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
    entries), `map<c>` (consumer c's PendingAcksMap: lock, acks, closed flag), `size<c>` (its volatile size,
    #26019), `stats<c>`, `owner<h>`, `inc<c>` (consumer c's object), `acked<c>` (what c's client acked),
    `unblocked` (the handler's calls, in order), `dispatcher` (its monitor), `replay` and `blocks`. The flags a
    step raises are computed from what it reads; LK-4 reads whether the step's own thread holds the tracker lock,
    which no other thread can change."""
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
        "get or create": (f"inc{c}",), "read count": per_hash("ref"), "size": (f"size{c}",),
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
        "drop next": (f"map{who}",), "drop": (f"map{who}",), "size": (f"size{c}",), "client acks": (f"acked{who}",),
        "client acks up to": (f"acked{who}",),
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


def reach(programs: tuple[tuple[Instruction, ...], ...], op: int, pc: int, step: bool,
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
