"""The producer-id quota's interesting states: a rotated Bloom layer, an expired one, a cleaned cache.

`entries[principal]` is `{count, next_rotation, layers: [[start, end, pids]]}`.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.coverage import as_int, as_list, records
from properties.engines.mechanism import Interesting, Vars


def _rotated(_: Mapping[str, Param], v: Vars) -> bool:
    return any(len(as_list(e.get("layers"))) >= 2 for e in records(v["entries"]))


def _expired(_: Mapping[str, Param], v: Vars) -> bool:
    """A layer past its window that cleanup has not dropped yet."""
    now = as_int(v["now"])
    return any(as_int(as_list(layer)[1]) <= now for e in records(v["entries"]) for layer in as_list(e.get("layers")))


def _cleaned(_: Mapping[str, Param], v: Vars) -> bool:
    """Time has passed a cleanup and no principal is tracked any more."""
    return not records(v["entries"]) and as_int(v["now"]) > 0


INTERESTING = (
    Interesting("a Bloom layer rotated", _rotated),
    Interesting("a layer expired", _expired),
    Interesting("all entries cleaned up", _cleaned),
)
