"""The flows scope's state: `FlowState`, its records (`FlowReq`, `Conn`, `Holder`, `Write`), the
request kinds and stages, and the field indices of `FlowReq` the step world's mutable copies use.

Separate because every other flows module reads these, and they are plain data: a state is
immutable, hashable, and holds nothing but ints, bools, strings and tuples.
"""

from __future__ import annotations

from typing import NamedTuple

from models.topiclist.common import Msg, QEntry


class FlowReq(NamedTuple):
    """A client request of the flows scope (get-topics, proxy get-topics, watch, watch close).

    For a watch request the record is also the watcher (watcher id = request id)."""

    kind: int  # K_BROKER, K_PROXY, K_WATCH, K_CLOSE
    conn: int
    ns: int
    mode: int
    hash: str  # the request's topics_hash; "" = none
    stage: int  # ST_*: what the flow waits for
    p0: int  # value of the initial heap permit (0 once consumed or released)
    p1: int  # value of the updated heap permit
    pd: int  # direct permits lost by no_exceptional_release after a serialization fault
    lookup: bool  # holds a broker lookup permit
    fault: bool  # serialization fault armed
    replies: int  # reply attempts answering this request (watch updates answer none)
    quiet: bool  # watch: its success send stopped quietly (TL-I8 exemption)
    topics: tuple[str, ...]  # listing / broker response result; a watcher's current topics
    rhash: str  # proxy: the hash carried by the broker response
    watcher: bool  # watch: a watcher was created (lookup and authorization passed)
    registered: bool  # watch: until closed or failed for good
    initializing: bool  # watch: until its first listing succeeded or it was unregistered
    live: bool  # watch: topics_changed events queue for it
    sending: bool  # watch: sending_in_progress
    updates: tuple[Msg, ...]  # watch: queued WatchUpdate messages
    msg: Msg  # the message being sent (watch: or the success to send once listing ends); else ()
    lim: int  # index of the limiter's heap pool (direct = lim + 1)
    target: int  # watch_close: the watcher id; otherwise -1


class Conn(NamedTuple):
    active: bool
    replies: tuple[Msg, ...]
    backoff: int


class Holder(NamedTuple):
    size: int  # UNSET, INITIALIZING or the known size
    waiters: tuple[int, ...]


class Write(NamedTuple):
    request: int
    pool: int
    permits: int  # direct permit value still held by the write
    pending: bool


UNSET, INITIALIZING = -1, -2

K_BROKER, K_PROXY, K_WATCH, K_CLOSE = 0, 1, 2, 3
ST_NONE, ST_EST, ST_HEAP, ST_LIST, ST_UPD, ST_DIRECT, ST_RETRY_LIST, ST_RETRY_SEND = range(8)


class FlowState(NamedTuple):
    """A state of the flows scope."""

    now: int
    avail: tuple[int, ...]
    closed: tuple[bool, ...]
    queues: tuple[tuple[QEntry, ...], ...]
    execq: tuple[int, ...]
    reqs: tuple[FlowReq, ...]
    conns: tuple[Conn, ...]
    holders: tuple[Holder, ...]
    writes: tuple[Write, ...]
    lookup: int
    denied: tuple[bool, ...]
    changes: int
    stats: tuple[tuple[int, int], ...]  # per pool: (queued grants, timeouts); metrics, not in the key


# field indices of FlowReq for the mutable copies
(
    F_KIND,
    F_CONN,
    F_NS,
    F_MODE,
    F_HASH,
    F_STAGE,
    F_P0,
    F_P1,
    F_PD,
    F_LOOKUP,
    F_FAULT,
    F_REPLIES,
    F_QUIET,
    F_TOPICS,
    F_RHASH,
    F_WATCHER,
    F_REG,
    F_INIT,
    F_LIVE,
    F_SENDING,
    F_UPDATES,
    F_MSG,
    F_LIM,
    F_TARGET,
) = range(24)
