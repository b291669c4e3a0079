"""Bounds on the configurations a trace (or a port's hello) may carry.

A configuration sizes the work a replay does: a trace that asks for a billion ring points, workers or pending
acks would hang `replay` or exhaust memory before any invariant is judged. Any integer must fit in 64 bits and
any list in `MAX_ITEMS` items (checked when a trace is read); the keys that hold integers have tighter bounds,
which their mechanism's binding declares (`Mechanism.limits`) and every trace command checks before anything is
built from the configuration (`properties.engines.replay.model_for`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from models.core import Param

MAX_ITEMS = 1_000
INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)
"""A Java `int`'s range: the bound of an integer key that sizes no loop or allocation (a timeout, a count of
permits), so that every integer a configuration holds has a declared bound."""
NON_NEGATIVE_INT = (0, INT32[1])
NON_NEGATIVE_LONG = (0, INT64[1])
"""A Java `long` at least 0: ledger and entry ids, timestamps and durations in ms."""

Bounds = Mapping[str, tuple[int, int]]
"""By configuration key, the least and the largest value it may take: the key's integer, or every integer
inside its list (at any depth: a list of lists of ids is bounded id by id). `len(KEY)` bounds the number of
items of KEY's list instead, where that count sizes the work (a permutation of them, a thread each)."""


def length_key(key: str) -> str:
    """The `Bounds` key that bounds the number of items of `key`'s list."""
    return f"len({key})"


def config_problem(config: Mapping[str, Param], bounds: Bounds | None = None) -> str | None:
    """What is out of bounds in `config`, as a field path and the bound; None when it is within them.

    Only reads `config`: a bound is checked before anything is built from it, so an out-of-range value costs
    no more than the trace's own bytes."""
    limits = bounds or {}
    for key, value in config.items():
        count = limits.get(length_key(key))
        if count is not None and isinstance(value, tuple | list) and not count[0] <= len(value) <= count[1]:
            return f"config.{key}: {len(value):,} items is out of bounds ({count[0]:,} to {count[1]:,} items)"
        for where, problem in _problems(value, limits.get(key), key):
            return f"config.{where}: {problem}"
    return None


def _problems(value: Param, bounds: tuple[int, int] | None, where: str) -> Iterator[tuple[str, str]]:
    """(path, problem) for each part of `value` out of `bounds` or of 64 bits, or with too many items."""
    if isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            yield where, f"{value} is out of bounds ({bounds[0]:,} to {bounds[1]:,})"
        elif not INT64[0] <= value <= INT64[1]:
            yield where, f"{value} does not fit in 64 bits"
        return
    if len(value) > MAX_ITEMS:
        yield where, f"{len(value):,} items (at most {MAX_ITEMS:,})"
        return
    for index, item in enumerate(value):
        yield from _problems(item, bounds, f"{where}[{index}]")
