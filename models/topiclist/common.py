"""Pieces both scopes share: the sizes and hash of §4.6, the executor-entry encoding, the request
outcome codes, and the error and reply texts (which the reference's must match for lockstep).

Separate because the pools (`pools.py`), both scopes and the model read them; it imports nothing
from the rest of the package.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import crc32c

LONG_MAX = 2**63 - 1
INITIAL_ESTIMATE = 10240
BACKOFF_INITIAL_MS = 100
BACKOFF_MAX_MS = 25000

# ---------------------------------------------------------------------------------------------
# Sizes and hash (§4.6)


@lru_cache(maxsize=4096)
def topics_hash(topics: tuple[str, ...]) -> str:
    """CRC32C of the sorted, comma-joined topics, as lowercase hex of the little-endian bytes."""
    value: int = crc32c.crc32c(",".join(sorted(topics)).encode("utf-8"))
    return value.to_bytes(4, "little").hex()


@lru_cache(maxsize=4096)
def heap_size(topics: tuple[str, ...]) -> int:
    return sum(len(t.encode("utf-8")) + 32 for t in topics)


def wire_size(strings: Sequence[str]) -> int:
    return 32 + sum(len(s.encode("utf-8")) + 4 for s in strings)


# ---------------------------------------------------------------------------------------------
# Executor entries and request outcomes

# Executor entries are ints: (trigger time - now) << 24 | kind << 20 | pool << 16 | argument.
# A tuple of them is kept in (trigger time, seq) order, so that order is the list order.
PASS, TIMEOUT, DEFERRED, RETRY = 0, 1, 2, 3
TSHIFT = 24
"""An entry's due time (relative to now) starts at this bit: `entry >> TSHIFT` is its delay in ms."""
TUNIT = 1 << TSHIFT
"""One ms of delay: an entry below it is due now."""
TMASK = TUNIT - 1
"""The bits of an entry below its delay (kind, pool, argument): what names an entry whatever its time."""


def make_entry(delta: int, kind: int, pool: int, arg: int) -> int:
    """The executor entry of `kind` for `pool` and `arg` (a request id), due `delta` ms from now."""
    return (delta << TSHIFT) | (kind << 20) | (pool << 16) | arg


# Request outcomes (semaphore-level futures), as codes.
PENDING, GRANTED, S_TIMEOUT, S_QUEUE_FULL, S_CLOSED, S_CANCELLED, S_CALLER = range(7)
STATUS_NAMES = ("pending", "granted", "Timeout", "QueueFull", "AlreadyClosed", "Cancelled", "caller_cancelled")


QEntry = tuple[int, int, int]
"""A queued request: (request id, permits, previous permit: id (semaphore) / 0 = the owner's p0
(flows), or -1 for an acquire)."""
Msg = tuple[Any, ...]
"""A reply attempt as recorded in a connection's log (see `TopicListModel.reply_json`)."""


# ---------------------------------------------------------------------------------------------
# Error messages (§2.1) and flow reply texts (§4.8)

MSG_TOO_MANY_LOOKUPS = "Failed due to too many pending lookup requests"
MSG_NOT_AUTHORIZED = "Client is not authorized to GetTopicsOfNamespace"
MSG_WATCH_NOT_AUTHORIZED = "Proxy Client is not authorized to watchTopicList"
MSG_HEAP_LIMIT = "Failed due to heap memory limit exceeded"
MSG_BROKER_DIRECT = "Cannot acquire permits for direct memory"
MSG_PROXY_DIRECT = "Failed due to direct memory limit exceeded"
MSG_PROXY_LOOKUPS = "Too many concurrent lookup and partitionsMetadata requests"
MSG_CLOSED_BEFORE_CREATION = "Closed watcher before creation was complete"

# Messages of exceptions the spec does not spell out (permit errors, serialization faults).
# The reference's texts must match these for lockstep; they are only ever carried by replies.
ERROR_MESSAGES: dict[int, str] = {
    S_TIMEOUT: "Permit acquisition timed out",
    S_QUEUE_FULL: "Permit acquisition queue is full",
    S_CLOSED: "Semaphore is already closed",
    S_CANCELLED: "Permit acquisition was cancelled",
}
LISTING_ERROR = "listing failed"
"""The error message `complete_listing(id, error=...)` is offered with."""


def serialization_message(request_id: int) -> str:
    return f"Failed to serialize the response to request {request_id}"


BROKER_ERROR_MESSAGES: dict[str, str] = {
    "AuthorizationError": "AuthorizationError",
    "AuthenticationError": "AuthenticationError",
    "ServiceNotReady": "ServiceNotReady",
}


def negative_message(n: int) -> str:
    return f"Invalid negative permits value: {n}"


def too_large_message(n: int, max_permits: int) -> str:
    return f"Requested permits={n} is larger than maxPermits={max_permits}"


# ---------------------------------------------------------------------------------------------
# Executor helpers


def insert_entry(q: list[int], e: int) -> None:
    """Insert after every entry due at or before `e` (keeps (trigger time, seq) order)."""
    i = len(q)
    if i and q[-1] >> TSHIFT > e >> TSHIFT:
        d = e >> TSHIFT
        i -= 1
        while i and q[i - 1] >> TSHIFT > d:
            i -= 1
        q.insert(i, e)
    else:
        q.append(e)


def tuple_insert_entry(q: tuple[int, ...], e: int) -> tuple[int, ...]:
    """`insert_entry` on a frozen executor: a new tuple with `e` after every entry due at or before it."""
    d = e >> TSHIFT
    i = len(q)
    while i and q[i - 1] >> TSHIFT > d:
        i -= 1
    return (*q[:i], e, *q[i:])

