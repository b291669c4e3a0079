"""Bounds on the configurations a trace (or a port's hello) may carry.

A configuration sizes the work a replay does: a trace that asks for a billion ring points or
workers would hang `replay` or exhaust memory before any invariant is judged. Every key below
drives a loop or an allocation; its bound is far above any configuration the checks use, and
low enough that a replay of a trace stays within seconds. Any other integer must fit in 64 bits,
and any list in `MAX_ITEMS` items.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param

MAX_ITEMS = 1_000
INT64 = (-(2**63), 2**63 - 1)

SIZES: Mapping[str, Mapping[str, int]] = {
    "keyshared": {"points": 1_000, "consumers": 16, "max_consumers": 16, "read_batch_size": 1_000,
                  "max_messages": 500, "max_permits": 1_000, "interleave": 16, "max_batch_level": 16,
                  "range_max": 2**31 - 1, "look_ahead_per_consumer": 10**7, "look_ahead_per_subscription": 10**8},
    "metadata": {"workers": 64, "clients": 16, "max_ops": 1_000, "max_operations": 10**6, "max_delay_ms": 10**6},
    "pidquota": {"layer_count": 64, "n_layer": 100_000, "max_batch": 100, "window_ms": 10**9},
    "topiclist": {"max_queue_size": 10_000, "heap_queue": 10_000, "direct_queue": 10_000, "max_requests": 1_000,
                  "connections": 64, "lookup_max": 1_000, "max_topic_changes": 1_000},
    "delayed": {"lookahead": 10_000, "round_size": 10_000},
}
"""Per mechanism, the keys that size the work, with their largest accepted value (the least is in `LEAST`)."""

LEAST: Mapping[str, int] = {"range_max": 1, "points": 1, "layer_count": 2, "n_layer": 1, "window_ms": 1,
                            "workers": 1, "round_size": 1, "read_batch_size": 1}
"""Keys whose value 0 means nothing sensible (a modulus, a divisor, a pool of no thread); the rest may be 0."""


def config_problem(mechanism: str, config: Mapping[str, Param]) -> str | None:
    """What is out of bounds in `config`, as a field path and the bound; None when it is within them."""
    sizes = SIZES.get(mechanism, {})
    for key, value in config.items():
        size = sizes.get(key)
        problem = _value_problem(value, None if size is None else (LEAST.get(key, 0), size))
        if problem is not None:
            return f"config.{key}: {problem}"
    return None


def _value_problem(value: Param, bounds: tuple[int, int] | None) -> str | None:
    if isinstance(value, bool | str):
        return None
    if isinstance(value, int):
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            return f"{value} is out of bounds ({bounds[0]:,} to {bounds[1]:,})"
        if not INT64[0] <= value <= INT64[1]:
            return f"{value} does not fit in 64 bits"
        return None
    if len(value) > MAX_ITEMS:
        return f"{len(value):,} items (at most {MAX_ITEMS:,})"
    for item in value:
        problem = _value_problem(item, None)
        if problem is not None:
            return problem
    return None
