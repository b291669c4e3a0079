"""Key_Shared draining hashes bound to the engines: the registry entry over three scopes.

The dispatcher scope replays `reference_impl.keyshared.KeySharedDispatcher` through `KeySharedReference`
(`properties/keyshared/dispatcher.py`, with its configurations). A configuration with `scope: tracker` selects the
smaller scope of `PendingAcksMap` and `DrainingHashesTracker` alone (`models/keyshared/tracker.py`,
`properties/keyshared/tracker.py`), and `scope: locks` the tracker and its callers at upstream's lock granularity
(`models/keyshared/locks.py`), replayed on `reference_impl/keyshared/lock_level.py` stepped by the deterministic
scheduler (`properties/keyshared/locks.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.core import Model, Param
from models.keyshared import KeySharedModel
from models.keyshared.lock_state import DEFAULT_CONFIG as LOCKS_DEFAULT_CONFIG
from models.keyshared.locks import KeySharedLocksModel
from models.keyshared.tracker import EXPLORE_CONFIG as TRACKER_EXPLORE_CONFIG
from models.keyshared.tracker import HYPOTHESIS_CONFIG as TRACKER_HYPOTHESIS_CONFIG
from models.keyshared.tracker import WIDE_EXPLORE_CONFIG as TRACKER_WIDE_EXPLORE_CONFIG
from models.keyshared.tracker import KeySharedTrackerModel
from properties.engines.eventlog import EventLog
from properties.engines.lockstep import Implementation
from properties.engines.mechanism import BundledPort, Lanes, Mechanism, Property
from properties.keyshared import coverage as keyshared_coverage
from properties.keyshared import proofs as keyshared_z3
from properties.keyshared import protocol as keyshared_protocol
from properties.keyshared.dispatcher import (
    CORNER_CONFIGS,
    CURRENT,
    EXPLORE_CONFIGS,
    HYPOTHESIS_CONFIGS,
    JUMP_CONFIGS,
    JUMP_READ_FINDING,
    PERMITS_FINDING,
    PERMITS_NIGHTLY,
    TWINS,
    KeySharedReference,
)
from properties.keyshared.guards import GUARDS
from properties.keyshared.locks import KeySharedLocksReference
from properties.keyshared.tracker import KeySharedTrackerReference
from traces.limits import NON_NEGATIVE_LONG

# The lock scope (models/keyshared/locks.py), replayed on the upstream-granularity reference
# (reference_impl/keyshared/lock_level.py). `locks` moves the hash away, back and away again with dispatches
# between while the acker acks the drainer's two pending acks; `locks-batch` ends the draining with a cumulative
# ack (removeAllUpTo's handler batch) and then the drainer's own departure (a closing batch). Each order is its
# own configuration: the order is the tracker's code, not a dispatcher variant.
LOCKS_FINDING = "docs/findings/keyshared-tracker-lost-unblock.md"
_LOCKS_SCRIPT = {"dispatcher": ("join 2", "block", "block", "leave 2", "block", "join 2", "block"),
                 "acker": ("ack 0", "ack 1")}
_LOCKS_BATCH = {"dispatcher": ("join 2", "block", "leave 1", "block"), "acker": ("ack-up-to 1",)}
# Three threads: consumers join and leave on their own connection thread, so every dispatcher-side operation takes
# the dispatcher's monitor (upstream's synchronized addConsumer, removeConsumer and trySendMessagesToConsumers).
_LOCKS_MEMBERSHIP = {"dispatcher": ("block", "block", "block"), "membership": ("join 2", "leave 2", "join 2"),
                     "acker": ("ack 0", "ack 1")}
LOCKS_EXPLORE_CONFIGS: dict[str, Mapping[str, Param]] = {
    name: {**LOCKS_DEFAULT_CONFIG, **script, "order": order}
    for name, order, script in (("locks", "current", _LOCKS_SCRIPT), ("locks-batch", "current", _LOCKS_BATCH),
                                ("locks-fix", "locked-block", _LOCKS_SCRIPT),
                                ("locks-fix-batch", "locked-block", _LOCKS_BATCH),
                                ("locks-membership", "current", _LOCKS_MEMBERSHIP),
                                ("locks-fix-membership", "locked-block", _LOCKS_MEMBERSHIP),
                                ("locks-pre23854", "pre23854", _LOCKS_SCRIPT),
                                ("locks-unserialized", "unserialized", _LOCKS_SCRIPT))
}
# The widened lock scope, nightly (`brokerspec explore --mechanism keyshared --config locks-wide`): two sticky
# hashes, consumers 1 and 2 each owning one and holding four pending acks of it, each acking on its own
# connection thread (acker, acker2), so three threads. Consumer 3 joins and takes both hashes (both consumers
# drain at once), leaves (both hashes go back to their drainers: two ADD parts), joins again, then the drainers
# leave in turn (closing batches) while the ackers ack singly and in removeAllUpTo batches.
_WIDE_SCOPE: dict[str, Param] = {"present": (1, 2), "hashes": ((3, 1), (3, 2)), "pending": 4,
                                 "pending2": (2, 2, 2, 2)}
_WIDE_ACKS: dict[str, Param] = {"acker": ("ack 1", "ack 0", "ack-up-to 2", "ack 3"),
                                "acker2": ("ack 11", "ack-up-to 12", "ack 10", "ack 13")}
_WIDE = {**_WIDE_SCOPE, **_WIDE_ACKS,
         "dispatcher": ("join 3", "block 1", "block 2", "block 1", "leave 3", "block 1", "block 2", "join 3", "block 1",
                        "block 2", "leave 1", "block 2", "leave 2")}
# Four threads: the same moves on a membership thread, the dispatcher only dispatching (under its monitor).
_WIDE_MEMBERSHIP = {**_WIDE_SCOPE, **_WIDE_ACKS, "dispatcher": ("block 1", "block 2") * 3,
                    "membership": ("join 3", "leave 3", "join 3", "leave 1")}
# The twin without the map locks races far more (every step of every thread interleaves): a shorter script, in
# which it still breaks all five invariants it breaks on the default scope.
_WIDE_TWIN = {**_WIDE_SCOPE, "pending": 2, "pending2": (2, 2), "acker": ("ack 0", "ack 1"),
              "acker2": ("ack 10", "ack-up-to 11"),
              "dispatcher": ("join 3", "block 1", "block 2", "leave 3", "block 1", "join 3", "block 2")}
# The smallest widened script, whose every transition a test replays on the code.
_WIDE_SMALL = {**_WIDE_SCOPE, "pending": 1, "pending2": (2,), "acker": ("ack 0",), "acker2": ("ack-up-to 10",),
               "dispatcher": ("join 3", "block 1", "block 2", "leave 3", "block 2")}
LOCKS_NIGHTLY_CONFIGS: dict[str, Mapping[str, Param]] = {
    name: {**LOCKS_DEFAULT_CONFIG, **script, "order": order}
    for name, order, script in (("locks-wide-small", "current", _WIDE_SMALL), ("locks-wide", "current", _WIDE),
                                ("locks-wide-fix", "locked-block", _WIDE),
                                ("locks-wide-pre23854", "pre23854", _WIDE),
                                ("locks-wide-unserialized", "unserialized", _WIDE_TWIN),
                                ("locks-wide-membership", "current", _WIDE_MEMBERSHIP),
                                ("locks-wide-fix-membership", "locked-block", _WIDE_MEMBERSHIP))
}
"""Explored by name (`explore --config`), not in the default check: seconds to minutes each (see the finding)."""
LOCKS_FINDINGS: dict[str, Mapping[str, str]] = {
    "locks": {"LK-6": LOCKS_FINDING},  # upstream's current order loses a wake-up
    "locks-batch": {"LK-6": LOCKS_FINDING},  # also when the drainer's last ack is a cumulative one
    "locks-membership": {"LK-6": LOCKS_FINDING},  # and with the dispatcher's monitor and a membership thread
    "locks-pre23854": {"LK-4": LOCKS_FINDING},  # the twin: handler and stats inside the synchronized methods
    # the twin: callers without the PendingAcksMap lock
    "locks-unserialized": {name: LOCKS_FINDING for name in ("LK-1", "LK-2", "LK-3", "LK-5", "LK-6")},
    # the widened scope: the same lost wake-up, on either hash, and the same twins' verdicts
    "locks-wide-small": {"LK-6": LOCKS_FINDING},
    "locks-wide": {"LK-6": LOCKS_FINDING},
    "locks-wide-membership": {"LK-6": LOCKS_FINDING},
    "locks-wide-pre23854": {"LK-4": LOCKS_FINDING},
    "locks-wide-unserialized": {name: LOCKS_FINDING for name in ("LK-1", "LK-2", "LK-3", "LK-5", "LK-6")},
}
"""What each lock configuration must break (see Mechanism.findings); the `locks-fix*` ones must break nothing."""
FINDINGS: dict[str, Mapping[str, str]] = {
    **LOCKS_FINDINGS,
    "jump-read": {"KS-I5a": JUMP_READ_FINDING},  # a read in flight across a jump: a blocked message, no read scheduled
    "permits": {"KS-P1": PERMITS_FINDING},  # nightly: a leaver's queued flow is taken off the total and never added
}
"""Every configuration's known findings: the lock scope's, the jump-during-read one (`jump-read-fix` breaks
nothing) and the queued-flow one (nightly `permits`; `permits-fix` breaks nothing)."""
# Hypothesis samples longer runs than the explorer's, upstream's order with all three threads, on LK-1..LK-5: LK-6,
# the known finding the explorer reports, would end every run at its first lost wake-up.
LOCKS_HYPOTHESIS_CONFIG: dict[str, Param] = {
    **LOCKS_DEFAULT_CONFIG, "pending": 4, "unchecked": ("LK-6",),
    "dispatcher": ("block",) * 8,
    "membership": ("join 2", "leave 2", "join 2", "leave 2", "join 2", "leave 1"),
    "acker": ("ack 1", "ack 0", "ack-up-to 2", "ack 3"),
}


def _scope(config: Mapping[str, Param] | None) -> Param | None:
    """`scope: tracker` selects the PendingAcksMap + DrainingHashesTracker scope (models/keyshared/tracker.py),
    `scope: locks` the tracker at lock granularity (models/keyshared/locks.py)."""
    return config.get("scope") if config is not None else None


def make_model(config: Mapping[str, Param] | None, variant: str) -> Model[Any]:
    scope = _scope(config)
    if scope == "locks":
        return KeySharedLocksModel(config, variant)
    return KeySharedTrackerModel(config, variant) if scope == "tracker" else KeySharedModel(config, variant)


def make_reference(config: Mapping[str, Param] | None, variant: str) -> Implementation:
    scope = _scope(config)
    if scope == "locks":
        return KeySharedLocksReference(config, variant)
    if scope == "tracker":
        return KeySharedTrackerReference(config, variant)
    return KeySharedReference(config, variant)


def event_log() -> EventLog:
    """The event log the Spark pipeline checks (imported when asked for: it brings Spark and Arrow)."""
    from properties.keyshared.eventlog import EVENT_LOG

    return EVENT_LOG


# EXPLORE_CONFIGS and HYPOTHESIS_CONFIGS are the dispatcher scope's; the registry adds the tracker
# scope's under the name "tracker" (so the dispatcher's stay the defaults) and the lock scope's last (the
# twins, caught at the dispatcher scope, never get there).
MECHANISM = Mechanism(
    name="keyshared",
    spec="docs/spec/keyshared.md",
    log=event_log,
    # A consumer's permits, pending acks and ring ranges on its lane; a sticky hash's draining entry and replays on its.
    lanes=Lanes(actor_of={"consumers": ("consumer", 0), "pending": ("consumer", 0), "held": ("consumer", 0),
                          "recently_joined": ("consumer", 0), "ring": ("consumer", 2), "draining": ("hash", 0),
                          "replay": ("hash", 1)}),
    bundled_port=BundledPort("node_tracker", "node", "tests/ports/node/tracker_port.js", "tracker"),
    limits={"points": (1, 1_000), "consumers": (0, 16), "max_consumers": (0, 16), "read_batch_size": (1, 1_000),
            "max_messages": (0, 500), "max_permits": (0, 1_000), "interleave": (0, 16), "max_batch_level": (0, 16),
            "range_max": (1, 2**31 - 1), "look_ahead_per_consumer": (0, 10**7),
            "look_ahead_per_subscription": (0, 10**8), "add_permits": (0, 1_000), "flow": (0, 1_000),
            "batch_sizes": (0, 1_000), "skip": (0, 1_000), "position_hashes": (0, 2**31 - 1),
            "position_ledgers": NON_NEGATIVE_LONG, "hashes": (1, 16), "present": (1, 16), "pending": (0, 16),
            "pending2": (0, 16), "max_queued_flows": (0, 1_000)},
    make_model=make_model,
    make_reference=make_reference,
    current=CURRENT,
    twins=TWINS,
    guards=GUARDS,
    reference_judges={
        "keyshared": ("KS-I1", "KS-I2", "KS-I4", "KS-I5a", "KS-I8", "KS-C1", "KS-C2", "KS-C3", "KS-C4",
                      "KS-J1", "KS-J2", "KS-U1", "KS-P1", "KS-S1", "KS-S2"),
        "keyshared/tracker": ("KS-I1", "KS-I2", "KS-I3", "KS-C5"),
        "keyshared/locks": ("LK-1", "LK-2", "LK-3", "LK-4", "LK-5", "LK-6"),
    },
    beyond_model={
        "KS-C1": Property("the cursor's mark-delete and individual acks are where the harness's own acks and cursor "
                          "jumps put them, by the cursor's rules", ("reference",)),
        "KS-C2": Property("the log holds the keys the harness published, in order, and each consumer's permits are "
                          "those it joined with, plus what it flowed, less what it was delivered", ("reference",)),
        "KS-C3": Property("the current dispatcher (pip379) keeps none of its predecessors' gates: no recently-joined "
                          "map, last-sent position, sent set or stuck-on-replays flag", ("reference",)),
        "KS-C5": Property("a consumer's pending-acks map is closed exactly when the harness closed it "
                          "(forEachAndClose), never by a clear", ("reference",)),
        "KS-C4": Property("a rewind is pending exactly from the first consumer's joining while a read is in flight "
                          "until every read then in flight has completed", ("reference",)),
        "KS-S2": Property("a read whose dispatch pass sends nothing while a connected consumer with permits could "
                          "progress by reading ahead (no entry of the read for it, or on a Normal read one blocked by "
                          "hash) leaves the look-ahead pending, so the next read reads ahead instead of replaying",
                          ("reference",)),
        "KS-I8": Property("the ring is canonical: each point selects its earliest-joined claimer, the others collide "
                          "in join order, and each name index was the lowest free one at its join", ("reference",)),
        "KS-I9": Property("the ranges a membership change reports removed and added are exactly the pointwise "
                          "difference of the ring before and after", ("tests",)),
        "KS-I10": Property("the reference's traced lock order is acyclic, and the unblock handler never runs under "
                           "the tracker or a stats lock", ("tests",)),
        "KS-W": Property("the Z3 dispatcher is well formed: message statuses within bounds, pending acks only at "
                         "connected consumers, and a consumer holding a hash it does not own is draining it", ("z3",)),
    },
    # Replayed in full first (the corners, the cursor jumps, the tracker scope and the lock scope: seconds each),
    # the broad bounded ones last, so a bug within the small configurations is killed before minutes go to the
    # large ones.
    quick_configs=("collide", "tracker", "locks"),  # one per scope: the dispatcher, the tracker, its locks
    explore_configs={**CORNER_CONFIGS, **JUMP_CONFIGS, "tracker": TRACKER_EXPLORE_CONFIG,
                     "tracker-wide": TRACKER_WIDE_EXPLORE_CONFIG, **LOCKS_EXPLORE_CONFIGS,
                     **{k: v for k, v in EXPLORE_CONFIGS.items() if k not in CORNER_CONFIGS and k not in JUMP_CONFIGS}},
    hypothesis_configs={**HYPOTHESIS_CONFIGS, "tracker": TRACKER_HYPOTHESIS_CONFIG, "locks": LOCKS_HYPOTHESIS_CONFIG},
    proofs=keyshared_z3.proofs,
    bench=keyshared_z3.bench,
    # The corner configurations (collide, ackjump, unblock) and the tracker are replayed in full; the
    # three broad ones have 60-200k transitions each, so the tour takes their shallowest ones.
    conformance_steps={"small": 50_000, "gap": 50_000, "interleave": 50_000},
    interesting=keyshared_coverage.INTERESTING,
    vocabularies=keyshared_protocol.VOCABULARIES,
    scope_of=keyshared_protocol.scope_of,
    findings=FINDINGS,
    nightly_configs={**LOCKS_NIGHTLY_CONFIGS, **PERMITS_NIGHTLY},
)
