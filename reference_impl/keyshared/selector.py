"""Consistent-hashing sticky-key selector with name indexes, collisions and impacted ranges (§4.1).

Mirrors Pulsar's ConsistentHashingStickyKeyConsumerSelector, ConsumerNameIndexTracker,
ConsumerHashAssignmentsSnapshot, UpdatedHashRanges and ImpactedConsumersResult. Consumers are
compared by identity everywhere, including in snapshot diffs.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from .common import Consumer, IllegalStateError
from .hashing import DEFAULT_RANGE_MAX, STICKY_KEY_HASH_NOT_SET, make_sticky_key_hash
from .locks import SELECTOR_LOCK, LockTracer, traced

# Upstream separator between name, name index and point index (#22053).
KEY_SEPARATOR = "\x00"


@dataclass(frozen=True, order=True)
class Range:
    """Inclusive hash range, ordered by (start, end)."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start > self.end:
            raise ValueError(f"Range end must >= range start. start={self.start}, end={self.end}")

    @classmethod
    def of(cls, start: int, end: int) -> Range:
        return cls(start, end)

    def size(self) -> int:
        return self.end - self.start + 1

    def contains(self, value: int) -> bool:
        return self.start <= value <= self.end

    def __str__(self) -> str:
        return f"[{self.start}, {self.end}]"


@dataclass(frozen=True)
class HashRangeAssignment:
    """One range of a snapshot and the consumer owning it."""

    range: Range
    consumer: Consumer


class ConsumerNameIndexTracker:
    """Gives each live consumer the lowest name index not held by another live consumer of that name.

    The index makes ring points of same-named consumers differ, and lets a consumer that leaves and
    rejoins under the same name get the same points back.
    """

    def __init__(self) -> None:
        self._used_indexes: dict[str, set[int]] = {}
        # Per consumer identity: [name, index, refcount].
        self._entries: dict[Consumer, tuple[str, int, int]] = {}

    def increase_consumer_ref_count_and_return_index(self, consumer: Consumer) -> int:
        entry = self._entries.get(consumer)
        if entry is None:
            used = self._used_indexes.setdefault(consumer.name, set())
            index = 0
            while index in used:
                index += 1
            used.add(index)
            entry = (consumer.name, index, 0)
        name, index, ref_count = entry
        self._entries[consumer] = (name, index, ref_count + 1)
        return index

    def decrease_consumer_ref_count(self, consumer: Consumer) -> None:
        entry = self._entries.get(consumer)
        if entry is None:
            # Upstream dereferences a missing entry (NullPointerException); fail loudly too.
            raise IllegalStateError(f"consumer {consumer!r} is not tracked")
        name, index, ref_count = entry
        if ref_count > 1:
            self._entries[consumer] = (name, index, ref_count - 1)
            return
        del self._entries[consumer]
        used = self._used_indexes[name]
        used.discard(index)
        if not used:
            del self._used_indexes[name]

    def get_tracked_index(self, consumer: Consumer) -> int:
        entry = self._entries.get(consumer)
        return -1 if entry is None else entry[1]


class _HashRingPointEntry:
    """A ring point: the selected consumer plus the FIFO list of consumers whose point collided."""

    def __init__(self, selected: Consumer) -> None:
        self.selected: Consumer | None = selected
        self.colliding: list[Consumer] | None = None

    def add_colliding_consumer(self, consumer: Consumer) -> None:
        if self.colliding is None:
            self.colliding = []
        self.colliding.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> bool:
        """Remove by identity; True when the point has no consumer left and must be deleted."""
        if self.selected is consumer:
            if self.colliding is not None:
                self.selected = self.colliding.pop(0)
                if not self.colliding:
                    self.colliding = None
            else:
                self.selected = None
        elif self.colliding is not None:
            self.colliding = [c for c in self.colliding if c is not consumer]
            if not self.colliding:
                self.colliding = None
        return self.selected is None


class OperationType(Enum):
    ADD = "ADD"
    REMOVE = "REMOVE"


class UpdatedHashRanges:
    """Sorted, non-overlapping ranges that changed owner for one consumer."""

    def __init__(self, sorted_ranges: tuple[Range, ...]) -> None:
        self._sorted_ranges = sorted_ranges

    @staticmethod
    def of(ranges: Iterable[Range]) -> UpdatedHashRanges:
        as_tuple = tuple(ranges)
        for previous, current in itertools.pairwise(as_tuple):
            if previous.start > current.start:
                raise ValueError(f"Ranges must be sorted: {previous} and {current}")
            if previous.end >= current.start:
                raise ValueError(f"Ranges must not overlap: {previous} and {current}")
        return UpdatedHashRanges(as_tuple)

    def contains_sticky_key(self, sticky_key_hash: int) -> bool:
        for hash_range in self._sorted_ranges:
            if hash_range.contains(sticky_key_hash):
                return True
            if hash_range.start > sticky_key_hash:
                return False
        return False

    def as_ranges(self) -> list[Range]:
        return list(self._sorted_ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UpdatedHashRanges) and self._sorted_ranges == other._sorted_ranges

    def __hash__(self) -> int:
        return hash(self._sorted_ranges)

    def __repr__(self) -> str:
        return f"UpdatedHashRanges({', '.join(map(str, self._sorted_ranges))})"


UpdatedHashRangesProcessor = Callable[[Consumer, UpdatedHashRanges, OperationType], None]


class ImpactedConsumersResult:
    """Per consumer, the ranges it lost (`removed_hash_ranges`) and gained (`added_hash_ranges`)."""

    def __init__(
        self,
        removed_hash_ranges: dict[Consumer, UpdatedHashRanges],
        added_hash_ranges: dict[Consumer, UpdatedHashRanges],
    ) -> None:
        self.removed_hash_ranges = removed_hash_ranges
        self.added_hash_ranges = added_hash_ranges

    def process_updated_hash_ranges(self, processor: UpdatedHashRangesProcessor) -> None:
        """Every REMOVE entry first, then every ADD entry; consumers in first-appearance order."""
        for consumer, ranges in self.removed_hash_ranges.items():
            processor(consumer, ranges, OperationType.REMOVE)
        for consumer, ranges in self.added_hash_ranges.items():
            processor(consumer, ranges, OperationType.ADD)

    def is_empty(self) -> bool:
        # Upstream checks the removed ranges only.
        return not self.removed_hash_ranges


class ConsumerHashAssignmentsSnapshot:
    """An immutable, sorted, non-overlapping list of range → consumer assignments."""

    def __init__(self, assignments: tuple[HashRangeAssignment, ...]) -> None:
        self._assignments = assignments
        self._ranges_by_consumer: dict[Consumer, list[Range]] | None = None

    @staticmethod
    def of(assignments: list[HashRangeAssignment] | None) -> ConsumerHashAssignmentsSnapshot:
        if assignments is None:
            raise ValueError("Hash range assignments must not be null")
        previous: Range | None = None
        for assignment in assignments:
            if assignment is None or assignment.range is None or assignment.consumer is None:
                raise ValueError("Range and consumer must not be null")
            if previous is not None and (previous >= assignment.range or previous.end >= assignment.range.start):
                raise ValueError("Ranges must be non-overlapping and sorted")
            previous = assignment.range
        return ConsumerHashAssignmentsSnapshot(tuple(assignments))

    @staticmethod
    def empty() -> ConsumerHashAssignmentsSnapshot:
        return ConsumerHashAssignmentsSnapshot(())

    @property
    def assignments(self) -> list[HashRangeAssignment]:
        return list(self._assignments)

    def get_ranges_by_consumer(self) -> dict[Consumer, list[Range]]:
        """Merged ranges per consumer, in first-appearance order; consumers without a range are absent."""
        if self._ranges_by_consumer is None:
            grouped: dict[Consumer, list[Range]] = {}
            for assignment in self._assignments:
                grouped.setdefault(assignment.consumer, []).append(assignment.range)
            self._ranges_by_consumer = {
                consumer: ConsumerHashAssignmentsSnapshot.merge_overlapping_ranges(ranges)
                for consumer, ranges in grouped.items()
            }
        return {consumer: list(ranges) for consumer, ranges in self._ranges_by_consumer.items()}

    def diff_ranges(
        self, other: ConsumerHashAssignmentsSnapshot
    ) -> dict[Range, tuple[Consumer | None, Consumer | None]]:
        return _diff_ranges(self._assignments, other._assignments)

    def resolve_impacted_consumers(self, after: ConsumerHashAssignmentsSnapshot) -> ImpactedConsumersResult:
        removed: dict[Consumer, list[Range]] = {}
        added: dict[Consumer, list[Range]] = {}
        for hash_range, (before_consumer, after_consumer) in self.diff_ranges(after).items():
            if before_consumer is not None:
                removed.setdefault(before_consumer, []).append(hash_range)
            if after_consumer is not None:
                added.setdefault(after_consumer, []).append(hash_range)
        return ImpactedConsumersResult(_merged(removed), _merged(added))

    @staticmethod
    def merge_overlapping_ranges(ranges: Iterable[Range]) -> list[Range]:
        """Sort, then coalesce overlapping and adjacent ranges."""
        merged: list[Range] = []
        for hash_range in sorted(ranges):
            if merged and merged[-1].end >= hash_range.start - 1:
                last = merged[-1]
                merged[-1] = Range(last.start, max(last.end, hash_range.end))
            else:
                merged.append(hash_range)
        return merged


def _merged(ranges_by_consumer: dict[Consumer, list[Range]]) -> dict[Consumer, UpdatedHashRanges]:
    return {
        consumer: UpdatedHashRanges.of(ConsumerHashAssignmentsSnapshot.merge_overlapping_ranges(ranges))
        for consumer, ranges in ranges_by_consumer.items()
    }


def _diff_ranges(
    before: tuple[HashRangeAssignment, ...], after: tuple[HashRangeAssignment, ...]
) -> dict[Range, tuple[Consumer | None, Consumer | None]]:
    """Upstream's two-pointer walk, quirks included (see §4.1 "diff_ranges")."""
    impacted: dict[Range, tuple[Consumer | None, Consumer | None]] = {}
    i = j = 0
    while i < len(before) and j < len(after):
        b, a = before[i], after[j]
        if b.range == a.range:
            if b.consumer is not a.consumer:
                impacted[a.range] = (b.consumer, a.consumer)
            i += 1
            j += 1
        elif b.range.end < a.range.start:
            impacted[b.range] = (b.consumer, a.consumer)
            i += 1
        elif a.range.end < b.range.start:
            impacted[a.range] = (b.consumer, a.consumer)
            j += 1
        else:
            overlap = Range(max(b.range.start, a.range.start), min(b.range.end, a.range.end))
            if b.consumer is not a.consumer:
                impacted[overlap] = (b.consumer, a.consumer)
            if b.range.end <= overlap.end:
                i += 1
            if a.range.end <= overlap.end:
                j += 1
    for b in before[i:]:
        impacted[b.range] = (b.consumer, None)
    for a in after[j:]:
        impacted[a.range] = (None, a.consumer)
    return impacted


class ConsistentHashingStickyKeyConsumerSelector:
    """Hash ring with `number_of_points` points per consumer.

    Harness view: `ring_entries()` gives `(point, selected, colliding)` in ascending point order;
    `get_consumer_hash_assignments_snapshot().assignments` gives the ranges; `select(h)` the owner.
    In impacted mode, `add_consumer`/`remove_consumer` return the diff against the previous snapshot.
    """

    def __init__(
        self,
        number_of_points: int,
        add_or_remove_returns_impacted_consumers_result: bool = False,
        range_max_value: int = DEFAULT_RANGE_MAX,
        *,
        lock_tracer: LockTracer | None = None,
    ) -> None:
        self.number_of_points = number_of_points
        self.key_hash_range = Range.of(STICKY_KEY_HASH_NOT_SET + 1, range_max_value)
        self.add_or_remove_returns_impacted_consumers_result = add_or_remove_returns_impacted_consumers_result
        self.lock_tracer = lock_tracer
        self._hash_ring: dict[int, _HashRingPointEntry] = {}
        self._points: list[int] = []  # sorted keys of _hash_ring
        self._name_index_tracker = ConsumerNameIndexTracker()
        self._snapshot = ConsumerHashAssignmentsSnapshot.empty()

    @property
    def consumer_name_index_tracker(self) -> ConsumerNameIndexTracker:
        return self._name_index_tracker

    def make_sticky_key_hash(self, key: bytes | str) -> int:
        return make_sticky_key_hash(key, self.key_hash_range.start, self.key_hash_range.end)

    def _point(self, consumer: Consumer, name_index: int, point_index: int) -> int:
        return self.make_sticky_key_hash(f"{consumer.name}{KEY_SEPARATOR}{name_index}{KEY_SEPARATOR}{point_index}")

    def add_consumer(self, consumer: Consumer) -> ImpactedConsumersResult | None:
        """Add `consumer`'s points; colliding points queue it behind the selected consumer."""
        with traced(self.lock_tracer, SELECTOR_LOCK):
            for i in range(self.number_of_points):
                name_index = self._name_index_tracker.increase_consumer_ref_count_and_return_index(consumer)
                point = self._point(consumer, name_index, i)
                existing = self._hash_ring.get(point)
                if existing is None:
                    self._hash_ring[point] = _HashRingPointEntry(consumer)
                    bisect.insort(self._points, point)
                else:
                    existing.add_colliding_consumer(consumer)
            return self._impacted_result()

    def remove_consumer(self, consumer: Consumer) -> ImpactedConsumersResult | None:
        """Remove `consumer`'s points, promoting the first colliding consumer; harmless if absent."""
        with traced(self.lock_tracer, SELECTOR_LOCK):
            name_index = self._name_index_tracker.get_tracked_index(consumer)
            if name_index > -1:
                for i in range(self.number_of_points):
                    point = self._point(consumer, name_index, i)
                    entry = self._hash_ring.get(point)
                    assert entry is not None, f"hash ring entry wasn't found for hash {point}"
                    if entry.remove_consumer(consumer):
                        del self._hash_ring[point]
                        del self._points[bisect.bisect_left(self._points, point)]
                    self._name_index_tracker.decrease_consumer_ref_count(consumer)
            return self._impacted_result()

    def _impacted_result(self) -> ImpactedConsumersResult | None:
        if not self.add_or_remove_returns_impacted_consumers_result:
            return None
        after = self._build_snapshot()
        result = self._snapshot.resolve_impacted_consumers(after)
        self._snapshot = after
        return result

    def select(self, sticky_key_hash: int) -> Consumer | None:
        """Selected consumer of the smallest point >= hash, wrapping to the first point."""
        with traced(self.lock_tracer, SELECTOR_LOCK):
            if not self._points:
                return None
            index = bisect.bisect_left(self._points, sticky_key_hash)
            point = self._points[index] if index < len(self._points) else self._points[0]
            return self._hash_ring[point].selected

    def get_consumer_hash_assignments_snapshot(self) -> ConsumerHashAssignmentsSnapshot:
        with traced(self.lock_tracer, SELECTOR_LOCK):
            return self._build_snapshot()

    def get_consumer_key_hash_ranges(self) -> dict[Consumer, list[Range]]:
        return self.get_consumer_hash_assignments_snapshot().get_ranges_by_consumer()

    def ring_entries(self) -> list[tuple[int, Consumer, tuple[Consumer, ...]]]:
        """Harness view of the ring: `(point, selected, colliding)` in ascending point order."""
        with traced(self.lock_tracer, SELECTOR_LOCK):
            result: list[tuple[int, Consumer, tuple[Consumer, ...]]] = []
            for point in self._points:
                entry = self._hash_ring[point]
                assert entry.selected is not None
                result.append((point, entry.selected, tuple(entry.colliding or ())))
            return result

    def _build_snapshot(self) -> ConsumerHashAssignmentsSnapshot:
        if not self._points:
            return ConsumerHashAssignmentsSnapshot.empty()
        result: list[HashRangeAssignment] = []
        start = self.key_hash_range.start
        previous: Consumer | None = None
        for point in self._points:
            consumer = self._hash_ring[point].selected
            assert consumer is not None
            # Consecutive points of the same consumer form one range.
            hash_range = Range(result.pop().range.start, point) if consumer is previous else Range(start, point)
            result.append(HashRangeAssignment(hash_range, consumer))
            start = point + 1
            previous = consumer
        last_point = self._points[-1]
        range_max = self.key_hash_range.end
        if last_point < range_max:
            first_consumer = self._hash_ring[self._points[0]].selected
            assert first_consumer is not None
            if first_consumer is previous:
                hash_range = Range(result.pop().range.start, range_max)
            else:
                hash_range = Range(last_point + 1, range_max)
            result.append(HashRangeAssignment(hash_range, first_consumer))
        return ConsumerHashAssignmentsSnapshot.of(result)
