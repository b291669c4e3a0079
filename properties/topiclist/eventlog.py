"""The topic-list limiter's event log: its layout and the model's transition, compiled for the conformance replay.

The log is one record per model action of the `flows` Hypothesis configuration, keyed by limiter set.

The flows scope of `models.topiclist` is too large to write twice, and its operations are the spec;
what makes the full replay slow is around them: every step thaws the whole frozen state into a
mutable step world and freezes it back (three fifths of a step), enumerates the enabled actions to
check the one taken, projects the state to a dict of variables (3 KB of JSON a record) and parses
the logged one to compare. `TopicListReplay` keeps one step world (`models.topiclist.flow_world.FlowWorld`,
the model's own operations) alive for a whole partition and

- checks that the model enables each action as `FlowsScope._flow_enabled` does, looking for it
  where `FlowsScope._enabled_flows` would put it (in a set of the actions the model enumerates
  there) instead of enumerating every enabled action;
- runs the action on the world with the model's dispatch (`FlowsScope._step_flows`), and an
  `advance(dt)` before which no executor entry falls due (three records in four of a simulated log)
  as what it is: the clock moves, nothing else changes, so no invariant can break and only `now`
  changes among the variables (with nothing queued, an advance's parameters found enabled once are
  taken by their text);
- checks the invariants of `FlowView._flow_invariants` on the world, in one pass, after every step
  but those that only set a flag no invariant reads (a fault armed, a connection closed, a namespace
  denied: their verdict is the last one);
- renders the variables as the canonical JSON text a log holds (`json.dumps(..., sort_keys=True)`),
  in two halves around `now`, reusing the text of the connections and holders a step did not replace
  (and, after a flag, everything but the connections and denied namespaces), so a record is checked
  by comparing strings, the logged text against the two halves and `now` in place (a record written
  another way is parsed and compared as values, as the lockstep does: the verdict never depends on
  the formatting).

It answers where a partition first leaves the model, or None; a partition it fails goes through the
full model for the verdict, and `tests/pipeline/test_fast_replay.py` holds the two to the same
first failing step. It mirrors the model's private step world, so a model whose invariants are not
the ones written here is refused (`compiled` says None, and the pipeline replays the full model).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, cast

from models.core import Action, ActionNotEnabled, Model
from models.topiclist import TopicListModel
from models.topiclist.common import BROKER_ERROR_MESSAGES, LONG_MAX, TSHIFT
from models.topiclist.configs import topic_tuple
from models.topiclist.flow_state import (
    F_CONN,
    F_FAULT,
    F_INIT,
    F_KIND,
    F_LIM,
    F_LIVE,
    F_NS,
    F_P0,
    F_P1,
    F_PD,
    F_QUIET,
    F_REG,
    F_REPLIES,
    F_SENDING,
    F_STAGE,
    F_TOPICS,
    F_UPDATES,
    F_WATCHER,
    K_PROXY,
    K_WATCH,
    ST_DIRECT,
    ST_HEAP,
    ST_LIST,
    ST_UPD,
    FlowReq,
)
from models.topiclist.flow_view import HOLDER_STATE, POOL_NAMES
from models.topiclist.flow_world import FlowWorld
from properties.engines.eventlog import EventLog, LogSpec
from properties.engines.lockstep import same_values
from properties.engines.records import action_of, same_json

INVARIANTS = ("TL-I1", "TL-I2", "TL-I4", "TL-I5", "TL-I6", "TL-I7", "TL-I8")
"""The flows scope's invariants, as `invariants_hold` checks them."""
_NO_REPLIES = '{"replies": []}'
_QUEUED_STAGES = (ST_HEAP, ST_UPD, ST_DIRECT)
_FLAGS = frozenset(("arm_serialization_fault", "disconnect", "deny_authorization"))
"""Actions that set one flag (a request's fault armed, a connection closed, a namespace denied) that no invariant
reads: they reply nothing, and only the connections or the denied namespaces change in the variables."""
_CACHE_LIMIT = 1 << 16


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]


class TopicListReplay:
    """One limiter set at a time, on one step world of the model; built once per model (configuration, variant)."""

    def __init__(self, model: TopicListModel) -> None:
        if model.scope != "flows" or tuple(i.name for i in model.invariants) != INVARIANTS:
            raise ValueError("the compiled topiclist replay covers the flows scope with TL-I1..TL-I8")
        self.m = model
        self.actions: dict[tuple[str, str], Action] = {}
        self.idle: dict[str, int] = {}  # an advance's parameters: its dt, quiet and enabled whenever nothing is queued
        self.offers: dict[tuple[Any, ...], frozenset[Action]] = {}
        self.last_conns: list[tuple[bool, tuple[Any, ...], int, str]] = []  # per connection: as last rendered
        self.shown_conns: list[list[Any]] = []  # the connections' values, and their text, as last rendered
        self.conns_text = ""
        self.last_holders: list[Any] = []
        self.holders = ""
        self.after_denied = ""  # the variables' text from the executor to `now`, as `render` last made it
        self.texts: dict[Any, str] = {}  # JSON text of a reply on a connection, a topic list, a holder, the pools
        self.key_text = [_dumps(k) for k in model._holder_keys]
        self.pool_names = [_dumps(n) for n in POOL_NAMES]
        self.worlds = [_dumps(w) for w in model.conn_worlds]
        self.bounded = [p for p, mx in enumerate(model.pool_max) if mx > 0]

    def first_failure(self, action: Sequence[str], params: Sequence[str], observation: Sequence[str | None],
                      vars_: Sequence[str], lo: int, hi: int) -> int | None:
        """The first step (1-based) of rows lo..hi (one limiter set, in seq order) that leaves the model, or None."""
        m = self.m
        w = FlowWorld(m, m.initial())  # type: ignore[arg-type]
        head, tail = self.render(w)
        held = self.invariants_hold(w)  # as long as a step leaves their inputs alone
        idle = self.idle
        for i in range(lo, hi):
            try:
                dt = idle.get(params[i], 0) if not w.execq and action[i] == "advance" else 0
                if not dt:
                    act = self.action(action[i], params[i])
                    dt = self.quiet_advance(w, act)
                    if dt and not w.execq:
                        if len(idle) >= _CACHE_LIMIT:
                            idle.clear()
                        idle[params[i]] = dt
                if dt:
                    if w.execq:
                        w.advance(dt)
                    else:  # what `advance` does with nothing queued
                        w.now += dt
                    predicted = _NO_REPLIES
                else:
                    self.enabled(w, act)
                    w.out = []
                    self.apply(w, act)
                    if act.name in _FLAGS:
                        predicted = _NO_REPLIES
                        head = self.render_head(w)
                    else:
                        w.out.sort(key=_first)  # stable: per connection, in append order
                        predicted = _dumps({"replies": [d for _, d in w.out]}) if w.out else _NO_REPLIES
                        held = self.invariants_hold(w)
                        head, tail = self.render(w)
                if not held or (predicted != observation[i] and not same_json(predicted, observation[i])):
                    return i - lo + 1
                text = vars_[i]  # is it head, now, tail? (without building a 3 KB string)
                if not (text.startswith(head) and text.endswith(tail)
                        and text[len(head):len(text) - len(tail)] == str(w.now)) and not same_values(
                            m.vars(w.freeze()), json.loads(text)):
                    return i - lo + 1
            except Exception:  # an action the model does not enable, or anything it would not take
                return i - lo + 1
        return None

    def action(self, name: str, params: str) -> Action:
        """The logged action (cached by its text: a log repeats a few hundred of them)."""
        found = self.actions.get((name, params))
        if found is None:
            found = action_of(name, params)
            if len(self.actions) >= _CACHE_LIMIT:
                self.actions.clear()
            self.actions[name, params] = found
        return found

    def among(self, key: tuple[Any, ...], make: Callable[..., tuple[Action, ...]], *args: Any) -> frozenset[Action]:
        """The actions the model enumerates with `make(*args)`, as a set: found by hash rather than compared
        one by one (an action with an unhashable value raises: the model does not enable it either)."""
        found = self.offers.get(key)
        if found is None:
            found = self.offers[key] = frozenset(make(*args))
        return found

    # --- one step, as FlowsScope._step_flows -------------------------------------------------------

    def quiet_advance(self, w: FlowWorld, action: Action) -> int:
        """The `dt` of an enabled `advance(dt)` before which no executor entry falls due (0 for anything else):
        the model's step runs no entry then, it only moves the clock and the entries' relative times."""
        if action.name != "advance" or len(action.params) != 1 or action.params[0][0] != "dt":
            return 0
        dt = action.params[0][1]
        if type(dt) is not int or (w.execq and w.execq[0] >> TSHIFT <= dt):
            return 0
        self.m._check_time(w.execq, action)  # type: ignore[arg-type]  # ActionNotEnabled unless offered
        return dt

    def enabled(self, w: FlowWorld, action: Action) -> None:
        """`FlowsScope._flow_enabled` on the world: ActionNotEnabled unless the model offers `action`. Each
        action is looked for where `FlowsScope._enabled_flows` would put it, under the same conditions, so
        the world is frozen only for an action of a name the model does not know."""
        m, name = self.m, action.name
        if name == "step" or name == "advance":
            m._check_time(w.execq, action)  # type: ignore[arg-type]
            return
        if name in ("complete_listing", "complete_broker_response"):
            rid = action.get("id")
            ok = type(rid) is int and 0 <= rid < len(w.reqs) and w.reqs[rid][F_STAGE] == ST_LIST
            if ok:
                proxy = w.reqs[cast(int, rid)][F_KIND] == K_PROXY
                ok = proxy == (name == "complete_broker_response") and action in self.among(
                    (name, rid), m._response_actions if proxy else m._listing_actions, rid)
        elif name == "complete_write":
            wid = action.get("id")
            ok = type(wid) is int and 0 <= wid < len(w.writes) and w.writes[wid].pending
            ok = ok and action in self.among((name, wid), m._write_actions, wid)
        elif name == "arm_serialization_fault":
            rid = action.get("request_id")
            ok = type(rid) is int and 0 <= rid < len(w.reqs) and len(action.params) == 1
            ok = ok and m._faultable(FlowReq._make(w.reqs[cast(int, rid)]))
        elif name == "disconnect":
            ok = any(w.conns[c][0] and action == m._disc_actions[c] for c in range(len(w.conns)))
        elif name == "deny_authorization":
            ok = m.allow_deny and any(not w.denied[i] and action == m._deny_actions[i] for i in range(len(w.denied)))
        elif name == "close":
            ok = m.allow_close and any(not w.closed[2 * i] and action == m._close_actions[i]
                                       for i in range(len(m.limiters)))
        elif name in ("get_topics", "proxy_get_topics", "watch"):
            nreq = len(w.reqs)
            ok = nreq < m.max_requests and any(
                w.conns[c][0] and action in self.among(("new", nreq, c), m._new_requests, nreq, c)
                for c in range(len(w.conns)))
        elif name == "watch_close":
            nreq = len(w.reqs)
            ok = nreq < m.max_requests and any(
                r[F_KIND] == K_WATCH and r[F_REG] and w.conns[r[F_CONN]][0]
                and action == Action.of("watch_close", conn=r[F_CONN], request_id=nreq, watcher_id=rid)
                for rid, r in enumerate(w.reqs))
        elif name == "topics_changed":
            live = {r[F_NS] for r in w.reqs if r[F_KIND] == K_WATCH and r[F_REG] and r[F_LIVE]}
            ok = w.changes < m.max_topic_changes and any(
                action in self.among((name, ns), m._change_actions.__getitem__, ns) for ns in live)
        else:
            ok = action in m._enabled_flows(w.freeze())
        if not ok:
            raise ActionNotEnabled(action, "not among the enabled actions")

    def apply(self, w: FlowWorld, action: Action) -> None:
        """The operation of `FlowsScope._step_flows`, once the action is known to be enabled."""
        m, name = self.m, action.name
        p = action.as_dict()
        if name in ("get_topics", "proxy_get_topics", "watch"):
            conn = cast(int, p["conn"])
            ns = m.namespaces.index(str(p["namespace"]))
            h = str(p["topics_hash"])
            if name == "watch":
                w.watch(conn, ns, h)
            else:
                mode = m.modes.index(str(p["mode"]))
                if name == "get_topics":
                    w.get_topics(conn, ns, mode, h)
                else:
                    w.proxy_get_topics(conn, ns, mode, h)
        elif name == "watch_close":
            w.watch_close(cast(int, p["conn"]), cast(int, p["watcher_id"]))
        elif name == "complete_listing" or name == "complete_broker_response":
            rid = cast(int, p["id"])
            if "topics" in p:
                w.listing_done(rid, topic_tuple(p["topics"], "topics"), str(p.get("hash", "")))
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
            w.denied[m.namespaces.index(str(p["namespace"]))] = True
        elif name == "topics_changed":
            w.topics_changed(m.namespaces.index(str(p["namespace"])), topic_tuple(p["new"], "new"),
                             topic_tuple(p["deleted"], "deleted"))
        elif name == "close":
            w.close_limiter(2 * m.limiters.index(str(p["limiter"])))
        else:
            m._time_step(w, action)

    # --- invariants, as FlowView._flow_invariants ----------------------------------------------------

    def invariants_hold(self, w: FlowWorld) -> bool:
        """TL-I1..TL-I8 in one pass over the requests, writes and queues (a conjunction: the order its parts are
        checked in does not matter)."""
        m = self.m
        maxp, maxq = m.pool_max, m.pool_queue
        avail, queues, reqs, writes = w.avail, w.queues, w.reqs, w.writes
        for p in self.bounded:  # TL-I1
            if not 0 <= avail[p] <= maxp[p]:
                return False
        sums = [0] * len(maxp)  # TL-I2's permits held
        listing = pending = queued = False
        for r in reqs:
            lim, p0, p1, pd = r[F_LIM], r[F_P0], r[F_P1], r[F_PD]
            sums[lim] += p0 + p1
            sums[lim + 1] += pd
            hm, dm = maxp[lim], maxp[lim + 1]
            if (hm > 0 and (p0 > hm or p1 > hm)) or (dm > 0 and pd > dm):  # TL-I5
                return False
            if r[F_REPLIES] > 1:  # TL-I8
                return False
            listing = listing or r[F_STAGE] == ST_LIST
        for wr in writes:
            mx = maxp[wr.pool]
            sums[wr.pool] += wr.permits
            if mx > 0 and wr.permits > mx:  # TL-I5
                return False
            pending = pending or wr.pending
        for p in self.bounded:  # TL-I2
            if maxp[p] - avail[p] != sums[p]:
                return False
        for p, q in enumerate(queues):
            if q:
                queued = True
                if 0 < maxq[p] < len(q):  # TL-I6
                    return False
                for rid, _n, _prev in q:  # TL-I4
                    if reqs[rid][F_STAGE] not in _QUEUED_STAGES:
                        return False
        if queued and not w.execq:  # TL-I4: a queued request waits on the executor
            return False
        if w.execq or queued or listing or pending:  # not quiescent
            return True
        if any(maxp[p] > 0 and avail[p] != maxp[p] for p in range(len(maxp))) or w.lookup != m.lookup_max:
            return False  # TL-I7
        return all(r[F_REPLIES] == 1 or (r[F_KIND] == K_WATCH and r[F_QUIET]) for r in reqs)  # TL-I8, quiescent

    # --- the variables as text, as FlowView._vars_flows ------------------------------------------------

    def reply_text(self, conn: int, msg: tuple[Any, ...]) -> str:
        """A reply's JSON text on a connection (a connection's replies only grow: each is rendered once)."""
        found = self.texts.get((conn, msg))
        if found is None:
            found = self.texts[conn, msg] = _dumps(self.m.reply_json(conn, msg))
        return found

    def topics_text(self, topics: tuple[str, ...]) -> str:
        found = self.texts.get(topics)
        if found is None:
            found = self.texts[topics] = _dumps(list(topics))
        return found

    def holder_text(self, i: int, size: int, waiters: int) -> str:
        found = self.texts.get(("holder", i, size, waiters))
        if found is None:
            found = self.texts["holder", i, size, waiters] = (
                f'{{"key": {self.key_text[i]}, "size": {max(size, -1)}, '
                f'"state": "{HOLDER_STATE.get(size, "KNOWN")}", "waiters": {waiters}}}')
        return found

    def pools_text(self, w: FlowWorld) -> str:
        """The pools' JSON text; cached by their numbers while nothing is queued (queued entries name requests)."""
        key = None if any(w.queues) else (*w.avail, *w.closed, *w.grants, *w.timeouts)
        found = self.texts.get(key) if key is not None else None
        if found is not None:
            return found
        pools = []
        for i, mx in enumerate(self.m.pool_max):
            queue = ", ".join(f"[{n}, {w.reqs[rid][F_P0] if prev >= 0 else -1}]" for rid, n, prev in w.queues[i])
            grants, timeouts = w.grants[i], w.timeouts[i]
            available, acquired = (w.avail[i], mx - w.avail[i]) if mx > 0 else (LONG_MAX, 0)
            pools.append(f'{{"acquired": {acquired}, "available": {available}, "closed": {_bool(w.closed[i])}, '
                         f'"name": {self.pool_names[i]}, "queue": [{queue}], "timeouts": {timeouts}, '
                         f'"waits": {grants + timeouts}}}')
        text = ", ".join(pools)
        if key is not None:
            self.texts[key] = text
        return text

    def render(self, w: FlowWorld) -> tuple[str, str]:
        """`TopicListModel.vars` of the world as `json.dumps(..., sort_keys=True)` writes it, split around `now`."""
        m = self.m
        if len(self.texts) >= _CACHE_LIMIT:
            self.texts.clear()
        if w.holders != self.last_holders:  # (named tuples, so found alike by identity as long as none was replaced)
            self.last_holders = list(w.holders)
            self.holders = ", ".join(self.holder_text(i, h.size, len(h.waiters)) for i, h in enumerate(w.holders))
        now = w.now
        executor = ", ".join(str(now + (e >> TSHIFT)) for e in w.execq)
        listings: list[str] = []
        responses: list[str] = []
        watchers: list[str] = []
        for rid, r in enumerate(w.reqs):
            if r[F_STAGE] == ST_LIST:
                (responses if r[F_KIND] == K_PROXY else listings).append(str(rid))
            if r[F_WATCHER]:
                watchers.append(f'{{"id": {rid}, "initializing": {_bool(r[F_INIT])}, "live": {_bool(r[F_LIVE])}, '
                                f'"queued_updates": {len(r[F_UPDATES])}, "registered": {_bool(r[F_REG])}, '
                                f'"sending": {_bool(r[F_SENDING])}, '
                                f'"topics": {self.topics_text(r[F_TOPICS])}}}')
        pools = self.pools_text(w)
        writes = ", ".join(f'{{"id": {i}, "pending": {_bool(wr.pending)}, "request": {wr.request}}}'
                           for i, wr in enumerate(w.writes))
        self.after_denied = (f'"executor": [{executor}], "holders": [{self.holders}], '
                             f'"listings": [{", ".join(listings)}], "lookup_available": {w.lookup}, "now": ')
        tail = (f', "pools": [{pools}], "proxy_lookup_available": {m.proxy_lookup_max}, '
                f'"responses": [{", ".join(responses)}], "watchers": [{", ".join(watchers)}], "writes": [{writes}]}}')
        return self.render_head(w), tail

    def render_head(self, w: FlowWorld) -> str:
        """The text before `now`: the connections and denied namespaces rendered (the connections from what
        each last showed when it has not changed), the rest as `render` last left it."""
        if w.conns != self.shown_conns:  # (a connection's replies are a tuple, replaced when one is added)
            conns = []
            for i, (active, replies, backoff) in enumerate(w.conns):
                last = self.last_conns[i] if i < len(self.last_conns) else None
                if last is not None and last[1] is replies and last[0] == active and last[2] == backoff:
                    conns.append(last[3])
                    continue
                shown = ", ".join(self.reply_text(i, msg) for msg in replies)
                text = (f'{{"active": {_bool(active)}, "backoff_ms": {backoff}, "replies": [{shown}], '
                        f'"world": {self.worlds[i]}}}')
                self.last_conns[i:i + 1] = [(active, replies, backoff, text)]
                conns.append(text)
            self.shown_conns = [list(c) for c in w.conns]
            self.conns_text = ", ".join(conns)
        denied = "[]"
        if any(w.denied):
            key = ("denied", *w.denied)
            denied = self.texts.get(key) or self.texts.setdefault(
                key, _dumps([ns for ns, d in zip(self.m.namespaces, w.denied, strict=True) if d]))
        return f'{{"connections": [{self.conns_text}], "denied": {denied}, {self.after_denied}'


def compiled(model: Model[Any]) -> TopicListReplay | None:
    """The compiled replay of `model`, or None for a model other than the one compiled (its invariants changed)."""
    try:
        return TopicListReplay(cast(TopicListModel, model))
    except ValueError:
        return None


EVENT_LOG = EventLog(LogSpec("limiter", "flows"), compiled=compiled)
