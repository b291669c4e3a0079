"""The model's variants, its typical configurations, the configuration keys it reads and their
parsers.

Separate because the configurations are plain data that `properties/` and the tests import on
their own, and both scopes parse their keys with the same helpers.

Config keys (all optional; see `EXPLORE_CONFIG` and friends for typical values):

common
    ``scope``            ``"semaphore"`` or ``"flows"``
    ``dts``              tuple of clock advances offered as ``advance(dt)``
    ``advance_next``     also offer ``advance(dt)`` with `dt` reaching the next future executor entry
    ``max_requests``     budget of requests (semaphore: acquire/update calls that pass validation;
                         flows: client requests, i.e. get_topics, proxy_get_topics, watch and
                         watch_close)
    ``allow_close``      offer ``close``

Each scope lists its own keys: `semaphore.py`, `flows.py`.
"""

from __future__ import annotations

from models.core import Param

VARIANTS = ("current", "no_exceptional_release")

# ---------------------------------------------------------------------------------------------
# Configurations

EXPLORE_CONFIG: dict[str, Param] = {
    "scope": "semaphore",
    "max_permits": 4,
    "max_queue_size": 3,
    "timeout_ms": 100,
    "max_requests": 4,
    "sizes": (1, 2, 4),
    "invalid_sizes": False,
    "release_zero": False,
    "allow_close": True,
    "dts": (),
    "advance_next": True,
}
"""Small single-semaphore bounds for the explorer (limit 4, queue 3, at most 4 requests)."""

NAMESPACE = "public/default"
TOPIC_A = "persistent://public/default/a"
TOPIC_B = "persistent://public/default/b"
"""The namespace and topics of the typical configurations; the flows scope's defaults are the first two."""

EXPLORE_FLOWS_CONFIG: dict[str, Param] = {
    "scope": "flows",
    "heap_max": 100,
    "heap_queue": 2,
    "heap_timeout_ms": 100,
    "direct_max": 100,
    "direct_queue": 2,
    "direct_timeout_ms": 100,
    "lookup_max": 2,
    "proxy_limiter": "shared",
    "connections": 1,
    "namespaces": (NAMESPACE,),
    "modes": ("PERSISTENT",),
    "topic_lists": ((TOPIC_A,),),
    "flows": ("broker",),
    "use_hashes": False,
    "listing_errors": True,
    "broker_errors": (),
    "write_failures": True,
    "faults": True,
    "allow_deny": False,
    "allow_close": False,
    "max_requests": 2,
    "max_topic_changes": 0,
    "topic_changes": (),
    "dts": (),
    "advance_next": True,
}
"""Broker get-topics flow, two requests: small enough to explore in seconds; all three §6a leaks
(listing error, serialization fault, failed write) are reachable."""

EXPLORE_ALL_FLOWS_CONFIG: dict[str, Param] = {
    **EXPLORE_FLOWS_CONFIG,
    "flows": ("broker", "proxy", "watch"),
    "max_topic_changes": 1,
    "topic_changes": (((TOPIC_B,), ()),),
}
"""All three flows (one connection per world, two requests, one topic change): ~10^5 states."""

HYPOTHESIS_CONFIG: dict[str, Param] = {
    "scope": "semaphore",
    "max_permits": 10,
    "max_queue_size": 4,
    "timeout_ms": 5000,
    "max_requests": 12,
    "sizes": (0, 1, 2, 3, 5, 8, 10),
    "invalid_sizes": True,
    "release_zero": True,
    "allow_close": True,
    "dts": (1, 2499, 2500, 4999, 5000),
    "advance_next": True,
}
"""Larger single-semaphore bounds for random and Hypothesis runs (A-examples' S(10, ., 5000))."""

HYPOTHESIS_FLOWS_CONFIG: dict[str, Param] = {
    "scope": "flows",
    "heap_max": 200,
    "heap_queue": 3,
    "heap_timeout_ms": 1000,
    "direct_max": 150,
    "direct_queue": 3,
    "direct_timeout_ms": 1000,
    "lookup_max": 3,
    "proxy_limiter": "own",
    "connections": 2,
    "namespaces": (NAMESPACE, "public/other"),
    "modes": ("PERSISTENT", "ALL"),
    "topic_lists": ((), (TOPIC_A,), (TOPIC_A, TOPIC_B)),
    "flows": ("broker", "proxy", "watch"),
    "use_hashes": True,
    "listing_errors": True,
    "broker_errors": ("AuthorizationError", "ServiceNotReady"),
    "write_failures": True,
    "faults": True,
    "allow_deny": True,
    "allow_close": True,
    "max_requests": 8,
    "max_topic_changes": 3,
    "topic_changes": (((TOPIC_B,), ()), ((), (TOPIC_A,))),
    "dts": (1, 99, 100, 500, 1000),
    "advance_next": True,
}
"""All three flows on two connections, for random lockstep and Hypothesis runs."""

# ---------------------------------------------------------------------------------------------
# Parsing


def topic_tuple(v: Param, key: str) -> tuple[str, ...]:
    """A topic list of a configuration or of an action's parameters (`key` names it in the error)."""
    if not isinstance(v, tuple) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"topiclist config {key!r}: a topic list must be a tuple of strings, not {v!r}")
    return tuple(str(x) for x in v)


CONFIG_KEYS = frozenset({
    "scope", "dts", "advance_next", "max_requests", "allow_close",
    # semaphore scope
    "max_permits", "max_queue_size", "timeout_ms", "sizes", "invalid_sizes", "release_zero",
    # flows scope
    "heap_max", "heap_queue", "heap_timeout_ms", "direct_max", "direct_queue", "direct_timeout_ms", "flows",
    "connections", "namespaces", "modes", "topic_lists", "topic_changes", "max_topic_changes", "use_hashes",
    "listing_errors", "broker_errors", "write_failures", "faults", "allow_deny", "lookup_max", "proxy_limiter",
    "proxy_lookup_max",
})
"""Every configuration key either scope reads; each has its default where it is read."""

