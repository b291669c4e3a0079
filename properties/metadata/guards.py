"""What names a wrong value of each variable conformance compares in the metadata store (`Mechanism.guards`)."""

from __future__ import annotations

from properties.engines.mechanism import HARNESS_INPUT, Guard

GUARDS: dict[str, dict[str, Guard]] = {
    "metadata": {
        "now": Guard((HARNESS_INPUT,)),  # the virtual clock the harness advances
        "closed": Guard(("MD-I4", "MD-I10")),
        "threads": Guard(("MD-I1", "MD-I2", "MD-I5")),
        "read_q": Guard(("MD-I4",)),
        "write_q": Guard(("MD-I4",)),
        "ops": Guard(("MD-I4", "MD-I9", "MD-I10")),
        "tree": Guard(("MD-I7",)),
        "cache": Guard(("MD-I7", "MD-I8", "MD-LK2")),
        "flush_lock": Guard(("MD-I3", "MD-I5", "MD-LK1")),
        "flush_in_progress": Guard(("MD-I3",)),
        "key_locks": Guard(("MD-I5", "MD-LK2")),
        "flush_timer": Guard(("MD-I4",)),  # a lost flush leaves writes unanswered at quiescence
        "deadlock": Guard(("MD-I5",)),
        "stuck": Guard(("MD-I5",)),
    },
    # The lock scope (properties/metadata/locks.py): its ledger judges MD-LK1, MD-LK3, MD-LK4 and MD-I10.
    "metadata/locks": {
        "closed": Guard(("MD-I10", "MD-LK3")),  # a batch sent once closed; an op lost across close
        "read_ops": Guard(("MD-LK3",)),  # an op out of its queue unanswered
        "write_ops": Guard(("MD-LK3",)),
        "ops": Guard(("MD-LK3", "MD-I10")),  # a pending op nobody holds; a sent op after close
        "locks": Guard(("MD-LK1", "MD-LK4")),  # a flush or a poll outside the monitor
        "cancelled": Guard(("MD-LK3",)),  # a lost periodic task leaves an op pending at quiescence
        "threads": Guard(("MD-LK1", "MD-LK3")),  # a thread inside flush without the monitor; an op in no one's hands
        "broken": Guard(("MD-LK1", "MD-LK3", "MD-LK4")),
    },
}
