"""Reference implementation of Pulsar's Key_Shared draining hashes (PIP-379) and its predecessors.

Spec: docs/spec/keyshared.md. Depends only on the standard library and `mmh3`; everything is
synchronous and deterministic. A harness drives `KeySharedDispatcher` (see its module docstring for
how to read the state) or the components on their own.
"""

from .common import Consumer, ConsumerDrainingStats, IllegalStateError, Position
from .dispatcher import (
    LEDGER_ID,
    VARIANTS,
    Delivery,
    DrainingRemoveHandler,
    Interleave,
    KeySharedDispatcher,
    ReadOp,
    ReadResult,
    ReadType,
)
from .draining import DrainingHashEntry, DrainingHashesTracker
from .hashing import (
    DEFAULT_RANGE_MAX,
    NONE_KEY,
    STICKY_KEY_HASH_NOT_SET,
    make_sticky_key_hash,
    murmur3_32,
    resolve_sticky_key,
)
from .locks import (
    DISPATCHER_LOCK,
    SELECTOR_LOCK,
    TRACKER_LOCK,
    LockEvent,
    LockTracer,
    pending_lock,
    stats_lock,
)
from .pending_acks import (
    PENDING_ACK_NOT_FOUND,
    PendingAcksAddHandler,
    PendingAcksMap,
    PendingAcksOwner,
    PendingAcksRemoveHandler,
)
from .redelivery import RecentlyJoinedConsumers, RedeliveryMessages, advance_last_sent_position
from .selector import (
    ConsistentHashingStickyKeyConsumerSelector,
    ConsumerHashAssignmentsSnapshot,
    ConsumerNameIndexTracker,
    HashRangeAssignment,
    ImpactedConsumersResult,
    OperationType,
    Range,
    UpdatedHashRanges,
)
from .views import ConsumerView, DispatcherView, DrainingView

__all__ = [
    "DEFAULT_RANGE_MAX",
    "DISPATCHER_LOCK",
    "LEDGER_ID",
    "NONE_KEY",
    "PENDING_ACK_NOT_FOUND",
    "SELECTOR_LOCK",
    "STICKY_KEY_HASH_NOT_SET",
    "TRACKER_LOCK",
    "VARIANTS",
    "ConsistentHashingStickyKeyConsumerSelector",
    "Consumer",
    "ConsumerDrainingStats",
    "ConsumerHashAssignmentsSnapshot",
    "ConsumerNameIndexTracker",
    "ConsumerView",
    "Delivery",
    "DispatcherView",
    "DrainingHashEntry",
    "DrainingHashesTracker",
    "DrainingRemoveHandler",
    "DrainingView",
    "HashRangeAssignment",
    "IllegalStateError",
    "ImpactedConsumersResult",
    "Interleave",
    "KeySharedDispatcher",
    "LockEvent",
    "LockTracer",
    "OperationType",
    "PendingAcksAddHandler",
    "PendingAcksMap",
    "PendingAcksOwner",
    "PendingAcksRemoveHandler",
    "Position",
    "Range",
    "ReadOp",
    "ReadResult",
    "ReadType",
    "RecentlyJoinedConsumers",
    "RedeliveryMessages",
    "UpdatedHashRanges",
    "advance_last_sent_position",
    "make_sticky_key_hash",
    "murmur3_32",
    "pending_lock",
    "resolve_sticky_key",
    "stats_lock",
]
