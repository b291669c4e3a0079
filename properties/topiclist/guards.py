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
        "lookup_available": Guard(("TL-I7", "TL-I11")),
        "proxy_lookup_available": Guard(("TL-I7",)),
        "holders": Guard(unguarded="the size cache's holders (state, size, waiters): no oracle yet"),
        "connections": Guard(("TL-I8", "TL-I12")),  # the replies each request got, and what they carry
        "listings": Guard(("TL-I8",)),
        "responses": Guard(("TL-I8",)),
        "writes": Guard(("TL-I8",)),
        "watchers": Guard(unguarded="the watchers' registration and update queues: no oracle yet"),
        "denied": Guard(unguarded="the namespaces denied authorization: no oracle yet"),
    },
    # The lock-level scope (properties/topiclist/locks.py): its ledger judges SL-1..SL-4.
    "topiclist/semaphore-locks": {
        "available": Guard(("SL-1", "SL-2", "SL-3")),
        "permits": Guard(("SL-2", "SL-3")),  # what the callers hold, counted against the pool
        "requests": Guard(("SL-2", "SL-3")),  # a granted future adds its permit to what is held
        "queue": Guard(("SL-4",)),  # the head a lost wake-up leaves waiting
        "executor_queue": Guard(("SL-4",)),  # a pass that is never submitted
        "timers": Guard(unguarded="which timers are pending: a lost or extra timeout shows only through the requests "
                                  "it fails, which SL-2 and SL-3 count"),
        "threads": Guard(unguarded="where each thread is: a thread elsewhere refuses the model's next step (a named "
                                   "disagreement), and no invariant is about the position itself"),
        "locks": Guard(unguarded="the monitor of internalProcessQueue: only the executor takes it, so it is never "
                                 "contended and no invariant depends on who holds it"),
        "broken": Guard(("SL-1", "SL-2", "SL-3", "SL-4")),
    },
}
