"""The topic-list limiter's port vocabulary: one scope per limiter, the semaphore alone or the flows behind it.

Meanings keyed by the model's own names; `brokerspec protocol` adds types and examples from the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.mechanism import ActionDoc, Vocabulary

_TIME = "advance(dt): the virtual clock moves dt ms (timers due on the way run at their own times)"

_TOPICLIST_COMMON_CONFIG = {
    "scope": '"semaphore" (one AsyncSemaphore) or "flows" (the dual limiter behind the get-topics flows)',
    "dts": "clock advances offered as advance(dt)",
    "advance_next": "also offer advance(dt) reaching the next future executor entry",
    "max_requests": "budget of requests (semaphore: acquire/update calls that pass validation; flows: client requests)",
    "allow_close": "offer close",
}

_COMPLETED = {
    "completed": "futures completed during the step, in completion order",
    "completed[]": "one completed future",
    "completed[].request": "the request the future belongs to",
    "completed[].status": "granted, Timeout, QueueFull, AlreadyClosed, Cancelled (pool-side) or caller_cancelled",
    "completed[].permit": "on granted: the permit id created (ids count from 0 in grant order)",
    "completed[].permits": "on granted: the permit's value (its number of permits)",
}

TOPICLIST_SEMAPHORE = Vocabulary(
    config={
        **_TOPICLIST_COMMON_CONFIG,
        "max_permits": "pool size (<= 0: unbounded; then available_permits reports 2^63-1)",
        "max_queue_size": "queue bound (<= 0: unbounded); an acquire that would exceed it fails QueueFull",
        "timeout_ms": "acquire timeout; the deferred queue pass runs at timeout_ms // 2",
        "sizes": "permit counts offered to acquire and update",
        "invalid_sizes": "also offer -1 and max_permits+1, which fail with ValueError",
        "release_zero": "also offer release of permits whose value is already 0 (no-ops)",
    },
    defaults={"dts": (), "advance_next": True, "max_requests": 4, "allow_close": True, "max_permits": 4,
              "max_queue_size": 3, "timeout_ms": 100, "sizes": (1, 2), "invalid_sizes": False,
              "release_zero": False},
    vars={
        "now": "the virtual clock, ms",
        "available_permits": "permits left in the pool (2^63-1 when unbounded)",
        "acquired_permits": "max_permits - available_permits (0 when unbounded)",
        "queue_size": "number of queued requests",
        "closed": "close() was called",
        "queue": "the queued requests, head first",
        "queue[]": "a request id",
        "requests": "every request that passed validation, indexed by request id (ids count from 0)",
        "requests[]": "one request",
        "requests[].status": "pending, granted, or the failure it completed with (Timeout, QueueFull, AlreadyClosed, "
                             "Cancelled, caller_cancelled)",
        "requests[].cancelled": "its is_cancelled() is true (set by disconnect(request))",
        "requests[].permit": "present once granted: the permit id it created",
        "permits": "every permit ever granted, indexed by permit id: its current value (0 once released)",
        "permits[]": "a permit's value",
        "executor": "the executor's scheduled entries (timeouts, deferred queue passes), as absolute trigger times "
                    "in run order",
        "executor[]": "a trigger time, ms",
        "timeouts": "requests failed with Timeout so far",
        "waits": "wait-time observations so far: queued grants plus timeouts",
    },
    actions={
        "acquire": ActionDoc("acquire(permits): ask the pool for a new permit of `permits`",
                             "the request budget is not spent (invalid sizes: always)",
                             {"permits": "the permit count asked for"}),
        "update": ActionDoc("update(permit, permits): grow or shrink an existing permit to `permits` (a new request)",
                            "for every permit ever granted (valid sizes while the budget lasts)",
                            {"permit": "the permit id", "permits": "the new value"}),
        "release": ActionDoc("release(permit): give a permit's permits back to the pool",
                             "the permit's value is > 0 (or release_zero)", {"permit": "the permit id"}),
        "cancel": ActionDoc("cancel(request): the caller cancels the request's future",
                            "the request is pending", {"request": "the request id"}),
        "disconnect": ActionDoc("disconnect(request): the request's is_cancelled() turns true (its caller went away)",
                                "the request is pending and not yet cancelled", {"request": "the request id"}),
        "close": ActionDoc("close(): close the semaphore; queued requests fail AlreadyClosed",
                           "allow_close and not closed"),
        "step": ActionDoc("step(): run the earliest due executor entry", "an executor entry is due (trigger <= now)"),
        "advance": ActionDoc(_TIME, "always (dts, the next executor entry, or the smallest timeout when idle)",
                             {"dt": "ms to advance"}),
    },
    observation={
        **_COMPLETED,
        "request": "acquire/update: the new request's id",
        "status": "acquire/update: pending, granted or the failure it completed with at once",
        "permit": "acquire/update granted at once: the permit id",
        "permits": "acquire/update granted at once: the permit's value",
        "error": "an invalid permit count: ValueError (no request is created)",
        "message": "the ValueError's message, e.g. Invalid negative permits value: -1",
    },
)

_REPLY = "a reply the broker or proxy wrote to a connection (compared field by field)"
_REPLY_FIELDS = {
    "conn": "the connection", "type": "the reply type (GetTopicsResponse, WatchSuccess, WatchUpdate, Error, ...)",
    "request": "the request id answered", "code": "Error: the error code (TooManyRequests, ...)",
    "message": "Error: the error message", "topics": "the topics listed, in the listing's order",
    "topics[]": "a topic name",
    "hash": "the topics hash sent", "filtered": "the listing was filtered",
    "changed": "the list changed against the request's topics_hash", "watcher": "the watcher id",
    "new": "WatchUpdate: topics added", "new[]": "a topic name", "deleted": "WatchUpdate: topics removed",
    "deleted[]": "a topic name",
}
TOPICLIST_FLOWS = Vocabulary(
    config={
        **_TOPICLIST_COMMON_CONFIG,
        "heap_max": "heap pool size in bytes (<= 0: unbounded)",
        "heap_queue": "heap pool queue bound",
        "heap_timeout_ms": "heap pool acquire timeout",
        "direct_max": "direct pool size in bytes (<= 0: unbounded)",
        "direct_queue": "direct pool queue bound",
        "direct_timeout_ms": "direct pool acquire timeout",
        "lookup_max": "broker lookup semaphore size",
        "proxy_lookup_max": "proxy lookup semaphore size (<= 0 refuses every proxy request)",
        "proxy_limiter": '"shared" (the proxy uses the broker\'s limiter) or "own" (pools 2 and 3 are the proxy\'s)',
        "connections": "client connections per world (broker connections are numbered first, then proxy ones)",
        "namespaces": 'namespace names ("tenant/ns")',
        "modes": "listing modes offered to get-topics (the watcher always uses PERSISTENT)",
        "topic_lists": "the topic lists a listing or broker response may return",
        "flows": 'which client requests are offered: subset of "broker", "proxy", "watch"',
        "use_hashes": "also offer requests carrying the topics_hash of each topic list",
        "listing_errors": "offer complete_listing(id, error)",
        "broker_errors": "error kinds offered to complete_broker_response(id, error_kind)",
        "write_failures": "offer complete_write(id, ok=false)",
        "faults": "offer arm_serialization_fault until the request's reply is serialized",
        "allow_deny": "offer deny_authorization",
        "max_topic_changes": "budget of topics_changed actions",
        "topic_changes": "the [new, deleted] pairs offered to topics_changed",
    },
    defaults={"dts": (), "advance_next": True, "max_requests": 4, "allow_close": True, "heap_max": 100,
              "heap_queue": 2, "heap_timeout_ms": 100, "direct_max": 100, "direct_queue": 2,
              "direct_timeout_ms": 100, "lookup_max": 50000, "proxy_lookup_max": 50000, "proxy_limiter": "shared",
              "connections": 1, "namespaces": ("public/default",), "modes": ("PERSISTENT",),
              "topic_lists": (("persistent://public/default/a",),), "flows": ("broker",), "use_hashes": False,
              "listing_errors": True, "broker_errors": (), "write_failures": True, "faults": True,
              "allow_deny": False, "max_topic_changes": 0, "topic_changes": ()},
    vars={
        "now": "the virtual clock, ms",
        "pools": "the memory pools in this order: heap, direct (then the proxy's heap and direct when proxy_limiter is "
                 "own)",
        "pools[]": "one pool (an AsyncSemaphore over bytes)",
        "pools[].name": "heap, direct, proxy-heap or proxy-direct",
        "pools[].available": "bytes left (2^63-1 when unbounded)",
        "pools[].acquired": "bytes acquired (0 when unbounded)",
        "pools[].closed": "the pool was closed",
        "pools[].queue": "queued acquires, head first",
        "pools[].queue[]": "[bytes, previous] a queued acquire: its size and, for an update, the owner's current "
                           "permit size (-1 for a fresh acquire)",
        "pools[].queue[].bytes": "bytes asked for",
        "pools[].queue[].previous": "the permit being updated's size, or -1",
        "pools[].timeouts": "acquires failed with Timeout so far",
        "pools[].waits": "wait-time observations so far: queued grants plus timeouts",
        "executor": "scheduled executor entries (timeouts, deferred passes, watcher retries) as absolute trigger "
                    "times, in run order",
        "executor[]": "a trigger time, ms",
        "lookup_available": "permits left in the broker's lookup semaphore",
        "proxy_lookup_available": "the proxy's lookup semaphore size (held only inside the handler)",
        "holders": "the size caches: one per (world, namespace, mode), in that order (broker before proxy, "
                   "namespaces and modes as configured)",
        "holders[]": "one size holder",
        "holders[].key": "world:namespace:mode",
        "holders[].state": "UNSET, INITIALIZING or KNOWN",
        "holders[].size": "the cached size estimate in bytes once KNOWN, else -1",
        "holders[].waiters": "requests waiting for the holder's first size",
        "connections": "client connections, by connection number",
        "connections[]": "one connection",
        "connections[].world": "broker or proxy",
        "connections[].active": "not disconnected",
        "connections[].backoff_ms": "the watcher retry backoff on this connection",
        "connections[].replies": "every reply attempt written to this connection, in order",
        "connections[].replies[]": _REPLY,
        **{f"connections[].replies[].{k}": v for k, v in _REPLY_FIELDS.items()},
        "listings": "requests whose namespace listing awaits complete_listing, by owning request id (ascending)",
        "listings[]": "a request id",
        "responses": "proxy requests whose broker response awaits complete_broker_response, by request id (ascending)",
        "responses[]": "a request id",
        "writes": "reply writes, numbered in creation order",
        "writes[]": "one write",
        "writes[].id": "the write id (complete_write's id)",
        "writes[].request": "the request it answers",
        "writes[].pending": "awaits complete_write",
        "watchers": "the topic-list watchers by request id, ascending (watcher id = the watch request id)",
        "watchers[]": "one watcher",
        "watchers[].id": "the watcher id",
        "watchers[].registered": "still registered on its connection",
        "watchers[].initializing": "its initial WatchSuccess is not yet written",
        "watchers[].live": "receives topics_changed updates",
        "watchers[].sending": "an update send is in progress",
        "watchers[].queued_updates": "updates waiting to be sent",
        "watchers[].topics": "the topics the watcher's client knows, in order: the listing's, then each update drops "
                             "the deleted ones and appends the new ones",
        "watchers[].topics[]": "a topic name",
        "denied": "namespaces whose authorization was denied, in the configured namespaces' order",
        "denied[]": "a namespace",
    },
    actions={
        "get_topics": ActionDoc("a client's get-topics request to the broker",
                                "the connection is active and the request budget is not spent",
                                {"conn": "the connection", "request_id": "the next request id",
                                 "namespace": "the namespace", "mode": "the listing mode",
                                 "topics_hash": 'the client\'s topics hash, "" for none'}),
        "proxy_get_topics": ActionDoc("a client's get-topics request through the proxy",
                                      "a proxy connection is active and the request budget is not spent",
                                      {"conn": "the connection", "request_id": "the next request id",
                                       "namespace": "the namespace", "mode": "the listing mode",
                                       "topics_hash": 'the client\'s topics hash, "" for none'}),
        "watch": ActionDoc("a client opens a topic-list watcher", "as get_topics",
                           {"conn": "the connection", "request_id": "the next request id (= the watcher id)",
                            "namespace": "the namespace", "topics_hash": 'the client\'s topics hash, "" for none'}),
        "watch_close": ActionDoc("a client closes a watcher",
                                 "the watcher is registered, its connection active, the budget not spent",
                                 {"conn": "the connection", "request_id": "the next request id",
                                  "watcher_id": "the watcher"}),
        "topics_changed": ActionDoc("topics of a namespace are created or deleted",
                                    "a live watcher exists on the namespace and max_topic_changes is not spent",
                                    {"namespace": "the namespace", "new": "topics created", "new[]": "a topic",
                                     "deleted": "topics deleted", "deleted[]": "a topic"}),
        "complete_listing": ActionDoc("the namespace listing of a request completes (topics or error)",
                                      "the request awaits its listing",
                                      {"id": "the owning request", "topics": "the topics listed",
                                       "topics[]": "a topic", "error": "the listing's error message"}),
        "complete_broker_response": ActionDoc("the broker answers a proxied request (topics and hash, or an error)",
                                              "the proxy request awaits its broker response",
                                              {"id": "the owning request", "topics": "the topics",
                                               "topics[]": "a topic", "hash": "their hash",
                                               "error_kind": "the broker error kind"}),
        "complete_write": ActionDoc("a reply write completes (ok or failed)", "the write is pending",
                                    {"id": "the write id", "ok": "success"}),
        "arm_serialization_fault": ActionDoc("the request's reply will fail to serialize",
                                             "faults, and the request's reply is not yet serialized",
                                             {"request_id": "the request"}),
        "disconnect": ActionDoc("a client connection closes", "the connection is active", {"conn": "the connection"}),
        "deny_authorization": ActionDoc("authorization of a namespace is revoked",
                                        "allow_deny and the namespace is not yet denied",
                                        {"namespace": "the namespace"}),
        "close": ActionDoc("close a limiter (its heap and direct pools)", "allow_close and the limiter is open",
                           {"limiter": "broker or proxy"}),
        "step": ActionDoc("run the earliest due executor entry", "an executor entry is due (trigger <= now)"),
        "advance": ActionDoc(_TIME, "always (dts, the next executor entry, or the smallest timeout when idle)",
                             {"dt": "ms to advance"}),
    },
    observation={
        "replies": "reply attempts appended during the step, per connection in append order",
        "replies[]": _REPLY,
        **{f"replies[].{k}": v for k, v in _REPLY_FIELDS.items()},
    },
)

_STEP = ("the operation the thread is about to perform, as the Java method and the atomic, queue, future, lock or "
         "executor it touches (e.g. 'internalProcessQueue: availablePermits.addAndGet'): one step runs it and the "
         "thread's code up to its next scheduling point (see models/topiclist/semaphore_locks.py)")
_SCRIPT = ("'acquire N', 'update Pi N' (grow or shrink held permit Pi to N), 'release Pi' and 'cancel' (cancel the "
           "future the previous operation returned); each operation that returns a future names its request "
           "'<thread>.<index in the script>'")
TOPICLIST_SEMAPHORE_LOCKS = Vocabulary(
    config={
        "scope": '"semaphore-locks": one AsyncSemaphoreImpl at upstream\'s lock granularity, two caller threads and '
                 "its executor",
        "order": "the semaphore's code: current (upstream today, after #25066), fixed (the finding's fix), pre25066 "
                 "(before apache/pulsar#25066) or unswapped (releasePermits a read then a write: its getAndSet's "
                 "atomicity dropped)",
        "max_permits": "the semaphore's permits",
        "max_queue": "the request queue's capacity (0: unbounded)",
        "held": "permits P0, P1, ... the callers hold before the threads start",
        "caller": f"the caller thread's script: {_SCRIPT}",
        "other": f"the other caller thread's script: {_SCRIPT}",
        "clock": "offer clock (time moves to the next timer); false: time stands still",
        "unchecked": "invariants left out (a known finding that would end every Hypothesis run)",
    },
    vars={
        "available": "availablePermits",
        "queue": "the queued requests, head first, by name",
        "queue[]": "a request name",
        "requests": "each future an operation returned to its caller, by name",
        "requests[]": "[name, state] one future",
        "requests[].name": "its name",
        "requests[].state": "pending, granted, timed out, queue full or cancelled",
        "permits": "each permit the callers hold, in this order: the held ones (P0, ...), then each granted future's",
        "permits[]": "[name, value] one permit",
        "permits[].name": "its name",
        "permits[].value": "its permits",
        "timers": "the executor's timers not yet due, in firing order (internalProcessQueue: the constructor's "
                  "one-shot pass; timeoutTask: a request's timeout)",
        "timers[]": "a task label",
        "executor_queue": "the tasks submitted to the executor and not started, in order",
        "executor_queue[]": "a task label",
        "threads": "the caller, the other caller and the executor, in that order",
        "threads[]": "[name, next] one thread",
        "threads[].name": "the thread",
        "threads[].next": "its next operation, or done",
        "locks": "who holds each lock: the monitor internalProcessQueue is synchronized on",
        "locks.AsyncSemaphoreImpl": "the threads holding it, by name (only the executor ever takes it)",
        "locks.AsyncSemaphoreImpl[]": "a thread name",
        "broken": "invariants a step broke (they stay broken), sorted",
        "broken[]": "an invariant name",
    },
    actions={
        "caller": ActionDoc("the caller thread runs to its next scheduling point", "its script is not done",
                            {"step": _STEP}),
        "other": ActionDoc("the other caller thread runs to its next scheduling point", "its script is not done",
                           {"step": _STEP}),
        "executor": ActionDoc("the executor runs to its next scheduling point (across its queued tasks)",
                              "it has a task", {"step": _STEP}),
        "clock": ActionDoc("time moves to the next timer's deadline: every timer due then is queued on the executor",
                           "clock and a timer is pending"),
    },
    observation={},
)

TOPICLIST_SESSIONS = Vocabulary(
    config={
        "scope": '"sessions": one TopicListWatcher of one namespace across metadata session losses (#25188)',
        "topics": "the topic names the namespace may hold",
        "initial": "the namespace's topics at the start (the watcher is created and answered with them)",
        "max_changes": "budget of toggle actions (creates and deletes)",
        "max_losses": "budget of session losses",
    },
    vars={
        "namespace": "the namespace's topics, sorted (the harness's own record)",
        "namespace[]": "a topic name",
        "connected": "whether the broker's metadata session is up",
        "executor": "the connection executor's tasks, in order: send(-deleted +new) an update's send, reconnect the "
                    "reconnect's update of the watcher",
        "executor[]": "a task label",
        "listing": "a listing of the namespace is in flight",
        "client": "what the client end holds",
        "client.topics": "the client's list, sorted: the updates it received applied in order",
        "client.topics[]": "a topic name",
        "client.hash": "the hash carried by the last update it received (at first, its WatchSuccess's)",
    },
    actions={
        "toggle": ActionDoc("the topic is created if the namespace lacks it, else deleted; while the session is up "
                            "the watcher gets the notification (onTopicEvent), while it is lost nobody does",
                            "changes are left", {"topic": "the topic"}),
        "lose": ActionDoc("SessionLost / ConnectionLost reaches the watcher", "the session is up and losses are left"),
        "reconnect": ActionDoc("Reconnected / SessionReestablished reaches the watcher: it queues its update",
                               "the session is lost"),
        "step": ActionDoc("the connection's executor runs its next task", "a task is queued"),
        "complete_listing": ActionDoc("the listing in flight returns the namespace's topics", "a listing is in "
                                      "flight and the session is up"),
        "fail_listing": ActionDoc("the listing in flight fails (a read on the lost session)", "a listing is in "
                                  "flight and the session is lost"),
    },
    observation={},
)

VOCABULARIES: Mapping[str, Vocabulary] = {
    "topiclist/semaphore": TOPICLIST_SEMAPHORE,
    "topiclist/flows": TOPICLIST_FLOWS,
    "topiclist/semaphore-locks": TOPICLIST_SEMAPHORE_LOCKS,
    "topiclist/sessions": TOPICLIST_SESSIONS,
}
"""Every scope's meanings, by scope."""


def scope_of(config: Mapping[str, Param]) -> str:
    """A configuration speaks the vocabulary of the limiter it drives (`scope`, the semaphore by default)."""
    return f"topiclist/{config.get('scope', 'semaphore')}"
