"""What names a wrong value of each variable conformance compares in the PID quota (`Mechanism.guards`)."""

from __future__ import annotations

from properties.engines.mechanism import HARNESS_INPUT, Guard

GUARDS: dict[str, dict[str, Guard]] = {
    "pidquota": {
        "now": Guard((HARNESS_INPUT,)),  # the harness's clock
        # The schedule W, W + ΔT, ...: a cleanup that runs late keeps an idle principal (PQ-I5).
        "next_cleanup": Guard(("PQ-I5",)),
        # Per principal: the count (PQ-I12), the timer's arming (PQ-I13: a next_rotation off by a millisecond
        # broke none of the others), the layers' order, bits and containment (PQ-I10, PQ-I11), what a wrong
        # rotation or expiry does to the horizon and to merges (PQ-I1, PQ-I4a), and isolation (PQ-I8).
        "entries": Guard(("PQ-I12", "PQ-I13", "PQ-I10", "PQ-I11", "PQ-I1", "PQ-I4a", "PQ-I8")),
    },
}
