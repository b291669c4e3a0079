"""What names a wrong value of each variable conformance compares in Key_Shared (`Mechanism.guards`).

Each guard is an oracle the reference adapter judges from the harness's own record (`reference_judges`):
for the dispatcher scope KS-I1, KS-I2 and KS-I4 on what the clients hold, KS-I5a on the blocking entries a
step released, KS-I8 on the recorded joins, KS-C1 and KS-C2 on the harness's acks, jumps, publishes and
flows, KS-C3 on the twins' bookkeeping the current variant must not keep, KS-C4 on the reads in flight when
the first consumer joined, KS-J1 and KS-J2 on the cursor and
the places of every unacknowledged message. Where no oracle exists yet, `unguarded` says why; `check`
then reports a divergence there as a defect of the harness, not as a bare difference.
"""

from __future__ import annotations

from properties.engines.mechanism import HARNESS_INPUT, Guard

DISPATCHER: dict[str, Guard] = {
    "messages": Guard(("KS-C2",)),
    "consumers": Guard(("KS-I8", "KS-C2")),  # ids, names and name indexes (KS-I8); permits (KS-C2)
    "pending": Guard(("KS-I2", "KS-J2")),
    "unacked": Guard(("KS-U1",)),  # against the consumer's own pending acks
    "total_permits": Guard(("KS-P1",)),  # against the harness's count of the consumers' permits
    "queued_flows": Guard(("KS-P1",)),  # the connected consumers' queued flows complete the total
    "held": Guard(("KS-I1", "KS-I2", "KS-I4")),  # the deliveries the reference logged
    "ring": Guard(("KS-I8",)),
    "read_position": Guard(("KS-J2",)),
    "mark_delete": Guard(("KS-C1",)),
    "acked": Guard(("KS-C1",)),
    "replay": Guard(("KS-J1", "KS-J2")),
    "draining": Guard(("KS-I2",)),  # owner and ref count; the blocked flag only through the reads it causes
    "recently_joined": Guard(("KS-C3",)),  # the twins' bookkeeping: pip379 keeps none
    "last_sent": Guard(("KS-C3",)),  # the twins' bookkeeping: pip379 keeps none
    "sent": Guard(("KS-C3",)),  # the twins' bookkeeping: pip379 keeps none
    "stuck_on_replays": Guard(("KS-C3",)),  # the twins' bookkeeping: pip379 keeps none
    "scheduled_read": Guard(("KS-I5a",)),
    # The look-ahead flag: one a pass owed and left unset (KS-S2), or one whose absence makes a read replay the same
    # entries again, a read that changes nothing (KS-S1); one set wrongly costs a read, which no oracle names.
    "skip_next_replay": Guard(("KS-S1", "KS-S2")),
    "reads_in_flight": Guard(("KS-J2",)),  # a Normal read's positions are one of an unacked message's places
    "rewind_pending": Guard(("KS-C4",)),
    "nacked": Guard(("KS-C1",)),  # the harness's negative acks, less what the reference's cursor acknowledged
    "settled": Guard((HARNESS_INPUT,)),
    "pinned": Guard((HARNESS_INPUT,)),
    "events": Guard(unguarded="coverage events (a promotion, an unblock inside a pass, a hash back with its "
                              "drainer, a jump's release, a reset back): no oracle of their own"),
}

TRACKER: dict[str, Guard] = {
    "consumers": Guard(("KS-C5",)),  # ids and names are the harness's; whether the map is closed
    "owners": Guard((HARNESS_INPUT,)),  # the harness's own selector
    "pending": Guard(("KS-I2",)),  # every insertion and removal goes through the handlers KS-I2 counts
    "draining": Guard(("KS-I2",)),
    "batch_level": Guard(("KS-I3",)),
    "unblocked_while_batching": Guard(("KS-I3",)),
    "replay": Guard(unguarded="what a closing map handed back: no oracle yet"),
    "events": Guard(unguarded="coverage events of the pending-acks map: no oracle of their own"),
}

LOCKS: dict[str, Guard] = {
    "owner": Guard((HARNESS_INPUT,)),  # the scripts move the hash: the dispatcher thread alone changes it
    "owners": Guard((HARNESS_INPUT,)),  # with two hashes: as `owner`, each moved by the one membership-changing thread
    "pending": Guard(("LK-1", "LK-2")),  # a pending ack counted wrongly drives a ref count below 0 or removes early
    "closed": Guard(unguarded="a map closed at the wrong moment: no oracle, only the acks it then refuses"),
    "draining": Guard(("LK-1", "LK-2", "LK-3", "LK-6")),  # the ledger sees every entry each step changed
    "batch_level": Guard(("LK-6",)),  # an unblock deferred to a batch is owed by whoever ends it
    "unblocked_while_batching": Guard(("LK-6",)),
    "stats": Guard(unguarded="the stats' content: LK-4 judges only where they are updated"),
    "locks": Guard(("LK-4",)),  # the tracker's holder at a handler or stats step; a map's only by what it forbids
    "unblocked": Guard(("LK-6",)),  # every removal of a blocking entry owes a call, through batches
    "replay": Guard(unguarded="what a closing map handed to redelivery: no oracle yet"),
    "blocks": Guard(("LK-6",)),  # a block counted on an entry already removed without a call
    "threads": Guard(unguarded="a thread's next operation: a difference is the code's structure differing from the "
                               "model's, reported as a disagreement naming the thread and both operations"),
    "broken": Guard(("LK-1", "LK-2", "LK-3", "LK-4", "LK-5", "LK-6")),  # the reference's own verdicts
}

GUARDS: dict[str, dict[str, Guard]] = {
    "keyshared": DISPATCHER,
    "keyshared/tracker": TRACKER,
    "keyshared/locks": LOCKS,
}
