"""What names a wrong value of each variable conformance compares in the topic-list limiter (`Mechanism.guards`)."""

from __future__ import annotations

from properties.engines.mechanism import HARNESS_INPUT, Guard

GUARDS: dict[str, dict[str, Guard]] = {
    "topiclist/semaphore": {
        "now": Guard((HARNESS_INPUT,)),  # the executor's clock, advanced by the harness
        "available_permits": Guard(("TL-I1", "TL-I2")),
        "acquired_permits": Guard(("TL-I2", "TL-I7")),
        "queue_size": Guard(("TL-I6", "TL-I9")),
        "closed": Guard(("TL-I10",)),
        "queue": Guard(("TL-I3",)),
        "requests": Guard(("TL-I3", "TL-I4", "TL-I10")),
        "permits": Guard(("TL-I2", "TL-I5")),
        "executor": Guard(("TL-I4",)),
        "timeouts": Guard(("TL-I9",)),
        "waits": Guard(("TL-I9",)),
    },
    "topiclist/flows": {
        "now": Guard((HARNESS_INPUT,)),
        "pools": Guard(("TL-I1", "TL-I2", "TL-I5", "TL-I6", "TL-I9")),
        "executor": Guard(("TL-I4", "TL-I7")),
        "lookup_available": Guard(("TL-I7",)),
        "proxy_lookup_available": Guard(("TL-I7",)),
        "holders": Guard(unguarded="the size cache's holders (state, size, waiters): no oracle yet"),
        "connections": Guard(("TL-I8",)),  # the replies each request got
        "listings": Guard(("TL-I8",)),
        "responses": Guard(("TL-I8",)),
        "writes": Guard(("TL-I8",)),
        "watchers": Guard(unguarded="the watchers' registration and update queues: no oracle yet"),
        "denied": Guard(unguarded="the namespaces denied authorization: no oracle yet"),
    },
    # The lock-level scope (properties/topiclist/locks.py) is another developer's: its guards are theirs to declare.
    "topiclist/semaphore-locks": {
        name: Guard(unguarded="the lock-level scope's guards are its owner's to declare (topiclist/locks.py)")
        for name in ("available", "queue", "requests", "permits", "timers", "executor_queue", "threads", "broken")
    },
}
