"""The executable spec of the PIP-442 topic-list memory limiter (`spec/topic_list_limiter.md`).

A pure transition system, written from the spec independently of `reference_impl/topiclist/`, so
that the two can be run in lockstep (`properties/topiclist.py`). Two scopes, selected by the
config key `scope`:

* ``"semaphore"``: one `AsyncSemaphore` (§4.1-4.5) driven directly by the harness.
* ``"flows"``: a dual limiter (heap + direct; optionally a second one owned by the proxy) used by
  the broker get-topics flow, the proxy get-topics flow and the topic-list watcher (§4.6-4.8),
  with the harness actions of §2.3. Broker and proxy are separate worlds, each with its own
  connections, lookup semaphore and size cache, as in the reference.

**States** are immutable NamedTuples (`SemState`, `FlowState`) of ints, bools, strings and
tuples. Time is kept **relative**: an executor entry is an int holding its trigger time minus
`now` (and kind, pool, argument), in (trigger time, seq) order; `key` leaves out `now` (and, for
flows, the metric counters, which watcher retries could grow without bound), so states that differ
by a shift of the clock are one state. Everything else is bounded by the budgets below, and every
id is bounded: a pending listing or broker response is named by the client request that owns it
(a flow never has two at once), and writes are numbered in creation order (one per reply write).

**Actions** (snake_case, as the reference API):

semaphore scope
    ``acquire(permits)``, ``update(permit, permits)`` (grow or shrink), ``release(permit)``,
    ``cancel(request)`` (caller `future.cancel()`), ``disconnect(request)`` (its `is_cancelled`
    turns true), ``close()``, ``step()`` (run the smallest due executor entry),
    ``advance(dt)`` (`advance_to(now + dt)`). Requests and permits are numbered from 0 in creation
    order (requests: every call that passes validation; permits: every grant).
flows scope
    ``get_topics(conn, request_id, namespace, mode, topics_hash)``,
    ``proxy_get_topics(conn, request_id, namespace, mode, topics_hash)``,
    ``watch(conn, request_id, namespace, topics_hash)`` (watcher id = request id),
    ``watch_close(conn, request_id, watcher_id)``, ``topics_changed(namespace, new, deleted)``,
    ``complete_listing(id, topics | error)``, ``complete_broker_response(id, topics, hash |
    error_kind)`` (`id` = the owning request), ``complete_write(id, ok)``,
    ``arm_serialization_fault(request_id)``, ``disconnect(conn)``, ``deny_authorization(namespace)``,
    ``close(limiter)``, ``step()``, ``advance(dt)``. `topics_hash` "" stands for none. Broker
    connections are numbered first, then proxy connections.

**Observations**: semaphore requests return ``{"request", "status"[, "permit", "permits"]}`` or
``{"error": "ValueError", "message"}``; other semaphore actions return ``{"completed": [...]}``
(futures completed during the step, in completion order); flow actions return ``{"replies":
[...]}`` (reply attempts appended during the step, per connection in append order).

Where the spec is silent the model follows the reference (and upstream): the permit exceptions'
texts; the watcher resets its size holder when its listing step fails; `watch_close` answers the
initializing watch request before the close request; a watcher send checks the connection and the
registration before acquiring; an oversized or unserializable WatchSuccess is answered with
MetadataError; after a send stops quietly, queued updates are still attempted.

Config keys (all optional; see `EXPLORE_CONFIG` and friends for typical values):

common
    ``scope``            ``"semaphore"`` or ``"flows"``
    ``dts``              tuple of clock advances offered as ``advance(dt)``
    ``advance_next``     also offer ``advance(dt)`` with `dt` reaching the next future executor entry
    ``max_requests``     budget of requests (semaphore: acquire/update calls that pass validation;
                         flows: client requests, i.e. get_topics, proxy_get_topics, watch and
                         watch_close)
    ``allow_close``      offer ``close``
``"semaphore"`` scope
    ``max_permits``      pool size (``<= 0``: unbounded)
    ``max_queue_size``   queue bound (``<= 0``: unbounded)
    ``timeout_ms``       acquire timeout (the deferred pass runs at ``timeout_ms // 2``)
    ``sizes``            permit counts offered to ``acquire`` and ``update``
    ``invalid_sizes``    also offer the two invalid counts (-1 and max+1) that raise ValueError
    ``release_zero``     also offer ``release`` of permits whose value is already 0 (no-ops)
``"flows"`` scope
    ``heap_max`` ``heap_queue`` ``heap_timeout_ms`` ``direct_max`` ``direct_queue``
    ``direct_timeout_ms``  the dual limiter (§8 mapping, in bytes; ``<= 0`` max: unbounded)
    ``lookup_max``       broker lookup semaphore size
    ``proxy_lookup_max`` proxy lookup semaphore size (``<= 0`` refuses every proxy request)
    ``proxy_limiter``    ``"shared"`` (the proxy uses the broker's limiter) or ``"own"``
    ``connections``      client connections per world (broker, proxy)
    ``namespaces``       namespace names (``"tenant/ns"``)
    ``modes``            listing modes offered to get-topics (the watcher always uses PERSISTENT)
    ``topic_lists``      the topic lists a listing / broker response may return (tuples of names)
    ``flows``            subset of ``("broker", "proxy", "watch")`` offered as client requests
    ``use_hashes``       also offer requests carrying `topics_hash` of each topic list
    ``listing_errors``   offer ``complete_listing(id, error)``
    ``broker_errors``    error kinds offered to ``complete_broker_response(id, error_kind)``
    ``write_failures``   offer ``complete_write(id, ok=False)``
    ``faults``           offer ``arm_serialization_fault`` (until the request's reply is serialized)
    ``allow_deny``       offer ``deny_authorization``
    ``max_topic_changes``  budget of ``topics_changed`` actions
    ``topic_changes``    the ``(new, deleted)`` pairs offered to ``topics_changed``
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, cast

import crc32c

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param, check_arguments

__all__ = [
    "EXPLORE_ALL_FLOWS_CONFIG",
    "EXPLORE_CONFIG",
    "EXPLORE_FLOWS_CONFIG",
    "HYPOTHESIS_CONFIG",
    "HYPOTHESIS_FLOWS_CONFIG",
    "INITIAL_ESTIMATE",
    "LONG_MAX",
    "VARIANTS",
    "FlowState",
    "SemState",
    "TLState",
    "TopicListModel",
    "heap_size",
    "topics_hash",
    "wire_size",
]

LONG_MAX = 2**63 - 1
INITIAL_ESTIMATE = 10240
BACKOFF_INITIAL_MS = 100
BACKOFF_MAX_MS = 25000
VARIANTS = ("current", "no_exceptional_release")

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
# Configurations

EXPLORE_CONFIG: dict[str, Param] = {
    "scope": "semaphore",
    "max_permits": 4,
    "max_queue_size": 3,
    "timeout_ms": 100,
    "max_requests": 4,
    "sizes": (1, 2, 4),
    "invalid_sizes": False,
    "release_zero": False,
    "allow_close": True,
    "dts": (),
    "advance_next": True,
}
"""Small single-semaphore bounds for the explorer (limit 4, queue 3, at most 4 requests)."""

_NS = "public/default"
_TA = "persistent://public/default/a"
_TB = "persistent://public/default/b"

EXPLORE_FLOWS_CONFIG: dict[str, Param] = {
    "scope": "flows",
    "heap_max": 100,
    "heap_queue": 2,
    "heap_timeout_ms": 100,
    "direct_max": 100,
    "direct_queue": 2,
    "direct_timeout_ms": 100,
    "lookup_max": 2,
    "proxy_limiter": "shared",
    "connections": 1,
    "namespaces": (_NS,),
    "modes": ("PERSISTENT",),
    "topic_lists": ((_TA,),),
    "flows": ("broker",),
    "use_hashes": False,
    "listing_errors": True,
    "broker_errors": (),
    "write_failures": True,
    "faults": True,
    "allow_deny": False,
    "allow_close": False,
    "max_requests": 2,
    "max_topic_changes": 0,
    "topic_changes": (),
    "dts": (),
    "advance_next": True,
}
"""Broker get-topics flow, two requests: small enough to explore in seconds; all three §6a leaks
(listing error, serialization fault, failed write) are reachable."""

EXPLORE_ALL_FLOWS_CONFIG: dict[str, Param] = {
    **EXPLORE_FLOWS_CONFIG,
    "flows": ("broker", "proxy", "watch"),
    "max_topic_changes": 1,
    "topic_changes": (((_TB,), ()),),
}
"""All three flows (one connection per world, two requests, one topic change): ~10^5 states."""

HYPOTHESIS_CONFIG: dict[str, Param] = {
    "scope": "semaphore",
    "max_permits": 10,
    "max_queue_size": 4,
    "timeout_ms": 5000,
    "max_requests": 12,
    "sizes": (0, 1, 2, 3, 5, 8, 10),
    "invalid_sizes": True,
    "release_zero": True,
    "allow_close": True,
    "dts": (1, 2499, 2500, 4999, 5000),
    "advance_next": True,
}
"""Larger single-semaphore bounds for random and Hypothesis runs (A-examples' S(10, ., 5000))."""

HYPOTHESIS_FLOWS_CONFIG: dict[str, Param] = {
    "scope": "flows",
    "heap_max": 200,
    "heap_queue": 3,
    "heap_timeout_ms": 1000,
    "direct_max": 150,
    "direct_queue": 3,
    "direct_timeout_ms": 1000,
    "lookup_max": 3,
    "proxy_limiter": "own",
    "connections": 2,
    "namespaces": (_NS, "public/other"),
    "modes": ("PERSISTENT", "ALL"),
    "topic_lists": ((), (_TA,), (_TA, _TB)),
    "flows": ("broker", "proxy", "watch"),
    "use_hashes": True,
    "listing_errors": True,
    "broker_errors": ("AuthorizationError", "ServiceNotReady"),
    "write_failures": True,
    "faults": True,
    "allow_deny": True,
    "allow_close": True,
    "max_requests": 8,
    "max_topic_changes": 3,
    "topic_changes": (((_TB,), ()), ((), (_TA,))),
    "dts": (1, 99, 100, 500, 1000),
    "advance_next": True,
}
"""All three flows on two connections, for random lockstep and Hypothesis runs."""

# ---------------------------------------------------------------------------------------------
# State

# Executor entries are ints: (trigger time - now) << 24 | kind << 20 | pool << 16 | argument.
# A tuple of them is kept in (trigger time, seq) order, so that order is the list order.
PASS, TIMEOUT, DEFERRED, RETRY = 0, 1, 2, 3
_TSHIFT = 24
_TUNIT = 1 << _TSHIFT
_TMASK = _TUNIT - 1


def _entry(delta: int, kind: int, pool: int, arg: int) -> int:
    return (delta << _TSHIFT) | (kind << 20) | (pool << 16) | arg


# Request outcomes (semaphore-level futures), as codes.
PENDING, GRANTED, S_TIMEOUT, S_QUEUE_FULL, S_CLOSED, S_CANCELLED, S_CALLER = range(7)
STATUS_NAMES = ("pending", "granted", "Timeout", "QueueFull", "AlreadyClosed", "Cancelled", "caller_cancelled")

# A semaphore-scope request is an int: status | is_cancelled flag << 3 | was queued << 4 |
# (granted permit id + 1) << 5.
_FLAG = 8
_QUEUED = 16
_PSHIFT = 5

QEntry = tuple[int, int, int]
"""A queued request: (request id, permits, previous permit: id (semaphore) / 0 = the owner's p0
(flows), or -1 for an acquire)."""
Msg = tuple[Any, ...]
"""A reply attempt as recorded in a connection's log (see `TopicListModel.reply_json`)."""


class SemState(NamedTuple):
    """A state of the semaphore scope."""

    now: int
    avail: int
    closed: bool
    queue: tuple[QEntry, ...]
    grants: int  # queued grants (one wait observation each)
    timeouts: int  # Timeout failures (one counter increment and one wait observation each)
    execq: tuple[int, ...]
    reqs: tuple[int, ...]  # by request id, encoded as above
    permits: tuple[int, ...]  # permit values by permit id


class FlowReq(NamedTuple):
    """A client request of the flows scope (get-topics, proxy get-topics, watch, watch close).

    For a watch request the record is also the watcher (watcher id = request id)."""

    kind: int  # K_BROKER, K_PROXY, K_WATCH, K_CLOSE
    conn: int
    ns: int
    mode: int
    hash: str  # the request's topics_hash; "" = none
    stage: int  # ST_*: what the flow waits for
    p0: int  # value of the initial heap permit (0 once consumed or released)
    p1: int  # value of the updated heap permit
    pd: int  # direct permits lost by no_exceptional_release after a serialization fault
    lookup: bool  # holds a broker lookup permit
    fault: bool  # serialization fault armed
    replies: int  # reply attempts answering this request (watch updates answer none)
    quiet: bool  # watch: its success send stopped quietly (TL-I8 exemption)
    topics: tuple[str, ...]  # listing / broker response result; a watcher's current topics
    rhash: str  # proxy: the hash carried by the broker response
    watcher: bool  # watch: a watcher was created (lookup and authorization passed)
    registered: bool  # watch: until closed or failed for good
    initializing: bool  # watch: until its first listing succeeded or it was unregistered
    live: bool  # watch: topics_changed events queue for it
    sending: bool  # watch: sending_in_progress
    updates: tuple[Msg, ...]  # watch: queued WatchUpdate messages
    msg: Msg  # the message being sent (watch: or the success to send once listing ends); else ()
    lim: int  # index of the limiter's heap pool (direct = lim + 1)
    target: int  # watch_close: the watcher id; otherwise -1


class Conn(NamedTuple):
    active: bool
    replies: tuple[Msg, ...]
    backoff: int


class Holder(NamedTuple):
    size: int  # UNSET, INITIALIZING or the known size
    waiters: tuple[int, ...]


class Write(NamedTuple):
    request: int
    pool: int
    permits: int  # direct permit value still held by the write
    pending: bool


UNSET, INITIALIZING = -1, -2

K_BROKER, K_PROXY, K_WATCH, K_CLOSE = 0, 1, 2, 3
ST_NONE, ST_EST, ST_HEAP, ST_LIST, ST_UPD, ST_DIRECT, ST_RETRY_LIST, ST_RETRY_SEND = range(8)


class FlowState(NamedTuple):
    """A state of the flows scope."""

    now: int
    avail: tuple[int, ...]
    closed: tuple[bool, ...]
    queues: tuple[tuple[QEntry, ...], ...]
    execq: tuple[int, ...]
    reqs: tuple[FlowReq, ...]
    conns: tuple[Conn, ...]
    holders: tuple[Holder, ...]
    writes: tuple[Write, ...]
    lookup: int
    denied: tuple[bool, ...]
    changes: int
    stats: tuple[tuple[int, int], ...]  # per pool: (queued grants, timeouts); metrics, not in the key


TLState = SemState | FlowState
"""A model state. `key` leaves out `now` (the first field of both) and, in the flows scope, the
metric counters `stats` (the last field), which watcher retries could grow without bound."""


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


def _insert(q: list[int], e: int) -> None:
    """Insert after every entry due at or before `e` (keeps (trigger time, seq) order)."""
    i = len(q)
    if i and q[-1] >> _TSHIFT > e >> _TSHIFT:
        d = e >> _TSHIFT
        i -= 1
        while i and q[i - 1] >> _TSHIFT > d:
            i -= 1
        q.insert(i, e)
    else:
        q.append(e)


def _tuple_insert(q: tuple[int, ...], e: int) -> tuple[int, ...]:
    d = e >> _TSHIFT
    i = len(q)
    while i and q[i - 1] >> _TSHIFT > d:
        i -= 1
    return (*q[:i], e, *q[i:])


# ---------------------------------------------------------------------------------------------
# Mutable step worlds: a state is thawed into one, mutated by exactly one action, and frozen.


class _Pools:
    """Semaphore mechanics of §4.1-4.5 over one or more pools sharing one executor."""

    __slots__ = ("avail", "closed", "execq", "grants", "maxp", "maxq", "now", "queues", "timeouts", "tmo")

    avail: list[int]
    closed: list[bool]
    queues: list[list[QEntry]]
    grants: list[int]
    timeouts: list[int]

    def __init__(self, m: TopicListModel, now: int, execq: tuple[int, ...]) -> None:
        self.maxp = m.pool_max
        self.maxq = m.pool_queue
        self.tmo = m.pool_timeout
        self.now = now
        self.execq = list(execq)

    # hooks -------------------------------------------------------------------------------
    def is_cancelled(self, rid: int) -> bool:
        raise NotImplementedError

    def future_done(self, rid: int) -> bool:
        raise NotImplementedError

    def prev_value(self, rid: int, prev: int) -> int:
        raise NotImplementedError

    def swap_prev(self, rid: int, prev: int) -> int:
        raise NotImplementedError

    def on_grant(self, pool: int, rid: int, n: int) -> None:
        raise NotImplementedError

    def on_fail(self, pool: int, rid: int, status: int) -> None:
        raise NotImplementedError

    def on_retry(self, rid: int) -> None:
        raise NotImplementedError

    # operations --------------------------------------------------------------------------
    def enqueue(self, pool: int, rid: int, n: int, prev: int) -> int:
        """The bounded acquire / growing update path after validation (4.1 steps 3-5)."""
        if self.closed[pool]:
            return S_CLOSED
        q = self.queues[pool]
        mq = self.maxq[pool]
        if 0 < mq <= len(q):
            return S_QUEUE_FULL
        q.append((rid, n, prev))
        _insert(self.execq, _entry(self.tmo[pool], TIMEOUT, pool, rid))
        _insert(self.execq, _entry(0, PASS, pool, 0))
        return PENDING

    def give_back(self, pool: int, r: int) -> None:
        """Return `r > 0` permits to a bounded pool and submit a pass, unless it is closed
        (upstream's `processQueue()` returns at once on a closed semaphore and submits nothing)."""
        self.avail[pool] += r
        if not self.closed[pool]:
            _insert(self.execq, _entry(0, PASS, pool, 0))

    def cancel_timeout(self, pool: int, rid: int) -> None:
        low = (TIMEOUT << 20) | (pool << 16) | rid
        q = self.execq
        for i in range(len(q)):
            if q[i] & _TMASK == low:
                del q[i]
                return

    def run_pass(self, pool: int) -> None:
        q = self.queues[pool]
        avail = self.avail
        closed = self.closed
        while q and not closed[pool]:
            av = avail[pool]
            if av <= 0:
                return
            rid, n, prev = q[0]
            if self.is_cancelled(rid):
                self.cancel_timeout(pool, rid)
                del q[0]
                if not self.future_done(rid):
                    self.on_fail(pool, rid, S_CANCELLED)
                continue
            if self.future_done(rid):
                self.cancel_timeout(pool, rid)
                del q[0]
                continue
            if prev >= 0:
                if n - self.prev_value(rid, prev) > av:
                    return
                avail[pool] = av - (n - self.swap_prev(rid, prev))
            else:
                if n > av:
                    return
                avail[pool] = av - n
            self.cancel_timeout(pool, rid)
            del q[0]
            self.grants[pool] += 1
            self.on_grant(pool, rid, n)

    def run_timeout(self, pool: int, rid: int) -> None:
        q = self.queues[pool]
        for i in range(len(q)):
            if q[i][0] == rid:
                break
        else:
            return
        if self.future_done(rid):
            return
        del q[i]
        self.timeouts[pool] += 1
        self.on_fail(pool, rid, S_TIMEOUT)
        _insert(self.execq, _entry(0, PASS, pool, 0))

    def close_pool(self, pool: int) -> None:
        if self.closed[pool]:
            return
        self.closed[pool] = True
        ex = self.execq
        low = (DEFERRED << 20) | (pool << 16)
        for i in range(len(ex)):
            if ex[i] & _TMASK == low:
                del ex[i]
                break
        q = self.queues[pool]
        while q:
            rid = q.pop(0)[0]
            self.cancel_timeout(pool, rid)
            if not self.future_done(rid):
                self.on_fail(pool, rid, S_CLOSED)

    def run_entry(self) -> None:
        e = self.execq.pop(0)
        kind = (e >> 20) & 15
        if kind == TIMEOUT:
            self.run_timeout((e >> 16) & 15, e & 0xFFFF)
        elif kind == RETRY:
            self.on_retry(e & 0xFFFF)
        else:
            self.run_pass((e >> 16) & 15)

    def advance(self, dt: int) -> None:
        """`advance_to(now + dt)`: run what is due, jump to the next trigger, repeat."""
        left = dt
        while True:
            while self.execq and self.execq[0] < _TUNIT:
                self.run_entry()
            ex = self.execq
            d = ex[0] >> _TSHIFT if ex else left + 1
            if d > left:
                d = left
            if d:
                sh = d << _TSHIFT
                self.execq = [e - sh for e in ex]
                self.now += d
                left -= d
            elif not left:
                return


class _SemWorld(_Pools):
    """The semaphore scope: requests and permits are the harness's."""

    __slots__ = ("completed", "permits", "reqs")

    def __init__(self, m: TopicListModel, s: SemState) -> None:  # no super() call: hot path
        self.maxp = m.pool_max
        self.maxq = m.pool_queue
        self.tmo = m.pool_timeout
        self.now = s.now
        self.execq = list(s.execq)
        self.avail = [s.avail]
        self.closed = [s.closed]
        self.queues = [list(s.queue)]
        self.grants = [s.grants]
        self.timeouts = [s.timeouts]
        self.reqs = list(s.reqs)
        self.permits = list(s.permits)
        self.completed: list[Json] = []

    def is_cancelled(self, rid: int) -> bool:
        return self.reqs[rid] & _FLAG != 0

    def future_done(self, rid: int) -> bool:
        return self.reqs[rid] & 7 != PENDING

    def prev_value(self, rid: int, prev: int) -> int:
        return self.permits[prev]

    def swap_prev(self, rid: int, prev: int) -> int:
        v = self.permits[prev]
        self.permits[prev] = 0
        return v

    def on_grant(self, pool: int, rid: int, n: int) -> None:
        pid = len(self.permits)
        self.permits.append(n)
        self.reqs[rid] = (self.reqs[rid] & (_FLAG | _QUEUED)) | GRANTED | ((pid + 1) << _PSHIFT)
        self.completed.append({"request": rid, "status": "granted", "permit": pid, "permits": n})

    def on_fail(self, pool: int, rid: int, status: int) -> None:
        self.reqs[rid] = (self.reqs[rid] & (_FLAG | _QUEUED)) | status
        self.completed.append({"request": rid, "status": STATUS_NAMES[status]})

    def on_retry(self, rid: int) -> None:  # pragma: no cover - no retries in this scope
        raise AssertionError("no retry entries in the semaphore scope")

    def run_pass(self, pool: int) -> None:
        """`_Pools.run_pass` with the hooks inlined (the explorer's hottest path)."""
        q = self.queues[0]
        if self.closed[0]:
            return
        reqs = self.reqs
        permits = self.permits
        av = self.avail[0]
        while q and av > 0:
            rid, n, prev = q[0]
            r = reqs[rid]
            if r & _FLAG:
                self.cancel_timeout(0, rid)
                del q[0]
                if r & 7 == PENDING:
                    self.on_fail(0, rid, S_CANCELLED)
                continue
            if r & 7 != PENDING:
                self.cancel_timeout(0, rid)
                del q[0]
                continue
            if prev >= 0:
                old = permits[prev]
                if n - old > av:
                    break
                permits[prev] = 0
                av -= n - old
            else:
                if n > av:
                    break
                av -= n
            self.cancel_timeout(0, rid)
            del q[0]
            self.grants[0] += 1
            pid = len(permits)
            permits.append(n)
            reqs[rid] = (r & (_FLAG | _QUEUED)) | GRANTED | ((pid + 1) << _PSHIFT)
            self.completed.append({"request": rid, "status": "granted", "permit": pid, "permits": n})
        self.avail[0] = av

    def freeze(self) -> SemState:
        return SemState(
            self.now,
            self.avail[0],
            self.closed[0],
            tuple(self.queues[0]),
            self.grants[0],
            self.timeouts[0],
            tuple(self.execq),
            tuple(self.reqs),
            tuple(self.permits),
        )


# field indices of FlowReq for the mutable copies
(
    F_KIND,
    F_CONN,
    F_NS,
    F_MODE,
    F_HASH,
    F_STAGE,
    F_P0,
    F_P1,
    F_PD,
    F_LOOKUP,
    F_FAULT,
    F_REPLIES,
    F_QUIET,
    F_TOPICS,
    F_RHASH,
    F_WATCHER,
    F_REG,
    F_INIT,
    F_LIVE,
    F_SENDING,
    F_UPDATES,
    F_MSG,
    F_LIM,
    F_TARGET,
) = range(24)

_RETRYABLE = (S_TIMEOUT, S_QUEUE_FULL)
_IN_PROGRESS = ""
"""`watch_send`'s result while the send has not ended (else the error text, or None for no error)."""


class _FlowWorld(_Pools):
    """The flows scope (§4.6-4.8). A flow's continuation is selected by `FlowReq.stage`.

    Callbacks run synchronously in registration order, as `VFuture`s do: when a grant or failure
    completes a request future inside a pass, the flow's next stage runs inside that pass.
    """

    __slots__ = ("changes", "conns", "denied", "holders", "lookup", "m", "out", "reqs", "writes")

    def __init__(self, m: TopicListModel, s: FlowState) -> None:
        super().__init__(m, s.now, s.execq)
        self.m = m
        self.avail = list(s.avail)
        self.closed = list(s.closed)
        self.queues = [list(q) for q in s.queues]
        self.grants = [x[0] for x in s.stats]
        self.timeouts = [x[1] for x in s.stats]
        self.reqs: list[list[Any]] = [list(r) for r in s.reqs]
        self.conns: list[list[Any]] = [list(c) for c in s.conns]
        self.holders = list(s.holders)
        self.writes = list(s.writes)
        self.lookup = s.lookup
        self.denied = list(s.denied)
        self.changes = s.changes
        self.out: list[tuple[int, Json]] = []

    def freeze(self) -> FlowState:
        return FlowState(
            self.now,
            tuple(self.avail),
            tuple(self.closed),
            tuple(map(tuple, self.queues)),
            tuple(self.execq),
            tuple(FlowReq._make(r) for r in self.reqs),
            tuple(Conn._make(c) for c in self.conns),
            tuple(self.holders),
            tuple(self.writes),
            self.lookup,
            tuple(self.denied),
            self.changes,
            tuple(zip(self.grants, self.timeouts, strict=True)),
        )

    # pool hooks ----------------------------------------------------------------------------
    def is_cancelled(self, rid: int) -> bool:
        r = self.reqs[rid]
        if not self.conns[r[F_CONN]][0]:
            return True
        return r[F_KIND] == K_WATCH and not r[F_REG]

    def future_done(self, rid: int) -> bool:
        return False  # the flows never cancel a request future themselves

    def prev_value(self, rid: int, prev: int) -> int:
        v: int = self.reqs[rid][F_P0]
        return v

    def swap_prev(self, rid: int, prev: int) -> int:
        r = self.reqs[rid]
        v: int = r[F_P0]
        r[F_P0] = 0
        return v

    def on_grant(self, pool: int, rid: int, n: int) -> None:
        stage = self.reqs[rid][F_STAGE]
        if stage == ST_HEAP:
            self.heap_granted(rid, n)
        elif stage == ST_UPD:
            self.update_granted(rid, n)
        elif stage == ST_DIRECT:
            self.direct_granted(rid, n)
        else:  # pragma: no cover - model bug
            raise AssertionError(f"grant for request {rid} in stage {stage}")

    def on_fail(self, pool: int, rid: int, status: int) -> None:
        stage = self.reqs[rid][F_STAGE]
        if stage == ST_HEAP:
            self.heap_failed(rid, status)
        elif stage == ST_UPD:
            self.update_failed(rid, status)
        elif stage == ST_DIRECT:
            self.direct_failed(rid, status)
        else:  # pragma: no cover - model bug
            raise AssertionError(f"failure for request {rid} in stage {stage}")

    # small helpers -------------------------------------------------------------------------
    def reply(self, rid: int, msg: Msg, conn: int = -1) -> None:
        """Append a reply attempt to the request's connection log (even when inactive, §4.7)."""
        r = self.reqs[rid]
        c = r[F_CONN] if conn < 0 else conn
        cr = self.conns[c]
        cr[1] = (*cr[1], msg)
        if msg[0] != "WatchUpdate":
            r[F_REPLIES] += 1
        self.out.append((c, self.m.reply_json(c, msg)))

    def error(self, rid: int, code: str, message: str) -> None:
        self.reply(rid, ("Error", rid, code, message))

    def release_lookup(self, rid: int) -> None:
        r = self.reqs[rid]
        if r[F_LOOKUP]:
            r[F_LOOKUP] = False
            self.lookup += 1

    def release_heap(self, rid: int, field: int) -> None:
        """Release the p0 or p1 heap permit (idempotent: a consumed permit adds 0)."""
        r = self.reqs[rid]
        v = r[field]
        if v:
            r[field] = 0
            pool = r[F_LIM]
            if self.maxp[pool] > 0:
                self.give_back(pool, v)

    def holder_index(self, rid: int) -> int:
        r = self.reqs[rid]
        comp = 1 if r[F_KIND] == K_PROXY else 0
        return self.m.holder_index(comp, r[F_NS], r[F_MODE])

    def reset_if_initializing(self, rid: int) -> None:
        hi = self.holder_index(rid)
        h = self.holders[hi]
        if h.size == INITIALIZING:
            self.holders[hi] = Holder(UNSET, ())
            for w in h.waiters:
                self.heap_acquire(w, INITIAL_ESTIMATE)

    def update_size(self, rid: int, actual: int) -> None:
        hi = self.holder_index(rid)
        h = self.holders[hi]
        self.holders[hi] = Holder(actual, ())
        for w in h.waiters:
            self.heap_acquire(w, actual)

    # stage: estimate and initial heap acquire (with_acquired_permits) -------------------------
    def estimate(self, rid: int) -> None:
        hi = self.holder_index(rid)
        h = self.holders[hi]
        if h.size == UNSET:
            self.holders[hi] = Holder(INITIALIZING, ())
            self.heap_acquire(rid, INITIAL_ESTIMATE)
        elif h.size == INITIALIZING:
            self.holders[hi] = Holder(INITIALIZING, (*h.waiters, rid))
            self.reqs[rid][F_STAGE] = ST_EST
        else:
            self.heap_acquire(rid, h.size)

    def heap_acquire(self, rid: int, est: int) -> None:
        r = self.reqs[rid]
        pool = r[F_LIM]
        mx = self.maxp[pool]
        if mx <= 0:  # unbounded: an already completed permit, no accounting
            self.heap_granted(rid, est)
            return
        r[F_STAGE] = ST_HEAP
        out = self.enqueue(pool, rid, min(est, mx), -1)
        if out != PENDING:
            self.heap_failed(rid, out)

    def heap_granted(self, rid: int, n: int) -> None:
        r = self.reqs[rid]
        r[F_P0] = n if self.maxp[r[F_LIM]] > 0 else 0
        r[F_STAGE] = ST_LIST  # a pending listing (broker, watch) or broker response (proxy)

    def heap_failed(self, rid: int, status: int) -> None:
        r = self.reqs[rid]
        r[F_STAGE] = ST_NONE
        kind = r[F_KIND]
        if kind == K_WATCH:
            self.watch_init_failed(rid, ERROR_MESSAGES[status], status in _RETRYABLE)
            return
        self.reset_if_initializing(rid)
        self.error(rid, "TooManyRequests", MSG_HEAP_LIMIT)
        if kind == K_BROKER:
            self.release_lookup(rid)

    # stage: listing / broker response ----------------------------------------------------------
    def listing_done(self, rid: int, topics: tuple[str, ...], rhash: str) -> None:
        r = self.reqs[rid]
        r[F_STAGE] = ST_NONE
        actual = heap_size(topics)
        if r[F_KIND] == K_WATCH:
            self.update_size(rid, actual)
            if r[F_REG]:
                r[F_LIVE] = True
                r[F_TOPICS] = topics
            h = topics_hash(topics)
            r[F_MSG] = ("WatchSuccess", rid, h, () if r[F_HASH] == h else topics)
            if r[F_P0] == actual or self.maxp[r[F_LIM]] <= 0:
                self.release_heap(rid, F_P0)
                self.watch_initialized(rid)
                return
            self.heap_update(rid, actual)
            return
        r[F_TOPICS] = topics
        r[F_RHASH] = rhash
        self.update_size(rid, actual)
        self.heap_update(rid, actual)

    def listing_failed(self, rid: int, message: str, code: str) -> None:
        r = self.reqs[rid]
        r[F_STAGE] = ST_NONE
        kind = r[F_KIND]
        if kind == K_WATCH:  # §6(a) 1 names the get-topics listings only
            self.release_heap(rid, F_P0)
            self.watch_init_failed(rid, message, False)
            return
        if self.m.current:  # the step 3 helper releases p0 when fn's future ends
            self.release_heap(rid, F_P0)
        if kind == K_BROKER:
            self.stage_failed(rid, message)
        else:
            self.reset_if_initializing(rid)
            self.error(rid, code, message)

    def stage_failed(self, rid: int, message: str) -> None:
        """The get-topics flows' handler of a failed listing or later stage (broker step 4,
        proxy step 6); it runs after the helpers released what they hold."""
        if self.reqs[rid][F_KIND] == K_BROKER:
            self.release_lookup(rid)
            self.reset_if_initializing(rid)
            self.error(rid, "MetadataError", message)
        else:
            self.reset_if_initializing(rid)
            self.error(rid, "ServiceNotReady", message)

    # stage: heap update (with_updated_permits(p0, actual)) -----------------------------------
    def heap_update(self, rid: int, actual: int) -> None:
        r = self.reqs[rid]
        pool = r[F_LIM]
        mx = self.maxp[pool]
        if mx <= 0:
            self.update_granted(rid, 0)
            return
        if actual > mx:  # synchronous ValueError: the stage fails, the outer helper releases p0
            msg = too_large_message(actual, mx)
            self.release_heap(rid, F_P0)
            if r[F_KIND] == K_WATCH:
                self.watch_init_failed(rid, msg, False)
            else:
                self.stage_failed(rid, msg)
            return
        old = r[F_P0]
        if actual <= old:
            r[F_P0] = 0
            if old - actual > 0:
                self.give_back(pool, old - actual)
            self.update_granted(rid, actual)
            return
        r[F_STAGE] = ST_UPD
        out = self.enqueue(pool, rid, actual, 0)
        if out != PENDING:
            self.update_failed(rid, out)

    def update_granted(self, rid: int, n: int) -> None:
        r = self.reqs[rid]
        r[F_STAGE] = ST_NONE
        r[F_P1] = n
        if r[F_KIND] == K_WATCH:
            # fn returns a completed future: p1 is released, then p0 (consumed), then init ends
            self.release_heap(rid, F_P1)
            self.release_heap(rid, F_P0)
            self.watch_initialized(rid)
            return
        self.send_response(rid)

    def update_failed(self, rid: int, status: int) -> None:
        r = self.reqs[rid]
        r[F_STAGE] = ST_NONE
        if r[F_KIND] == K_WATCH:
            self.release_heap(rid, F_P0)
            self.watch_init_failed(rid, ERROR_MESSAGES[status], status in _RETRYABLE)
            return
        self.error(rid, "TooManyRequests", MSG_HEAP_LIMIT)
        self.release_heap(rid, F_P0)
        if r[F_KIND] == K_BROKER:
            self.release_lookup(rid)

    # stage: send a get-topics response (acquire_direct_and_write) ------------------------------
    def send_response(self, rid: int) -> None:
        r = self.reqs[rid]
        topics: tuple[str, ...] = r[F_TOPICS]
        if r[F_KIND] == K_BROKER:
            h = topics_hash(topics)
            if r[F_HASH] == h:
                msg: Msg = ("GetTopicsResponse", rid, (), h, False, False)
            else:
                msg = ("GetTopicsResponse", rid, topics, h, True, False)
        else:
            msg = ("GetTopicsResponse", rid, topics, r[F_RHASH], True, False)
        pool = r[F_LIM] + 1
        mx = self.maxp[pool]
        size = self.m.msg_size(msg)
        if mx > 0 and size > mx:  # ValueError raised inside fn: release p1, then the stage fails
            self.release_heap(rid, F_P1)
            self.release_heap(rid, F_P0)
            self.stage_failed(rid, too_large_message(size, mx))
            return
        r[F_MSG] = msg
        if mx <= 0:
            self.direct_granted(rid, 0)
            return
        r[F_STAGE] = ST_DIRECT
        out = self.enqueue(pool, rid, size, -1)
        if out != PENDING:
            self.direct_failed(rid, out)

    def direct_granted(self, rid: int, pd: int) -> None:
        r = self.reqs[rid]
        r[F_STAGE] = ST_NONE
        msg = r[F_MSG]
        r[F_MSG] = ()
        pool = r[F_LIM] + 1
        if r[F_FAULT] and msg[0] != "WatchUpdate":  # the armed fault fires on serialization
            r[F_FAULT] = False
            if pd:
                if self.m.current:
                    self.give_back(pool, pd)
                else:
                    r[F_PD] += pd
            error = serialization_message(rid)
            if r[F_KIND] == K_WATCH:
                self.watch_send_ended(rid, msg, error)
                return
            self.release_heap(rid, F_P1)
            self.release_heap(rid, F_P0)
            self.stage_failed(rid, error)
            return
        self.reply(rid, msg)  # the write starts: the reply attempt is logged
        self.writes.append(Write(rid, pool, pd, True))
        if r[F_KIND] == K_WATCH:
            self.conns[r[F_CONN]][2] = BACKOFF_INITIAL_MS
            self.watch_send_ended(rid, msg, None)
            return
        self.release_heap(rid, F_P1)
        self.release_heap(rid, F_P0)
        if r[F_KIND] == K_BROKER:
            self.release_lookup(rid)

    def direct_failed(self, rid: int, status: int) -> None:
        r = self.reqs[rid]
        r[F_STAGE] = ST_NONE
        kind = r[F_KIND]
        if kind == K_WATCH:
            msg = r[F_MSG]
            if status in _RETRYABLE and self.conns[r[F_CONN]][0] and r[F_REG]:
                self.schedule_retry(rid, ST_RETRY_SEND)
            else:
                r[F_MSG] = ()
                self.watch_send_ended(rid, msg, None)
            return
        r[F_MSG] = ()
        self.error(rid, "TooManyRequests", MSG_BROKER_DIRECT if kind == K_BROKER else MSG_PROXY_DIRECT)
        self.release_heap(rid, F_P1)
        self.release_heap(rid, F_P0)
        if kind == K_BROKER:
            self.release_lookup(rid)

    # watcher -------------------------------------------------------------------------------
    def schedule_retry(self, rid: int, stage: int) -> None:
        r = self.reqs[rid]
        c = self.conns[r[F_CONN]]
        delay = c[2]
        c[2] = min(delay * 2, BACKOFF_MAX_MS)
        r[F_STAGE] = stage
        _insert(self.execq, _entry(delay, RETRY, 0, rid))

    def watch_init_failed(self, rid: int, message: str, retryable: bool) -> None:
        """Step 2 ended with an error (after the heap helpers released what they held)."""
        self.reset_if_initializing(rid)
        r = self.reqs[rid]
        if not r[F_REG]:
            r[F_MSG] = ()
            return  # closed before creation completed: already answered
        if retryable and self.conns[r[F_CONN]][0]:
            self.schedule_retry(rid, ST_RETRY_LIST)
            return
        r[F_MSG] = ()
        self.error(rid, "MetadataError", message)
        self.unregister(rid)
        self.release_lookup(rid)

    def unregister(self, rid: int) -> None:
        r = self.reqs[rid]
        r[F_REG] = False
        r[F_INIT] = False
        r[F_LIVE] = False
        r[F_UPDATES] = ()

    def watch_initialized(self, rid: int) -> None:
        """Step 2 succeeded: send WatchSuccess, then release lookup (step 4)."""
        r = self.reqs[rid]
        if not r[F_REG]:
            r[F_MSG] = ()
            return  # the late initialization result is discarded
        r[F_INIT] = False
        self.conns[r[F_CONN]][2] = BACKOFF_INITIAL_MS
        r[F_SENDING] = True
        msg = r[F_MSG]
        r[F_MSG] = ()
        result = self.watch_send(rid, msg)
        self.release_lookup(rid)
        if result != _IN_PROGRESS:
            self.success_sent(rid, result)

    def watch_send(self, rid: int, msg: Msg) -> str | None:
        """Start sending `msg` (step 5). Returns `_IN_PROGRESS`, or how the send ended right away:
        None (written or stopped quietly) or the error text."""
        r = self.reqs[rid]
        if not self.conns[r[F_CONN]][0] or not r[F_REG]:
            if msg[0] == "WatchSuccess":
                r[F_QUIET] = True
            return None
        pool = r[F_LIM] + 1
        mx = self.maxp[pool]
        size = self.m.msg_size(msg)
        if mx > 0 and size > mx:
            return too_large_message(size, mx)
        r[F_MSG] = msg
        if mx <= 0:
            return self.direct_granted_sync(rid)
        r[F_STAGE] = ST_DIRECT
        out = self.enqueue(pool, rid, size, -1)
        if out == PENDING:
            return _IN_PROGRESS
        if out in _RETRYABLE and self.conns[r[F_CONN]][0] and r[F_REG]:
            self.schedule_retry(rid, ST_RETRY_SEND)
            return _IN_PROGRESS
        r[F_STAGE] = ST_NONE
        r[F_MSG] = ()
        if msg[0] == "WatchSuccess":
            r[F_QUIET] = True
        return None

    def direct_granted_sync(self, rid: int) -> str | None:
        """An unbounded direct pool grants at once; the write starts inside `watch_send`."""
        r = self.reqs[rid]
        msg = r[F_MSG]
        r[F_MSG] = ()
        r[F_STAGE] = ST_NONE
        if r[F_FAULT] and msg[0] == "WatchSuccess":
            r[F_FAULT] = False
            return serialization_message(rid)
        self.reply(rid, msg)
        self.writes.append(Write(rid, r[F_LIM] + 1, 0, True))
        self.conns[r[F_CONN]][2] = BACKOFF_INITIAL_MS
        return None

    def watch_send_ended(self, rid: int, msg: Msg, error: str | None) -> None:
        """An asynchronous end of a watcher send: run the continuation the sender attached."""
        r = self.reqs[rid]
        if error is None and msg[0] == "WatchSuccess" and not self.reply_logged(rid):
            r[F_QUIET] = True
        if msg[0] == "WatchSuccess":
            self.success_sent(rid, error)
        else:
            self.send_next_update(rid)

    def reply_logged(self, rid: int) -> bool:
        replies: int = self.reqs[rid][F_REPLIES]
        return replies > 0

    def success_sent(self, rid: int, error: str | None) -> None:
        r = self.reqs[rid]
        if error is not None and r[F_REG]:
            r[F_QUIET] = False
            self.error(rid, "MetadataError", error)
            self.unregister(rid)
        self.send_next_update(rid)

    def send_next_update(self, rid: int) -> None:
        r = self.reqs[rid]
        while r[F_REG] and r[F_UPDATES]:
            ups = r[F_UPDATES]
            r[F_UPDATES] = ups[1:]
            if self.watch_send(rid, ups[0]) == _IN_PROGRESS:
                return
        r[F_SENDING] = False

    def on_retry(self, rid: int) -> None:
        r = self.reqs[rid]
        stage = r[F_STAGE]
        r[F_STAGE] = ST_NONE
        if stage == ST_RETRY_LIST:
            if r[F_REG]:
                self.estimate(rid)
        else:
            msg = r[F_MSG]
            r[F_MSG] = ()
            result = self.watch_send(rid, msg)
            if result != _IN_PROGRESS:
                if msg[0] == "WatchSuccess":
                    self.success_sent(rid, result)
                else:
                    self.send_next_update(rid)

    # harness-driven operations ---------------------------------------------------------------
    def new_request(self, kind: int, conn: int, ns: int, mode: int, h: str, target: int) -> int:
        rid = len(self.reqs)
        lim = self.m.proxy_lim if kind == K_PROXY else 0
        row: list[Any] = [kind, conn, ns, mode, h, ST_NONE, 0, 0, 0, False, False, 0, False, (), ""]
        row += [False, False, False, False, False, (), (), lim, target]
        self.reqs.append(row)
        return rid

    def get_topics(self, conn: int, ns: int, mode: int, h: str) -> None:
        rid = self.new_request(K_BROKER, conn, ns, mode, h, -1)
        if self.lookup <= 0:
            self.error(rid, "TooManyRequests", MSG_TOO_MANY_LOOKUPS)
            return
        self.lookup -= 1
        self.reqs[rid][F_LOOKUP] = True
        if self.denied[ns]:
            self.error(rid, "AuthorizationError", MSG_NOT_AUTHORIZED)
            self.release_lookup(rid)
            return
        self.estimate(rid)

    def proxy_get_topics(self, conn: int, ns: int, mode: int, h: str) -> None:
        rid = self.new_request(K_PROXY, conn, ns, mode, h, -1)
        if self.m.proxy_lookup_max <= 0:  # the proxy holds its lookup permit only inside the handler
            self.error(rid, "ServiceNotReady", MSG_PROXY_LOOKUPS)
            return
        self.estimate(rid)

    def watch(self, conn: int, ns: int, h: str) -> None:
        rid = self.new_request(K_WATCH, conn, ns, self.m.persistent_mode, h, -1)
        if self.lookup <= 0:
            self.error(rid, "TooManyRequests", MSG_TOO_MANY_LOOKUPS)
            return
        self.lookup -= 1
        r = self.reqs[rid]
        r[F_LOOKUP] = True
        if self.denied[ns]:
            self.error(rid, "AuthorizationError", MSG_WATCH_NOT_AUTHORIZED)
            self.release_lookup(rid)
            return
        r[F_WATCHER] = True
        r[F_REG] = True
        r[F_INIT] = True
        self.estimate(rid)

    def watch_close(self, conn: int, wid: int) -> None:
        rid = self.new_request(K_CLOSE, conn, 0, 0, "", wid)
        w = self.reqs[wid]
        if w[F_REG]:
            if w[F_INIT]:
                # upstream fails the watcher future first, whose handler answers at once
                self.error(wid, "MetadataError", MSG_CLOSED_BEFORE_CREATION)
                self.release_lookup(wid)
            self.unregister(wid)
        self.reply(rid, ("Success", rid))

    def topics_changed(self, ns: int, new: tuple[str, ...], deleted: tuple[str, ...]) -> None:
        self.changes += 1
        for rid, r in enumerate(self.reqs):
            if r[F_KIND] != K_WATCH or not r[F_REG] or not r[F_LIVE] or r[F_NS] != ns:
                continue
            old: tuple[str, ...] = r[F_TOPICS]
            topics = tuple(t for t in old if t not in deleted)
            topics += tuple(dict.fromkeys(t for t in new if t not in topics))
            r[F_TOPICS] = topics
            r[F_UPDATES] = (*r[F_UPDATES], ("WatchUpdate", rid, new, deleted, topics_hash(topics)))
            if not r[F_INIT] and not r[F_SENDING]:
                r[F_SENDING] = True
                self.send_next_update(rid)

    def complete_write(self, wid: int, ok: bool) -> None:
        w = self.writes[wid]
        release = ok or self.m.current
        self.writes[wid] = Write(w.request, w.pool, 0 if release else w.permits, False)
        if release and w.permits:
            self.give_back(w.pool, w.permits)

    def close_limiter(self, lim: int) -> None:
        self.close_pool(lim)
        self.close_pool(lim + 1)


# ---------------------------------------------------------------------------------------------
# The model


def _first(pair: tuple[int, Json]) -> int:
    return pair[0]


def _bool(cfg: Mapping[str, Param], key: str, default: bool) -> bool:
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise ValueError(f"topiclist config {key!r} must be a bool, not {v!r}")
    return v


def _int(cfg: Mapping[str, Param], key: str, default: int) -> int:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"topiclist config {key!r} must be an int, not {v!r}")
    return v


def _ints(cfg: Mapping[str, Param], key: str, default: tuple[int, ...]) -> tuple[int, ...]:
    v = cfg.get(key, default)
    if not isinstance(v, tuple) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise ValueError(f"topiclist config {key!r} must be a tuple of ints, not {v!r}")
    return tuple(int(x) for x in v)  # type: ignore[arg-type]


def _strs(cfg: Mapping[str, Param], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    v = cfg.get(key, default)
    if not isinstance(v, tuple) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"topiclist config {key!r} must be a tuple of strings, not {v!r}")
    return tuple(str(x) for x in v)


def _topic_tuple(v: Param, key: str) -> tuple[str, ...]:
    if not isinstance(v, tuple) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"topiclist config {key!r}: a topic list must be a tuple of strings, not {v!r}")
    return tuple(str(x) for x in v)


_POOL_NAMES = ("heap", "direct", "proxy_heap", "proxy_direct")
_FLOW_ACTIONS = (
    ("broker", "get_topics"),
    ("proxy", "proxy_get_topics"),
    ("watch", "watch"),
    ("watch", "watch_close"),
    ("watch", "topics_changed"),
    ("broker", "complete_listing"),
    ("watch", "complete_listing"),
    ("proxy", "complete_broker_response"),
    ("*", "complete_write"),
    ("*", "disconnect"),
)
_FLOW_HARNESS = (("faults", "arm_serialization_fault"), ("allow_deny", "deny_authorization"))
_HOLDER_STATE = {UNSET: "UNSET", INITIALIZING: "INITIALIZING"}


CONFIG_KEYS = frozenset({
    "scope", "dts", "advance_next", "max_requests", "allow_close",
    # semaphore scope
    "max_permits", "max_queue_size", "timeout_ms", "sizes", "invalid_sizes", "release_zero",
    # flows scope
    "heap_max", "heap_queue", "heap_timeout_ms", "direct_max", "direct_queue", "direct_timeout_ms", "flows",
    "connections", "namespaces", "modes", "topic_lists", "topic_changes", "max_topic_changes", "use_hashes",
    "listing_errors", "broker_errors", "write_failures", "faults", "allow_deny", "lookup_max", "proxy_limiter",
    "proxy_lookup_max",
})
"""Every configuration key either scope reads; each has its default where it is read."""


class TopicListModel:
    """The topic-list limiter model (`mechanism = "topiclist"`), for one config and variant."""

    mechanism = "topiclist"

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "current") -> None:
        check_arguments(self.mechanism, variant, VARIANTS, config, CONFIG_KEYS)
        cfg: dict[str, Param] = dict(EXPLORE_CONFIG if config is None else config)
        self.config: Mapping[str, Param] = cfg
        self.variant = variant
        self.current = variant == "current"
        scope = cfg.get("scope", "semaphore")
        if scope not in ("semaphore", "flows"):
            raise ValueError(f"topiclist config 'scope' must be 'semaphore' or 'flows', not {scope!r}")
        self.scope: str = str(scope)
        self.dts = _ints(cfg, "dts", ())
        self.advance_next = _bool(cfg, "advance_next", True)
        self.max_requests = _int(cfg, "max_requests", 4)
        self.allow_close = _bool(cfg, "allow_close", True)
        self._msg_sizes: dict[Msg, int] = {}
        self._adv_cache: dict[int, Action] = {}
        if self.scope == "semaphore":
            self._init_semaphore(cfg)
            names = ["acquire", "update", "release", "cancel", "disconnect"]
        else:
            self._init_flows(cfg)
            names = list(dict.fromkeys(n for f, n in _FLOW_ACTIONS if f in self.flows or f == "*"))
            names += [n for flag, n in _FLOW_HARNESS if getattr(self, flag)]
        if self.allow_close:
            names.append("close")
        self.action_names: Sequence[str] = (*names, "step", "advance")
        self.idle_dt = min(self.pool_timeout)
        """The clock advance offered when the executor is idle and `dts` is empty."""
        self._idle_actions = self._dt_actions or (Action.of("advance", dt=self.idle_dt),)
        self.invariants: Sequence[Invariant[TLState]] = self._invariants()
        self.liveness: Sequence[Liveness[TLState]] = [
            Liveness(
                "TL-L1",
                self.quiescent_and_free,
                "from every reachable state, a quiescent state with nothing acquired (and every "
                "lookup permit back) is reachable",
            )
        ]

    # construction --------------------------------------------------------------------------
    def _init_semaphore(self, cfg: Mapping[str, Param]) -> None:
        self.max_permits = _int(cfg, "max_permits", 4)
        self.pool_max: tuple[int, ...] = (self.max_permits,)
        self.pool_queue: tuple[int, ...] = (_int(cfg, "max_queue_size", 3),)
        self.pool_timeout: tuple[int, ...] = (_int(cfg, "timeout_ms", 100),)
        self.sizes = _ints(cfg, "sizes", (1, 2))
        self.invalid_sizes = _bool(cfg, "invalid_sizes", False)
        self.release_zero = _bool(cfg, "release_zero", False)
        self.bounded = self.max_permits > 0
        invalid: list[int] = [-1]
        if self.bounded:
            invalid.append(self.max_permits + 1)
        self.invalid: tuple[int, ...] = tuple(invalid) if self.invalid_sizes else ()
        self._acquire_actions = tuple(Action.of("acquire", permits=n) for n in self.sizes)
        self._invalid_acquires = tuple(Action.of("acquire", permits=n) for n in self.invalid)
        self._step_action = Action.of("step")
        self._close_action = Action.of("close")
        self._dt_actions = tuple(Action.of("advance", dt=d) for d in self.dts)
        self._upd_cache: dict[int, tuple[Action, ...]] = {}
        self._rel_cache: dict[int, Action] = {}
        self._cancel_cache: dict[int, Action] = {}
        self._disc_cache: dict[int, Action] = {}

    def _init_flows(self, cfg: Mapping[str, Param]) -> None:
        heap = (_int(cfg, "heap_max", 100), _int(cfg, "heap_queue", 2), _int(cfg, "heap_timeout_ms", 100))
        direct = (
            _int(cfg, "direct_max", 100),
            _int(cfg, "direct_queue", 2),
            _int(cfg, "direct_timeout_ms", 100),
        )
        pl = cfg.get("proxy_limiter", "shared")
        if pl not in ("shared", "own"):
            raise ValueError(f"topiclist config 'proxy_limiter' must be 'shared' or 'own', not {pl!r}")
        self.own_proxy_limiter = pl == "own"
        pools = [heap, direct, heap, direct] if self.own_proxy_limiter else [heap, direct]
        self.pool_max = tuple(p[0] for p in pools)
        self.pool_queue = tuple(p[1] for p in pools)
        self.pool_timeout = tuple(p[2] for p in pools)
        self.proxy_lim = 2 if self.own_proxy_limiter else 0
        self.limiters: tuple[str, ...] = ("broker", "proxy") if self.own_proxy_limiter else ("broker",)
        self.lookup_max = _int(cfg, "lookup_max", 50000)
        self.proxy_lookup_max = _int(cfg, "proxy_lookup_max", 50000)
        self.nconns = _int(cfg, "connections", 1)
        self.namespaces = _strs(cfg, "namespaces", (_NS,))
        modes = _strs(cfg, "modes", ("PERSISTENT",))
        self.modes = modes if "PERSISTENT" in modes else (*modes, "PERSISTENT")
        self.offered_modes = tuple(range(len(modes)))
        self.persistent_mode = self.modes.index("PERSISTENT")
        tl = cfg.get("topic_lists", ((_TA,),))
        if not isinstance(tl, tuple):
            raise ValueError("topiclist config 'topic_lists' must be a tuple of topic lists")
        self.topic_lists = tuple(_topic_tuple(t, "topic_lists") for t in tl)
        flows = _strs(cfg, "flows", ("broker",))
        for f in flows:
            if f not in ("broker", "proxy", "watch"):
                raise ValueError(f"topiclist config 'flows': unknown flow {f!r}")
        self.flows = flows
        # Each world (broker, proxy) has its own connections: broker connections come first.
        nb = self.nconns if ("broker" in flows or "watch" in flows) else 0
        npx = self.nconns if "proxy" in flows else 0
        self.broker_conns = tuple(range(nb))
        self.proxy_conns = tuple(range(nb, nb + npx))
        self.conn_worlds = ("broker",) * nb + ("proxy",) * npx
        self.use_hashes = _bool(cfg, "use_hashes", False)
        self.listing_errors = _bool(cfg, "listing_errors", True)
        self.broker_errors = _strs(cfg, "broker_errors", ())
        for k in self.broker_errors:
            if k not in BROKER_ERROR_MESSAGES:
                raise ValueError(f"topiclist config 'broker_errors': unknown error kind {k!r}")
        self.write_failures = _bool(cfg, "write_failures", True)
        self.faults = _bool(cfg, "faults", True)
        self.allow_deny = _bool(cfg, "allow_deny", False)
        self.max_topic_changes = _int(cfg, "max_topic_changes", 0)
        tc = cfg.get("topic_changes", ())
        if not isinstance(tc, tuple):
            raise ValueError("topiclist config 'topic_changes' must be a tuple of (new, deleted) pairs")
        changes: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        for pair in tc:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValueError(f"topiclist config 'topic_changes': bad pair {pair!r}")
            changes.append((_topic_tuple(pair[0], "topic_changes"), _topic_tuple(pair[1], "topic_changes")))
        self.topic_changes = tuple(changes)
        self.hashes: tuple[str, ...] = ("",)
        if self.use_hashes:
            self.hashes = ("", *dict.fromkeys(topics_hash(t) for t in self.topic_lists))
        nm = len(self.modes)
        self._holder_keys = tuple(
            f"{comp}:{ns}:{mode}" for comp in ("broker", "proxy") for ns in self.namespaces for mode in self.modes
        )
        self._nsm = len(self.namespaces) * nm
        self._nm = nm
        # precomputed actions
        self._step_action = Action.of("step")
        self._dt_actions = tuple(Action.of("advance", dt=d) for d in self.dts)
        self._new_req_actions: dict[tuple[int, int], tuple[Action, ...]] = {}
        self._close_actions = tuple(Action.of("close", limiter=name) for name in self.limiters)
        self._deny_actions = tuple(Action.of("deny_authorization", namespace=ns) for ns in self.namespaces)
        self._disc_actions = tuple(Action.of("disconnect", conn=c) for c in range(len(self.conn_worlds)))
        self._change_actions = tuple(
            tuple(
                Action.of("topics_changed", namespace=ns, new=new, deleted=deleted)
                for new, deleted in self.topic_changes
            )
            for ns in self.namespaces
        )
        self._per_id_cache: dict[tuple[str, int], tuple[Action, ...]] = {}

    def holder_index(self, comp: int, ns: int, mode: int) -> int:
        return comp * self._nsm + ns * self._nm + mode

    def msg_size(self, msg: Msg) -> int:
        size = self._msg_sizes.get(msg)
        if size is None:
            kind = msg[0]
            if kind == "GetTopicsResponse":
                strings: list[str] = [*msg[2], msg[3]]
            elif kind == "WatchSuccess":
                strings = [*msg[3], msg[2]]
            elif kind == "WatchUpdate":
                strings = [*msg[2], *msg[3], msg[4]]
            else:
                strings = []
            size = wire_size(strings)
            self._msg_sizes[msg] = size
        return size

    # Model protocol ------------------------------------------------------------------------
    def initial(self) -> TLState:
        npools = len(self.pool_max)
        execq: list[int] = []
        for p in range(npools):
            if self.pool_max[p] > 0:
                _insert(execq, _entry(self.pool_timeout[p] // 2, DEFERRED, p, 0))
        if self.scope == "semaphore":
            return SemState(0, max(self.max_permits, 0), False, (), 0, 0, tuple(execq), (), ())
        return FlowState(
            0,
            tuple(max(m, 0) for m in self.pool_max),
            (False,) * npools,
            ((),) * npools,
            tuple(execq),
            (),
            tuple(Conn(True, (), BACKOFF_INITIAL_MS) for _ in self.conn_worlds),
            (Holder(UNSET, ()),) * (2 * self._nsm),
            (),
            self.lookup_max,
            (False,) * len(self.namespaces),
            0,
            ((0, 0),) * npools,
        )

    def key(self, state: TLState) -> Hashable:
        """Everything but `now` (behaviour depends on time differences only) and, for flows, the
        metric counters."""
        if type(state) is SemState:
            return state[1:]
        return state[1:-1]

    def enabled(self, state: TLState) -> Sequence[Action]:
        if type(state) is SemState:
            return self._enabled_sem(state)
        return self._enabled_flows(cast(FlowState, state))

    def step(self, state: TLState, action: Action) -> tuple[TLState, Observation]:
        if type(state) is SemState:
            return self._step_sem(state, action)
        return self._step_flows(cast(FlowState, state), action)

    # time actions shared by both scopes ------------------------------------------------------
    def _time_actions(self, execq: tuple[int, ...], acts: list[Action]) -> None:
        if not execq:  # time may still pass: no state is terminal (a self-loop for `key`)
            acts.extend(self._idle_actions)
            return
        if execq[0] < _TUNIT:
            acts.append(self._step_action)
        acts.extend(self._dt_actions)
        if self.advance_next:
            for e in execq:
                if e >= _TUNIT:
                    d = e >> _TSHIFT
                    if d not in self.dts:
                        a = self._adv_cache.get(d)
                        if a is None:
                            a = self._adv_cache[d] = Action.of("advance", dt=d)
                        acts.append(a)
                    break

    def _check_time(self, execq: tuple[int, ...], action: Action) -> None:
        if action.name == "step":
            if action.params:
                raise ActionNotEnabled(action, "step takes no parameters")
            if not execq or execq[0] >= _TUNIT:
                raise ActionNotEnabled(action, "no executor entry is due")
            return
        ps = action.params
        if len(ps) != 1 or ps[0][0] != "dt":
            raise ActionNotEnabled(action, "advance takes one parameter, dt")
        dt = ps[0][1]
        if dt in self.dts or (not execq and dt == self.idle_dt):
            return
        nxt = next((e >> _TSHIFT for e in execq if e >= _TUNIT), None)
        if not (self.advance_next and dt == nxt):
            raise ActionNotEnabled(action, f"dt={dt!r} is not offered")

    @staticmethod
    def _time_step(w: _Pools, action: Action) -> None:
        if action.name == "step":
            w.run_entry()
        else:
            w.advance(cast(int, action.params[0][1]))

    # semaphore scope -------------------------------------------------------------------------
    def _enabled_sem(self, s: SemState) -> list[Action]:
        acts: list[Action] = []
        budget = len(s.reqs) < self.max_requests
        if budget:
            acts.extend(self._acquire_actions)
        acts.extend(self._invalid_acquires)
        perms = s.permits
        nsizes = len(self.sizes)
        for pid in range(len(perms)):
            ups = self._upd_cache.get(pid)
            if ups is None:
                ups = self._upd_cache[pid] = tuple(
                    Action.of("update", permit=pid, permits=n) for n in (*self.sizes, *self.invalid)
                )
            acts.extend(ups if budget else ups[nsizes:])
            if perms[pid] > 0 or self.release_zero:
                acts.append(self._rel_action(pid))
        for rid, r in enumerate(s.reqs):
            if r & 7 == PENDING:
                acts.append(self._cancel_action(rid))
                if not r & _FLAG:
                    acts.append(self._disc_action(rid))
        if self.allow_close and not s.closed:
            acts.append(self._close_action)
        self._time_actions(s.execq, acts)
        return acts

    def _rel_action(self, pid: int) -> Action:
        a = self._rel_cache.get(pid)
        if a is None:
            a = self._rel_cache[pid] = Action.of("release", permit=pid)
        return a

    def _cancel_action(self, rid: int) -> Action:
        a = self._cancel_cache.get(rid)
        if a is None:
            a = self._cancel_cache[rid] = Action.of("cancel", request=rid)
        return a

    def _disc_action(self, rid: int) -> Action:
        a = self._disc_cache.get(rid)
        if a is None:
            a = self._disc_cache[rid] = Action.of("disconnect", request=rid)
        return a

    def _validate(self, n: int) -> str | None:
        if n < 0:
            return negative_message(n)
        if self.bounded and n > self.max_permits:
            return too_large_message(n, self.max_permits)
        return None

    @staticmethod
    def _int_param(action: Action, names: tuple[str, ...]) -> tuple[int, ...]:
        ps = action.params
        if len(ps) != len(names):
            raise ActionNotEnabled(action, f"expected parameters {names}")
        out: list[int] = []
        for (k, v), want in zip(ps, names, strict=True):
            if k != want or type(v) is not int:
                raise ActionNotEnabled(action, f"expected integer parameters {names}")
            out.append(v)
        return tuple(out)

    def _step_sem(self, s: SemState, action: Action) -> tuple[SemState, Observation]:
        name = action.name
        if name == "acquire":
            (n,) = self._int_param(action, ("permits",))
            return self._sem_request(s, action, n, -1)
        if name == "update":
            pid, n = self._int_param(action, ("permit", "permits"))
            if not 0 <= pid < len(s.permits):
                raise ActionNotEnabled(action, "no such permit")
            return self._sem_request(s, action, n, pid)
        if name == "release":
            (pid,) = self._int_param(action, ("permit",))
            if not 0 <= pid < len(s.permits):
                raise ActionNotEnabled(action, "no such permit")
            r = s.permits[pid]
            if not (r > 0 or self.release_zero):
                raise ActionNotEnabled(action, "the permit is already released")
            if not self.bounded or r == 0:
                return s, {"completed": []}
            perms = s.permits
            return SemState(
                s.now,
                s.avail + r,
                s.closed,
                s.queue,
                s.grants,
                s.timeouts,
                s.execq if s.closed else _tuple_insert(s.execq, _entry(0, PASS, 0, 0)),
                s.reqs,
                (*perms[:pid], 0, *perms[pid + 1 :]),
            ), {"completed": []}
        if name == "cancel" or name == "disconnect":
            (rid,) = self._int_param(action, ("request",))
            if not 0 <= rid < len(s.reqs) or s.reqs[rid] & 7 != PENDING:
                raise ActionNotEnabled(action, "the request is not pending")
            r = s.reqs[rid]
            reqs = s.reqs
            if name == "cancel":
                nr = (r & ~7) | S_CALLER
                obs: list[Json] = [{"request": rid, "status": "caller_cancelled"}]
            else:
                if r & _FLAG:
                    raise ActionNotEnabled(action, "already disconnected")
                nr = r | _FLAG
                obs = []
            return SemState(
                s.now,
                s.avail,
                s.closed,
                s.queue,
                s.grants,
                s.timeouts,
                s.execq,
                (*reqs[:rid], nr, *reqs[rid + 1 :]),
                s.permits,
            ), {"completed": obs}
        if name == "close":
            if action.params or not self.allow_close or s.closed:
                raise ActionNotEnabled(action, "close is not offered")
            if not s.queue:  # only the deferred pass to cancel
                low = (DEFERRED << 20) | (0 << 16)
                ex = s.execq
                for i in range(len(ex)):
                    if ex[i] & _TMASK == low:
                        ex = (*ex[:i], *ex[i + 1 :])
                        break
                return SemState(s.now, s.avail, True, (), s.grants, s.timeouts, ex, s.reqs, s.permits), {
                    "completed": []
                }
            w = _SemWorld(self, s)
            w.close_pool(0)
            return w.freeze(), {"completed": w.completed}
        if name == "step" or name == "advance":
            self._check_time(s.execq, action)
            if name == "step" and self._noop_pass(s):
                return SemState(
                    s.now, s.avail, s.closed, s.queue, s.grants, s.timeouts, s.execq[1:], s.reqs, s.permits
                ), {"completed": []}
            w = _SemWorld(self, s)
            self._time_step(w, action)
            return w.freeze(), {"completed": w.completed}
        raise ActionNotEnabled(action, "unknown action")

    @staticmethod
    def _noop_pass(s: SemState) -> bool:
        """Whether the due head entry is a pass that can change nothing (head blocked or nothing to do)."""
        kind = (s.execq[0] >> 20) & 15
        if kind == TIMEOUT:
            return False
        if s.closed or not s.queue or s.avail <= 0:
            return True
        rid, n, prev = s.queue[0]
        r = s.reqs[rid]
        if r & _FLAG or r & 7 != PENDING:
            return False
        return n - (s.permits[prev] if prev >= 0 else 0) > s.avail

    def _sem_request(self, s: SemState, action: Action, n: int, pid: int) -> tuple[SemState, Observation]:
        if n not in self.sizes and n not in self.invalid:
            raise ActionNotEnabled(action, "permits is not one of the configured sizes")
        err = self._validate(n)
        if err is not None:
            return s, {"error": "ValueError", "message": err}
        rid = len(s.reqs)
        if rid >= self.max_requests:
            raise ActionNotEnabled(action, "the request budget is spent")
        if not self.bounded:
            newp = len(s.permits)
            return s._replace(reqs=(*s.reqs, GRANTED | ((newp + 1) << _PSHIFT)), permits=(*s.permits, n)), {
                "request": rid,
                "status": "granted",
                "permit": newp,
                "permits": n,
            }
        if pid >= 0:
            old = s.permits[pid]
            if n <= old:  # shrinking or equal update: synchronous, works even when closed
                perms = s.permits
                newp = len(perms)
                execq = s.execq if old == n or s.closed else _tuple_insert(s.execq, _entry(0, PASS, 0, 0))
                return SemState(
                    s.now,
                    s.avail + old - n,
                    s.closed,
                    s.queue,
                    s.grants,
                    s.timeouts,
                    execq,
                    (*s.reqs, GRANTED | ((newp + 1) << _PSHIFT)),
                    (*perms[:pid], 0, *perms[pid + 1 :], n),
                ), {"request": rid, "status": "granted", "permit": newp, "permits": n}
        if s.closed:
            return s._replace(reqs=(*s.reqs, S_CLOSED)), {"request": rid, "status": "AlreadyClosed"}
        if 0 < self.pool_queue[0] <= len(s.queue):
            return s._replace(reqs=(*s.reqs, S_QUEUE_FULL)), {"request": rid, "status": "QueueFull"}
        ex = list(s.execq)
        _insert(ex, _entry(self.pool_timeout[0], TIMEOUT, 0, rid))
        _insert(ex, _entry(0, PASS, 0, 0))
        return SemState(
            s.now,
            s.avail,
            False,
            (*s.queue, (rid, n, pid)),
            s.grants,
            s.timeouts,
            tuple(ex),
            (*s.reqs, PENDING | _QUEUED),
            s.permits,
        ), {"request": rid, "status": "pending"}

    # flows scope ---------------------------------------------------------------------------
    def _per_id(self, name: str, rid: int, make: Callable[[int], tuple[Action, ...]]) -> tuple[Action, ...]:
        k = (name, rid)
        acts = self._per_id_cache.get(k)
        if acts is None:
            acts = self._per_id_cache[k] = make(rid)
        return acts

    def _new_requests(self, rid: int, conn: int) -> tuple[Action, ...]:
        k = (conn, rid)
        acts = self._new_req_actions.get(k)
        if acts is None:
            lst: list[Action] = []
            proxy = self.conn_worlds[conn] == "proxy"
            for ns in self.namespaces:
                for h in self.hashes:
                    if proxy or "broker" in self.flows:
                        for mi in self.offered_modes:
                            lst.append(
                                Action.of(
                                    "proxy_get_topics" if proxy else "get_topics",
                                    conn=conn,
                                    request_id=rid,
                                    namespace=ns,
                                    mode=self.modes[mi],
                                    topics_hash=h,
                                )
                            )
                    if not proxy and "watch" in self.flows:
                        lst.append(Action.of("watch", conn=conn, request_id=rid, namespace=ns, topics_hash=h))
            acts = self._new_req_actions[k] = tuple(lst)
        return acts

    def _faultable(self, r: FlowReq) -> bool:
        """Arming is offered while the request's first reply can still be serialized."""
        if not self.faults or r.fault:
            return False
        if r.kind == K_WATCH:
            return r.registered and r.replies == 0
        return r.kind != K_CLOSE and r.stage in (ST_EST, ST_HEAP, ST_LIST, ST_UPD, ST_DIRECT)

    def _enabled_flows(self, s: FlowState) -> list[Action]:
        acts: list[Action] = []
        reqs = s.reqs
        nreq = len(reqs)
        budget = nreq < self.max_requests
        conns = s.conns
        if budget:
            for c in range(len(conns)):
                if conns[c].active:
                    acts.extend(self._new_requests(nreq, c))
        live_ns = 0
        for rid, r in enumerate(reqs):
            kind = r.kind
            if r.stage == ST_LIST:
                if kind == K_PROXY:
                    acts.extend(self._per_id("response", rid, self._response_actions))
                else:
                    acts.extend(self._per_id("listing", rid, self._listing_actions))
            if kind == K_WATCH and r.registered:
                if r.live:
                    live_ns |= 1 << r.ns
                if budget and conns[r.conn].active:
                    acts.append(Action.of("watch_close", conn=r.conn, request_id=nreq, watcher_id=rid))
            if self._faultable(r):
                acts.extend(self._per_id("fault", rid, self._fault_actions))
        for wid, wr in enumerate(s.writes):
            if wr.pending:
                acts.extend(self._per_id("write", wid, self._write_actions))
        if live_ns and s.changes < self.max_topic_changes:
            for i in range(len(self.namespaces)):
                if live_ns >> i & 1:
                    acts.extend(self._change_actions[i])
        for c in range(len(conns)):
            if conns[c].active:
                acts.append(self._disc_actions[c])
        if self.allow_deny:
            for i, d in enumerate(s.denied):
                if not d:
                    acts.append(self._deny_actions[i])
        if self.allow_close:
            for i in range(len(self.limiters)):
                if not s.closed[2 * i]:
                    acts.append(self._close_actions[i])
        self._time_actions(s.execq, acts)
        return acts

    def _listing_actions(self, rid: int) -> tuple[Action, ...]:
        acts = [Action.of("complete_listing", id=rid, topics=t) for t in self.topic_lists]
        if self.listing_errors:
            acts.append(Action.of("complete_listing", id=rid, error=LISTING_ERROR))
        return tuple(acts)

    def _response_actions(self, rid: int) -> tuple[Action, ...]:
        acts = [Action.of("complete_broker_response", id=rid, topics=t, hash=topics_hash(t)) for t in self.topic_lists]
        acts.extend(Action.of("complete_broker_response", id=rid, error_kind=k) for k in self.broker_errors)
        return tuple(acts)

    def _fault_actions(self, rid: int) -> tuple[Action, ...]:
        return (Action.of("arm_serialization_fault", request_id=rid),)

    def _write_actions(self, wid: int) -> tuple[Action, ...]:
        acts = [Action.of("complete_write", id=wid, ok=True)]
        if self.write_failures:
            acts.append(Action.of("complete_write", id=wid, ok=False))
        return tuple(acts)

    def _flow_enabled(self, s: FlowState, action: Action) -> None:
        """Raise ActionNotEnabled unless `_enabled_flows(s)` offers `action` (checked cheaply for
        the actions naming a pending item)."""
        name = action.name
        if name == "step" or name == "advance":
            self._check_time(s.execq, action)
            return
        if name in ("complete_listing", "complete_broker_response"):
            rid = action.get("id")
            ok = type(rid) is int and 0 <= rid < len(s.reqs) and s.reqs[rid].stage == ST_LIST
            if ok:
                proxy = s.reqs[cast(int, rid)].kind == K_PROXY
                ok = proxy == (name == "complete_broker_response") and action in self._per_id(
                    "response" if proxy else "listing",
                    cast(int, rid),
                    self._response_actions if proxy else self._listing_actions,
                )
        elif name == "complete_write":
            wid = action.get("id")
            ok = type(wid) is int and 0 <= wid < len(s.writes) and s.writes[wid].pending
            ok = ok and action in self._write_actions(cast(int, wid))
        elif name == "arm_serialization_fault":
            rid = action.get("request_id")
            ok = type(rid) is int and 0 <= rid < len(s.reqs) and len(action.params) == 1
            ok = ok and self._faultable(s.reqs[cast(int, rid)])
        else:
            ok = action in self._enabled_flows(s)
        if not ok:
            raise ActionNotEnabled(action, "not among the enabled actions")

    def _step_flows(self, s: FlowState, action: Action) -> tuple[FlowState, Observation]:
        self._flow_enabled(s, action)
        w = _FlowWorld(self, s)
        name = action.name
        p = action.as_dict()
        if name in ("get_topics", "proxy_get_topics", "watch"):
            conn = cast(int, p["conn"])
            ns = self.namespaces.index(str(p["namespace"]))
            h = str(p["topics_hash"])
            if name == "watch":
                w.watch(conn, ns, h)
            else:
                mode = self.modes.index(str(p["mode"]))
                if name == "get_topics":
                    w.get_topics(conn, ns, mode, h)
                else:
                    w.proxy_get_topics(conn, ns, mode, h)
        elif name == "watch_close":
            w.watch_close(cast(int, p["conn"]), cast(int, p["watcher_id"]))
        elif name == "complete_listing" or name == "complete_broker_response":
            rid = cast(int, p["id"])
            if "topics" in p:
                topics = _topic_tuple(p["topics"], "topics")
                w.listing_done(rid, topics, str(p.get("hash", "")))
            elif "error" in p:
                w.listing_failed(rid, str(p["error"]), "MetadataError")
            else:
                kind = str(p["error_kind"])
                w.listing_failed(rid, BROKER_ERROR_MESSAGES[kind], kind)
        elif name == "complete_write":
            w.complete_write(cast(int, p["id"]), bool(p["ok"]))
        elif name == "arm_serialization_fault":
            w.reqs[cast(int, p["request_id"])][F_FAULT] = True
        elif name == "disconnect":
            w.conns[cast(int, p["conn"])][0] = False
        elif name == "deny_authorization":
            w.denied[self.namespaces.index(str(p["namespace"]))] = True
        elif name == "topics_changed":
            w.topics_changed(
                self.namespaces.index(str(p["namespace"])),
                _topic_tuple(p["new"], "new"),
                _topic_tuple(p["deleted"], "deleted"),
            )
        elif name == "close":
            w.close_limiter(2 * self.limiters.index(str(p["limiter"])))
        else:
            self._time_step(w, action)
        w.out.sort(key=_first)  # stable: per connection, in append order
        return w.freeze(), {"replies": [d for _, d in w.out]}

    # projections -----------------------------------------------------------------------------
    def reply_json(self, conn: int, msg: Msg) -> dict[str, Json]:
        kind = msg[0]
        d: dict[str, Json] = {"conn": conn, "type": kind}
        if kind == "Error":
            d.update(request=msg[1], code=msg[2], message=msg[3])
        elif kind == "GetTopicsResponse":
            d.update(request=msg[1], topics=list(msg[2]), hash=msg[3], changed=msg[4], filtered=msg[5])
        elif kind == "WatchSuccess":
            d.update(request=msg[1], watcher=msg[1], hash=msg[2], topics=list(msg[3]))
        elif kind == "WatchUpdate":
            d.update(watcher=msg[1], new=list(msg[2]), deleted=list(msg[3]), hash=msg[4])
        else:
            d.update(request=msg[1])
        return d

    def vars(self, state: TLState) -> dict[str, Json]:
        now = state.now
        execq: list[Json] = [now + (e >> _TSHIFT) for e in state.execq]
        if type(state) is SemState:
            reqs: list[Json] = []
            for r in state.reqs:
                d: dict[str, Json] = {"status": STATUS_NAMES[r & 7], "cancelled": bool(r & _FLAG)}
                if r & 7 == GRANTED:
                    d["permit"] = (r >> _PSHIFT) - 1
                reqs.append(d)
            a = state.avail
            return {
                "now": now,
                "available_permits": a if self.bounded else LONG_MAX,
                "acquired_permits": self.max_permits - a if self.bounded else 0,
                "queue_size": len(state.queue),
                "closed": state.closed,
                "queue": [e[0] for e in state.queue],
                "requests": reqs,
                "permits": list(state.permits),
                "executor": execq,
                "timeouts": state.timeouts,
                "waits": state.grants + state.timeouts,
            }
        fs = cast(FlowState, state)
        pools: list[Json] = []
        for i in range(len(self.pool_max)):
            mx = self.pool_max[i]
            queue: list[Json] = []
            for rid, n, prev in fs.queues[i]:
                queue.append([n, fs.reqs[rid].p0 if prev >= 0 else -1])
            grants, timeouts = fs.stats[i]
            pools.append(
                {
                    "name": _POOL_NAMES[i],
                    "available": fs.avail[i] if mx > 0 else LONG_MAX,
                    "acquired": mx - fs.avail[i] if mx > 0 else 0,
                    "closed": fs.closed[i],
                    "queue": queue,
                    "timeouts": timeouts,
                    "waits": grants + timeouts,
                }
            )
        holders: list[Json] = [
            {
                "key": self._holder_keys[i],
                "state": _HOLDER_STATE.get(h.size, "KNOWN"),
                "size": max(h.size, -1),
                "waiters": len(h.waiters),
            }
            for i, h in enumerate(fs.holders)
        ]
        conns: list[Json] = [
            {
                "world": self.conn_worlds[i],
                "active": c.active,
                "backoff_ms": c.backoff,
                "replies": [self.reply_json(i, m) for m in c.replies],
            }
            for i, c in enumerate(fs.conns)
        ]
        watchers: list[Json] = [
            {
                "id": rid,
                "registered": r.registered,
                "initializing": r.initializing,
                "live": r.live,
                "sending": r.sending,
                "queued_updates": len(r.updates),
                "topics": list(r.topics),
            }
            for rid, r in enumerate(fs.reqs)
            if r.watcher
        ]
        return {
            "now": now,
            "pools": pools,
            "executor": execq,
            "lookup_available": fs.lookup,
            "proxy_lookup_available": self.proxy_lookup_max,
            "holders": holders,
            "connections": conns,
            "listings": [rid for rid, r in enumerate(fs.reqs) if r.stage == ST_LIST and r.kind != K_PROXY],
            "responses": [rid for rid, r in enumerate(fs.reqs) if r.stage == ST_LIST and r.kind == K_PROXY],
            "writes": [{"id": i, "request": wr.request, "pending": wr.pending} for i, wr in enumerate(fs.writes)],
            "watchers": watchers,
            "denied": [ns for ns, d in zip(self.namespaces, fs.denied, strict=True) if d],
        }

    # properties --------------------------------------------------------------------------------
    def acquired(self, state: TLState, pool: int = 0) -> int:
        """`acquired_permits` of pool `pool` (0 = the semaphore / heap, 1 = direct, ...)."""
        mx = self.pool_max[pool]
        if mx <= 0:
            return 0
        if type(state) is SemState:
            return mx - state.avail
        return mx - cast(FlowState, state).avail[pool]

    def quiescent(self, state: TLState) -> bool:
        """TL-I7's and TL-I8's premise (§5): nothing more can happen without new client input.

        Semaphore scope: the executor is idle, nothing is queued and the harness holds no permit
        (every issued permit has value 0). Flows scope: the executor is idle (so no request is
        queued in any pool and no watcher retry is pending), and no listing, broker response or
        write awaits the harness. A request still unanswered here never will be: TL-I8 judges it
        (the premise does not assume that every request was answered).
        """
        if state.execq:
            return False
        if type(state) is SemState:
            return not state.queue and (not self.bounded or not any(state.permits))
        fs = cast(FlowState, state)
        for q in fs.queues:
            if q:
                return False
        for r in fs.reqs:
            if r.stage == ST_LIST:
                return False
        return all(not wr.pending for wr in fs.writes)

    def leak_free(self, state: TLState) -> bool:
        """Every bounded pool back at its max and (flows) every lookup permit back."""
        if type(state) is SemState:
            return not self.bounded or state.avail == self.max_permits
        fs = cast(FlowState, state)
        for p in range(len(self.pool_max)):
            if self.pool_max[p] > 0 and fs.avail[p] != self.pool_max[p]:
                return False
        return fs.lookup == self.lookup_max

    def quiescent_and_free(self, state: TLState) -> bool:
        return self.quiescent(state) and self.leak_free(state)

    def live_permits(self, state: FlowState) -> list[int]:
        """Per pool, the sum of the values of the permits the flows hold (TL-I2's right side)."""
        sums = [0] * len(self.pool_max)
        for r in state.reqs:
            sums[r.lim] += r.p0 + r.p1
            sums[r.lim + 1] += r.pd
        for wr in state.writes:
            sums[wr.pool] += wr.permits
        return sums

    def _invariants(self) -> list[Invariant[TLState]]:
        if self.scope == "semaphore":
            return self._sem_invariants()
        return self._flow_invariants()

    def _sem_invariants(self) -> list[Invariant[TLState]]:
        mx = self.max_permits
        mq = self.pool_queue[0]
        bounded = self.bounded

        def i1(s: Any) -> bool:
            return not bounded or 0 <= s.avail <= mx

        def i2(s: Any) -> bool:
            return not bounded or mx - s.avail == sum(s.permits)

        def i3(s: Any) -> bool:
            if not s.queue:
                return True
            first = s.queue[0][0]  # the queue is in enqueue (= request id) order, see TL-I4
            for rid in range(first, len(s.reqs)):
                r = s.reqs[rid]
                if r & 7 == GRANTED and r & _QUEUED:
                    return False
            return True

        def i4(s: Any) -> bool:
            queue = s.queue
            last = -1
            for e in queue:  # queued in enqueue order, each request at most once
                if e[0] <= last:
                    return False
                last = e[0]
            for rid, r in enumerate(s.reqs):
                if r & 7 == PENDING:
                    if not s.execq:
                        return False
                    for e in queue:
                        if e[0] == rid:
                            break
                    else:
                        return False
            return True

        def i5(s: Any) -> bool:
            if bounded:
                for v in s.permits:
                    if v < 0 or v > mx:
                        return False
            return True

        def i6(s: Any) -> bool:
            return mq <= 0 or len(s.queue) <= mq

        def i7(s: Any) -> bool:
            return not self.quiescent(s) or self.leak_free(s)

        def i9(s: Any) -> bool:
            g = t = 0
            for r in s.reqs:
                st = r & 7
                if st == GRANTED and r & _QUEUED:
                    g += 1
                elif st == S_TIMEOUT:
                    t += 1
            return bool(s.grants == g and s.timeouts == t)

        def i10(s: Any) -> bool:
            for r in s.reqs:
                st = r & 7
                if st == S_CANCELLED and not r & _FLAG:
                    return False
                if st == GRANTED and r & _QUEUED and r & _FLAG:
                    return False
                if st in (S_TIMEOUT, S_CANCELLED, S_CALLER) and not r & _QUEUED:
                    return False
            return True

        return [
            Invariant("TL-I1", i1, "0 <= available <= max_permits"),
            Invariant("TL-I2", i2, "acquired == max - available == sum of the live permits' values"),
            Invariant(
                "TL-I3",
                i3,
                "FIFO grants: no request granted from the queue was enqueued after one still queued",
            ),
            Invariant(
                "TL-I4",
                i4,
                "exactly-once completion: a pending future is queued with its timeout scheduled; "
                "when the executor is idle no request future is pending",
            ),
            Invariant("TL-I5", i5, "every permit value is <= max_permits"),
            Invariant("TL-I6", i6, "queue_size <= max_queue_size when the queue is bounded"),
            Invariant(
                "TL-I7",
                i7,
                "no permit leak at quiescence: with the executor idle, nothing queued and every "
                "issued permit released, acquired_permits == 0",
            ),
            Invariant(
                "TL-I9",
                i9,
                "metrics agree with state: the timeout counter equals the number of Timeout outcomes "
                "and the wait observations equal queued grants + timeouts",
            ),
            Invariant(
                "TL-I10",
                i10,
                "outcome attribution: Cancelled only with is_cancelled() true, a queued grant only "
                "with it false, Timeout / Cancelled / caller-cancelled only for queued requests",
            ),
        ]

    def _flow_invariants(self) -> list[Invariant[TLState]]:
        maxp = self.pool_max
        maxq = self.pool_queue
        npools = len(maxp)
        bounded = [p for p in range(npools) if maxp[p] > 0]

        def i1(s: Any) -> bool:
            return all(0 <= s.avail[p] <= maxp[p] for p in bounded)

        def i2(s: Any) -> bool:
            sums = self.live_permits(s)
            return all(maxp[p] - s.avail[p] == sums[p] for p in bounded)

        def i4(s: Any) -> bool:
            for p in range(npools):
                for rid, _n, _prev in s.queues[p]:
                    st = s.reqs[rid].stage
                    if st not in (ST_HEAP, ST_UPD, ST_DIRECT):
                        return False
            if s.execq:
                return True
            return all(not q for q in s.queues)

        def i5(s: Any) -> bool:
            for r in s.reqs:
                hm, dm = maxp[r.lim], maxp[r.lim + 1]
                if hm > 0 and (r.p0 > hm or r.p1 > hm):
                    return False
                if dm > 0 and r.pd > dm:
                    return False
            return all(maxp[wr.pool] <= 0 or wr.permits <= maxp[wr.pool] for wr in s.writes)

        def i6(s: Any) -> bool:
            return all(maxq[p] <= 0 or len(s.queues[p]) <= maxq[p] for p in range(npools))

        def i7(s: Any) -> bool:
            return not self.quiescent(s) or self.leak_free(s)

        def i8(s: Any) -> bool:
            q = self.quiescent(s)
            for r in s.reqs:
                if r.replies > 1:
                    return False
                if q and r.replies != 1 and not (r.kind == K_WATCH and r.quiet):
                    return False
            return True

        return [
            Invariant("TL-I1", i1, "0 <= available <= max_permits for each bounded pool"),
            Invariant(
                "TL-I2",
                i2,
                "acquired == max - available == sum of the values of the permits the flows hold, per pool",
            ),
            Invariant(
                "TL-I4",
                i4,
                "exactly-once completion: every queued request belongs to a flow waiting on it; when "
                "the executor is idle nothing is queued",
            ),
            Invariant("TL-I5", i5, "every permit a flow holds is <= its pool's max_permits"),
            Invariant("TL-I6", i6, "queue_size <= max_queue_size when the queue is bounded"),
            Invariant(
                "TL-I7",
                i7,
                "no permit leak at quiescence: heap and direct acquired == 0 and the lookup semaphore back at its max",
            ),
            Invariant(
                "TL-I8",
                i8,
                "one reply attempt per client request: never two; exactly one once nothing more can "
                "happen (an unanswered request is a failure) unless a watch stopped quietly",
            ),
        ]
