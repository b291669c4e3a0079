"""The delayed-delivery tracker's port vocabulary (one scope).

Meanings keyed by the model's own names; `brokerspec protocol` adds types and examples from the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.mechanism import ActionDoc, Vocabulary

_POSITION = "[ledger, entry] a message position"
DELAYED = Vocabulary(
    config={
        "tick": "T, the tick time in ms (bucket precision P is the largest power of 2 <= T)",
        "strict": "strict mode: never offer before D (else up to T early)",
        "lookahead": "fixed-delay detection: should_pause may pause once this many are tracked (0: off)",
        "ledgers": "ledger ids; positions are ledgers x entries",
        "entries": "entry ids",
        "max_deliver_at": "the largest D offered; the clock stops at max_deliver_at + P - 1",
        "limits": "limits offered to get_scheduled",
        "round_size": "the limit of the round a timer fire (or a foreign run) triggers",
        "extra_deliver_at": "D values always offered to add",
        "extra_now": "clock values always offered to advance",
    },
    vars={
        "now": "the virtual clock, ms",
        "buckets": "the tracked messages in (bucket key, ledger, entry) order",
        "buckets[]": "[key, ledger, entry] a tracked message and the bucket key it is stored under",
        "buckets[].key": "the bucket key (D trimmed to precision P; rounded up in strict mode)",
        "buckets[].ledger": "ledger id",
        "buckets[].entry": "entry id",
        "count": "the tracker's count of tracked messages",
        "memory": "bytes of the roaring bitmaps, summed per (key, ledger)",
        "highest": "the highest D seen (fixed-delay detection)",
        "fixed": "every D so far was within tick of the highest (fixed-delay detection)",
        "timer": "[target, deadline] the armed timer; [] when none is armed",
        "timer.target": "the bucket key the armed timer is for",
        "timer.deadline": "when the timer fires, ms",
        "last_tick_run": "when the last timer run (fire or foreign run) happened",
        "deliver_at": "the dispatcher's exact D per position read so far, in the configured positions' order (ledgers, "
                      "then entries)",
        "deliver_at[]": "[ledger, entry, d] a position and its D (-1: no delay)",
        "deliver_at[].ledger": "ledger id",
        "deliver_at[].entry": "entry id",
        "deliver_at[].d": "deliver-at time, ms",
    },
    actions={
        "add": ActionDoc("a cursor read of a message through the dispatcher (tracked when its D is in the future)",
                         "for every position: D in the choices around bucket edges and the tick (first read) or its "
                         "own D (re-read)",
                         {"ledger": "ledger id", "entry": "entry id", "deliver_at": "D, ms (-1: no delay)"}),
        "advance": ActionDoc("move the clock to `now`", "now is a clock target: next ms, bucket edges, the head "
                             "bucket, the timer deadline, a message becoming deliverable",
                             {"now": "the new clock value (absolute)"}),
        "get_scheduled": ActionDoc("one dispatcher round: get_scheduled_messages(limit), then re-check each offer's D",
                                   "always (limit from config limits)", {"limit": "the round's limit"}),
        "fire": ActionDoc("the armed timer fires and runs a round of round_size",
                          "a timer is armed and now >= deadline"),
        "run": ActionDoc("run() called with a stale handle", "always",
                         {"handle": '"foreign" (an uncancelled stale handle: runs a round) or "cancelled" (no-op)'}),
        "should_pause": ActionDoc("the dispatcher asks should_pause_all_deliveries()", "always"),
        "clear": ActionDoc("clear the tracker (the armed timer stays, stale)", "always"),
    },
    observation={
        "delivered": "add: whether the message was delivered at once (not held); a round: the positions delivered, in "
                     "delivery order",
        "delivered[]": _POSITION,
        "delivered[].ledger": "ledger id",
        "delivered[].entry": "entry id",
        "offered": "a round: the positions the tracker offered, in order",
        "offered[]": _POSITION,
        "offered[].ledger": "ledger id",
        "offered[].entry": "entry id",
        "pause": "should_pause's answer",
    },
)

VOCABULARIES: Mapping[str, Vocabulary] = {"delayed": DELAYED}
"""Its one scope's meanings."""


def scope_of(config: Mapping[str, Param]) -> str:
    """One scope: every configuration speaks the same vocabulary."""
    return "delayed"
