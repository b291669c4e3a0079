"""Shape, hashers and SimpleBloomFilter (spec §4.1, §4.2, §7 shape table, C24, PQ-I3, PQ-I9)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_impl.pidquota import (
    EnhancedDoubleHasher,
    IncrementingHasher,
    Shape,
    SimpleBloomFilter,
    default_pid_hasher,
    round_half_up,
)
from reference_impl.pidquota.bloom import INT_MAX, LONG_MAX, LONG_MIN

S = Shape.from_km(17, 72)
FROM1 = IncrementingHasher(1, 1)
FROM11 = IncrementingHasher(11, 1)


def _close(actual: float, expected: str) -> bool:
    """Equal to ``expected`` to the precision it is written with (half a unit of the last digit)."""
    exponent = Decimal(expected).as_tuple().exponent
    assert isinstance(exponent, int)
    return abs(actual - float(expected)) <= 0.5 * 10.0**exponent


# --- §7 shape table ----------------------------------------------------------------------------------

SHAPE_TABLE = [
    (5, 0.1, 24, 3, "0.100375", "5.55", 1),
    (1, 0.01, 10, 7, "0.008194", "0.99", 1),
    (10, 0.01, 96, 7, "0.009965", "9.51", 2),
    (50, 0.01, 480, 7, "0.009965", "47.53", 8),
    (100, 0.01, 959, 7, "0.010015", "94.96", 15),
    (100, 0.001, 1438, 10, "0.000999", "99.67", 23),
    (100, 0.1, 480, 3, "0.100375", "110.90", 8),
    (1000, 0.01, 9586, 7, "0.010035", "949.22", 150),
    (1000, 0.001, 14378, 10, "0.000999826", "996.61", 225),
    (10, 1 / 2_000_000, 302, 21, "4.995e-7", "9.97", 5),
]


@pytest.mark.parametrize(("n", "p", "m", "k", "prob", "max_n", "words"), SHAPE_TABLE)
def test_shape_table(n: int, p: float, m: int, k: int, prob: str, max_n: str, words: int) -> None:
    shape = Shape.from_np(n, p)
    assert (shape.k, shape.m) == (k, m)
    assert _close(shape.probability(n), prob)
    assert _close(shape.estimate_max_n(), max_n)
    bf = SimpleBloomFilter(shape)
    assert len(bf.bit_words()) == words


def test_shape_str_and_equality() -> None:
    assert str(Shape.from_np(5, 0.1)) == "Shape[k=3 m=24]"
    assert Shape.from_np(5, 0.1) == Shape.from_km(3, 24)
    with pytest.raises(AttributeError):
        S.k = 3  # type: ignore[misc]


def test_other_factories() -> None:
    assert Shape.from_nm(5, 24) == Shape(3, 24)
    assert Shape.from_nmk(5, 24, 3) == Shape(3, 24)
    assert Shape.from_pmk(0.1, 24, 3) == Shape(3, 24)
    # Java divides by a zero log term without error (n becomes 0), so this shape is accepted.
    assert Shape.from_pmk(1e-300, 10, 1) == Shape(1, 10)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Shape.from_np(0, 0.1),
        lambda: Shape.from_np(1, 0.0),
        lambda: Shape.from_np(1, 1.0),
        lambda: Shape.from_np(1, math.nan),
        lambda: Shape.from_np(10**9, 1e-300),  # more than 2**31 - 1 bits
        lambda: Shape.from_km(0, 10),
        lambda: Shape.from_km(1, 0),
        lambda: Shape.from_km(1, 2**31),
        lambda: Shape.from_nm(0, 10),
        lambda: Shape.from_nm(100, 10),  # k = round(0.069) = 0: filter too small
        lambda: Shape.from_nmk(1000, 1, 1),  # probability(1000) == 1
        lambda: Shape.from_nmk(1, 10, 0),
        lambda: Shape.from_pmk(0.0, 10, 1),
        lambda: Shape.from_pmk(0.5, 0, 1),
        lambda: Shape.from_pmk(0.5, 10, 0),
    ],
)
def test_invalid_shapes_raise_value_error(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_filter_too_small_message() -> None:
    with pytest.raises(ValueError, match="Filter too small"):
        Shape.from_nm(100, 10)


def test_probability_and_estimates() -> None:
    shape = Shape.from_km(3, 24)
    assert shape.probability(0) == 0
    with pytest.raises(ValueError):
        shape.probability(-1)
    assert shape.estimate_n(0) == 0
    assert shape.estimate_n(24) == math.inf
    assert math.isnan(shape.estimate_n(25))
    # estimate_n(m/2) == estimate_max_n(): saturation at max_n means half the bits are set.
    assert shape.estimate_n(12) == shape.estimate_max_n()
    assert shape.estimate_n(11) < shape.estimate_max_n()


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.5, 1),
        (-0.5, 0),
        (2.5, 3),
        (-2.5, -2),
        (2.4999, 2),
        (0.49999999999999994, 0),  # floor(x + 0.5) in doubles would give 1; Java gives 0
        (math.nan, 0),
        (math.inf, LONG_MAX),
        (-math.inf, LONG_MIN),
        (1e300, LONG_MAX),
        (-1e300, LONG_MIN),
        (7, 7),
    ],
)
def test_round_half_up_is_java_math_round(x: float, expected: int) -> None:
    assert round_half_up(x) == expected


# --- §4.2 EnhancedDoubleHasher ----------------------------------------------------------------------


def test_c24_vector() -> None:
    assert EnhancedDoubleHasher(1, 1).indices(Shape.from_km(17, 72)) == [
        1, 0, 0, 2, 7, 16, 30, 50, 5, 40, 12, 66, 59, 64, 10, 42, 17,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("pid", "h1", "h2", "indices"),
    [
        (0, 0x28DF63B7CC57C3CB, 0xF2557DFCC4E8FE52, [203, 663, 165, 628, 135, 605, 121]),
        (1000, 0x8E00F2D48AC9F3C1, 0x0C1108CB70F97D04, [280, 415, 551, 689, 830, 16, 166]),
    ],
)
def test_default_pid_hasher_vectors(pid: int, h1: int, h2: int, indices: list[int]) -> None:
    hasher = default_pid_hasher(pid)
    assert (hasher.initial, hasher.increment) == (h1, h2)
    assert hasher.indices(Shape.from_km(7, 959)) == indices
    assert Shape.from_np(100, 0.01) == Shape.from_km(7, 959)


def test_default_pid_hasher_accepts_negative_and_rejects_out_of_range() -> None:
    assert len(default_pid_hasher(-1).indices(S)) == 17
    assert default_pid_hasher(-1).initial != default_pid_hasher(1).initial
    with pytest.raises(ValueError):
        default_pid_hasher(2**63)
    with pytest.raises(ValueError):
        default_pid_hasher(-(2**63) - 1)


def test_values_are_unsigned_mod_2_64() -> None:
    hasher = EnhancedDoubleHasher(-1, -2)
    assert (hasher.initial, hasher.increment) == (2**64 - 1, 2**64 - 2)
    # 2**64 - 1 = 18446744073709551615, which is 5 mod 10 (a signed mod would give -1).
    assert hasher.indices(Shape.from_km(1, 10)) == [5]
    assert EnhancedDoubleHasher(2**64 + 3, 0).initial == 3


@pytest.mark.parametrize(
    ("buf", "initial", "increment"),
    [
        (b"\x01", 0, 0x0100000000000000),
        (b"\x00\x01\x00\x02", 1 << 48, 2 << 48),
        (bytes(7) + b"\x01" + bytes(7) + b"\x02", 1, 2),
        (bytes(range(20)), 0x0001020304050607, 0x0A0B0C0D0E0F1011),  # only the first 8 bytes of a half
        (b"\x01\x02\x03", 0x0100000000000000, 0x0203000000000000),  # the increment gets the odd byte
    ],
)
def test_from_bytes(buf: bytes, initial: int, increment: int) -> None:
    hasher = EnhancedDoubleHasher.from_bytes(buf)
    assert (hasher.initial, hasher.increment) == (initial, increment)


def test_from_bytes_empty_raises() -> None:
    with pytest.raises(ValueError):
        EnhancedDoubleHasher.from_bytes(b"")


def test_k_at_least_m_uses_the_wrapping_counter() -> None:
    # Hand-run of §4.2 with tet: idx 0; -1 -> 1 (inc 0, tet 0); 1 (inc 0, tet 1); 1 (inc 1, tet 0);
    # 0 (inc 1, tet 1); 1.
    assert EnhancedDoubleHasher(0, 1).indices(Shape.from_km(6, 2)) == [0, 1, 1, 1, 0, 1]


def test_m_equal_1_reproduces_the_upstream_counter_quirk() -> None:
    # tet starts at 1 == m, so ``++tet == m`` never resets it and inc goes negative: commons emits
    # index 1 for m = 1, and merging it fails. Bit-exactness means ports must do the same.
    assert EnhancedDoubleHasher(0, 0).indices(Shape.from_km(4, 1)) == [0, 0, 0, 1]
    with pytest.raises(ValueError):
        SimpleBloomFilter(Shape.from_km(4, 1)).merge(EnhancedDoubleHasher(0, 0))


@given(
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(1, 40),
    st.integers(2, 300),
)
def test_closed_form_and_range(h1: int, h2: int, k: int, m: int) -> None:
    shape = Shape.from_km(k, m)
    indices = EnhancedDoubleHasher(h1, h2).indices(shape)
    assert len(indices) == k
    assert all(0 <= i < m for i in indices)
    if k < m:
        assert indices == [(h1 - i * h2 + (i**3 - i) // 6) % m for i in range(k)]


def test_incrementing_hasher() -> None:
    assert FROM1.indices(S) == list(range(1, 18))
    assert FROM11.indices(S) == list(range(11, 28))
    assert IncrementingHasher(11, 2).indices(S) == list(range(11, 44, 2))
    assert IncrementingHasher(70, 1).indices(Shape.from_km(3, 72)) == [70, 71, 0]


# --- SimpleBloomFilter ------------------------------------------------------------------------------


def test_merge_contains_hasher_indices_and_filter() -> None:
    bf = SimpleBloomFilter(S)
    assert bf.is_empty()
    assert bf.merge(FROM1) is True
    assert bf.contains(FROM1)
    assert not bf.contains(FROM11)
    assert bf.contains([1, 17])
    assert not bf.contains([0])
    assert bf.cardinality() == 17
    assert bf.as_index_array() == list(range(1, 18))
    other = SimpleBloomFilter(S)
    other.merge([3, 4])
    assert bf.contains(other)
    other.merge([40])
    assert not bf.contains(other)
    bf.merge(other)
    assert bf.contains(other)
    assert bf.cardinality() == 18


def test_duplicate_indices_are_allowed() -> None:
    bf = SimpleBloomFilter(S)
    bf.merge([5, 5, 5])
    assert bf.as_index_array() == [5]


def test_out_of_range_index_raises() -> None:
    bf = SimpleBloomFilter(S)
    with pytest.raises(ValueError):
        bf.merge([1, 72])
    # Upstream sets bits while iterating: the index before the bad one stays set.
    assert bf.as_index_array() == [1]
    with pytest.raises(ValueError):
        bf.merge([-1])
    with pytest.raises(ValueError):
        bf.contains([0, 100])
    with pytest.raises(ValueError):
        bf.contains([-1])
    wide = SimpleBloomFilter(Shape.from_km(1, 200))
    wide.merge([150])
    with pytest.raises(ValueError):
        bf.merge(wide)
    assert bf.as_index_array() == [1]
    assert not bf.contains(wide)


def test_bit_words_layout() -> None:
    bf = SimpleBloomFilter(S)
    bf.merge([0, 63, 64, 71])
    assert bf.bit_words() == [1 | (1 << 63), 1 | (1 << 7)]
    assert bf.bits == (1 << 0) | (1 << 63) | (1 << 64) | (1 << 71)


def test_estimate_n() -> None:
    shape = Shape.from_km(3, 24)
    bf = SimpleBloomFilter(shape)
    assert bf.estimate_n() == 0
    bf.merge(range(12))
    assert bf.estimate_n() == 6  # 5.545 rounded half up
    bf.merge(range(24))
    assert bf.estimate_n() == INT_MAX  # inf


def test_estimate_n_nan_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    bf = SimpleBloomFilter(Shape.from_km(3, 24))
    monkeypatch.setattr(bf, "cardinality", lambda: 25)
    with pytest.raises(ValueError, match="Cardinality too large"):
        bf.estimate_n()


def test_copy_is_independent_and_clear() -> None:
    bf = SimpleBloomFilter(S)
    bf.merge(FROM1)
    cp = bf.copy()
    cp.merge([40])
    assert not bf.contains([40])
    assert cp.contains(FROM1)
    bf.clear()
    assert bf.is_empty()
    assert cp.cardinality() == 18


def test_process_indices_stops_at_first_false() -> None:
    bf = SimpleBloomFilter(S)
    bf.merge([2, 5, 9])
    seen: list[int] = []

    def below(limit: int) -> Callable[[int], bool]:
        def pred(i: int) -> bool:
            seen.append(i)
            return i < limit

        return pred

    assert bf.process_indices(below(100)) is True
    assert seen == [2, 5, 9]
    seen.clear()
    assert bf.process_indices(below(5)) is False
    assert seen == [2, 5]


# --- PQ-I3 (statistical) --------------------------------------------------------------------------


def _threshold(n_trials: int, p: float) -> float:
    return 1.15 * n_trials * p + 3 * math.sqrt(n_trials * p)


def test_pq_i3_thresholds_match_the_spec() -> None:
    n_trials = 64 * 20_000
    p50 = Shape.from_np(50, 0.01).probability(50)
    p100 = Shape.from_np(100, 0.01).probability(100)
    assert abs(_threshold(n_trials, p50) - 15_007.5) < 0.5
    assert abs(_threshold(n_trials, p100) - 15_081.2) < 0.5
    assert abs(_threshold(n_trials, 1 - (1 - p50) ** 2) - 29_669.2) < 0.5


def _false_positives(n: int, p: float, layers: int, sequential: bool, seeds: int, probes: int) -> int:
    """PQ-I3 sampling (fewer seeds and probes than the spec's stat profile, to stay fast)."""
    hits = 0
    for seed in range(seeds):
        rnd = random.Random(seed)
        filters = [SimpleBloomFilter(Shape.from_np(n, p)) for _ in range(layers)]
        inserted: set[int] = set()
        base = rnd.randrange(2**40) * 1000
        for layer_no, bf in enumerate(filters):
            for j in range(n):
                pid = base + layer_no * n + j if sequential else rnd.getrandbits(63)
                inserted.add(pid)
                bf.merge(default_pid_hasher(pid))
        probe = base + layers * n
        done = 0
        while done < probes:
            if sequential:
                pid, probe = probe, probe + 1
            else:
                pid = rnd.getrandbits(63)
            if pid in inserted:
                continue
            h = default_pid_hasher(pid)
            hits += any(bf.contains(h) for bf in filters)
            done += 1
    return hits


@pytest.mark.parametrize(
    ("n", "layers", "sequential"),
    [(50, 1, False), (50, 1, True), (100, 1, False), (100, 1, True), (50, 2, False)],
)
def test_pq_i3_false_positive_rate_is_within_bound(n: int, layers: int, sequential: bool) -> None:
    seeds, probes = 8, 4000
    p_n = Shape.from_np(n, 0.01).probability(n)
    p_l = 1 - (1 - p_n) ** layers
    hits = _false_positives(n, 0.01, layers, sequential, seeds, probes)
    assert 0 < hits <= _threshold(seeds * probes, p_l)
