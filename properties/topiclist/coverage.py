"""The topic-list limiter's interesting states: the situations its leak and queue invariants exist for.

The semaphore scope has flat variables, the flows scope one record per pool.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.coverage import as_int, as_list, records
from properties.engines.mechanism import Interesting, Vars


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


INTERESTING = (
    Interesting("a request timed out", _timed_out),
    Interesting("the queue is full", _queue_full),
    Interesting("memory held while a request waits", _contended),
    Interesting("a leak-free quiescent state after a failure", _quiet_after_failure),
)
