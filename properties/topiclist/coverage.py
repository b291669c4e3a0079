"""The topic-list limiter's interesting states: the situations its leak and queue invariants exist for.

The semaphore scope has flat variables, the flows scope one record per pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from models.core import Param
from properties.engines.coverage import as_int, as_list, records
from properties.engines.mechanism import Interesting, Predicate, Vars


def _timed_out(_: Mapping[str, Param], v: Vars) -> bool:
    return as_int(v.get("timeouts")) > 0 or any(as_int(p.get("timeouts")) > 0 for p in records(v.get("pools")))


def _queue_full(c: Mapping[str, Param], v: Vars) -> bool:
    if "queue_size" in v:
        return as_int(v["queue_size"]) >= as_int(c.get("max_queue_size"))
    return any(
        len(as_list(p.get("queue"))) >= as_int(c.get(f"{str(p.get('name')).removeprefix('proxy_')}_queue"))
        for p in records(v.get("pools"))
    )


def _contended(_: Mapping[str, Param], v: Vars) -> bool:
    """Memory is held while another request waits for it: the situation the limiter exists for."""
    if "queue_size" in v:
        return as_int(v["acquired_permits"]) > 0 and bool(as_list(v["queue"]))
    return any(as_int(p.get("acquired")) > 0 and as_list(p.get("queue")) for p in records(v.get("pools")))


def _quiet_after_failure(c: Mapping[str, Param], v: Vars) -> bool:
    """Nothing held or queued, lookups all back, after a request failed (timeout or error reply)."""
    if "queue_size" in v:
        return as_int(v["acquired_permits"]) == 0 and not as_list(v["queue"]) and as_int(v["timeouts"]) > 0
    failed = any(r.get("type") == "Error" for conn in records(v.get("connections"))
                 for r in records(conn.get("replies")))
    pools = records(v.get("pools"))
    idle = all(as_int(p.get("acquired")) == 0 and not as_list(p.get("queue")) for p in pools)
    return (failed and idle and as_int(v.get("lookup_available")) == as_int(c.get("lookup_max"))
            and not as_list(v["executor"]))


def _locks(order: str, holds: Callable[[Vars], bool]) -> Predicate:
    """A mark of the semaphore's lock scope, on configurations of `order`."""
    return lambda c, v: c.get("scope") == "semaphore-locks" and c.get("order") == order and holds(v)


def _label(thread: str, label: str) -> Callable[[Vars], bool]:
    return lambda v: [thread, label] in as_list(v.get("threads"))


def _request(state: str) -> Callable[[Vars], bool]:
    return lambda v: any(isinstance(r, list) and r[1:] == [state] for r in as_list(v.get("requests")))


LOCK_MARKS = (
    Interesting("a grant found its previous permit swapped by a release first (available below 0)",
                _locks("current", lambda v: "SL-1" in as_list(v.get("broken")))),
    Interesting("a caller cancelled a growing update whose grant had swapped its previous permit",
                _locks("current", lambda v: "SL-3" in as_list(v.get("broken")))),
    Interesting("a waiter was granted the permits a release gave back",
                _locks("current", lambda v: _request("granted")(v) and ["P0", 0] in as_list(v.get("permits")))),
    Interesting("a queued request timed out",
                _locks("current", _request("timed out"))),
    Interesting("the fix left a growing update waiting for the pass of the release that swapped its permit",
                _locks("fixed", lambda v: bool(as_list(v.get("queue"))) and _label("executor", "done")(v)
                       and _label("other", "release: availablePermits.addAndGet")(v))),
)
"""The semaphore lock scope's marks (models/topiclist/semaphore_locks.py)."""


def _client_behind(v: Vars) -> bool:
    client = v.get("client")
    return isinstance(client, dict) and as_list(client.get("topics")) != as_list(v.get("namespace"))


def _sessions(holds: Callable[[Vars], bool]) -> Predicate:
    """A mark of the sessions scope."""
    return lambda c, v: c.get("scope") == "sessions" and holds(v)


SESSION_MARKS = (
    Interesting("the client's list differs from the namespace while the session is lost",
                _sessions(lambda v: v.get("connected") is False and _client_behind(v))),
    Interesting("a listing is in flight after a reconnect",
                _sessions(lambda v: v.get("connected") is True and v.get("listing") is True)),
)
"""The sessions scope's marks (models/topiclist/sessions.py)."""


INTERESTING = (
    Interesting("a request timed out", _timed_out),
    Interesting("the queue is full", _queue_full),
    Interesting("memory held while a request waits", _contended),
    Interesting("a leak-free quiescent state after a failure", _quiet_after_failure),
    *LOCK_MARKS,
    *SESSION_MARKS,
)
