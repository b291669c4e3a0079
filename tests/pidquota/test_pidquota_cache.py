"""ProducerIdQuotaManagerCache (spec §3, §4.5, PQ-I1, PQ-I4, PQ-I5, PQ-I8, PQ-I10)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_impl.pidquota import (
    IncrementingHasher,
    ProducerIdQuotaManagerCache,
    Shape,
    TimestampedLayer,
)

MIN = 60_000
W = 60 * MIN
RATE = 100.0  # PIDs per hour: n_layer = 50 with W = 60 min, L = 2


def _cache(**kwargs: object) -> ProducerIdQuotaManagerCache:
    return ProducerIdQuotaManagerCache(W, 2, **kwargs)  # type: ignore[arg-type]


# --- construction and sizing -------------------------------------------------------------------------


def test_defaults_and_derived_values() -> None:
    cache = ProducerIdQuotaManagerCache(W)
    assert (cache.layer_count, cache.false_positive_rate, cache.variant) == (4, 0.01, "current")
    assert cache.delta_t == 15 * MIN
    assert _cache().delta_t == 30 * MIN
    assert cache.now is None
    assert cache.principals() == []


@pytest.mark.parametrize(
    ("window_ms", "layer_count", "fpp", "variant"),
    [
        (W, 1, 0.01, "current"),
        (61, 2, 0.01, "current"),
        (0, 2, 0.01, "current"),
        (W, 2, 0.0, "current"),
        (W, 2, 1.0, "current"),
        (W, 2, math.nan, "current"),
        (W, 2, 0.01, "bogus"),
    ],
)
def test_invalid_configuration(window_ms: int, layer_count: int, fpp: float, variant: str) -> None:
    with pytest.raises(ValueError):
        ProducerIdQuotaManagerCache(window_ms, layer_count, fpp, variant=variant)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("window_ms", "layer_count", "rate", "n_layer"),
    [
        (W, 2, 100, 50),
        (W, 4, 10, 3),  # 2.5 rounds half up
        (W, 4, 9.9, 2),
        (W, 2, 1, 1),
        (W, 2, 0.1, 1),  # max(1, 0)
        (60, 2, 3 * 2 * MIN, 3),  # the "small" profile: W = 60 ms
        (3_600_000, 4, 1000, 250),
    ],
)
def test_layer_size(window_ms: int, layer_count: int, rate: float, n_layer: int) -> None:
    assert ProducerIdQuotaManagerCache(window_ms, layer_count).layer_size(rate) == n_layer


@pytest.mark.parametrize("rate", [0, -1, math.nan])
def test_layer_size_rejects_non_positive_rates(rate: float) -> None:
    cache = _cache()
    with pytest.raises(ValueError):
        cache.layer_size(rate)
    with pytest.raises(ValueError):
        cache.track("A", rate, 1, 0)
    assert cache.principals() == []
    assert cache.now is None


# --- entry creation and track ------------------------------------------------------------------------


def test_entry_creation() -> None:
    cache = _cache()
    assert cache.track("A", RATE, 42, 5) is False
    entry = cache.entry_of("A")
    assert entry is not None
    assert (entry.shape, entry.n_layer) == (Shape(7, 480), 50)
    assert entry.next_rotation == 5 + 30 * MIN
    assert entry.count_check.count == 1
    assert (entry.merges, entry.readds) == (1, 0)
    assert cache.layers_of("A") == [(5, 5 + W, 7)]
    layer = cache.filter_of("A").get(0)  # type: ignore[union-attr]
    assert isinstance(layer, TimestampedLayer)
    assert cache.is_seen("A", 42, 5)
    assert cache.track("A", 1_000_000.0, 42, 6) is True  # the rate of a later call does not resize
    assert entry.n_layer == 50
    assert cache.entry_of("B") is None and cache.filter_of("B") is None and cache.layers_of("B") == []


def test_track_new_hit_and_recency_boundary() -> None:
    cache = _cache()
    cache.track("A", RATE, 42, 0)
    entry = cache.entry_of("A")
    assert entry is not None
    assert cache.track("A", RATE, 42, 30 * MIN) is True  # created 0 >= 30 - 30: recent, no merge
    assert entry.merges == 1
    assert cache.track("A", RATE, 42, 30 * MIN + 1) is True  # not recent: re-added
    assert (entry.merges, entry.readds) == (2, 1)
    assert cache.track("A", RATE, 42, 31 * MIN) is True  # now in a layer created at 30 min + 1
    assert (entry.merges, entry.readds) == (2, 1)


def test_readd_goes_into_the_target_and_may_rotate() -> None:
    cache = _cache()
    cache.track("A", RATE, 42, 0)
    cache.track("A", RATE, 43, 10 * MIN)
    assert [(c, e) for c, e, _ in cache.layers_of("A")] == [(0, W)]
    cache.track("A", RATE, 42, 31 * MIN)  # timer due (31 >= 30): rotation, then the re-add
    layers = cache.layers_of("A")
    assert [(c, e) for c, e, _ in layers] == [(0, W), (31 * MIN, 31 * MIN + W)]
    lbf = cache.filter_of("A")
    assert lbf is not None
    assert lbf.find(cache.pid_hasher(42)) == [0, 1]
    assert lbf.find(cache.pid_hasher(43)) == [0]


def test_n_layer_one_rotates_on_every_merge_and_drops_the_empty_first_layer() -> None:
    cache = ProducerIdQuotaManagerCache(60, 2)
    rate = 2 * MIN  # n_layer = round(2·60000·60/3600000/2) = 1
    assert cache.layer_size(rate) == 1
    cache.track("A", rate, 1, 0)
    assert len(cache.layers_of("A")) == 1  # layer 0 was empty at the rotation and removed
    assert cache.layers_of("A")[0][2] > 0
    cache.track("A", rate, 2, 0)
    assert len(cache.layers_of("A")) == 2


def test_count_rotation_does_not_reset_the_timer_and_timer_only_consulted_when_count_says_no() -> None:
    cache = ProducerIdQuotaManagerCache(60, 2, pid_hasher=lambda pid: IncrementingHasher(pid, 1))
    rate = 2 * 2 * MIN  # n_layer 2
    cache.track("A", rate, 1, 0)  # count 1; next_rotation 30
    entry = cache.entry_of("A")
    assert entry is not None
    cache.track("A", rate, 10, 40)  # count reaches 2: rotates by count; the due timer is not consulted
    assert entry.next_rotation == 30
    assert len(cache.layers_of("A")) == 2
    cache.track("A", rate, 13, 41)  # count 1 (no), timer 41 >= 30: rotates and re-arms
    assert entry.next_rotation == 71
    assert [c for c, _, _ in cache.layers_of("A")] == [0, 40, 41]


def test_pq_i1_example_forgotten_beyond_the_horizon() -> None:
    """A PID merged at 29 min into a layer created at 0 is gone after a rotation at 61 (W = 60, L = 2)."""
    cache = _cache()
    cache.track("A", RATE, 1, 0)
    cache.track("A", RATE, 2, 29 * MIN)
    assert cache.is_seen("A", 2, 59 * MIN)  # within 29 + H = 59
    cache.track("A", RATE, 3, 61 * MIN)  # the timer rotates, the layer created at 0 (expires 60) goes
    assert [c for c, _, _ in cache.layers_of("A")] == [61 * MIN]
    assert not cache.is_seen("A", 2, 61 * MIN)
    assert cache.track("A", RATE, 2, 62 * MIN) is False


def test_is_seen_is_pure() -> None:
    cache = _cache()
    cache.track("A", RATE, 1, 0)
    entry = cache.entry_of("A")
    assert entry is not None
    before = (cache.layers_of("A"), entry.merges, entry.next_rotation, entry.count_check.count)
    assert cache.is_seen("A", 1, 100 * MIN)  # the layer expired at 60 but no cleanup ran: still seen
    assert not cache.is_seen("A", 2, 100 * MIN)
    assert not cache.is_seen("B", 1, 100 * MIN)
    assert (cache.layers_of("A"), entry.merges, entry.next_rotation, entry.count_check.count) == before
    assert cache.principals() == ["A"]
    assert cache.now == 100 * MIN


def test_time_must_not_go_backwards() -> None:
    cache = _cache()
    cache.track("A", RATE, 1, 100)
    for call in (
        lambda: cache.track("A", RATE, 2, 99),
        lambda: cache.is_seen("A", 1, 99),
        lambda: cache.clean_map(99),
    ):
        with pytest.raises(ValueError, match="backwards"):
            call()
    assert cache.layers_of("A") == [(100, 100 + W, 7)]
    assert cache.track("A", RATE, 1, 100) is True  # equal time is fine


# --- clean_map ---------------------------------------------------------------------------------------


def test_clean_map_removes_idle_principals_in_insertion_order() -> None:
    cache = _cache()
    cache.track("B", RATE, 7, 0)
    cache.track("A", RATE, 8, 0)
    cache.track("C", RATE, 9, 40 * MIN)
    assert cache.clean_map(60 * MIN) == []  # 60 < 60 is false: kept (D5)
    assert cache.clean_map(90 * MIN) == ["B", "A"]
    assert cache.principals() == ["C"]
    assert cache.clean_map(100 * MIN) == []  # C's layer expires at 100: 100 < 100 is false
    assert cache.clean_map(100 * MIN + 1) == ["C"]


def test_clean_map_keeps_principals_with_live_layers_and_drops_expired_heads() -> None:
    cache = _cache()
    cache.track("A", RATE, 1, 0)
    cache.track("A", RATE, 2, 40 * MIN)  # timer rotation: layers created 0 and 40
    assert cache.clean_map(61 * MIN) == []
    assert [c for c, _, _ in cache.layers_of("A")] == [40 * MIN]
    assert cache.is_seen("A", 2, 61 * MIN) and not cache.is_seen("A", 1, 61 * MIN)


def test_pq_i8_principal_isolation() -> None:
    cache = _cache()
    cache.track("A", RATE, 1, 0)
    cache.track("B", RATE, 1, 0)
    b = cache.entry_of("B")
    assert b is not None
    snapshot = (cache.layers_of("B"), b.next_rotation, b.count_check.count, b.merges)
    for t in range(1, 200):
        cache.track("A", RATE, t, t * MIN)
    assert len(cache.layers_of("A")) > 1
    assert (cache.layers_of("B"), b.next_rotation, b.count_check.count, b.merges) == snapshot


# --- properties over random traces (small profile) ---------------------------------------------------

step = st.tuples(
    st.integers(0, 40),  # time advance (ms)
    st.sampled_from(["A", "B"]),
    st.integers(0, 5),  # pid
    st.booleans(),  # also run clean_map at this time
)


@given(st.sampled_from([2, 3]), st.integers(1, 3), st.lists(step, max_size=40))
def test_pq_i1_pq_i4a_pq_i10_hold_on_random_traces(
    layer_count: int, n_layer: int, steps: list[tuple[int, str, int, bool]]
) -> None:
    """Current variant, W = 60 ms: no false negative within H, whatever the cleanup timing; at most two
    merges per PID in any ΔT; created times non-decreasing."""
    cache = ProducerIdQuotaManagerCache(60, layer_count)
    rate = n_layer * layer_count * MIN
    assert cache.layer_size(rate) == n_layer
    horizon = cache.window_ms - cache.delta_t
    last_seen: dict[tuple[str, int], int] = {}
    merges: dict[tuple[str, int], list[int]] = {}
    now = 0
    for advance, principal, pid, clean in steps:
        now += advance
        if clean:
            cache.clean_map(now)
        entry = cache.entry_of(principal)
        merges_before = entry.merges if entry is not None else 0
        seen = cache.track(principal, rate, pid, now)
        key = (principal, pid)
        if key in last_seen and now <= last_seen[key] + horizon:
            assert seen, f"PQ-I1: {key} tracked at {last_seen[key]} forgotten at {now}"
        last_seen[key] = now
        entry = cache.entry_of(principal)
        assert entry is not None
        if entry.merges > merges_before:
            merges.setdefault(key, []).append(now)
            recent = [t for t in merges[key] if t >= now - cache.delta_t]
            assert len(recent) <= 2, f"PQ-I4a: {key} merged at {recent}"
        created = [c for c, _, _ in cache.layers_of(principal)]
        assert created == sorted(created) and len(created) >= 1
