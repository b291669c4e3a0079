"""The delayed-delivery tracker's interesting states: due messages, several buckets, a drained tracker.

Buckets are `[key, ledger, entry]`, deliver_at entries `[ledger, entry, time]`.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.coverage import as_int, as_list
from properties.engines.mechanism import Interesting, Vars


def _due(_: Mapping[str, Param], v: Vars) -> bool:
    return any(as_int(as_list(m)[-1]) <= as_int(v["now"]) for m in as_list(v["deliver_at"]))


def _two_buckets(_: Mapping[str, Param], v: Vars) -> bool:
    return len({as_int(as_list(b)[0]) for b in as_list(v["buckets"])}) >= 2


def _drained(_: Mapping[str, Param], v: Vars) -> bool:
    """Every tracked message gone again after some were added: the tracker emptied, not just started empty."""
    return as_int(v["count"]) == 0 and as_int(v["highest"]) > 0


INTERESTING = (
    Interesting("timer armed", lambda _, v: bool(as_list(v["timer"]))),
    Interesting("a message is due", _due),
    Interesting("two buckets tracked", _two_buckets),
    Interesting("the tracker drained", _drained),
)
