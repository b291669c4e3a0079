"""The flows scope (``scope: "flows"``): a dual limiter (heap + direct; optionally a second one
owned by the proxy) used by the broker get-topics flow, the proxy get-topics flow and the
topic-list watcher (§4.6-4.8), with the harness actions of §2.3. Broker and proxy are separate
worlds, each with its own connections, lookup semaphore and size cache, as in the reference.

Its state `FlowState` (with `FlowReq`, `Conn`, `Holder`, `Write`), its step world `FlowWorld` (the
pools of `pools.py`, one heap and one direct pool per dual limiter, and the flows' stages) and
`FlowsScope`, this scope's half of `TopicListModel`: configuration, enabled actions, steps,
projection and invariants. Separate from `semaphore.py` because the two scopes share only the
pools and the time actions.

**Actions** (snake_case, as the reference API)
    ``get_topics(conn, request_id, namespace, mode, topics_hash)``,
    ``proxy_get_topics(conn, request_id, namespace, mode, topics_hash)``,
    ``watch(conn, request_id, namespace, topics_hash)`` (watcher id = request id),
    ``watch_close(conn, request_id, watcher_id)``, ``topics_changed(namespace, new, deleted)``,
    ``complete_listing(id, topics | error)``, ``complete_broker_response(id, topics, hash |
    error_kind)`` (`id` = the owning request), ``complete_write(id, ok)``,
    ``arm_serialization_fault(request_id)``, ``disconnect(conn)``, ``deny_authorization(namespace)``,
    ``close(limiter)``, ``step()``, ``advance(dt)``. `topics_hash` "" stands for none. Broker
    connections are numbered first, then proxy connections.

**Observations**: every action returns ``{"replies": [...]}`` (reply attempts appended during the
step, per connection in append order).

**Config keys** (besides the common ones of `configs.py`)
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

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

from models.core import Action, ActionNotEnabled, Invariant, Json, Observation, Param
from models.topiclist.common import (
    BACKOFF_INITIAL_MS,
    BACKOFF_MAX_MS,
    BROKER_ERROR_MESSAGES,
    ERROR_MESSAGES,
    INITIAL_ESTIMATE,
    LISTING_ERROR,
    LONG_MAX,
    MSG_BROKER_DIRECT,
    MSG_CLOSED_BEFORE_CREATION,
    MSG_HEAP_LIMIT,
    MSG_NOT_AUTHORIZED,
    MSG_PROXY_DIRECT,
    MSG_PROXY_LOOKUPS,
    MSG_TOO_MANY_LOOKUPS,
    MSG_WATCH_NOT_AUTHORIZED,
    PENDING,
    RETRY,
    S_QUEUE_FULL,
    S_TIMEOUT,
    TSHIFT,
    Msg,
    QEntry,
    heap_size,
    insert_entry,
    make_entry,
    serialization_message,
    too_large_message,
    topics_hash,
    wire_size,
)
from models.topiclist.configs import NAMESPACE, TOPIC_A, _bool, _int, _strs, topic_tuple
from models.topiclist.pools import Pools
from models.topiclist.scope import ScopeBase


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


class FlowWorld(Pools):
    """The flows scope (§4.6-4.8). A flow's continuation is selected by `FlowReq.stage`.

    Callbacks run synchronously in registration order, as `VFuture`s do: when a grant or failure
    completes a request future inside a pass, the flow's next stage runs inside that pass.
    """

    __slots__ = ("changes", "conns", "denied", "holders", "lookup", "m", "out", "reqs", "writes")

    def __init__(self, m: FlowsScope, s: FlowState) -> None:
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
        insert_entry(self.execq, make_entry(delay, RETRY, 0, rid))

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


def _first(pair: tuple[int, Json]) -> int:
    return pair[0]


POOL_NAMES = ("heap", "direct", "proxy_heap", "proxy_direct")
FLOW_ACTIONS = (
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
FLOW_HARNESS = (("faults", "arm_serialization_fault"), ("allow_deny", "deny_authorization"))
HOLDER_STATE = {UNSET: "UNSET", INITIALIZING: "INITIALIZING"}


class FlowsScope(ScopeBase):
    """The flows scope's half of `TopicListModel`."""

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
        self.namespaces = _strs(cfg, "namespaces", (NAMESPACE,))
        modes = _strs(cfg, "modes", ("PERSISTENT",))
        self.modes = modes if "PERSISTENT" in modes else (*modes, "PERSISTENT")
        self.offered_modes = tuple(range(len(modes)))
        self.persistent_mode = self.modes.index("PERSISTENT")
        tl = cfg.get("topic_lists", ((TOPIC_A,),))
        if not isinstance(tl, tuple):
            raise ValueError("topiclist config 'topic_lists' must be a tuple of topic lists")
        self.topic_lists = tuple(topic_tuple(t, "topic_lists") for t in tl)
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
            changes.append((topic_tuple(pair[0], "topic_changes"), topic_tuple(pair[1], "topic_changes")))
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
        self._msg_sizes: dict[Msg, int] = {}

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

    def _initial_flows(self, execq: tuple[int, ...]) -> FlowState:
        npools = len(self.pool_max)
        return FlowState(
            0,
            tuple(max(m, 0) for m in self.pool_max),
            (False,) * npools,
            ((),) * npools,
            execq,
            (),
            tuple(Conn(True, (), BACKOFF_INITIAL_MS) for _ in self.conn_worlds),
            (Holder(UNSET, ()),) * (2 * self._nsm),
            (),
            self.lookup_max,
            (False,) * len(self.namespaces),
            0,
            ((0, 0),) * npools,
        )

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
        w = FlowWorld(self, s)
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
                topics = topic_tuple(p["topics"], "topics")
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
                topic_tuple(p["new"], "new"),
                topic_tuple(p["deleted"], "deleted"),
            )
        elif name == "close":
            w.close_limiter(2 * self.limiters.index(str(p["limiter"])))
        else:
            self._time_step(w, action)
        w.out.sort(key=_first)  # stable: per connection, in append order
        return w.freeze(), {"replies": [d for _, d in w.out]}

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

    def _vars_flows(self, fs: FlowState) -> dict[str, Json]:
        now = fs.now
        execq: list[Json] = [now + (e >> TSHIFT) for e in fs.execq]
        pools: list[Json] = []
        for i in range(len(self.pool_max)):
            mx = self.pool_max[i]
            queue: list[Json] = []
            for rid, n, prev in fs.queues[i]:
                queue.append([n, fs.reqs[rid].p0 if prev >= 0 else -1])
            grants, timeouts = fs.stats[i]
            pools.append(
                {
                    "name": POOL_NAMES[i],
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
                "state": HOLDER_STATE.get(h.size, "KNOWN"),
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

    def _quiescent_flows(self, fs: FlowState) -> bool:
        """`TopicListModel.quiescent` in this scope: the executor is idle (so no request is queued in
        any pool and no watcher retry is pending), and no listing, broker response or write awaits
        the harness."""
        if fs.execq:
            return False
        for q in fs.queues:
            if q:
                return False
        for r in fs.reqs:
            if r.stage == ST_LIST:
                return False
        return all(not wr.pending for wr in fs.writes)

    def _leak_free_flows(self, fs: FlowState) -> bool:
        """Every bounded pool back at its max and every lookup permit back."""
        for p in range(len(self.pool_max)):
            if self.pool_max[p] > 0 and fs.avail[p] != self.pool_max[p]:
                return False
        return fs.lookup == self.lookup_max

    def live_permits(self, state: FlowState) -> list[int]:
        """Per pool, the sum of the values of the permits the flows hold (TL-I2's right side)."""
        sums = [0] * len(self.pool_max)
        for r in state.reqs:
            sums[r.lim] += r.p0 + r.p1
            sums[r.lim + 1] += r.pd
        for wr in state.writes:
            sums[wr.pool] += wr.permits
        return sums


    def _flow_invariants(self) -> list[Invariant[Any]]:
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
            return not self._quiescent_flows(s) or self._leak_free_flows(s)

        def i8(s: Any) -> bool:
            q = self._quiescent_flows(s)
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
