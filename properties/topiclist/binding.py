"""The topic-list limiter (PIP-442) bound to the engines: the reference adapter and the registry entry.

`TopicListReference` builds the reference world of `reference_impl.topiclist` for a model config
(one `AsyncSemaphore`, or dual limiters with a `Broker` and a `Proxy`), performs the model's
actions on it, returns observations in the model's shape, projects the reference onto exactly the
model's variables, and judges the invariants on the reference side (`violations`).

The rule for `violations`: every invariant the model declares is evaluated on the reference
against an **independent oracle**: the harness's own record of its inputs and of what the
reference answered (and when), or a function of those inputs written here from the spec; never
by asking the code under test what the right answer is. The semaphore scope keeps a ledger of
the value each permit must hold, of the requests that came back pending and of the executor
running, so TL-I10 knows the head and the available permits at a pass without reading the queue;
the flows scope counts reply attempts per request and treats a request still unanswered once
nothing more can happen (executor idle, no listing, broker response or write left for the
harness) as TL-I8, exempting only watches the harness disconnected, closed or cut off by close().

How model names map to the reference:

* requests: model request ids are passed as the reference's request ids (flows), or are the
  semaphore's request sequence number minus one (semaphore scope: every validated call gets one);
* permits (semaphore scope): numbered in the order the adapter sees them issued;
* connections: model connection `c` is the `c`-th connection the adapter opened, broker
  connections first, then proxy connections (each world has its own);
* listings are named by the request that owns them (`PendingListing.request_id`);
* writes are numbered in global creation order (the reference numbers them per world); the adapter
  wraps each connection's `write` to see that order;
* the model's `advance(dt)` is `advance_to(now + dt)`, `step` is one `VirtualExecutor.step()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from models.core import Action, Json, Model, Observation, Param
from models.topiclist import (
    EXPLORE_ALL_FLOWS_CONFIG,
    EXPLORE_CONFIG,
    EXPLORE_FLOWS_CONFIG,
    HYPOTHESIS_CONFIG,
    HYPOTHESIS_FLOWS_CONFIG,
    TopicListModel,
)
from models.topiclist.common import topics_hash
from models.topiclist.semaphore_locks import DEFAULT_CONFIG as LOCKS_DEFAULT_CONFIG
from models.topiclist.semaphore_locks import SemaphoreLocksModel
from models.topiclist.sessions import DEFAULT_CONFIG as SESSIONS_DEFAULT_CONFIG
from models.topiclist.sessions import SessionsModel
from properties.engines.eventlog import EventLog
from properties.engines.lockstep import BaseImplementation, Implementation
from properties.engines.mechanism import Mechanism, Property
from properties.topiclist import coverage as topiclist_coverage
from properties.topiclist import proofs as topiclist_z3
from properties.topiclist import protocol as topiclist_protocol
from properties.topiclist.guards import GUARDS
from properties.topiclist.locks import SemaphoreLocksReference
from properties.topiclist.sessions import SessionsReference
from reference_impl.topiclist import (
    LONG_MAX,
    AsyncDualMemoryLimiter,
    AsyncSemaphore,
    Broker,
    Connection,
    ErrorReply,
    GetTopicsResponse,
    LimitType,
    Outcome,
    Permit,
    PermitAcquireAlreadyClosedError,
    PermitAcquireCancelledError,
    PermitAcquireQueueFullError,
    PermitAcquireTimeoutError,
    Proxy,
    Reply,
    SizeState,
    SuccessReply,
    TopicListMetrics,
    VFuture,
    VirtualExecutor,
    WatchSuccess,
    WatchUpdate,
)
from reference_impl.topiclist.flows import PendingListing
from traces.limits import INT32, NON_NEGATIVE_INT, NON_NEGATIVE_LONG

_FAILURE_NAMES: tuple[tuple[type[BaseException], str], ...] = (
    (PermitAcquireTimeoutError, "Timeout"),
    (PermitAcquireQueueFullError, "QueueFull"),
    (PermitAcquireAlreadyClosedError, "AlreadyClosed"),
    (PermitAcquireCancelledError, "Cancelled"),
)


def _int(action: Action, name: str) -> int:
    value = action[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{action}: parameter {name} must be an int")
    return value


def _str(action: Action, name: str) -> str:
    return str(action[name])


def _topics(action: Action, name: str) -> list[str]:
    value = action[name]
    if not isinstance(value, tuple):
        raise ValueError(f"{action}: parameter {name} must be a tuple of topic names")
    return [str(t) for t in value]


def _failure_name(error: BaseException | None) -> str:
    for cls, name in _FAILURE_NAMES:
        if isinstance(error, cls):
            return name
    return type(error).__name__


class SemaphoreReferenceWorld:
    """The semaphore scope: one `AsyncSemaphore` whose requests and permits the harness holds.

    The harness keeps its own ledger (what it asked, what the reference answered and when): the
    value each permit must hold (`values`), the requests that came back pending (`enqueued`), the
    futures it saw complete and whether the executor was running then. Every check compares the
    reference's answers with that ledger; none asks the semaphore's own queue or counters.
    """

    def __init__(self, model: TopicListModel) -> None:
        self.model = model
        self.ex = VirtualExecutor()
        self.timeouts = 0
        self.observations: list[int] = []
        self.sem = AsyncSemaphore(
            model.max_permits,
            model.pool_queue[0],
            model.pool_timeout[0],
            executor=self.ex,
            queue_latency_recorder=self._record,
        )
        self.bounded = model.max_permits > 0
        self.futures: list[VFuture[Permit]] = []
        self.flags: list[bool] = []
        self.created_at: list[int] = []
        self.requested: list[int] = []
        self.enqueued: list[bool] = []  # the call returned a pending future
        self.permits: list[Permit] = []
        self.values: list[int] = []  # per permit id: the value the harness's ledger says it holds
        self.permit_ids: dict[int, int] = {}  # id(Permit) -> model permit id
        self.completions: list[Json] = []
        self.completed_count: list[int] = []
        self.update_of: dict[int, int] = {}  # rid of a growing update -> the old permit's id
        self.queued_grants = 0
        self.timed_out = 0
        self.closed = False  # the harness called close()
        self.running = False  # the executor is running (a pass or a timeout task may complete)
        self.failed: set[str] = set()

    def _record(self, value: int) -> None:
        if value == LONG_MAX:
            self.timeouts += 1
        else:
            self.observations.append(value)

    def _available(self) -> int:
        """The pool's available permits by the ledger: max minus what the harness's permits hold."""
        return self.model.max_permits - sum(self.values)

    def _earlier_pending(self, rid: int) -> bool:
        """A request enqueued before `rid` still waits (not done): `rid` is not the head."""
        return any(self.enqueued[r] and not self.futures[r].done() for r in range(rid))

    # -- callbacks -----------------------------------------------------------------------------
    def _watch(self, rid: int, future: VFuture[Permit]) -> None:
        def done(f: VFuture[Permit]) -> None:
            self.completed_count[rid] += 1
            if self.completed_count[rid] > 1:
                self.failed.add("TL-I4")
            if f.cancelled():
                self.completions.append({"request": rid, "status": "caller_cancelled"})
                if not self.enqueued[rid]:
                    self.failed.add("TL-I10")
                return
            error = f.exception()
            if error is None:
                permit = f.result()
                pid = len(self.permits)
                self.permits.append(permit)
                self.permit_ids[id(permit)] = pid
                self.completions.append({"request": rid, "status": "granted", "permit": pid, "permits": permit.permits})
                self._check_grant(rid, permit)
                return
            name = _failure_name(error)
            self.completions.append({"request": rid, "status": name})
            self._check_failure(rid, name)

        future.add_done_callback(done)

    def _check_grant(self, rid: int, permit: Permit) -> None:
        n = self.requested[rid]
        old = self.update_of.get(rid)
        if self.bounded and permit.permits > self.model.max_permits:
            self.failed.add("TL-I5")
        if self.enqueued[rid]:  # TL-I3 / TL-I10: a pass grants the head, if it fits and is not cancelled
            self.queued_grants += 1
            required = n - (self.values[old] if old is not None else 0)
            if self._earlier_pending(rid):
                self.failed.add("TL-I3")
            if self.flags[rid] or not self.running or required > self._available():
                self.failed.add("TL-I10")
        if old is not None:
            self.values[old] = 0  # the grant consumed the old permit
        self.values.append(n if self.bounded else 0)

    def _check_failure(self, rid: int, name: str) -> None:
        if self._misattributed(rid, name):
            self.failed.add("TL-I10")
        if name == "Timeout":
            self.timed_out += 1
        old = self.update_of.get(rid)
        if old is not None and self.permits[old].permits != self.values[old]:
            self.failed.add("TL-I10")  # a failed growing update changed the old permit

    def _misattributed(self, rid: int, name: str) -> bool:
        """TL-I10: a failure where §4.1-4.5 do not put it. Timeout and Cancelled come from the
        executor for a queued request; Cancelled only for the head, with is_cancelled() true and
        permits available; Timeout only at created_at + timeout_ms; AlreadyClosed only after close();
        QueueFull only at the call, when the queue may be full."""
        if name in ("Timeout", "Cancelled") and not (self.enqueued[rid] and self.running):
            return True
        if name == "Cancelled":
            return not self.flags[rid] or self._available() <= 0 or self._earlier_pending(rid)
        if name == "Timeout":
            return self.ex.now != self.created_at[rid] + self.sem.timeout_ms
        if name == "AlreadyClosed":
            return not self.closed
        if name == "QueueFull":
            return self.closed or self.enqueued[rid] or not self._queue_may_be_full()
        return False

    def _queue_may_be_full(self) -> bool:
        """At most this many requests can be queued: the ones not done, plus caller-cancelled ones
        (they stay queued until a pass drops them)."""
        mq = self.model.pool_queue[0]
        queued = sum(
            1 for r, f in enumerate(self.futures) if self.enqueued[r] and (not f.done() or f.cancelled())
        )
        return 0 < mq <= queued

    # -- actions -------------------------------------------------------------------------------
    def apply(self, action: Action) -> Observation:
        name = action.name
        self.completions = []
        if name in ("acquire", "update"):
            return self._request(action, name)
        if name == "release":
            pid = _int(action, "permit")
            self.sem.release(self.permits[pid])
            self.values[pid] = 0
        elif name == "cancel":
            self.futures[_int(action, "request")].cancel()
        elif name == "disconnect":
            self.flags[_int(action, "request")] = True
        elif name == "close":
            self.closed = True
            self.sem.close()
        elif name in ("step", "advance"):
            self.running = True
            try:
                if name == "step":
                    self.ex.step()
                else:
                    self.ex.advance_to(self.ex.now + _int(action, "dt"))
            finally:
                self.running = False
        else:
            raise ValueError(f"the topiclist reference has no action {name!r}")
        return {"completed": self.completions}

    def _request(self, action: Action, name: str) -> Observation:
        n = _int(action, "permits")
        pid = _int(action, "permit") if name == "update" else -1
        rid = len(self.futures)

        def is_cancelled() -> bool:
            return self.flags[rid]

        try:
            if name == "acquire":
                future = self.sem.acquire(n, is_cancelled)
            else:
                future = self.sem.update(self.permits[pid], n, is_cancelled)
        except ValueError as e:
            return {"error": "ValueError", "message": str(e)}
        if future.id != rid + 1:
            self.failed.add("TL-I4")  # request numbering out of step with the calls
        growing = pid < 0 or n > self.values[pid]
        self.futures.append(future)
        self.flags.append(False)
        self.created_at.append(self.ex.now)
        self.completed_count.append(0)
        self.requested.append(n)
        self.enqueued.append(not future.done())
        if self.bounded and growing and future.done() and future.exception() is None:
            self.failed.add("TL-I10")  # a bounded acquire or growing update granted inline, not by a pass
        if pid >= 0:
            if growing:
                self.update_of[rid] = pid
            elif self.bounded:
                self.values[pid] = 0  # a shrinking or equal update consumes the old permit
        if self.enqueued[rid] and 0 < self.model.pool_queue[0] < sum(
            1 for r, f in enumerate(self.futures) if self.enqueued[r] and not f.done()
        ):
            self.failed.add("TL-I6")  # enqueued past the bound
        if self.enqueued[rid] and self.closed:
            self.failed.add("TL-I10")  # a closed semaphore fails every acquire at once
        self._watch(rid, future)
        if not future.done():
            return {"request": rid, "status": "pending"}
        (done,) = self.completions
        assert isinstance(done, dict)
        return done

    # -- projection and checks -----------------------------------------------------------------
    def _status(self, future: VFuture[Permit]) -> str:
        if not future.done():
            return "pending"
        if future.cancelled():
            return "caller_cancelled"
        error = future.exception()
        return "granted" if error is None else _failure_name(error)

    def vars(self) -> dict[str, Json]:
        sem = self.sem
        reqs: list[Json] = []
        for rid, future in enumerate(self.futures):
            status = self._status(future)
            d: dict[str, Json] = {"status": status, "cancelled": self.flags[rid]}
            if status == "granted":
                d["permit"] = self.permit_ids[id(future.result())]
            reqs.append(d)
        return {
            "now": self.ex.now,
            "available_permits": sem.available_permits,
            "acquired_permits": sem.acquired_permits,
            "queue_size": sem.queue_size,
            "closed": sem.closed,
            "queue": [p.seq - 1 for p in sem.queue],
            "requests": reqs,
            "permits": [p.permits for p in self.permits],
            "executor": [t for t, _ in self.ex.pending()],
            "timeouts": self.timeouts,
            "waits": len(self.observations),
        }

    def violations(self) -> list[str]:
        """The reference's answers (getters, permit values, recorder calls) against the ledger."""
        sem = self.sem
        failed = set(self.failed)
        if self.bounded:
            mx = self.model.max_permits
            if not 0 <= sem.available_permits <= mx:
                failed.add("TL-I1")
            if not sem.acquired_permits == mx - sem.available_permits == sum(self.values) or any(
                p.permits != v for p, v in zip(self.permits, self.values, strict=True)
            ):
                failed.add("TL-I2")
            if any(p.permits > mx for p in self.permits):
                failed.add("TL-I5")
        if self.ex.idle() and any(not f.done() for f in self.futures):
            failed.add("TL-I4")
        if self.ex.idle() and not any(self.values) and sem.acquired_permits != 0:
            failed.add("TL-I7")
        if self.timeouts != self.timed_out or len(self.observations) != self.queued_grants + self.timed_out:
            failed.add("TL-I9")
        return sorted(failed)


def _by_request(listing: PendingListing) -> int:
    return listing.request_id


def _reply_json(conn: int, reply: Reply) -> dict[str, Json]:
    d: dict[str, Json] = {"conn": conn}
    if isinstance(reply, ErrorReply):
        d.update(type="Error", request=reply.request_id, code=str(reply.code.value), message=reply.message)
    elif isinstance(reply, SuccessReply):
        d.update(type="Success", request=reply.request_id)
    elif isinstance(reply, GetTopicsResponse):
        d.update(
            type="GetTopicsResponse",
            request=reply.request_id,
            topics=list(reply.topics),
            hash=reply.topics_hash,
            changed=reply.changed,
            filtered=reply.filtered,
        )
    elif isinstance(reply, WatchSuccess):
        d.update(
            type="WatchSuccess",
            request=reply.request_id,
            watcher=reply.watcher_id,
            hash=reply.topics_hash,
            topics=list(reply.topics),
        )
    elif isinstance(reply, WatchUpdate):
        d.update(
            type="WatchUpdate",
            watcher=reply.watcher_id,
            new=list(reply.new_topics),
            deleted=list(reply.deleted_topics),
            hash=reply.topics_hash,
        )
    return d


class FlowsReferenceWorld:
    """The flows scope: a broker (get-topics and watchers) and a proxy over one or two limiters."""

    def __init__(self, model: TopicListModel, variant: str) -> None:
        self.model = model
        self.ex = VirtualExecutor()
        m = model
        limiters: list[AsyncDualMemoryLimiter] = []
        self.metrics: list[TopicListMetrics] = []
        for i, prefix in enumerate(("pulsar_broker_", "pulsar_proxy_")[: len(m.limiters)]):
            heap, direct = 2 * i, 2 * i + 1
            lim = AsyncDualMemoryLimiter(
                m.pool_max[heap],
                m.pool_queue[heap],
                m.pool_timeout[heap],
                m.pool_max[direct],
                m.pool_queue[direct],
                m.pool_timeout[direct],
                executor=self.ex,
            )
            limiters.append(lim)
            self.metrics.append(TopicListMetrics(lim, prefix))
        self.limiters = limiters
        self.broker = Broker(limiters[0], self.ex, lookup_max=m.lookup_max, variant=variant)  # type: ignore[arg-type]
        self.proxy = Proxy(
            limiters[-1],
            self.ex,
            lookup_max=m.proxy_lookup_max,
            variant=variant,  # type: ignore[arg-type]
        )
        self.pools: list[tuple[AsyncSemaphore, TopicListMetrics, LimitType]] = []
        for lim, met in zip(limiters, self.metrics, strict=True):
            self.pools.append((lim.heap, met, LimitType.HEAP_MEMORY))
            self.pools.append((lim.direct, met, LimitType.DIRECT_MEMORY))
        self.conns: list[Connection] = []
        for world_name in m.conn_worlds:
            world: Broker | Proxy = self.broker if world_name == "broker" else self.proxy
            conn = world.connect()
            self._wrap_write(conn, world)
            self.conns.append(conn)
        self.writes: list[tuple[Broker | Proxy, int, int]] = []  # (world, reference id, request)
        self.written: set[int] = set()  # writes the harness completed
        self.kinds: dict[int, str] = {}
        self.conn_of: dict[int, int] = {}  # client request -> its connection
        self.disconnected: set[int] = set()
        self.closed_watchers: set[int] = set()  # watcher ids the harness sent watch_close for
        self.closed_limiter = False
        self.client_hash: dict[int, str | None] = {}  # client request -> the hash it sent (TL-I12)
        self.listed: dict[int, tuple[str, ...]] = {}  # client request -> the topics its last listing returned
        self.broker_answer: dict[int, tuple[tuple[str, ...], str]] = {}  # proxied request -> the broker's topics, hash
        self.failed: set[str] = set()
        self._granted_seen = [0] * len(self.pools)
        self.issued: list[list[Permit]] = [[] for _ in self.pools]  # per pool: every permit it issued
        for i, (pool, _, _) in enumerate(self.pools):
            self._wrap_issue(i, pool)

    # -- instrumentation -----------------------------------------------------------------------
    def _wrap_write(self, conn: Connection, world: Broker | Proxy) -> None:
        original = conn.write

        def write(reply: Any, listener: Callable[[bool], None]) -> None:
            original(reply, listener)
            request = reply.watcher_id if isinstance(reply, WatchUpdate) else reply.request_id
            self.writes.append((world, max(world.pending_writes), int(request)))

        conn.write = write  # type: ignore[method-assign]

    def _wrap_issue(self, index: int, pool: AsyncSemaphore) -> None:
        original = pool._issue

        def _issue(seq: int, permits: int) -> Permit:
            granted = pool.outcomes[Outcome.GRANTED]
            if granted != self._granted_seen[index]:  # a queued grant: only the head is granted
                self._granted_seen[index] = granted
                if any(p.seq < seq for p in pool.queue):
                    self.failed.add("TL-I3")
            if 0 < self.model.pool_max[index] < permits:
                self.failed.add("TL-I5")
            permit = original(seq, permits)
            self.issued[index].append(permit)
            return permit

        pool._issue = _issue  # type: ignore[method-assign]

    # -- actions -------------------------------------------------------------------------------
    def _world_of(self, rid: int) -> Broker | Proxy:
        return self.proxy if self.kinds.get(rid) == "proxy" else self.broker

    def apply(self, action: Action) -> Observation:
        before = [len(c.replies) for c in self.conns]
        name = action.name
        b, p = self.broker, self.proxy
        if name in ("get_topics", "proxy_get_topics", "watch"):
            rid = _int(action, "request_id")
            conn = self.conns[_int(action, "conn")]
            ns = _str(action, "namespace")
            h = _str(action, "topics_hash") or None
            self.kinds[rid] = name
            self.conn_of[rid] = _int(action, "conn")
            self.client_hash[rid] = h
            if name == "get_topics":
                b.handle_get_topics(conn, rid, ns, _str(action, "mode"), h)
            elif name == "proxy_get_topics":
                self.kinds[rid] = "proxy"
                p.handle_get_topics(conn, rid, ns, _str(action, "mode"), h)
            else:
                b.handle_watch(conn, rid, rid, ns, h)
        elif name == "watch_close":
            rid = _int(action, "request_id")
            self.kinds[rid] = name
            self.conn_of[rid] = _int(action, "conn")
            self.closed_watchers.add(_int(action, "watcher_id"))
            b.handle_watch_close(self.conns[_int(action, "conn")], rid, _int(action, "watcher_id"))
        elif name == "complete_listing":
            rid = _int(action, "id")
            (listing,) = [x.listing_id for x in b.pending_listings.values() if x.request_id == rid]
            if action.get("topics") is not None:
                self.listed[rid] = tuple(_topics(action, "topics"))
                b.complete_listing(listing, topics=_topics(action, "topics"))
            else:
                b.complete_listing(listing, error=_str(action, "error"))
        elif name == "complete_broker_response":
            rid = _int(action, "id")
            (response,) = [r.response_id for r in p.pending_broker_responses.values() if r.request_id == rid]
            if action.get("topics") is not None:
                answer = tuple(_topics(action, "topics"))
                self.broker_answer[rid] = (answer, _str(action, "hash"))  # the proxy forwards the broker's hash
                p.complete_broker_response(response, _topics(action, "topics"), _str(action, "hash"))
            else:
                p.complete_broker_response(response, error_kind=_str(action, "error_kind"))
        elif name == "complete_write":
            world, ref_id, _ = self.writes[_int(action, "id")]
            self.written.add(_int(action, "id"))
            ok = action["ok"]
            world.complete_write(ref_id, ok is True)
        elif name == "arm_serialization_fault":
            rid = _int(action, "request_id")
            self._world_of(rid).arm_serialization_fault(rid)
        elif name == "disconnect":
            c = _int(action, "conn")
            world = b if self.model.conn_worlds[c] == "broker" else p
            self.disconnected.add(c)
            world.disconnect(self.conns[c])
        elif name == "deny_authorization":
            b.deny_authorization(_str(action, "namespace"))
        elif name == "topics_changed":
            b.topics_changed(_str(action, "namespace"), _topics(action, "new"), _topics(action, "deleted"))
        elif name == "close":
            self.closed_limiter = True
            self.limiters[self.model.limiters.index(_str(action, "limiter"))].close()
        elif name == "step":
            self.ex.step()
        elif name == "advance":
            self.ex.advance_to(self.ex.now + _int(action, "dt"))
        else:
            raise ValueError(f"the topiclist reference has no action {name!r}")
        replies: list[Json] = []
        for c, conn in enumerate(self.conns):
            replies.extend(_reply_json(c, r) for r in conn.replies[before[c] :])
        return {"replies": replies}

    # -- projection ----------------------------------------------------------------------------
    def vars(self) -> dict[str, Json]:
        m = self.model
        pools: list[Json] = []
        names = ("heap", "direct", "proxy_heap", "proxy_direct")
        for i, (pool, met, lt) in enumerate(self.pools):
            pools.append(
                {
                    "name": names[i],
                    "available": pool.available_permits,
                    "acquired": pool.acquired_permits,
                    "closed": pool.closed,
                    "queue": [
                        [q.permits, -1 if q.previous_permit is None else q.previous_permit.permits] for q in pool.queue
                    ],
                    "timeouts": met.timeouts[lt],
                    "waits": len(met.observations[lt]),
                }
            )
        holders: list[Json] = []
        for comp, world in (("broker", self.broker), ("proxy", self.proxy)):
            for ns in m.namespaces:
                for mode in m.modes:
                    h = world.size_cache.holders.get((ns, mode))
                    state = "UNSET" if h is None else h.state.name
                    size = -1 if h is None or h.state is not SizeState.KNOWN or h.size is None else h.size
                    holders.append(
                        {
                            "key": f"{comp}:{ns}:{mode}",
                            "state": state,
                            "size": size,
                            "waiters": 0 if h is None else h.waiters,
                        }
                    )
        conns: list[Json] = [
            {
                "world": m.conn_worlds[c],
                "active": conn.active,
                "backoff_ms": conn.retry_backoff.current_ms,
                "replies": [_reply_json(c, r) for r in conn.replies],
            }
            for c, conn in enumerate(self.conns)
        ]
        listings: list[Json] = [x.request_id for x in sorted(self.broker.pending_listings.values(), key=_by_request)]
        responses: list[Json] = [
            rid for rid in sorted(r.request_id for r in self.proxy.pending_broker_responses.values())
        ]
        watchers: list[Json] = [
            {
                "id": wid,
                "registered": w.registered,
                "initializing": w.initializing,
                "live": w.live,
                "sending": w.sending_in_progress,
                "queued_updates": len(w.update_queue),
                "topics": list(w.topics),
            }
            for wid, w in sorted(self.broker.watchers.items())
        ]
        return {
            "now": self.ex.now,
            "pools": pools,
            "executor": [t for t, _ in self.ex.pending()],
            "lookup_available": self.broker.lookup.available,
            "proxy_lookup_available": self.proxy.lookup.available,
            "holders": holders,
            "connections": conns,
            "listings": listings,
            "responses": responses,
            "writes": [
                {"id": i, "request": request, "pending": ref_id in world.pending_writes}
                for i, (world, ref_id, request) in enumerate(self.writes)
            ],
            "watchers": watchers,
            "denied": [ns for ns in m.namespaces if ns in self.broker.denied_namespaces],
        }

    # -- checks on reference internals ---------------------------------------------------------
    def _reply_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for conn in self.conns:
            for r in conn.replies:
                if not isinstance(r, WatchUpdate):
                    counts[r.request_id] = counts.get(r.request_id, 0) + 1
        return counts

    def quiescent(self) -> bool:
        """TL-I7's and TL-I8's premise, from the harness's side: the executor it drives is idle and
        no listing, broker response or write waits for it to complete. Nothing more can then
        happen without a new client request, so a request still unanswered never will be."""
        return (
            self.ex.idle()
            and not self.broker.pending_listings
            and not self.proxy.pending_broker_responses
            and len(self.written) == len(self.writes)
        )

    def may_stop_quietly(self, rid: int) -> bool:
        """TL-I8's exemption (watcher step 5), judged from the harness's own inputs: a watch whose
        connection it dropped, whose watcher it closed, or whose limiter it closed."""
        return self.kinds[rid] == "watch" and (
            self.conn_of[rid] in self.disconnected or rid in self.closed_watchers or self.closed_limiter
        )

    def _admitted_unanswered(self, counts: dict[int, int]) -> list[int]:
        """TL-I11's requests, from the harness's record: the broker's get-topics requests not answered yet (a request
        refused a lookup permit is answered at once) on connections the harness did not drop; each must still hold
        its lookup permit. A watch is not one: upstream gives its permit back once its first send has started,
        before the reply is written."""
        return [rid for rid, kind in self.kinds.items()
                if kind == "get_topics" and not counts.get(rid, 0) and self.conn_of[rid] not in self.disconnected]

    def _payloads_right(self) -> bool:
        """TL-I12, on the harness's own inputs: a reply that describes a topic list describes the one the harness fed,
        with the hash `TopicList.calculateHash` gives it (the model's `topics_hash`, never the reference's). A broker's
        GetTopicsResponse carries its listing's hash, and its topics unless that hash is the client's (then none and
        `changed` false); a proxy's carries the broker's answer; a WatchSuccess carries its listing's hash and topics
        (none when the hash is the client's); each WatchUpdate carries the hash of its watcher's list after the
        update, starting from the listing and applying the updates in the order they were written."""
        views: dict[int, set[str]] = {}
        for conn in self.conns:
            for r in conn.replies:
                if isinstance(r, GetTopicsResponse):
                    if self.kinds.get(r.request_id) == "proxy":
                        topics, digest = self.broker_answer.get(r.request_id, ((), ""))
                        expected = (topics, digest, True)
                    else:
                        listed = self.listed.get(r.request_id, ())
                        digest = topics_hash(listed)
                        same = digest == self.client_hash.get(r.request_id)
                        expected = ((), digest, False) if same else (listed, digest, True)
                    if (r.topics, r.topics_hash, r.changed) != expected:
                        return False
                elif isinstance(r, WatchSuccess):
                    listed = self.listed.get(r.request_id, ())
                    digest = topics_hash(listed)
                    shown = () if digest == self.client_hash.get(r.request_id) else listed
                    if (r.topics_hash, r.topics) != (digest, shown):
                        return False
                    views[r.watcher_id] = set(listed)
                elif isinstance(r, WatchUpdate):
                    view = views.setdefault(r.watcher_id, set(self.listed.get(r.watcher_id, ())))
                    view.difference_update(r.deleted_topics)
                    view.update(r.new_topics)
                    if r.topics_hash != topics_hash(tuple(view)):
                        return False
        return True

    def violations(self) -> list[str]:
        failed = set(self.failed)
        if not self._payloads_right():
            failed.add("TL-I12")
        for i, (pool, _, _) in enumerate(self.pools):
            mx = self.model.pool_max[i]  # the configured bounds, not the pool's own idea of them
            if mx <= 0:
                continue
            if not 0 <= pool.available_permits <= mx:
                failed.add("TL-I1")
            if not pool.acquired_permits == mx - pool.available_permits == sum(p.permits for p in self.issued[i]):
                failed.add("TL-I2")  # against every permit the harness saw issued, not the pool's live set
            if any(p.permits > mx for p in self.issued[i]):
                failed.add("TL-I5")
            if 0 < self.model.pool_queue[i] < pool.queue_size:
                failed.add("TL-I6")
        if self.ex.idle() and any(pool.queue for pool, _, _ in self.pools):
            failed.add("TL-I4")
        counts = self._reply_counts()
        if any(n > 1 for n in counts.values()):
            failed.add("TL-I8")
        if len(self._admitted_unanswered(counts)) > self.model.lookup_max - self.broker.lookup.available:
            failed.add("TL-I11")  # a lookup permit given back while its request is still being worked on
        if self.quiescent():
            if any(pool.acquired_permits for pool, _, _ in self.pools):
                failed.add("TL-I7")
            if self.broker.lookup.available != self.model.lookup_max:
                failed.add("TL-I7")
            if self.proxy.lookup.available != self.model.proxy_lookup_max:
                failed.add("TL-I7")
            if any(counts.get(rid, 0) != 1 and not self.may_stop_quietly(rid) for rid in self.kinds):
                failed.add("TL-I8")  # a request left unanswered once nothing more can happen
        for met in self.metrics:
            collected = met.collect()
            for lt in LimitType:
                pool = met.limiter.limiter(lt)
                base = f"{met.prefix}topic_list_{lt.value}_"
                wait = collected[base + "wait_time_ms"]
                timeouts = pool.outcomes[Outcome.TIMEOUT]
                if (
                    collected[base + "memory_used_bytes"] != pool.acquired_permits
                    or collected[base + "queue_size"] != pool.queue_size
                    or collected[base + "timeout_total"] != timeouts
                    or getattr(wait, "count", -1) != pool.outcomes[Outcome.GRANTED] + timeouts
                ):
                    failed.add("TL-I9")
        return sorted(failed)


class TopicListReference(BaseImplementation):
    """The reference implementation of one variant, driven by the model's actions."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        self.model = TopicListModel(config, variant)  # parses and completes the configuration
        self.world: SemaphoreReferenceWorld | FlowsReferenceWorld
        if self.model.scope == "semaphore":
            self.world = SemaphoreReferenceWorld(self.model)
        else:
            self.world = FlowsReferenceWorld(self.model, variant)

    def apply(self, action: Action) -> Observation:
        return self.world.apply(action)

    def vars(self) -> dict[str, Json]:
        return self.world.vars()

    def violations(self) -> list[str]:
        return self.world.violations()


def _scope(config: Mapping[str, Param] | None) -> Param | None:
    return config.get("scope") if config is not None else None


def make_model(config: Mapping[str, Param] | None, variant: str) -> Model[Any]:
    """`scope: semaphore-locks` selects the semaphore at lock granularity (models/topiclist/semaphore_locks.py),
    `scope: sessions` the watcher across metadata sessions (models/topiclist/sessions.py)."""
    if _scope(config) == "semaphore-locks":
        return SemaphoreLocksModel(config, variant)
    if _scope(config) == "sessions":
        return SessionsModel(config, variant)
    return TopicListModel(config, variant)


def make_reference(config: Mapping[str, Param] | None, variant: str) -> Implementation:
    if _scope(config) == "semaphore-locks":
        return SemaphoreLocksReference(config, variant)
    if _scope(config) == "sessions":
        return SessionsReference(config, variant)
    return TopicListReference(config, variant)


# The watcher across metadata sessions (models/topiclist/sessions.py): `sessions` is one create or delete and two
# session losses (a change during a loss, one in flight at a loss, a loss while the reconnect's listing runs);
# `sessions-race` allows a second change, enough for an update still queued at a loss: upstream drops it while its
# snapshot of the list counts it (the finding below, TL-S1 in 7 steps).
SESSIONS_FINDING = "docs/findings/topiclist-sessions-dropped-queued-update.md"
SESSIONS_EXPLORE_CONFIGS: dict[str, Mapping[str, Param]] = {
    "sessions": {**SESSIONS_DEFAULT_CONFIG, "max_changes": 1},
    "sessions-race": SESSIONS_DEFAULT_CONFIG,
}


# The semaphore's lock scope (models/topiclist/semaphore_locks.py), replayed on the upstream-granularity reference
# (reference_impl/topiclist/lock_level.py). `semaphore-locks-grant` is one acquire of the last permit (its own pass
# must grant it: the smallest wake-up), `semaphore-locks` races a growing update of P0 with a release of it
# (#25066's race), `semaphore-locks-cancel` the caller's cancellation with the grant of its growing update, and
# `semaphore-locks-wake` a release with a waiter it must wake (under the clock: a timeout and the one-shot pass
# too). Each order is its own configuration: the order is the semaphore's code, not a variant of the limiter.
LOCKS_FINDING = "docs/findings/topiclist-semaphore-lock-level.md"
_RACE: dict[str, Param] = {"held": (1,), "caller": ("update P0 2",), "other": ("release P0",)}
_CANCEL: dict[str, Param] = {"held": (1,), "caller": ("update P0 2", "cancel"), "other": ()}
_GRANT: dict[str, Param] = {"held": (1,), "caller": ("acquire 1",), "other": ()}
_WAKE: dict[str, Param] = {"held": (2,), "caller": ("acquire 1",), "other": ("release P0",), "clock": True}
LOCKS_EXPLORE_CONFIGS: dict[str, Mapping[str, Param]] = {
    name: {**LOCKS_DEFAULT_CONFIG, **script, "order": order}
    for name, order, script in (
        ("semaphore-locks-grant", "current", _GRANT), ("semaphore-locks", "current", _RACE),
        ("semaphore-locks-cancel", "current", _CANCEL),
        ("semaphore-locks-wake", "current", _WAKE),
        ("semaphore-locks-fix", "fixed", _RACE), ("semaphore-locks-fix-cancel", "fixed", _CANCEL),
        ("semaphore-locks-pre25066", "pre25066", _RACE), ("semaphore-locks-unswapped", "unswapped", _RACE))
}
LOCKS_FINDINGS: dict[str, Mapping[str, str]] = {
    "semaphore-locks": {"SL-1": LOCKS_FINDING},  # a grant reusing a permit a release swapped first: available < 0
    "semaphore-locks-cancel": {"SL-3": LOCKS_FINDING},  # a cancelled growing update loses its previous permit
    "semaphore-locks-pre25066": {"SL-2": LOCKS_FINDING, "SL-3": LOCKS_FINDING},  # #25066's race: counted twice
    "semaphore-locks-unswapped": {name: LOCKS_FINDING for name in ("SL-1", "SL-2", "SL-3")},  # the twin
}
"""What each lock configuration must break (see Mechanism.findings); the `-fix` ones, `-grant` and `-wake` break
nothing."""
# Wider scripts, nightly (`brokerspec explore --mechanism topiclist --config semaphore-locks-wide`): two held
# permits, each caller working on its own, the clock running, a full queue of one: the caller grows P0, releases
# it without waiting for the update, acquires and cancels; the other releases P1, acquires both permits and cancels.
_WIDE: dict[str, Param] = {"max_permits": 2, "max_queue": 1, "held": (1, 1), "clock": True,
                           "caller": ("update P0 2", "release P0", "acquire 1", "cancel"),
                           "other": ("release P1", "acquire 2", "cancel")}
LOCKS_NIGHTLY_CONFIGS: dict[str, Mapping[str, Param]] = {
    name: {**LOCKS_DEFAULT_CONFIG, **_WIDE, "order": order}
    for name, order in (("semaphore-locks-wide", "current"), ("semaphore-locks-wide-fix", "fixed"))
}
"""About a million states each (30-40 s): upstream's order breaks SL-1 there, by the race the finding describes
(a release swapping a permit a grant has read), and the fix nothing."""
LOCKS_FINDINGS["semaphore-locks-wide"] = {"SL-1": LOCKS_FINDING}
LOCKS_HYPOTHESIS_CONFIG: dict[str, Param] = {
    **LOCKS_DEFAULT_CONFIG, "held": (1, 1), "max_permits": 3, "clock": True, "unchecked": ("SL-1", "SL-3"),
    "caller": ("update P0 2", "cancel", "acquire 1"), "other": ("release P0", "update P1 3", "release P1"),
}
"""Hypothesis samples longer runs than the explorer's, upstream's order, on SL-2 and SL-4: SL-1 and SL-3, the known
findings the explorer reports, would end most runs at their first occurrence."""


def event_log() -> EventLog:
    """The event log the Spark pipeline checks (imported when asked for: it brings Spark and Arrow)."""
    from properties.topiclist.eventlog import EVENT_LOG

    return EVENT_LOG


MECHANISM = Mechanism(
    name="topiclist",
    spec="docs/spec/topiclist.md",
    log=event_log,
    limits={"max_queue_size": (0, 10_000), "heap_queue": (0, 10_000), "direct_queue": (0, 10_000),
            "max_requests": (0, 1_000), "connections": (0, 64), "lookup_max": (0, 1_000),
            "max_topic_changes": (0, 1_000), "max_queue": (0, 1_000), "held": (0, 1_000),
            "max_changes": (0, 1_000), "max_losses": (0, 1_000),
            "max_permits": NON_NEGATIVE_INT, "heap_max": NON_NEGATIVE_INT, "direct_max": NON_NEGATIVE_INT,
            "sizes": INT32, "proxy_lookup_max": INT32, "timeout_ms": NON_NEGATIVE_LONG,
            "heap_timeout_ms": NON_NEGATIVE_LONG, "direct_timeout_ms": NON_NEGATIVE_LONG, "dts": NON_NEGATIVE_LONG},
    make_model=make_model,
    make_reference=make_reference,
    current="current",
    twins={"no_exceptional_release": "TL-I7"},
    guards=GUARDS,
    reference_judges={
        "topiclist/semaphore": ("TL-I1", "TL-I2", "TL-I3", "TL-I4", "TL-I5", "TL-I6", "TL-I7", "TL-I9", "TL-I10"),
        "topiclist/flows": ("TL-I1", "TL-I2", "TL-I3", "TL-I4", "TL-I5", "TL-I6", "TL-I7", "TL-I8", "TL-I9",
                            "TL-I11", "TL-I12"),
        "topiclist/semaphore-locks": ("SL-1", "SL-2", "SL-3", "SL-4"),
        "topiclist/sessions": ("TL-S1",),
    },
    beyond_model={
        "TL-I11": Property("a lookup permit is held for every get-topics request the broker admitted, until the "
                           "request is answered", ("reference",)),
        "TL-I12": Property("a reply that describes a topic list describes the one the harness fed, with its "
                           "TopicList.calculateHash: a listing's topics and hash (none when the client has that hash), "
                           "the broker's answer through the proxy, and each watch update the hash of the list after it",
                           ("reference",)),
        "TL-W": Property("the Z3 semaphore is well formed: permit values are non-negative, queue entries lie within "
                         "bounds and point at issued permits, and sequence numbers are ordered", ("z3",)),
    },
    # Three requests, not the model's four: 24k states whose every transition the conformance
    # tour replays within its budget, where four (586k states, 3M transitions) cost minutes per
    # engine and were replayed only in part.
    quick_configs=("semaphore", "flows", "semaphore-locks"),  # one per scope
    explore_configs={
        "semaphore": {**EXPLORE_CONFIG, "max_requests": 3},
        "flows": EXPLORE_FLOWS_CONFIG,
        **LOCKS_EXPLORE_CONFIGS,  # seconds each: replayed before the broad all_flows
        **SESSIONS_EXPLORE_CONFIGS,
        "all_flows": EXPLORE_ALL_FLOWS_CONFIG,
    },
    hypothesis_configs={"semaphore": HYPOTHESIS_CONFIG, "flows": HYPOTHESIS_FLOWS_CONFIG,
                        "semaphore-locks": LOCKS_HYPOTHESIS_CONFIG},
    proofs=topiclist_z3.proofs,
    conformance_steps={"all_flows": 60_000},  # 369k transitions: the shallowest ones (flows is replayed in full)
    interesting=topiclist_coverage.INTERESTING,
    vocabularies=topiclist_protocol.VOCABULARIES,
    scope_of=topiclist_protocol.scope_of,
    findings={**LOCKS_FINDINGS, "sessions-race": {"TL-S1": SESSIONS_FINDING}},
    nightly_configs=LOCKS_NIGHTLY_CONFIGS,
)
