"""The metadata store's interesting states (flushes, blocked threads, batching, caching, closing), and the
action its current variant leaves out on purpose."""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.coverage import as_list, records
from properties.engines.mechanism import Interesting, Vars


def _flushing(_: Mapping[str, Param], v: Vars) -> bool:
    """Legacy marks a flush with a flag, PIP-453 with the flush lock its batch flusher holds."""
    return v["flush_in_progress"] is True or v["flush_lock"] not in ("", None)


def _blocked(_: Mapping[str, Param], v: Vars) -> bool:
    return any(t.get("wait") not in ("", None) for t in records(v["threads"]))


def _batched(_: Mapping[str, Param], v: Vars) -> bool:
    return bool(as_list(v["read_q"]) or as_list(v["write_q"]))


def _cached(_: Mapping[str, Param], v: Vars) -> bool:
    return bool(v["cache"])


INTERESTING = (
    Interesting("a flush is in progress", _flushing),
    Interesting("a thread blocked", _blocked),
    Interesting("an operation waits in a batch queue", _batched),
    Interesting("a value is cached", _cached),
    Interesting("the store closed", lambda _, v: v["closed"] is True),
)

NOT_OFFERED: Mapping[str, Mapping[str, str]] = {
    "pip453": {"store_callback": "only the blocking_callback variant offers it (the PIP's bad example)"},
}
"""By variant, the actions it never enables by design and why: exempt from action coverage."""
