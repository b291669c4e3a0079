"""LayerManager, extend checks, cleanups and LayeredBloomFilter (spec §4.3, C1-C17, PQ-I10, PQ-I11)."""

from __future__ import annotations

from typing import Any

import pytest

from reference_impl.pidquota import (
    IncrementingHasher,
    LayeredBloomFilter,
    LayerManager,
    Shape,
    SimpleBloomFilter,
    advance_on_count,
    advance_on_populated,
    advance_on_saturation,
    all_of,
    any_of,
    chain,
    fixed_layered,
    never_advance,
    no_cleanup,
    on_max_size,
    remove_empty_target,
    remove_if,
)
from reference_impl.pidquota.layered import ExtendCheck

S = Shape.from_km(17, 72)
ONE = Shape.from_km(1, 72)  # one index per "item", so layer contents show the merges
FROM1 = IncrementingHasher(1, 1)
FROM11 = IncrementingHasher(11, 1)


def _manager(check: ExtendCheck | None = None, cleanup: Any = None, shape: Shape = S) -> LayerManager[Any]:
    builder = LayerManager.builder().set_supplier(lambda: SimpleBloomFilter(shape))
    if check is not None:
        builder.set_extend_check(check)
    if cleanup is not None:
        builder.set_cleanup(cleanup)
    return builder.get()


def _filled(*index_sets: list[int]) -> list[SimpleBloomFilter]:
    layers = []
    for indices in index_sets:
        bf = SimpleBloomFilter(S)
        bf.merge(indices)
        layers.append(bf)
    return layers


class CountingCheck:
    """Wraps an extend check and counts how often it is evaluated."""

    def __init__(self, inner: ExtendCheck) -> None:
        self.inner = inner
        self.calls = 0

    def __call__(self, manager: LayerManager[Any]) -> bool:
        self.calls += 1
        return self.inner(manager)


# --- extend checks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [1, 2, 4, 10])
def test_c1_advance_on_count(b: int) -> None:
    check = advance_on_count(b)
    manager = _manager()
    results = []
    for _ in range(2 * b):
        results.append(check(manager))
        manager.last().merge(FROM1)
    assert results == [i % b == 0 for i in range(1, 2 * b + 1)]
    assert check.count == 0


def test_c3_advance_on_populated() -> None:
    check = advance_on_populated()
    manager = _manager()
    assert check(manager) is False
    manager.get_target().merge(FROM1)
    assert check(manager) is True


def test_advance_on_saturation_at_half_the_bits() -> None:
    check = advance_on_saturation(ONE.estimate_max_n())
    manager = _manager(shape=ONE)
    manager.last().merge(range(35))
    assert check(manager) is False
    manager.last().merge([35])  # 36 = m/2 bits
    assert check(manager) is True


def test_never_advance_and_builder_defaults() -> None:
    assert never_advance()(_manager()) is False
    manager = _manager()
    for i in range(50):
        manager.get_target().merge([i])
    assert manager.get_depth() == 1


def test_any_of_and_all_of_short_circuit() -> None:
    manager = _manager()
    spy = CountingCheck(never_advance())
    assert any_of(lambda m: True, spy)(manager) is True
    assert all_of(lambda m: False, spy)(manager) is False
    assert spy.calls == 0
    assert any_of(lambda m: False, lambda m: True)(manager) is True
    assert all_of(lambda m: True, lambda m: False)(manager) is False
    assert spy.calls == 0


@pytest.mark.parametrize("make", [lambda: advance_on_count(0), lambda: advance_on_count(-1),
                                  lambda: advance_on_saturation(0), lambda: advance_on_saturation(-1.5),
                                  lambda: on_max_size(0), lambda: on_max_size(-1)])  # fmt: skip
def test_non_positive_parameters_raise(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize(
    ("break_at", "merges", "sizes"),
    [(3, 7, [2, 3, 2]), (3, 8, [2, 3, 3]), (2, 5, [1, 2, 2]), (1, 3, [0, 1, 1, 1])],
)
def test_advance_on_count_layer_sizes(break_at: int, merges: int, sizes: list[int]) -> None:
    """The check runs before the merge: the first layer gets N-1 merges, later ones N (§4.3, PQ-I10)."""
    lbf = LayeredBloomFilter(ONE, _manager(advance_on_count(break_at), shape=ONE))
    for i in range(merges):
        lbf.merge([i])
    assert [layer.cardinality() for layer in lbf.layers] == sizes


def test_advance_on_count_counts_duplicates() -> None:
    lbf = LayeredBloomFilter(ONE, _manager(advance_on_count(2), shape=ONE))
    for _ in range(3):
        lbf.merge([5])
    assert lbf.get_depth() == 2
    assert lbf.find([5]) == [0, 1]


# --- cleanups ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", [1, 2, 5, 100])
def test_c11_on_max_size(s: int) -> None:
    cleanup = on_max_size(s)
    layers: list[SimpleBloomFilter] = []
    added: list[SimpleBloomFilter] = []
    for i in range(1, 2 * s + 1):
        layer = SimpleBloomFilter(S)
        layers.append(layer)
        added.append(layer)
        cleanup(layers)
        assert len(layers) == min(i, s)
        assert layers == added[-len(layers) :]


def test_c12_remove_empty_target() -> None:
    cleanup = remove_empty_target()
    empty = _filled([])
    cleanup(empty)
    assert empty == []
    populated = _filled([1])
    cleanup(populated)
    assert len(populated) == 1
    empty_then_populated = _filled([], [1])
    before = list(empty_then_populated)
    cleanup(empty_then_populated)
    assert empty_then_populated == before
    three = _filled([1], [], [])
    cleanup(three)
    assert [bf.is_empty() for bf in three] == [False, True]
    nothing: list[SimpleBloomFilter] = []
    cleanup(nothing)
    assert nothing == []


def test_remove_if_chain_and_no_cleanup() -> None:
    layers = _filled([1], [], [2], [])
    no_cleanup()(layers)
    assert len(layers) == 4
    remove_if(lambda bf: bf.is_empty())(layers)
    assert [bf.as_index_array() for bf in layers] == [[1], [2]]
    order: list[str] = []
    chained = chain(lambda ls: order.append("a"), lambda ls: order.append("b"))
    chained(layers)
    assert order == ["a", "b"]
    layers = _filled([1], [2], [])
    chain(remove_empty_target(), on_max_size(1))(layers)
    assert [bf.as_index_array() for bf in layers] == [[2]]


# --- manager -----------------------------------------------------------------------------------------


def test_builder_errors() -> None:
    with pytest.raises(ValueError, match="filter_supplier"):
        LayerManager.builder().get()
    with pytest.raises(ValueError, match="extend_check"):
        LayerManager.builder().set_supplier(lambda: SimpleBloomFilter(S)).set_extend_check(None).get()
    with pytest.raises(ValueError, match="filter_cleanup"):
        LayerManager.builder().set_supplier(lambda: SimpleBloomFilter(S)).set_cleanup(None).get()
    with pytest.raises(ValueError, match="filter_supplier returned None"):
        LayerManager.builder().set_supplier(lambda: None).get()


def test_get_first_last_and_depth() -> None:
    manager = _manager()
    manager.next()
    manager.next()
    assert manager.get_depth() == 3
    assert manager.first() is manager.get(0)
    assert manager.last() is manager.get(2)
    for bad in (-1, 3):
        with pytest.raises(IndexError):
            manager.get(bad)


def test_get_target_is_the_only_place_the_check_runs() -> None:
    spy = CountingCheck(advance_on_populated())
    manager = _manager(spy)
    assert spy.calls == 0
    target = manager.get_target()
    assert spy.calls == 1
    assert target is manager.last()
    target.merge(FROM1)
    assert manager.get_target() is not target
    assert spy.calls == 2
    assert manager.get_depth() == 2


def test_next_cleanup_and_clear() -> None:
    manager = _manager(cleanup=remove_empty_target())
    first = manager.last()
    manager.next()  # the empty target is removed, then a fresh one appended
    assert manager.get_depth() == 1
    assert manager.last() is not first
    before = manager.last()
    manager.cleanup()  # emptied -> a fresh layer
    assert manager.get_depth() == 1
    assert manager.last() is not before
    manager.last().merge([1])
    kept = manager.last()
    manager.cleanup()
    assert manager.layers == (kept,)
    manager.next()
    manager.last().merge([2])
    manager.clear()
    assert manager.get_depth() == 1
    assert manager.last().is_empty()


def test_copy_deep_copies_layers_and_shares_strategies() -> None:
    manager = _manager(advance_on_count(2), shape=ONE)
    manager.get_target().merge([1])  # count 1
    clone = manager.copy()
    assert clone.extend_check is manager.extend_check
    assert clone.filter_cleanup is manager.filter_cleanup
    assert clone.filter_supplier is manager.filter_supplier
    clone.last().merge([9])
    assert not manager.last().contains([9])
    clone.get_target()  # shared counter reaches 2: the clone rotates
    assert clone.get_depth() == 2
    manager.get_target()  # shared counter back to 1: the original does not
    assert manager.get_depth() == 1


def test_process_bloom_filters_stops_at_first_false() -> None:
    manager = _manager()
    manager.next()
    manager.next()
    visited: list[SimpleBloomFilter] = []

    def stop_at_second(bf: SimpleBloomFilter) -> bool:
        visited.append(bf)
        return len(visited) < 2

    assert manager.process_bloom_filters(stop_at_second) is False
    assert visited == [manager.get(0), manager.get(1)]
    assert manager.process_bloom_filters(lambda bf: True) is True


# --- layered filter ----------------------------------------------------------------------------------


def test_c15_find() -> None:
    lbf = fixed_layered(S, 10)
    lbf.merge(FROM1)
    lbf.merge(FROM11)
    lbf.merge(IncrementingHasher(11, 2))
    both = SimpleBloomFilter(S)
    both.merge(FROM1)
    both.merge(FROM11)
    lbf.merge(both)
    assert lbf.get_depth() == 4
    assert lbf.find(FROM1) == [0, 3]
    assert lbf.find(FROM11) == [1, 3]
    assert lbf.find(IncrementingHasher(11, 2)) == [2]
    assert lbf.find([70]) == []


def test_c17_containment_is_per_layer() -> None:
    lbf = fixed_layered(S, 10)
    lbf.merge(FROM1)
    lbf.merge(FROM11)
    assert lbf.get_depth() == 2
    assert lbf.contains(FROM1)
    assert lbf.contains(FROM11)
    t1 = [6, 7, 17, 18, 19]
    assert lbf.contains(t1) is False
    assert lbf.copy().contains(t1) is False
    assert lbf.flatten().contains(t1) is True
    assert lbf.find(t1) == []


def test_fixed_layered_trims_before_appending() -> None:
    # next() runs on_max_size(3) and *then* appends, so the depth settles at max_depth + 1 (upstream).
    lbf = fixed_layered(S, 3)
    for i in range(10):
        lbf.merge([i])
    assert lbf.get_depth() == 4
    assert [layer.as_index_array() for layer in lbf.layers] == [[6], [7], [8], [9]]


def test_contains_layered_filter() -> None:
    lbf = fixed_layered(S, 10)
    lbf.merge(FROM1)
    lbf.merge(FROM11)
    sub = fixed_layered(S, 10)
    sub.merge([1, 2])
    sub.merge([20, 21])
    assert lbf.contains(sub)
    sub.merge([2, 20])  # a layer that only the union holds
    assert not lbf.contains(sub)


def test_contains_simple_filter_and_out_of_range() -> None:
    lbf = fixed_layered(S, 10)
    lbf.merge(FROM1)
    probe = SimpleBloomFilter(S)
    probe.merge([3, 4])
    assert lbf.contains(probe)
    probe.merge([50])
    assert not lbf.contains(probe)
    with pytest.raises(ValueError):
        lbf.contains([72])


def test_union_statistics_and_emptiness() -> None:
    lbf = fixed_layered(S, 10)
    assert lbf.is_empty()
    assert lbf.cardinality() == 0
    lbf.merge(FROM1)
    lbf.merge(FROM11)
    assert not lbf.is_empty()
    assert lbf.cardinality() == 27  # bits 1..27 on the union
    assert lbf.estimate_n() == lbf.flatten().estimate_n()
    other = SimpleBloomFilter(S)
    other.merge(range(40, 72))
    union = lbf.flatten()
    union.merge(other)
    assert lbf.estimate_union(other) == union.estimate_n()
    assert lbf.estimate_union(fixed_layered(S, 2)) == lbf.estimate_n()
    assert lbf.cardinality() == 27  # estimate_union does not change the filter


def test_process_indices_visits_each_layer() -> None:
    lbf = fixed_layered(S, 10)
    lbf.merge(FROM1)
    lbf.merge(FROM11)
    seen: list[int] = []

    def collect(i: int) -> bool:
        seen.append(i)
        return True

    assert lbf.process_indices(collect)
    assert seen == list(range(1, 18)) + list(range(11, 28))
    assert lbf.process_indices(lambda i: i < 5) is False


def test_layered_delegation_next_cleanup_clear_copy() -> None:
    lbf = LayeredBloomFilter(ONE, _manager(cleanup=remove_empty_target(), shape=ONE))
    lbf.merge([1])
    lbf.next()
    assert lbf.get_depth() == 2
    lbf.cleanup()  # the empty target goes, the populated layer stays
    assert lbf.get_depth() == 1
    assert lbf.get(0).as_index_array() == [1]
    clone = lbf.copy()
    clone.merge([2])
    assert not lbf.contains([2])
    lbf.clear()
    assert lbf.is_empty()
    assert lbf.get_depth() == 1
    assert clone.contains([1])


def test_pq_i10_check_runs_once_per_merge_and_never_on_reads() -> None:
    spy = CountingCheck(advance_on_count(2))
    lbf = LayeredBloomFilter(ONE, _manager(spy, shape=ONE))
    for i in range(5):
        lbf.merge([i])
    assert spy.calls == 5
    lbf.contains([1])
    lbf.find([1])
    lbf.flatten()
    lbf.is_empty()
    lbf.cardinality()
    lbf.estimate_n()
    lbf.process_indices(lambda i: True)
    lbf.copy().contains([2])
    assert spy.calls == 5


def test_pq_i11_contains_iff_find_nonempty() -> None:
    lbf = fixed_layered(S, 10)
    lbf.merge(FROM1)
    lbf.merge(FROM11)
    for probe in ([1, 2], [17, 18], [6, 7, 17, 18, 19], [30], [11, 27], []):
        assert lbf.contains(probe) == (lbf.find(probe) != [])
