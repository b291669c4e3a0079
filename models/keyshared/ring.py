"""Key_Shared's consistent-hash ring (spec keyshared.md §2, §4.1): the sticky-key hash, each consumer's
points, and the ring a join order selects.

The ring is not state: it is a pure function of the consumers' (name, name index) in join order,
since the selected consumer of every point is its earliest-joined claimer (KS-I8). It is computed with
the exact sticky-key hash, so a configuration with `points=3` reproduces the spec's rings; only the
owners of the configured keys' hashes matter to the dispatcher, and impacted ranges are taken
pointwise at those hashes (KS-I9).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

import mmh3


def sticky_hash(key: str, range_max: int) -> int:
    """The sticky-key hash of §2 on [1, range_max] (never 0)."""
    return (mmh3.hash(key.encode("utf-8"), 0, signed=False) & 0x7FFFFFFF) % range_max + 1


def ring_points(name: str, index: int, points: int, range_max: int) -> list[int]:
    """§4.1: the ring points of a consumer with this name and name index, in point-index order."""
    return [sticky_hash(f"{name}\x00{index}\x00{i}", range_max) for i in range(points)]


def claims(join: Sequence[tuple[str, int]], points: int, range_max: int) -> dict[int, list[int]]:
    """Per ring point, the join slots claiming it in join order (KS-I8: the first is selected)."""
    out: dict[int, list[int]] = {}
    for slot, (name, index) in enumerate(join):
        for point in ring_points(name, index, points, range_max):
            out.setdefault(point, []).append(slot)
    return out


class Ring(NamedTuple):
    """The ring of one join order: owner slot per key hash, and the snapshot as (start, end, slot)."""

    owners: dict[int, int]
    ranges: tuple[tuple[int, int, int], ...]
    promoting: frozenset[int] = frozenset()  # slots whose leaving passes a point to a consumer colliding there


def build_ring(join: Sequence[tuple[str, int]], points: int, range_max: int, hashes: Sequence[int]) -> Ring:
    """§4.1: each point selects its earliest-joined claimer; the snapshot tiles [1, range_max]."""
    claimed = claims(join, points, range_max)
    selected = {point: slots[0] for point, slots in claimed.items()}
    if not selected:
        return Ring({}, ())
    ring = sorted(selected)
    owners = {}
    for h in hashes:
        at = bisect.bisect_left(ring, h)
        owners[h] = selected[ring[at if at < len(ring) else 0]]
    ranges: list[tuple[int, int, int]] = []
    start = 1
    for point in ring:
        slot = selected[point]
        if ranges and ranges[-1][2] == slot:
            ranges[-1] = (ranges[-1][0], point, slot)
        else:
            ranges.append((start, point, slot))
        start = point + 1
    if ring[-1] < range_max:
        first = selected[ring[0]]
        if ranges[-1][2] == first:
            ranges[-1] = (ranges[-1][0], range_max, first)
        else:
            ranges.append((ring[-1] + 1, range_max, first))
    return Ring(owners, tuple(ranges), frozenset(slots[0] for slots in claimed.values() if len(set(slots)) > 1))
