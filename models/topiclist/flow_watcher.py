"""`WatcherStages`: the topic-list watcher's own part of the step world (§4.8): its WatchSuccess
and WatchUpdate sends, their retries with backoff, registration and the continuations the
permit stages call.
"""

from __future__ import annotations

from models.topiclist.common import (
    BACKOFF_INITIAL_MS,
    BACKOFF_MAX_MS,
    PENDING,
    RETRY,
    Msg,
    insert_entry,
    make_entry,
    serialization_message,
    too_large_message,
)
from models.topiclist.flow_stages import RETRYABLE, FlowStages
from models.topiclist.flow_state import (
    F_CONN,
    F_FAULT,
    F_INIT,
    F_LIM,
    F_LIVE,
    F_MSG,
    F_QUIET,
    F_REG,
    F_REPLIES,
    F_SENDING,
    F_STAGE,
    F_UPDATES,
    ST_DIRECT,
    ST_NONE,
    ST_RETRY_LIST,
    ST_RETRY_SEND,
    Write,
)

_IN_PROGRESS = ""
"""`watch_send`'s result while the send has not ended (else the error text, or None for no error)."""


class WatcherStages(FlowStages):
    """The watcher's sends, retries and registration on top of the permit stages."""

    __slots__ = ()

    def schedule_retry(self, rid: int, stage: int) -> None:
        r = self.reqs[rid]
        c = self.conns[r[F_CONN]]
        delay = c[2]
        c[2] = min(delay * 2, BACKOFF_MAX_MS)
        r[F_STAGE] = stage
        insert_entry(self.execq, make_entry(delay, RETRY, 0, rid))

    def watch_init_failed(self, rid: int, message: str, retryable: bool) -> None:
        """Step 2 ended with an error (after the heap helpers released what they held)."""
        self.reset_if_initializing(rid)
        r = self.reqs[rid]
        if not r[F_REG]:
            r[F_MSG] = ()
            return  # closed before creation completed: already answered
        if retryable and self.conns[r[F_CONN]][0]:
            self.schedule_retry(rid, ST_RETRY_LIST)
            return
        r[F_MSG] = ()
        self.error(rid, "MetadataError", message)
        self.unregister(rid)
        self.release_lookup(rid)

    def unregister(self, rid: int) -> None:
        r = self.reqs[rid]
        r[F_REG] = False
        r[F_INIT] = False
        r[F_LIVE] = False
        r[F_UPDATES] = ()

    def watch_initialized(self, rid: int) -> None:
        """Step 2 succeeded: send WatchSuccess, then release lookup (step 4)."""
        r = self.reqs[rid]
        if not r[F_REG]:
            r[F_MSG] = ()
            return  # the late initialization result is discarded
        r[F_INIT] = False
        self.conns[r[F_CONN]][2] = BACKOFF_INITIAL_MS
        r[F_SENDING] = True
        msg = r[F_MSG]
        r[F_MSG] = ()
        result = self.watch_send(rid, msg)
        self.release_lookup(rid)
        if result != _IN_PROGRESS:
            self.success_sent(rid, result)

    def watch_send(self, rid: int, msg: Msg) -> str | None:
        """Start sending `msg` (step 5). Returns `_IN_PROGRESS`, or how the send ended right away:
        None (written or stopped quietly) or the error text."""
        r = self.reqs[rid]
        if not self.conns[r[F_CONN]][0] or not r[F_REG]:
            if msg[0] == "WatchSuccess":
                r[F_QUIET] = True
            return None
        pool = r[F_LIM] + 1
        mx = self.maxp[pool]
        size = self.m.msg_size(msg)
        if mx > 0 and size > mx:
            return too_large_message(size, mx)
        r[F_MSG] = msg
        if mx <= 0:
            return self.direct_granted_sync(rid)
        r[F_STAGE] = ST_DIRECT
        out = self.enqueue(pool, rid, size, -1)
        if out == PENDING:
            return _IN_PROGRESS
        if out in RETRYABLE and self.conns[r[F_CONN]][0] and r[F_REG]:
            self.schedule_retry(rid, ST_RETRY_SEND)
            return _IN_PROGRESS
        r[F_STAGE] = ST_NONE
        r[F_MSG] = ()
        if msg[0] == "WatchSuccess":
            r[F_QUIET] = True
        return None

    def direct_granted_sync(self, rid: int) -> str | None:
        """An unbounded direct pool grants at once; the write starts inside `watch_send`."""
        r = self.reqs[rid]
        msg = r[F_MSG]
        r[F_MSG] = ()
        r[F_STAGE] = ST_NONE
        if r[F_FAULT] and msg[0] == "WatchSuccess":
            r[F_FAULT] = False
            return serialization_message(rid)
        self.reply(rid, msg)
        self.writes.append(Write(rid, r[F_LIM] + 1, 0, True))
        self.conns[r[F_CONN]][2] = BACKOFF_INITIAL_MS
        return None

    def watch_send_ended(self, rid: int, msg: Msg, error: str | None) -> None:
        """An asynchronous end of a watcher send: run the continuation the sender attached."""
        r = self.reqs[rid]
        if error is None and msg[0] == "WatchSuccess" and not self.reply_logged(rid):
            r[F_QUIET] = True
        if msg[0] == "WatchSuccess":
            self.success_sent(rid, error)
        else:
            self.send_next_update(rid)

    def reply_logged(self, rid: int) -> bool:
        replies: int = self.reqs[rid][F_REPLIES]
        return replies > 0

    def success_sent(self, rid: int, error: str | None) -> None:
        r = self.reqs[rid]
        if error is not None and r[F_REG]:
            r[F_QUIET] = False
            self.error(rid, "MetadataError", error)
            self.unregister(rid)
        self.send_next_update(rid)

    def send_next_update(self, rid: int) -> None:
        r = self.reqs[rid]
        while r[F_REG] and r[F_UPDATES]:
            ups = r[F_UPDATES]
            r[F_UPDATES] = ups[1:]
            if self.watch_send(rid, ups[0]) == _IN_PROGRESS:
                return
        r[F_SENDING] = False

    def on_retry(self, rid: int) -> None:
        r = self.reqs[rid]
        stage = r[F_STAGE]
        r[F_STAGE] = ST_NONE
        if stage == ST_RETRY_LIST:
            if r[F_REG]:
                self.estimate(rid)
        else:
            msg = r[F_MSG]
            r[F_MSG] = ()
            result = self.watch_send(rid, msg)
            if result != _IN_PROGRESS:
                if msg[0] == "WatchSuccess":
                    self.success_sent(rid, result)
                else:
                    self.send_next_update(rid)
