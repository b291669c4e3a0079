"""The producer-id quota's port vocabulary (one scope).

Meanings keyed by the model's own names; `brokerspec protocol` adds types and examples from the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.mechanism import ActionDoc, Vocabulary

_TIME = "advance(dt): the virtual clock moves dt ms (timers due on the way run at their own times)"

PIDQUOTA = Vocabulary(
    config={
        "window_ms": "W, the cache window in ms",
        "layer_count": "L >= 2 layers per window; W must be a multiple of L (dT = W / L)",
        "n_layer": "the per-layer design load: a rotation after this many merges",
        "principals": "principal names",
        "pids": "producer ids (distinct, >= 0)",
        "max_batch": "produce carries every ordered tuple of 1..max_batch distinct pids",
        "dts": "clock advances offered as advance(dt)",
        "boundaries": "also offer the advances that land on the next moment something changes",
        "cleanup": "offer cleanup",
        "hasher": '"exact" (pid x sets bit x) or "murmur" (the spec\'s Bloom hasher)',
    },
    vars={
        "now": "the virtual clock, ms",
        "next_cleanup": "when the manager's next scheduled clean_map runs (first at W, then every dT)",
        "entries": "the cache: one entry per principal present",
        "entries.*": "one principal's layered filter",
        "entries.*.count": "merges since the last rotation by count (advance_on_count)",
        "entries.*.next_rotation": "when the rotation timer is due (reported as max(due, now))",
        "entries.*.layers": "the layers, oldest first",
        "entries.*.layers[]": "[created, expires, bits] one layer",
        "entries.*.layers[].created": "when the layer was created",
        "entries.*.layers[].expires": "created + W",
        "entries.*.layers[].bits": "the set bits, ascending (exact hasher: the layer's pids)",
        "entries.*.layers[].bits[]": "a bit index",
    },
    actions={
        "produce": ActionDoc("the manager's on_produce: track each pid in order", "always",
                             {"principal": "the principal", "pids": "the batch, in tracking order",
                              "pids[]": "a producer id"}),
        "advance": ActionDoc(_TIME, "dt in dts, or (boundaries) a cleanup, rotation or layer age boundary",
                             {"dt": "ms to advance"}),
        "cleanup": ActionDoc("clean_map at the current time", "config cleanup"),
    },
    observation={
        "new": "produce: the pids counted new, in tracking order",
        "new[]": "a producer id",
        "removed": "advance/cleanup: principals whose entries clean_map removed, by name",
        "removed[]": "a principal",
    },
)

VOCABULARIES: Mapping[str, Vocabulary] = {"pidquota": PIDQUOTA}
"""Its one scope's meanings."""


def scope_of(config: Mapping[str, Param]) -> str:
    """One scope: every configuration speaks the same vocabulary."""
    return "pidquota"
