"""`FlowStages`: the stages every flow's request goes through in the step world: the size
estimate and initial heap acquire, the listing (or broker response), the heap update to the
actual size, and the direct acquire and write of the reply (§4.6-4.7), with the pools' grant and
failure hooks that resume them.

The watcher (§4.8) takes the same stages up to its first send; where it parts from the
get-topics flows a stage calls one of the watcher's continuations, declared here and defined by
`WatcherStages` (`flow_watcher.py`).
"""

from __future__ import annotations

from models.topiclist.common import (
    BACKOFF_INITIAL_MS,
    ERROR_MESSAGES,
    INITIAL_ESTIMATE,
    MSG_BROKER_DIRECT,
    MSG_HEAP_LIMIT,
    MSG_PROXY_DIRECT,
    PENDING,
    S_QUEUE_FULL,
    S_TIMEOUT,
    Msg,
    heap_size,
    serialization_message,
    too_large_message,
    topics_hash,
)
from models.topiclist.flow_frame import FlowFrame
from models.topiclist.flow_state import (
    F_CONN,
    F_FAULT,
    F_HASH,
    F_KIND,
    F_LIM,
    F_LIVE,
    F_MODE,
    F_MSG,
    F_NS,
    F_P0,
    F_P1,
    F_PD,
    F_REG,
    F_RHASH,
    F_STAGE,
    F_TOPICS,
    INITIALIZING,
    K_BROKER,
    K_PROXY,
    K_WATCH,
    ST_DIRECT,
    ST_EST,
    ST_HEAP,
    ST_LIST,
    ST_NONE,
    ST_RETRY_SEND,
    ST_UPD,
    UNSET,
    Holder,
    Write,
)

RETRYABLE = (S_TIMEOUT, S_QUEUE_FULL)
"""The permit failures after which a watcher retries (with backoff) instead of failing."""


class FlowStages(FlowFrame):
    """The permit stages of every flow (§4.6-4.7) on top of the frame."""

    __slots__ = ()

    # pool hooks ----------------------------------------------------------------------------
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

    # the watcher's continuations (WatcherStages) -------------------------------------------------
    def schedule_retry(self, rid: int, stage: int) -> None:
        """Retry the watcher's stage `stage` after its connection's backoff."""
        raise NotImplementedError

    def watch_init_failed(self, rid: int, message: str, retryable: bool) -> None:
        """The watcher's listing stages ended with an error."""
        raise NotImplementedError

    def watch_initialized(self, rid: int) -> None:
        """The watcher's listing stages succeeded: its WatchSuccess is sent."""
        raise NotImplementedError

    def watch_send_ended(self, rid: int, msg: Msg, error: str | None) -> None:
        """A watcher's send ended asynchronously."""
        raise NotImplementedError

    # size holders (§4.6: one per component, namespace and mode) ----------------------------------
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
            self.watch_init_failed(rid, ERROR_MESSAGES[status], status in RETRYABLE)
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
            self.watch_init_failed(rid, ERROR_MESSAGES[status], status in RETRYABLE)
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
            if status in RETRYABLE and self.conns[r[F_CONN]][0] and r[F_REG]:
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
