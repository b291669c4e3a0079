"""The executable spec of Key_Shared's draining hashes (PIP-379) and its predecessors (`docs/spec/keyshared.md`).

Pure transition systems, written from the spec independently of `reference_impl/keyshared/`, so that
they can be run in lockstep (`properties/keyshared/binding.py`). Three scopes, selected by the config
key `scope`, one module each:

``dispatcher.py``  `KeySharedModel`: the whole dispatcher of one subscription (§4.4–§4.6), with the
                   harness's client record; its state in ``state.py``, its operations in ``dispatch.py``
``tracker.py``     `KeySharedTrackerModel`: `PendingAcksMap` and `DrainingHashesTracker` alone (§4.2, §4.3)
``locks.py``       `KeySharedLocksModel`: the tracker and its callers at upstream's lock granularity; its
                   state in ``lock_state.py``, its programs in ``lock_program.py``, their footprints in
                   ``lock_footprints.py``

``ring.py`` holds what the scopes and the pipeline share: the sticky-key hash and the ring (§2, §4.1).
Each scope's module lists its actions, observations and configuration keys; the names of one scope
that another has too (`DEFAULT_CONFIG`, `ACTION_NAMES`, `VARIANTS`) are imported from its module
(the dispatcher's from ``state.py``, the lock scope's from ``lock_state.py``).
"""

from models.keyshared.dispatcher import KeySharedModel
from models.keyshared.lock_state import LocksState
from models.keyshared.locks import KeySharedLocksModel
from models.keyshared.ring import Ring, build_ring, claims, ring_points, sticky_hash
from models.keyshared.state import (
    CAME_BACK,
    JUMP_RELEASED,
    JUMPS,
    NORMAL,
    PROMOTED,
    REPLAY,
    RESET_BACK,
    UNBLOCKED_IN_PASS,
    UNKNOWN_HASH,
    Consumer,
    Draining,
    KSState,
)
from models.keyshared.tracker import KeySharedTrackerModel, TrackerState

__all__ = [
    "CAME_BACK",
    "JUMPS",
    "JUMP_RELEASED",
    "NORMAL",
    "PROMOTED",
    "REPLAY",
    "RESET_BACK",
    "UNBLOCKED_IN_PASS",
    "UNKNOWN_HASH",
    "Consumer",
    "Draining",
    "KSState",
    "KeySharedLocksModel",
    "KeySharedModel",
    "KeySharedTrackerModel",
    "LocksState",
    "Ring",
    "TrackerState",
    "build_ring",
    "claims",
    "ring_points",
    "sticky_hash",
]
