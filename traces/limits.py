"""Bounds on the configurations a trace (or a port's hello) may carry.

A configuration sizes the work a replay does: a trace that asks for a billion ring points or
workers would hang `replay` or exhaust memory before any invariant is judged. Any integer must fit
in 64 bits and any list in `MAX_ITEMS` items (checked when a trace is read); the keys that drive a
mechanism's loops and allocations have tighter bounds, which its binding declares
(`Mechanism.limits`) and the replay checks before the model is built.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param

MAX_ITEMS = 1_000
INT64 = (-(2**63), 2**63 - 1)

Bounds = Mapping[str, tuple[int, int]]
"""By configuration key, the least and the largest value it may take."""


def config_problem(config: Mapping[str, Param], bounds: Bounds | None = None) -> str | None:
    """What is out of bounds in `config`, as a field path and the bound; None when it is within them."""
    for key, value in config.items():
        problem = _value_problem(value, (bounds or {}).get(key))
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
