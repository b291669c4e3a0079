"""`FlowFrame`: the flows scope's step world without its flows: a state thawed into mutable
copies and frozen back, the pools' cancellation hooks, and the small helpers every stage uses
(replies, lookup and heap permit releases, the size holders).

The world is a chain of classes, one concern each, bottom to top: `FlowFrame`, `FlowStages`
(`flow_stages.py`: the stages a request's permits go through), `WatcherStages`
(`flow_watcher.py`: the watcher's sends and retries) and `FlowWorld` (`flow_world.py`: the
operations the harness drives). A state is thawed into a `FlowWorld`, mutated by exactly one
action, and frozen.
"""

from __future__ import annotations

from typing import Any

from models.core import Json
from models.topiclist.common import Msg
from models.topiclist.flow_config import FlowConfig
from models.topiclist.flow_state import (
    F_CONN,
    F_KIND,
    F_LIM,
    F_LOOKUP,
    F_P0,
    F_REG,
    F_REPLIES,
    K_WATCH,
    Conn,
    FlowReq,
    FlowState,
)
from models.topiclist.pools import Pools


class FlowFrame(Pools):
    """The flows scope's step world (§4.6-4.8), up to its flows. A flow's continuation is selected
    by `FlowReq.stage`.

    Callbacks run synchronously in registration order, as `VFuture`s do: when a grant or failure
    completes a request future inside a pass, the flow's next stage runs inside that pass.
    """

    __slots__ = ("changes", "conns", "denied", "holders", "lookup", "m", "out", "reqs", "writes")

    def __init__(self, m: FlowConfig, s: FlowState) -> None:
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

    # pool hooks (grant and failure resume a stage: FlowStages) ---------------------------
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
