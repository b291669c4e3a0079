"""`Pools`: the semaphore mechanics of §4.1-4.5 (enqueue, passes, timeouts, close, the clock)
over one or more pools sharing one executor.

Both scopes' mutable step worlds derive from it (`semaphore.py`: one pool; `flows.py`: the heap
and direct pools of one or two dual limiters). A state is thawed into a world, mutated by exactly
one action, and frozen.
"""

from __future__ import annotations

from typing import Protocol

from models.topiclist.common import (
    DEFERRED,
    PASS,
    PENDING,
    RETRY,
    S_CANCELLED,
    S_CLOSED,
    S_QUEUE_FULL,
    S_TIMEOUT,
    TIMEOUT,
    TMASK,
    TSHIFT,
    TUNIT,
    QEntry,
    insert_entry,
    make_entry,
)


class PoolBounds(Protocol):
    """What a world reads from the model: per pool, its max permits, queue bound and timeout."""

    pool_max: tuple[int, ...]
    pool_queue: tuple[int, ...]
    pool_timeout: tuple[int, ...]


class Pools:
    """Semaphore mechanics of §4.1-4.5 over one or more pools sharing one executor."""

    __slots__ = ("avail", "closed", "execq", "grants", "maxp", "maxq", "now", "queues", "timeouts", "tmo")

    avail: list[int]
    closed: list[bool]
    queues: list[list[QEntry]]
    grants: list[int]
    timeouts: list[int]

    def __init__(self, m: PoolBounds, now: int, execq: tuple[int, ...]) -> None:
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
        insert_entry(self.execq, make_entry(self.tmo[pool], TIMEOUT, pool, rid))
        insert_entry(self.execq, make_entry(0, PASS, pool, 0))
        return PENDING

    def give_back(self, pool: int, r: int) -> None:
        """Return `r > 0` permits to a bounded pool and submit a pass, unless it is closed
        (upstream's `processQueue()` returns at once on a closed semaphore and submits nothing)."""
        self.avail[pool] += r
        if not self.closed[pool]:
            insert_entry(self.execq, make_entry(0, PASS, pool, 0))

    def cancel_timeout(self, pool: int, rid: int) -> None:
        low = (TIMEOUT << 20) | (pool << 16) | rid
        q = self.execq
        for i in range(len(q)):
            if q[i] & TMASK == low:
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
        insert_entry(self.execq, make_entry(0, PASS, pool, 0))

    def close_pool(self, pool: int) -> None:
        if self.closed[pool]:
            return
        self.closed[pool] = True
        ex = self.execq
        low = (DEFERRED << 20) | (pool << 16)
        for i in range(len(ex)):
            if ex[i] & TMASK == low:
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
            while self.execq and self.execq[0] < TUNIT:
                self.run_entry()
            ex = self.execq
            d = ex[0] >> TSHIFT if ex else left + 1
            if d > left:
                d = left
            if d:
                sh = d << TSHIFT
                self.execq = [e - sh for e in ex]
                self.now += d
                left -= d
            elif not left:
                return


