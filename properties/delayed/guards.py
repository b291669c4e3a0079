"""What names a wrong value of each variable conformance compares in delayed delivery (`Mechanism.guards`)."""

from __future__ import annotations

from properties.engines.mechanism import HARNESS_INPUT, Guard

GUARDS: dict[str, dict[str, Guard]] = {
    "delayed": {
        "now": Guard((HARNESS_INPUT,)),  # the harness's clock
        "buckets": Guard(("DD-I3", "DD-I5")),
        "count": Guard(("DD-I5",)),
        "memory": Guard(("DD-I7",)),
        "highest": Guard(("DD-I8",)),
        "fixed": Guard(("DD-I8",)),
        "timer": Guard(("DD-I6",)),
        "last_tick_run": Guard(("DD-I11",)),
        "deliver_at": Guard(("DD-I1", "DD-I2")),
    },
}
