"""The lock scope's state and configuration (see `models/keyshared/locks.py`): its orders, threads and invariants,
the default configuration, and the state tuples (entries, a thread's registers and position, the whole state).

Kept apart from the compiled programs and the step runner so that the reference's adapter, the coverage marks
and the tests read what a state is without the code that makes one.
"""

from __future__ import annotations

from typing import NamedTuple

from models.core import Param

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
