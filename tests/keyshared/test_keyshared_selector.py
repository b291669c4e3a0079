"""The consistent-hashing selector (§4.1): ring, name indexes, collisions, snapshots, impacted diffs."""

from __future__ import annotations

import pytest

from reference_impl.keyshared import (
    ConsistentHashingStickyKeyConsumerSelector,
    Consumer,
    ConsumerHashAssignmentsSnapshot,
    HashRangeAssignment,
    ImpactedConsumersResult,
    OperationType,
    Range,
    UpdatedHashRanges,
    make_sticky_key_hash,
)

R = Range.of


def ranges_by_name(selector: ConsistentHashingStickyKeyConsumerSelector) -> dict[str, list[tuple[int, int]]]:
    return {c.name: [(r.start, r.end) for r in rs] for c, rs in selector.get_consumer_key_hash_ranges().items()}


def s12() -> tuple[ConsistentHashingStickyKeyConsumerSelector, list[Consumer]]:
    selector = ConsistentHashingStickyKeyConsumerSelector(3)
    consumers = [Consumer(f"consumer{i}", i) for i in (1, 2, 3)]
    for consumer in consumers:
        selector.add_consumer(consumer)
    return selector, consumers


def test_s12_ring_points_and_owners() -> None:
    selector, consumers = s12()
    assert all(selector.consumer_name_index_tracker.get_tracked_index(c) == 0 for c in consumers)
    ring = [(point, selected.name[-1], colliding) for point, selected, colliding in selector.ring_entries()]
    assert ring == [
        (6668, "2", ()),
        (14358, "3", ()),
        (18366, "1", ()),
        (29990, "3", ()),
        (39817, "1", ()),
        (52979, "2", ()),
        (60442, "1", ()),
        (63679, "2", ()),
        (65183, "3", ()),
    ]


def test_s12_consumer_key_hash_ranges() -> None:
    selector, _ = s12()
    assert ranges_by_name(selector) == {
        "consumer1": [(14359, 18366), (29991, 39817), (52980, 60442)],
        "consumer2": [(1, 6668), (39818, 52979), (60443, 63679), (65184, 65535)],
        "consumer3": [(6669, 14358), (18367, 29990), (63680, 65183)],
    }
    assignments = selector.get_consumer_hash_assignments_snapshot().assignments
    assert sum(a.range.size() for a in assignments) == 65535
    assert [a.range.start for a in assignments] == [1] + [a.range.end + 1 for a in assignments[:-1]]
    assert assignments[-1].range.end == 65535
    # Head and tail of consumer2 stay separate ranges even though they have the same owner.
    assert (assignments[0].range, assignments[-1].range) == (R(1, 6668), R(65184, 65535))
    assert assignments[0].consumer is assignments[-1].consumer


def test_snapshot_agrees_with_select_at_every_hash() -> None:
    selector, _ = s12()
    for assignment in selector.get_consumer_hash_assignments_snapshot().assignments:
        for h in range(assignment.range.start, assignment.range.end + 1):
            assert selector.select(h) is assignment.consumer


def test_select_wraps_around_and_empty_ring() -> None:
    selector = ConsistentHashingStickyKeyConsumerSelector(3)
    assert selector.select(5) is None
    assert selector.get_consumer_hash_assignments_snapshot().assignments == []
    assert selector.get_consumer_key_hash_ranges() == {}
    selector, (_, c2, c3) = s12()
    assert selector.select(6668) is c2
    assert selector.select(6669) is c3
    assert selector.select(65184) is c2  # past the last point: the first point's consumer
    assert selector.select(65535) is c2
    assert selector.key_hash_range == R(1, 65535)


def test_single_consumer_owns_everything() -> None:
    selector = ConsistentHashingStickyKeyConsumerSelector(3)
    c = Consumer("consumer1", 1)
    selector.add_consumer(c)
    assert selector.get_consumer_key_hash_ranges() == {c: [R(1, 65535)]}


def test_name_indexes_are_lowest_free_per_name() -> None:
    selector = ConsistentHashingStickyKeyConsumerSelector(3)
    tracker = selector.consumer_name_index_tracker
    x0, x1, y0 = Consumer("x", 1), Consumer("x", 2), Consumer("y", 3)
    for c in (x0, x1, y0):
        selector.add_consumer(c)
    assert [tracker.get_tracked_index(c) for c in (x0, x1, y0)] == [0, 1, 0]
    x1_points = {make_sticky_key_hash(f"x\x001\x00{i}") for i in range(3)}
    assert x1_points <= {p for p, _, _ in selector.ring_entries()}
    selector.remove_consumer(x0)
    assert tracker.get_tracked_index(x0) == -1
    x2 = Consumer("x", 4)
    selector.add_consumer(x2)
    assert tracker.get_tracked_index(x2) == 0


def test_name_index_tracker_refcounts() -> None:
    selector = ConsistentHashingStickyKeyConsumerSelector(1)
    tracker = selector.consumer_name_index_tracker
    c = Consumer("x", 1)
    assert tracker.increase_consumer_ref_count_and_return_index(c) == 0
    assert tracker.increase_consumer_ref_count_and_return_index(c) == 0
    tracker.decrease_consumer_ref_count(c)
    assert tracker.get_tracked_index(c) == 0
    tracker.decrease_consumer_ref_count(c)
    assert tracker.get_tracked_index(c) == -1


def test_collisions_are_fifo_and_never_replace_the_selected_consumer() -> None:
    # With range_max 3: "a" -> points [1, 2, 1], "b" -> [1, 1, 1], "c" -> [1, 3, 2].
    selector = ConsistentHashingStickyKeyConsumerSelector(3, range_max_value=3)
    a, b, c = Consumer("a", 1), Consumer("b", 2), Consumer("c", 3)
    selector.add_consumer(a)
    selector.add_consumer(b)
    assert selector.ring_entries() == [(1, a, (a, b, b, b)), (2, a, ())]
    # b collides on every point: registered, but owns no range.
    assert selector.consumer_name_index_tracker.get_tracked_index(b) == 0
    assert selector.get_consumer_key_hash_ranges() == {a: [R(1, 3)]}
    selector.add_consumer(c)
    assert selector.ring_entries() == [(1, a, (a, b, b, b, c)), (2, a, (c,)), (3, c, ())]
    selector.remove_consumer(a)
    # Each removal of a's point promotes the head of the colliding list (a itself at point 1 first).
    assert selector.ring_entries() == [(1, b, (b, b, c)), (2, c, ()), (3, c, ())]


def test_rejoin_gets_same_points_and_goes_to_the_end_of_colliding_lists() -> None:
    # "c6019" point 0 collides with consumer1's point 1 (18366).
    selector = ConsistentHashingStickyKeyConsumerSelector(3)
    c1, other = Consumer("consumer1", 1), Consumer("c6019", 2)
    selector.add_consumer(c1)
    selector.add_consumer(other)
    points = dict((p, (s, col)) for p, s, col in selector.ring_entries())
    assert points[18366] == (c1, (other,))
    selector.remove_consumer(c1)
    assert dict((p, (s, col)) for p, s, col in selector.ring_entries())[18366] == (other, ())
    c1b = Consumer("consumer1", 3)
    selector.add_consumer(c1b)
    points = dict((p, (s, col)) for p, s, col in selector.ring_entries())
    assert points[18366] == (other, (c1b,))
    assert points[60442] == (c1b, ()) and points[39817] == (c1b, ())


def test_remove_twice_is_harmless() -> None:
    selector = ConsistentHashingStickyKeyConsumerSelector(3, True)
    c1, c2 = Consumer("consumer1", 1), Consumer("consumer2", 2)
    selector.add_consumer(c1)
    selector.add_consumer(c2)
    first = selector.remove_consumer(c2)
    assert first is not None and not first.is_empty()
    ring = selector.ring_entries()
    second = selector.remove_consumer(c2)
    assert second is not None and second.is_empty() and second.added_hash_ranges == {}
    assert selector.ring_entries() == ring


def test_non_impacted_mode_returns_none() -> None:
    selector = ConsistentHashingStickyKeyConsumerSelector(3)
    c = Consumer("consumer1", 1)
    assert selector.add_consumer(c) is None
    assert selector.remove_consumer(c) is None


def test_add_then_remove_restores_the_snapshot_exactly() -> None:
    selector = ConsistentHashingStickyKeyConsumerSelector(100, True)
    for i in range(5):
        selector.add_consumer(Consumer(f"c{i}", i))
    before = selector.get_consumer_hash_assignments_snapshot().assignments
    newcomer = Consumer("c1", 99)  # same name as a live consumer: gets name index 1
    selector.add_consumer(newcomer)
    selector.remove_consumer(newcomer)
    after = selector.get_consumer_hash_assignments_snapshot().assignments
    assert after == before
    assert all(x.consumer is y.consumer for x, y in zip(before, after, strict=True))


def owners(selector: ConsistentHashingStickyKeyConsumerSelector, range_max: int) -> list[Consumer | None]:
    return [selector.select(h) for h in range(range_max + 1)]


def test_impacted_result_is_the_pointwise_diff_and_moves_only_to_or_from_the_changed_consumer() -> None:
    range_max = 3000
    selector = ConsistentHashingStickyKeyConsumerSelector(20, True, range_max)
    consumers = [Consumer(f"c{i}", i) for i in range(4)] + [Consumer("c0", 10)]
    steps = [(True, c) for c in consumers] + [(False, consumers[1]), (False, consumers[0]), (False, consumers[4])]
    impacted_seen = 0
    for adding, consumer in steps:
        before = owners(selector, range_max)
        result = selector.add_consumer(consumer) if adding else selector.remove_consumer(consumer)
        after = owners(selector, range_max)
        assert isinstance(result, ImpactedConsumersResult)
        for h in range(1, range_max + 1):
            b, a = before[h], after[h]
            for c, ranges in result.removed_hash_ranges.items():
                assert ranges.contains_sticky_key(h) == (b is c and a is not c)
            for c, ranges in result.added_hash_ranges.items():
                assert ranges.contains_sticky_key(h) == (a is c and b is not c)
            if b is not a:
                impacted_seen += 1
                assert b in result.removed_hash_ranges or b is None
                assert a in result.added_hash_ranges or a is None
                assert (a is consumer) if adding else (b is consumer)  # KS-I6: no bystander moves
    assert impacted_seen > 0


def test_process_updated_hash_ranges_calls_removes_before_adds() -> None:
    c1, c2, c3 = Consumer("c1", 1), Consumer("c2", 2), Consumer("c3", 3)
    result = ImpactedConsumersResult(
        {c1: UpdatedHashRanges.of([R(1, 2)]), c2: UpdatedHashRanges.of([R(5, 6)])},
        {c3: UpdatedHashRanges.of([R(1, 2), R(5, 6)])},
    )
    calls: list[tuple[str, OperationType]] = []
    result.process_updated_hash_ranges(lambda c, _r, op: calls.append((c.name, op)))
    assert calls == [("c1", OperationType.REMOVE), ("c2", OperationType.REMOVE), ("c3", OperationType.ADD)]
    assert not result.is_empty()
    assert ImpactedConsumersResult({}, {c3: UpdatedHashRanges.of([R(1, 2)])}).is_empty()


def test_range_basics() -> None:
    r = R(3, 7)
    assert r.size() == 5 and r.contains(3) and r.contains(7) and not r.contains(8) and not r.contains(2)
    assert R(1, 5) < R(1, 6) < R(2, 3)
    assert str(r) == "[3, 7]"
    with pytest.raises(ValueError):
        R(5, 4)
    with pytest.raises(ValueError):
        Range(5, 4)


def test_updated_hash_ranges() -> None:
    ranges = UpdatedHashRanges.of([R(1, 5), R(10, 12)])
    assert [ranges.contains_sticky_key(h) for h in (0, 1, 5, 6, 10, 12, 13)] == [
        False,
        True,
        True,
        False,
        True,
        True,
        False,
    ]
    assert ranges.as_ranges() == [R(1, 5), R(10, 12)]
    with pytest.raises(ValueError):
        UpdatedHashRanges.of([R(10, 12), R(1, 5)])
    with pytest.raises(ValueError):
        UpdatedHashRanges.of([R(1, 5), R(5, 12)])


def test_snapshot_validation() -> None:
    c = Consumer("c", 1)
    with pytest.raises(ValueError):
        ConsumerHashAssignmentsSnapshot.of(None)
    with pytest.raises(ValueError):
        ConsumerHashAssignmentsSnapshot.of([HashRangeAssignment(R(6, 9), c), HashRangeAssignment(R(1, 5), c)])
    with pytest.raises(ValueError):
        ConsumerHashAssignmentsSnapshot.of([HashRangeAssignment(R(1, 5), c), HashRangeAssignment(R(5, 9), c)])
    with pytest.raises(ValueError):
        ConsumerHashAssignmentsSnapshot.of([HashRangeAssignment(R(1, 5), None)])  # type: ignore[arg-type]
    assert ConsumerHashAssignmentsSnapshot.empty().assignments == []


def test_s17_merge_overlapping_ranges() -> None:
    merged = ConsumerHashAssignmentsSnapshot.merge_overlapping_ranges(
        [R(15, 20), R(1, 5), R(6, 10), R(8, 12), R(21, 25)]
    )
    assert merged == [R(1, 12), R(15, 25)]


def snapshot(*assignments: tuple[int, int, Consumer]) -> ConsumerHashAssignmentsSnapshot:
    return ConsumerHashAssignmentsSnapshot.of([HashRangeAssignment(R(s, e), c) for s, e, c in assignments])


C1, C2 = Consumer("c1", 1), Consumer("c2", 2)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (snapshot((1, 5, C1)), snapshot((1, 5, C1)), {}),
        (snapshot((1, 5, C1)), snapshot((1, 5, C2)), {R(1, 5): (C1, C2)}),
        (snapshot(), snapshot((1, 5, C1)), {R(1, 5): (None, C1)}),
        (snapshot((1, 5, C1)), snapshot(), {R(1, 5): (C1, None)}),
    ],
)
def test_s17_diff(
    before: ConsumerHashAssignmentsSnapshot,
    after: ConsumerHashAssignmentsSnapshot,
    expected: dict[Range, tuple[Consumer | None, Consumer | None]],
) -> None:
    assert before.diff_ranges(after) == expected


def test_s17_diff_of_partially_overlapping_ranges() -> None:
    diff = snapshot((1, 5, C1)).diff_ranges(snapshot((3, 7, C2)))
    assert diff[R(3, 5)] == (C1, C2)
    # The after-range is also left over once the before side is exhausted (upstream's walk).
    assert diff == {R(3, 5): (C1, C2), R(3, 7): (None, C2)}


def test_diff_records_a_range_left_of_the_other_without_an_equality_check() -> None:
    diff = snapshot((1, 5, C1)).diff_ranges(snapshot((10, 12, C1)))
    assert diff == {R(1, 5): (C1, C1), R(10, 12): (None, C1)}


def test_s17_resolve() -> None:
    moved = snapshot((1, 5, C1)).resolve_impacted_consumers(snapshot((1, 5, C2)))
    assert moved.removed_hash_ranges == {C1: UpdatedHashRanges.of([R(1, 5)])}
    assert moved.added_hash_ranges == {C2: UpdatedHashRanges.of([R(1, 5)])}
    overlap = snapshot((1, 5, C1)).resolve_impacted_consumers(snapshot((3, 7, C2)))
    assert overlap.removed_hash_ranges == {C1: UpdatedHashRanges.of([R(3, 5)])}
    assert overlap.added_hash_ranges == {C2: UpdatedHashRanges.of([R(3, 7)])}
    assert not overlap.removed_hash_ranges[C1].contains_sticky_key(2)  # [1, 2] is not reported


def test_ranges_by_consumer_groups_and_merges_per_identity() -> None:
    same_name = Consumer("c1", 3)
    snap = snapshot((1, 5, C1), (6, 9, C1), (10, 12, same_name), (13, 20, C1))
    assert snap.get_ranges_by_consumer() == {C1: [R(1, 9), R(13, 20)], same_name: [R(10, 12)]}


def test_diff_compares_consumers_by_identity() -> None:
    twin = Consumer("c1", 1)  # same name and id, different identity
    assert snapshot((1, 5, C1)).diff_ranges(snapshot((1, 5, twin))) == {R(1, 5): (C1, twin)}
