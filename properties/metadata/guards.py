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
}
