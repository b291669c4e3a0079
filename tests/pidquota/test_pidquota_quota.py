"""Kafka Rate / TokenBucket / Sensor / throttle times (spec §4.4, K1, K5, K6)."""

from __future__ import annotations

import pytest

from reference_impl.pidquota import (
    MetricConfig,
    PermissiveTokenQuota,
    Quota,
    QuotaViolation,
    Rate,
    Sensor,
    StrictTokenQuota,
    ThrottlingQuotaExceeded,
    TokenBucket,
    WindowedSum,
    bounded_throttle_time,
    throttle_time,
    token_throttle_time,
)
from reference_impl.pidquota.bloom import LONG_MAX


def _permissive_record(sensor: Sensor, value: float, now: int) -> int:
    """ClientQuotaManager.recordAndGetThrottleTimeMs."""
    try:
        sensor.record(value, now)
    except QuotaViolation as v:
        return throttle_time(v, now)
    return 0


def test_k1_fresh_window_throttle() -> None:
    rate = Rate()
    config = MetricConfig(samples=3, time_window_ms=1000, quota=Quota(50))
    sensor = Sensor([(rate, config)])
    with pytest.raises(QuotaViolation) as info:
        sensor.record(200, 0)
    v = info.value
    assert (v.value, v.bound) == (100, 50)
    assert v.stat is rate and v.config is config
    assert rate.window_size(config, 0) == 2000
    assert throttle_time(v, 0) == 2000
    assert bounded_throttle_time(v, 500, 0) == 500
    assert bounded_throttle_time(v, 5000, 0) == 2000


def test_k5_rate_spike_and_recovery() -> None:
    sensor = Sensor([(Rate(), MetricConfig(samples=11, time_window_ms=1000, quota=Quota(500)))])
    for t in range(0, 10_000, 1000):
        assert _permissive_record(sensor, 400, t) == 0
    # 400·10 + 2300 = 6300 B over 10.5 s = 600 B/s: (600 - 500)/500 · 10,500 = 2100.
    assert _permissive_record(sensor, 2300, 10_500) == 2100
    throttles = [_permissive_record(sensor, 400, t) for t in range(12_600, 21_601, 1000)]
    assert max(throttles) > 0  # "could continue to see delays until the bursty sample disappears"
    assert _permissive_record(sensor, 0, 22_600) == 0


def test_k6_strict_token_bucket() -> None:
    t0 = 1_000_000
    bucket = TokenBucket()
    sensor = Sensor([(bucket, MetricConfig(samples=10, time_window_ms=1000, quota=Quota(10)))])
    quota = StrictTokenQuota(sensor)
    quota.record(90, t0)
    assert bucket.tokens == 10
    quota.record(90, t0)
    assert bucket.tokens == -80
    assert quota.throttle_time(t0) == 0  # accepted into debt, no throttle
    with pytest.raises(ThrottlingQuotaExceeded) as info:
        quota.record(90, t0)
    assert info.value.throttle_ms == 8000
    assert bucket.tokens == -80  # not recorded
    assert (quota.last_throttle_ms, quota.last_recorded_ms) == (8000, t0)
    assert quota.throttle_time(t0 + 5000) == 3000
    assert quota.throttle_time(t0 + 9000) == 0


def test_permissive_token_quota_records_and_never_raises() -> None:
    t0 = 1_000_000
    bucket = TokenBucket()
    quota = PermissiveTokenQuota(Sensor([(bucket, MetricConfig(10, 1000, Quota(10)))]))
    quota.record(90, t0)
    assert quota.throttle_time(t0) == 0
    quota.record(90, t0)  # -80 after recording: violation, but recorded and not raised
    assert bucket.tokens == -80
    assert quota.throttle_time(t0) == 8000
    assert quota.throttle_time(t0 + 1000) == 7000


def test_token_bucket_starts_empty_at_time_zero() -> None:
    config = MetricConfig(samples=10, time_window_ms=1000, quota=Quota(10))  # burst 100
    early = TokenBucket()
    assert early.measure(config, 1000) == 10  # refilled for 1 s since last_update_ms = 0
    late = TokenBucket()
    assert late.measure(config, 10_000) == 100
    assert late.measure(config, 50_000) == 100  # capped at the burst
    late.record(config, 30, 50_000)
    assert (late.tokens, late.last_update_ms) == (70, 50_000)
    late.record(config, -500, 50_000)  # a negative record cannot exceed the burst either
    assert late.tokens == 100


def test_token_bucket_without_quota() -> None:
    bucket = TokenBucket()
    config = MetricConfig()
    bucket.record(config, 5, 100)
    assert (bucket.tokens, bucket.last_update_ms) == (0, 0)
    assert bucket.measure(config, 100) == float(LONG_MAX)


def test_windowed_sum_uses_samples_plus_one_slots() -> None:
    config = MetricConfig(samples=2, time_window_ms=1000)
    ws = WindowedSum()
    for t in (0, 1000, 2000, 3000):
        ws.record(config, 1, t)
    assert len(ws.slots) == 3
    assert ws.current == 0  # wrapped round to the first slot, which was reset at 3000
    assert [(s.start_ms, s.value) for s in ws.slots] == [(3000, 1), (1000, 1), (2000, 1)]
    assert ws.measure(config, 3000) == 2  # the 1000 sample's last event is 2000 = S·Wd old: purged
    assert ws.slots[1].start_ms == 3000


def test_windowed_sum_event_window_closes_a_sample() -> None:
    config = MetricConfig(samples=2, time_window_ms=1000, event_window=2)
    ws = WindowedSum()
    for _ in range(3):
        ws.record(config, 1, 0)
    assert [(s.event_count, s.start_ms) for s in ws.slots] == [(2, 0), (1, 0)]
    assert ws.current == 1


def test_purge_by_last_event_and_oldest_tie() -> None:
    config = MetricConfig(samples=2, time_window_ms=1000)
    ws = WindowedSum()
    ws.record(config, 5, 0)
    ws.record(config, 5, 900)  # same sample: start 0, last event 900
    ws.record(config, 5, 1500)  # second sample
    ws.purge(config, 2000)  # by last event (Kafka >= 3.8): 2000 - 900 < 2000 -> kept, though started at 0
    assert [(s.value, s.start_ms, s.last_event_ms) for s in ws.slots] == [(10, 0, 900), (5, 1500, 1500)]
    ws.purge(config, 2900)
    assert [(s.value, s.start_ms, s.last_event_ms) for s in ws.slots] == [(0, 2900, 2900), (5, 1500, 1500)]
    assert ws.measure(config, 3499) == 5
    assert ws.measure(config, 3500) == 0
    assert ws.measure(config, 10_000) == 0  # both reset to start 10,000
    assert ws.current == 1
    assert ws.oldest(10_000) is ws.slots[0]  # a tie on start: the first in list order wins


def test_rate_window_size_floor_of_one_ms() -> None:
    rate = Rate()
    config = MetricConfig(samples=1, time_window_ms=1000)
    rate.record(config, 5, 0)
    assert rate.window_size(config, 0) == 1
    assert rate.measure(config, 0) == 5000


def test_rate_window_size_counts_elapsed_beyond_min_windows() -> None:
    rate = Rate()
    config = MetricConfig(samples=3, time_window_ms=1000)
    rate.record(config, 1, 0)
    assert rate.window_size(config, 500) == 2500  # 500 elapsed + 2 missing full windows
    assert rate.window_size(config, 2700) == 2700
    assert rate.window_size(config, 1000) == 2000  # 1 full window + 1 missing


def test_sensor_checks_each_quota_in_order_and_raises_the_first() -> None:
    low = Rate()
    high = Rate()
    sensor = Sensor([(high, MetricConfig(3, 1000, Quota(1000))), (low, MetricConfig(3, 1000, Quota(1)))])
    with pytest.raises(QuotaViolation) as info:
        sensor.record(10, 0)
    assert info.value.stat is low
    assert high.stat.slots[0].value == 10  # recorded into every stat before checking
    sensor.record(10, 0, check_quotas=False)
    assert low.stat.slots[0].value == 20


def test_lower_bound_quota() -> None:
    assert Quota(5, upper=False).acceptable(5)
    assert not Quota(5, upper=False).acceptable(4.9)
    assert Quota(5).acceptable(5)
    assert not Quota(5).acceptable(5.1)
    sensor = Sensor([(Rate(), MetricConfig(1, 1000, Quota(10_000, upper=False)))])
    with pytest.raises(QuotaViolation):
        sensor.record(1, 0)  # 1000/s < 10,000/s


def test_throttle_time_is_negative_below_the_quota() -> None:
    rate = Rate()
    config = MetricConfig(3, 1000, Quota(50))
    assert throttle_time(QuotaViolation(rate, config, 25, 50), 0) == -1000


def test_throttle_formulas_reject_the_wrong_stat() -> None:
    config = MetricConfig(3, 1000, Quota(50))
    with pytest.raises(ValueError):
        throttle_time(QuotaViolation(TokenBucket(), config, -5, 50), 0)
    with pytest.raises(ValueError):
        token_throttle_time(QuotaViolation(Rate(), config, 100, 50))
    assert token_throttle_time(QuotaViolation(TokenBucket(), config, -0.0125, 10)) == 1  # 1.25 ms -> 1
    assert token_throttle_time(QuotaViolation(TokenBucket(), config, -0.015, 10)) == 2  # 1.5 ms -> 2
