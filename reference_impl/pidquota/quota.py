"""Kafka quota machinery: WindowedSum / Rate / TokenBucket, Sensor, throttle times, token quotas.

Spec: ``docs/spec/pidquota.md`` (the quota sensors). Sample semantics are
Kafka >= 3.8 (PR #15889: ``samples + 1`` slots, purge by the last event of a sample).

How a harness reads the state without changing it:

* ``WindowedSum.slots`` (list of ``Sample(value, event_count, start_ms, last_event_ms)``) and
  ``WindowedSum.current``; a ``Rate`` keeps its sum in ``Rate.stat``;
* ``TokenBucket.tokens`` and ``TokenBucket.last_update_ms``;
* ``Sensor.stats`` (the ``(stat, config)`` pairs);
* ``StrictTokenQuota`` / ``PermissiveTokenQuota``: ``last_throttle_ms`` and ``last_recorded_ms``.

``measure`` and ``window_size`` are *not* pure, exactly as in Kafka: they purge obsolete samples, may
append a first sample, and refill the token bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from reference_impl.pidquota.bloom import LONG_MAX, round_half_up


@dataclass(frozen=True)
class Quota:
    """An upper (``value <= bound``) or lower (``value >= bound``) bound on a measured value."""

    bound: float
    upper: bool = True

    def acceptable(self, value: float) -> bool:
        return value <= self.bound if self.upper else value >= self.bound


@dataclass(frozen=True)
class MetricConfig:
    samples: int = 11
    time_window_ms: int = 1000
    quota: Quota | None = None
    event_window: int = 2**63 - 1


class Stat(Protocol):
    def record(self, config: MetricConfig, value: float, now: int) -> None: ...

    def measure(self, config: MetricConfig, now: int) -> float: ...


@dataclass
class Sample:
    value: float
    event_count: int
    start_ms: int
    last_event_ms: int

    @classmethod
    def new(cls, now: int) -> Sample:
        return cls(0.0, 0, now, now)

    def reset(self, now: int) -> None:
        self.value, self.event_count, self.start_ms, self.last_event_ms = 0.0, 0, now, now

    def is_complete(self, now: int, config: MetricConfig) -> bool:
        return now - self.start_ms >= config.time_window_ms or self.event_count >= config.event_window


class WindowedSum:
    """Kafka ``WindowedSum``: at most ``samples + 1`` slots used round-robin; the extra slot keeps the
    sample that overlaps the start of the window."""

    def __init__(self) -> None:
        self.slots: list[Sample] = []
        self.current = 0

    def current_sample(self, now: int) -> Sample:
        if not self.slots:
            self.slots.append(Sample.new(now))
        return self.slots[self.current]

    def record(self, config: MetricConfig, value: float, now: int) -> None:
        sample = self.current_sample(now)
        if sample.is_complete(now, config):
            sample = self._advance(config, now)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now

    def _advance(self, config: MetricConfig, now: int) -> Sample:
        self.current = (self.current + 1) % (config.samples + 1)
        if self.current >= len(self.slots):
            sample = Sample.new(now)
            self.slots.append(sample)
            return sample
        sample = self.slots[self.current]
        sample.reset(now)
        return sample

    def purge(self, config: MetricConfig, now: int) -> None:
        """Reset every sample whose last event is at least ``samples · time_window_ms`` old."""
        expire_age = config.samples * config.time_window_ms
        for sample in self.slots:
            if now - sample.last_event_ms >= expire_age:
                sample.reset(now)

    def oldest(self, now: int) -> Sample:
        """The slot with the smallest start (the first in list order on a tie)."""
        if not self.slots:
            self.slots.append(Sample.new(now))
        oldest = self.slots[0]
        for sample in self.slots[1:]:
            if sample.start_ms < oldest.start_ms:
                oldest = sample
        return oldest

    def measure(self, config: MetricConfig, now: int) -> float:
        self.purge(config, now)
        return sum(sample.value for sample in self.slots)


class Rate:
    """Kafka ``Rate`` over a ``WindowedSum``, per ``unit_ms`` (1000 = per second)."""

    def __init__(self, unit_ms: int = 1000) -> None:
        self.unit_ms = unit_ms
        self.stat = WindowedSum()

    def record(self, config: MetricConfig, value: float, now: int) -> None:
        self.stat.record(config, value, now)

    def measure(self, config: MetricConfig, now: int) -> float:
        value = self.stat.measure(config, now)
        return value / (self.window_size(config, now) / self.unit_ms)

    def window_size(self, config: MetricConfig, now: int) -> int:
        """Elapsed time since the oldest sample, but at least ``samples - 1`` full windows, and >= 1 ms,
        so that a young sensor does not report an inflated rate."""
        self.stat.purge(config, now)
        elapsed = now - self.stat.oldest(now).start_ms
        full_windows = elapsed // config.time_window_ms
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.time_window_ms
        return max(elapsed, 1)


class TokenBucket:
    """Kafka ``TokenBucket``: credits ``bound`` per unit, capped at ``burst = samples·window·bound``.

    It starts empty at time 0, so it is full on first use only once the clock is far enough past 0.
    Without a quota it records nothing and measures ``Long.MAX_VALUE``, as upstream.
    """

    def __init__(self, unit_ms: int = 1000) -> None:
        self.unit_ms = unit_ms
        self.tokens = 0.0
        self.last_update_ms = 0

    def _burst(self, config: MetricConfig, bound: float) -> float:
        return config.samples * (config.time_window_ms / self.unit_ms) * bound

    def _refill(self, bound: float, burst: float, now: int) -> None:
        # Kafka: quota * convert(elapsed), i.e. bound * (elapsed / unit) in that order.
        self.tokens = min(burst, self.tokens + bound * ((now - self.last_update_ms) / self.unit_ms))
        self.last_update_ms = now

    def record(self, config: MetricConfig, value: float, now: int) -> None:
        if config.quota is None:
            return
        bound = config.quota.bound
        burst = self._burst(config, bound)
        self._refill(bound, burst, now)
        self.tokens = min(burst, self.tokens - value)

    def measure(self, config: MetricConfig, now: int) -> float:
        if config.quota is None:
            return float(LONG_MAX)
        bound = config.quota.bound
        self._refill(bound, self._burst(config, bound), now)
        return self.tokens


class QuotaViolation(Exception):
    """A stat with a quota measured outside its bound; carries what the throttle formulas need."""

    def __init__(self, stat: Stat, config: MetricConfig, value: float, bound: float) -> None:
        super().__init__(f"value {value} violates bound {bound}")
        self.stat = stat
        self.config = config
        self.value = value
        self.bound = bound


class ThrottlingQuotaExceeded(Exception):
    """Kafka's ThrottlingQuotaExceededException: a strict token quota rejected the request."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__(f"THROTTLING_QUOTA_EXCEEDED, throttle {throttle_ms} ms")
        self.throttle_ms = throttle_ms


class Sensor:
    """Records a value into every stat, then checks each stat that has a quota, in order."""

    def __init__(self, stats: Sequence[tuple[Stat, MetricConfig]]) -> None:
        self.stats = list(stats)

    def record(self, value: float, now: int, check_quotas: bool = True) -> None:
        for stat, config in self.stats:
            stat.record(config, value, now)
        if check_quotas:
            self.check_quotas(now)

    def check_quotas(self, now: int) -> None:
        """Raise ``QuotaViolation`` for the first stat out of bounds; a TokenBucket violates below 0."""
        for stat, config in self.stats:
            quota = config.quota
            if quota is None:
                continue
            value = stat.measure(config, now)
            violated = value < 0 if isinstance(stat, TokenBucket) else not quota.acceptable(value)
            if violated:
                raise QuotaViolation(stat, config, value, quota.bound)


def throttle_time(v: QuotaViolation, now: int) -> int:
    """Kafka ``QuotaUtils.throttleTime``: ``(value - bound)/bound · window_size``, i.e. N/Q - W_eff.

    Not purely a read: it recomputes the window size (which purges), as upstream.
    """
    if not isinstance(v.stat, Rate):
        raise ValueError(f"stat is not a Rate: {v.stat!r}")
    difference = v.value - v.bound
    return round_half_up(difference / v.bound * v.stat.window_size(v.config, now))


def bounded_throttle_time(v: QuotaViolation, max_ms: int, now: int) -> int:
    return min(throttle_time(v, now), max_ms)


def token_throttle_time(v: QuotaViolation) -> int:
    """ControllerMutationQuotaManager: time to refill the token debt, ``-tokens/bound · 1000``."""
    if not isinstance(v.stat, TokenBucket):
        raise ValueError(f"stat is not a TokenBucket: {v.stat!r}")
    return round_half_up(-v.value / v.bound * 1000)


class _TokenQuota:
    """Kafka ``AbstractControllerMutationQuota``: remembers the last throttle and when it was set."""

    def __init__(self, sensor: Sensor) -> None:
        self.sensor = sensor
        self.last_throttle_ms = 0
        self.last_recorded_ms = 0

    def _update_throttle_time(self, v: QuotaViolation, now: int) -> None:
        self.last_throttle_ms = token_throttle_time(v)
        self.last_recorded_ms = now

    def throttle_time(self, now: int) -> int:
        """The remaining throttle: the last one minus the time elapsed since it was set."""
        return max(0, self.last_throttle_ms - (now - self.last_recorded_ms))


class StrictTokenQuota(_TokenQuota):
    """Checks before recording: a request that would start from a negative balance is rejected."""

    def record(self, permits: float, now: int) -> None:
        try:
            self.sensor.check_quotas(now)
        except QuotaViolation as v:
            self._update_throttle_time(v, now)
            raise ThrottlingQuotaExceeded(self.last_throttle_ms) from v
        self.sensor.record(permits, now, check_quotas=False)


class PermissiveTokenQuota(_TokenQuota):
    """Records with the check; a violation only sets the throttle, nothing is rejected."""

    def record(self, permits: float, now: int) -> None:
        try:
            self.sensor.record(permits, now)
        except QuotaViolation as v:
            self._update_throttle_time(v, now)
