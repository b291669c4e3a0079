"""`FlowWorld`: the flows scope's step world, complete: the operations the harness drives (client
requests, topic changes, write completions, limiter close) on top of the stages of every flow and
the watcher's (`flow_frame.py` describes the chain).
"""

from __future__ import annotations

from typing import Any

from models.topiclist.common import (
    MSG_CLOSED_BEFORE_CREATION,
    MSG_NOT_AUTHORIZED,
    MSG_PROXY_LOOKUPS,
    MSG_TOO_MANY_LOOKUPS,
    MSG_WATCH_NOT_AUTHORIZED,
    topics_hash,
)
from models.topiclist.flow_state import (
    F_INIT,
    F_KIND,
    F_LIVE,
    F_LOOKUP,
    F_NS,
    F_REG,
    F_SENDING,
    F_TOPICS,
    F_UPDATES,
    F_WATCHER,
    K_BROKER,
    K_CLOSE,
    K_PROXY,
    K_WATCH,
    ST_NONE,
    Write,
)
from models.topiclist.flow_watcher import WatcherStages


class FlowWorld(WatcherStages):
    """The flows scope's step world: a state thawed, mutated by one action, frozen."""

    __slots__ = ()

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
