"""The flows scope (``scope: "flows"``): a dual limiter (heap + direct; optionally a second one
owned by the proxy) used by the broker get-topics flow, the proxy get-topics flow and the
topic-list watcher (§4.6-4.8), with the harness actions of §2.3. Broker and proxy are separate
worlds, each with its own connections, lookup semaphore and size cache, as in the reference.

This module holds `FlowsScope`, this scope's half of `TopicListModel`: the actions it enables
and the step that takes one. Below it, one module per concern (none imports one above it):

``flow_view.py``     `FlowView`: projection to variables, quiescence, invariants TL-I1..TL-I8
``flow_config.py``   `FlowConfig`: the configuration keys below, parsed; the initial state
``flow_world.py``    `FlowWorld`, the step world a state is thawed into for one action: the
                     operations the harness drives, over `flow_watcher.py` (the watcher's sends
                     and retries), `flow_stages.py` (the permit stages of every flow) and
                     `flow_frame.py` (thaw, freeze, helpers) on the pools of `pools.py`, one heap
                     and one direct pool per dual limiter
``flow_state.py``    `FlowState` and its records (`FlowReq`, `Conn`, `Holder`, `Write`)

Separate from `semaphore.py` because the two scopes share only the pools and the time actions.

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
from typing import cast

from models.core import Action, ActionNotEnabled, Json, Observation, Param, int_param
from models.topiclist.common import BROKER_ERROR_MESSAGES, LISTING_ERROR, topics_hash
from models.topiclist.configs import topic_tuple
from models.topiclist.flow_state import (
    F_FAULT,
    K_CLOSE,
    K_PROXY,
    K_WATCH,
    ST_DIRECT,
    ST_EST,
    ST_HEAP,
    ST_LIST,
    ST_UPD,
    FlowReq,
    FlowState,
)
from models.topiclist.flow_view import FlowView
from models.topiclist.flow_world import FlowWorld


def _first(pair: tuple[int, Json]) -> int:
    return pair[0]


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
"""The scope's client and harness action names, each with the flow that offers it (``"*"``: every
configuration): `TopicListModel.action_names` lists those of the configured flows."""
FLOW_HARNESS = (("faults", "arm_serialization_fault"), ("allow_deny", "deny_authorization"))
"""The harness actions offered only under a configuration flag: (flag, action name)."""


class FlowsScope(FlowView):
    """The flows scope's half of `TopicListModel`: its actions and their steps."""

    def _init_flows(self, cfg: Mapping[str, Param]) -> None:
        """Read the configuration, then build the actions the enumeration reuses."""
        self._read_flows_config(cfg)
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
            conn = int_param(action, "conn")
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
            w.watch_close(int_param(action, "conn"), int_param(action, "watcher_id"))
        elif name == "complete_listing" or name == "complete_broker_response":
            rid = int_param(action, "id")
            if "topics" in p:
                topics = topic_tuple(p["topics"], "topics")
                w.listing_done(rid, topics, str(p.get("hash", "")))
            elif "error" in p:
                w.listing_failed(rid, str(p["error"]), "MetadataError")
            else:
                kind = str(p["error_kind"])
                w.listing_failed(rid, BROKER_ERROR_MESSAGES[kind], kind)
        elif name == "complete_write":
            w.complete_write(int_param(action, "id"), bool(p["ok"]))
        elif name == "arm_serialization_fault":
            w.reqs[int_param(action, "request_id")][F_FAULT] = True
        elif name == "disconnect":
            w.conns[int_param(action, "conn")][0] = False
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
