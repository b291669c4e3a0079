"""`FlowView`: what the flows scope says about a state without stepping it: its projection to
variables, quiescence, leak freedom, the permits the flows hold, and the invariants TL-I1..TL-I8.

Separate from the action enumeration (`flows.py`): the properties read a state, they never make
one.
"""

from __future__ import annotations

from typing import Any

from models.core import Invariant, Json
from models.topiclist.common import LONG_MAX, TSHIFT
from models.topiclist.flow_config import FlowConfig
from models.topiclist.flow_state import (
    INITIALIZING,
    K_PROXY,
    K_WATCH,
    ST_DIRECT,
    ST_HEAP,
    ST_LIST,
    ST_UPD,
    UNSET,
    FlowState,
)

POOL_NAMES = ("heap", "direct", "proxy_heap", "proxy_direct")
"""The pools of one or two dual limiters, by index, as the variables name them."""
HOLDER_STATE = {UNSET: "UNSET", INITIALIZING: "INITIALIZING"}
"""The size holder states that are not a known size, as the variables name them."""


class FlowView(FlowConfig):
    """The flows scope's projection and properties."""

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
