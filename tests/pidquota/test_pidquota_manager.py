"""ProducerIdQuotaManager (spec §4.6, D1, D5, D6, PQ-I4b, PQ-I5, PQ-I6, PQ-I7) and configuration (§8)."""

from __future__ import annotations

import pytest

from reference_impl.pidquota import (
    KIP_DEFAULTS,
    THROTTLING_QUOTA_EXCEEDED,
    MetricConfig,
    ProduceOutcome,
    ProducerIdQuotaManager,
    ProducerIdQuotaManagerCache,
    Rate,
    Sensor,
    TokenBucket,
)

MIN = 60_000
W = 60 * MIN


def _d_manager(variant: str = "current", **kwargs: object) -> ProducerIdQuotaManager:
    """The D assumptions: W = 60 min, L = 2, fpp 0.01, Q = 100 PIDs/h, rate_permissive, start 0."""
    cache = ProducerIdQuotaManagerCache(W, 2, 0.01, variant=variant)  # type: ignore[arg-type]
    return ProducerIdQuotaManager(cache, default_quota=100, **kwargs)  # type: ignore[arg-type]


def _rate_events(sensor: Sensor | None) -> int:
    """Events recorded into a Rate sensor's samples (no sample is purged in these short scenarios)."""
    assert sensor is not None
    rate = sensor.stats[0][0]
    assert isinstance(rate, Rate)
    return sum(s.event_count for s in rate.stat.slots)


class CountingStat:
    """A stat without quota that counts record() calls, added next to the quota stat (PQ-I6)."""

    def __init__(self) -> None:
        self.records: list[float] = []

    def record(self, config: MetricConfig, value: float, now: int) -> None:
        self.records.append(value)

    def measure(self, config: MetricConfig, now: int) -> float:
        return float(len(self.records))


# --- worked examples ---------------------------------------------------------------------------------


def test_d1_new_then_hit() -> None:
    manager = _d_manager()
    assert manager.on_produce("A", [42], 0) == ProduceOutcome(0, False, (42,), None)
    assert _rate_events(manager.sensor_of("A")) == 1
    assert manager.on_produce("A", [42], 10 * MIN) == ProduceOutcome(0, False, (), None)
    assert _rate_events(manager.sensor_of("A")) == 1
    entry = manager.cache.entry_of("A")
    assert entry is not None
    assert (entry.shape.k, entry.shape.m, entry.n_layer) == (7, 480, 50)


def test_d5_idle_principal_removed_and_counted_again() -> None:
    manager = _d_manager()
    manager.on_produce("B", [7], 0)
    manager.maybe_clean(60 * MIN)
    assert manager.cache.principals() == ["B"]  # 60 < 60 is false
    manager.maybe_clean(90 * MIN)
    assert manager.cache.principals() == []
    assert manager.next_cleanup_ms == 120 * MIN
    assert manager.on_produce("B", [7], 95 * MIN).new_pids == (7,)
    assert _rate_events(manager.sensor_of("B")) == 2


def _d6(variant: str) -> tuple[list[int], list[int], dict[int, int]]:
    manager = _d_manager(variant)
    new_at, readd_at, depth = [], [], {}
    readds = 0
    for minute in range(0, 181, 10):
        outcome = manager.on_produce("A", [424242], minute * MIN)
        if outcome.new_pids:
            new_at.append(minute)
        entry = manager.cache.entry_of("A")
        assert entry is not None
        if entry.readds > readds:
            readd_at.append(minute)
            readds = entry.readds
        depth[minute] = len(manager.cache.layers_of("A"))
    assert _rate_events(manager.sensor_of("A")) == len(new_at)
    return new_at, readd_at, depth


def test_d6_current() -> None:
    new_at, readd_at, depth = _d6("current")
    assert new_at == [0]
    assert readd_at == [40, 80, 120, 160]
    expected = {m: 1 if m <= 30 else 2 if m <= 140 else 1 if m == 150 else 2 for m in range(0, 181, 10)}
    assert depth == expected


def test_d6_no_readd() -> None:
    new_at, readd_at, _ = _d6("no_readd")
    assert new_at == [0, 90, 180]
    assert readd_at == []


# --- request handling --------------------------------------------------------------------------------


def test_unlimited_principal_does_not_touch_cache_or_sensors() -> None:
    cache = ProducerIdQuotaManagerCache(W, 2)
    manager = ProducerIdQuotaManager(cache, quotas={"A": 100})
    assert manager.quota_of("U") is None
    assert manager.on_produce("U", [1, 2], 0) == ProduceOutcome(0, False, (), None)
    assert cache.principals() == []
    assert manager.sensor_of("U") is None
    manager.on_produce("U", [1], 90 * MIN)
    assert manager.next_cleanup_ms == 120 * MIN  # the cleanup schedule still ran


def test_quota_resolution_prefers_the_user_entry() -> None:
    manager = ProducerIdQuotaManager(ProducerIdQuotaManagerCache(W, 2), quotas={"A": 10}, default_quota=100)
    assert (manager.quota_of("A"), manager.quota_of("B")) == (10, 100)
    manager.on_produce("A", [1], 0)
    manager.on_produce("B", [1], 0)
    a, b = manager.cache.entry_of("A"), manager.cache.entry_of("B")
    assert a is not None and b is not None
    assert (a.n_layer, b.n_layer) == (5, 50)


def test_per_second_unit_conversion() -> None:
    manager = ProducerIdQuotaManager(ProducerIdQuotaManagerCache(W, 2), default_quota=1, rate_unit="per_second")
    assert manager.pids_per_hour("A") == 3600
    manager.on_produce("A", [1], 0)
    entry = manager.cache.entry_of("A")
    sensor = manager.sensor_of("A")
    assert entry is not None and sensor is not None
    assert entry.n_layer == 1800
    config = sensor.stats[0][1]
    assert config.quota is not None and config.quota.bound == 1.0
    assert (config.samples, config.time_window_ms) == (11, 3_600_000)


def test_distinct_pids_in_first_appearance_order_and_one_record_each() -> None:
    manager = _d_manager()
    manager.on_produce("A", [], 0)  # creates the sensor, records nothing
    sensor = manager.sensor_of("A")
    assert sensor is not None
    spy = CountingStat()
    sensor.stats.append((spy, MetricConfig()))
    assert manager.on_produce("A", [3, 1, 3, 2, 1], 0).new_pids == (3, 1, 2)
    assert manager.on_produce("A", [2, 4, 3], 1).new_pids == (4,)
    assert spy.records == [1, 1, 1, 1]  # PQ-I6: one record(1) per track that returned False


def _small_rate_manager(max_throttle_ms: int | None = None) -> ProducerIdQuotaManager:
    """1 PID/s, 2 samples of 1 s: a fresh window is 1000 ms long."""
    return ProducerIdQuotaManager(
        ProducerIdQuotaManagerCache(W, 2),
        default_quota=1,
        rate_unit="per_second",
        window_num=2,
        window_size_ms=1000,
        max_throttle_ms=max_throttle_ms,
    )


def test_pq_i7_rate_permissive_throttle() -> None:
    manager = _small_rate_manager()
    # 3 PIDs in a 1000 ms window at 1/s: N/Q - W_eff = 3000 - 1000 = 2000 (the max over the records).
    assert manager.on_produce("A", [1, 2, 3], 0) == ProduceOutcome(2000, False, (1, 2, 3), None)
    assert manager.on_produce("A", [1, 2, 3], 10) == ProduceOutcome(0, False, (), None)  # hits: no record
    assert _small_rate_manager(1500).on_produce("A", [1, 2, 3], 0).throttle_time_ms == 1500


def test_pq_i7_ci_profile_throttle() -> None:
    # 100 PIDs/h over 11 x 3600 s: the fresh window is 10 h, so the 1001st new PID is the first over
    # the quota; throttle = N/Q - W_eff = 1001 · 36 s - 36,000 s = 36,000 ms. PIDs are sent one per
    # request until 1001 were new (the overloaded filter has many layers, so some PIDs are false hits).
    manager = _d_manager()
    throttles: list[int] = []
    pid = 0
    while len(throttles) < 1001:
        outcome = manager.on_produce("A", [pid], 0)
        pid += 1
        if outcome.new_pids:
            throttles.append(outcome.throttle_time_ms)
        else:
            assert outcome.throttle_time_ms == 0
    assert throttles[:1000] == [0] * 1000
    assert throttles[1000] == 36_000


def _strict_manager() -> ProducerIdQuotaManager:
    """1 PID/s, burst 2 tokens (2 samples x 1 s); scenarios start at t >= window_num·window_size_ms."""
    return ProducerIdQuotaManager(
        ProducerIdQuotaManagerCache(W, 2),
        default_quota=1,
        rate_unit="per_second",
        enforcement="token_strict",
        window_num=2,
        window_size_ms=1000,
    )


def test_token_strict_rejects_and_neither_tracks_nor_records() -> None:
    manager = _strict_manager()
    t0 = 10_000
    outcome = manager.on_produce("A", [1, 2, 3, 4, 5], t0)
    # tokens 2 -> 1 -> 0 -> -1 (accepted into debt), then PID 4 finds the bucket negative.
    assert outcome == ProduceOutcome(1000, True, (1, 2, 3), THROTTLING_QUOTA_EXCEEDED)
    sensor = manager.sensor_of("A")
    assert sensor is not None
    bucket = sensor.stats[0][0]
    assert isinstance(bucket, TokenBucket)
    assert bucket.tokens == -1
    assert [manager.cache.is_seen("A", pid, t0) for pid in (1, 2, 3, 4, 5)] == [True, True, True, False, False]
    # A hit does not consume a token; the unseen PID 4 is still rejected half a second later.
    assert manager.on_produce("A", [1, 4], t0 + 500) == ProduceOutcome(500, True, (), THROTTLING_QUOTA_EXCEEDED)
    assert bucket.tokens == -0.5
    assert manager.on_produce("A", [4], t0 + 1000) == ProduceOutcome(0, False, (4,), None)
    assert bucket.tokens == -1


def test_token_strict_hit_may_readd() -> None:
    manager = ProducerIdQuotaManager(ProducerIdQuotaManagerCache(W, 2), default_quota=100, enforcement="token_strict")
    t0 = 11 * 3_600_000
    manager.on_produce("A", [9], t0)
    assert manager.on_produce("A", [9], t0 + 40 * MIN).new_pids == ()
    entry = manager.cache.entry_of("A")
    assert entry is not None and entry.readds == 1


def test_cleanup_schedule_and_clock() -> None:
    cache = ProducerIdQuotaManagerCache(60, 2)
    manager = ProducerIdQuotaManager(cache, default_quota=100, start_ms=5)
    assert manager.next_cleanup_ms == 65
    manager.maybe_clean(64)
    assert cache.now is None
    manager.maybe_clean(130)  # runs at 65, 95, 125
    assert cache.now == 125
    assert manager.next_cleanup_ms == 155
    with pytest.raises(ValueError, match="backwards"):
        manager.on_produce("A", [1], 129)


def test_cleanup_runs_before_a_produce_at_the_same_instant() -> None:
    manager = _d_manager()
    manager.on_produce("A", [1], 0)
    assert manager.on_produce("A", [1], 90 * MIN).new_pids == (1,)  # A was removed at 90 first


@pytest.mark.parametrize(
    "kwargs",
    [
        {"quotas": {"A": 0}},
        {"default_quota": -1},
        {"enforcement": "strict"},
        {"rate_unit": "per_minute"},
        {"window_num": 0},
        {"window_size_ms": 0},
    ],
)
def test_invalid_manager_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ProducerIdQuotaManager(ProducerIdQuotaManagerCache(W, 2), **kwargs)  # type: ignore[arg-type]


def test_pq_i4b_depth_bound_within_quota() -> None:
    """D = 25 distinct PIDs per ΔT (2·D <= n_layer = 50), manager cleanups: depth <= 2L + 3."""
    manager = _d_manager()
    max_depth = 0
    for step in range(200):
        t = step * 3 * MIN
        pids = [1000 * (step // 10) + i for i in range(25)] if step % 10 == 0 else [7]
        manager.on_produce("A", pids, t)
        max_depth = max(max_depth, len(manager.cache.layers_of("A")))
    assert 2 <= max_depth <= 2 * 2 + 3


# --- §8 configuration --------------------------------------------------------------------------------


def test_kip_config_defaults() -> None:
    manager = ProducerIdQuotaManager.from_kip_configs()
    assert (manager.window_num, manager.window_size_ms) == (11, 3_600_000)
    cache = manager.cache
    assert (cache.window_ms, cache.layer_count, cache.false_positive_rate) == (3_600_000, 4, 0.01)
    assert (manager.enforcement, manager.rate_unit, manager.default_quota) == ("rate_permissive", "per_hour", None)
    assert manager.next_cleanup_ms == 3_600_000
    assert KIP_DEFAULTS["producer.id.quota.cache.cleanup.scheduler.interval.ms"] == 10
    # the defaults of the plain constructors agree with §8
    plain = ProducerIdQuotaManager(ProducerIdQuotaManagerCache(3_600_000))
    assert (plain.window_num, plain.window_size_ms, plain.cache.layer_count) == (11, 3_600_000, 4)


def test_kip_config_mapping() -> None:
    manager = ProducerIdQuotaManager.from_kip_configs(
        {
            "producer.id.quota.window.num": 5,
            "producer.id.quota.window.size.seconds": 60,
            "producer.id.quota.cache.layer.count": 3,
            "producer.id.quota.cache.false.positive.rate": 0.001,
            "producer.id.quota.cache.cleanup.scheduler.interval.ms": 99_999,
        },
        {"<default>": 7, "alice": 3},
        variant="no_readd",
    )
    assert (manager.window_num, manager.window_size_ms) == (5, 60_000)
    cache = manager.cache
    assert (cache.window_ms, cache.layer_count, cache.delta_t) == (60_000, 3, 20_000)
    assert (cache.false_positive_rate, cache.variant) == (0.001, "no_readd")
    assert (manager.quota_of("alice"), manager.quota_of("bob")) == (3, 7)
    assert manager.next_cleanup_ms == 60_000  # the scheduler interval is not used


def test_kip_config_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match=r"producer\.id\.quota\.window\.sizes"):
        ProducerIdQuotaManager.from_kip_configs({"producer.id.quota.window.sizes": 1})


def test_sensor_stat_follows_enforcement() -> None:
    rate = _d_manager()
    rate.on_produce("A", [1], 0)
    strict = _strict_manager()
    strict.on_produce("A", [1], 10_000)
    rate_sensor, strict_sensor = rate.sensor_of("A"), strict.sensor_of("A")
    assert rate_sensor is not None and strict_sensor is not None
    assert isinstance(rate_sensor.stats[0][0], Rate)
    assert isinstance(strict_sensor.stats[0][0], TokenBucket)
