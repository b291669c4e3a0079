"""KIP-936 ``ProducerIdQuotaManager``: counts only unseen PIDs against a per-user quota and throttles.

Spec: ``docs/spec/pidquota.md`` (the manager and its configuration).

How a harness reads the state after each step (all reads are side-effect free):

* ``cache`` (see ``cache.py``) and ``next_cleanup_ms`` (the next scheduled ``clean_map``);
* ``sensor_of(p)`` -> the principal's ``Sensor`` or ``None`` before its first limited produce; its
  single stat is a ``Rate`` (``rate_permissive``) or a ``TokenBucket`` (``token_strict``), read through
  ``Rate.stat.slots`` / ``TokenBucket.tokens`` (see ``quota.py``; ``measure`` is not pure);
* ``quota_of(p)`` -> the configured ``producer_ids_rate`` in ``rate_unit`` (``None`` = unlimited),
  ``pids_per_hour(p)`` the same in PIDs per hour, as the cache is sized with it;
* ``now`` (the last ``on_produce`` / ``maybe_clean`` time).

The token quota of ``token_strict`` is created per request, like Kafka's ``newStrictQuotaFor``, so its
``last_throttle_ms`` does not outlive the request: a request that is not rejected has throttle 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Literal, NamedTuple, get_args

from reference_impl.pidquota.bloom import PidHasher, default_pid_hasher
from reference_impl.pidquota.cache import Principal, ProducerIdQuotaManagerCache, Variant
from reference_impl.pidquota.quota import (
    MetricConfig,
    Quota,
    QuotaViolation,
    Rate,
    Sensor,
    Stat,
    StrictTokenQuota,
    ThrottlingQuotaExceeded,
    TokenBucket,
    bounded_throttle_time,
    throttle_time,
)

Enforcement = Literal["rate_permissive", "token_strict"]
ENFORCEMENTS: tuple[Enforcement, ...] = get_args(Enforcement)
RateUnit = Literal["per_hour", "per_second"]
RATE_UNITS: tuple[RateUnit, ...] = get_args(RateUnit)

THROTTLING_QUOTA_EXCEEDED = "THROTTLING_QUOTA_EXCEEDED"
DEFAULT_ENTITY = "<default>"

_NO_QUOTAS: Mapping[Principal, float] = MappingProxyType({})
_NO_CONFIGS: Mapping[str, float] = MappingProxyType({})

# KIP-936 broker configs and their defaults (spec §8).
WINDOW_NUM = "producer.id.quota.window.num"
WINDOW_SIZE_SECONDS = "producer.id.quota.window.size.seconds"
CLEANUP_INTERVAL_MS = "producer.id.quota.cache.cleanup.scheduler.interval.ms"
LAYER_COUNT = "producer.id.quota.cache.layer.count"
FALSE_POSITIVE_RATE = "producer.id.quota.cache.false.positive.rate"
KIP_DEFAULTS: Mapping[str, float] = MappingProxyType(
    {
        WINDOW_NUM: 11,
        WINDOW_SIZE_SECONDS: 3600,
        CLEANUP_INTERVAL_MS: 10,
        LAYER_COUNT: 4,
        FALSE_POSITIVE_RATE: 0.01,
    }
)


class ProduceOutcome(NamedTuple):
    throttle_time_ms: int
    rejected: bool
    new_pids: tuple[int, ...]
    error: str | None


class ProducerIdQuotaManager:
    """Per produce request: clean the cache on schedule, track each distinct PID, charge the unseen ones."""

    def __init__(
        self,
        cache: ProducerIdQuotaManagerCache,
        *,
        quotas: Mapping[Principal, float] = _NO_QUOTAS,
        default_quota: float | None = None,
        enforcement: Enforcement = "rate_permissive",
        rate_unit: RateUnit = "per_hour",
        window_num: int = 11,
        window_size_ms: int = 3_600_000,
        max_throttle_ms: int | None = None,
        start_ms: int = 0,
    ) -> None:
        # Rejecting non-positive quotas here is our choice: the cache cannot be sized for them (§4.5).
        for who, quota in [*quotas.items(), (DEFAULT_ENTITY, default_quota)]:
            if quota is not None and not quota > 0:
                raise ValueError(f"producer_ids_rate for {who} must be > 0: {quota}")
        if enforcement not in ENFORCEMENTS:
            raise ValueError(f"unknown enforcement {enforcement!r}; expected one of {ENFORCEMENTS}")
        if rate_unit not in RATE_UNITS:
            raise ValueError(f"unknown rate_unit {rate_unit!r}; expected one of {RATE_UNITS}")
        if window_num < 1 or window_size_ms < 1:
            raise ValueError(f"window_num and window_size_ms must be >= 1: {window_num}, {window_size_ms}")
        self.cache = cache
        self.quotas = dict(quotas)
        self.default_quota = default_quota
        self.enforcement: Enforcement = enforcement
        self.rate_unit: RateUnit = rate_unit
        self.window_num = window_num
        self.window_size_ms = window_size_ms
        self.max_throttle_ms = max_throttle_ms
        self.next_cleanup_ms = start_ms + cache.window_ms
        self.now: int | None = None
        self._sensors: dict[Principal, Sensor] = {}

    @classmethod
    def from_kip_configs(
        cls,
        configs: Mapping[str, float] = _NO_CONFIGS,
        user_quotas: Mapping[str, float] = _NO_QUOTAS,
        *,
        enforcement: Enforcement = "rate_permissive",
        rate_unit: RateUnit = "per_hour",
        variant: Variant = "current",
        pid_hasher: PidHasher = default_pid_hasher,
        max_throttle_ms: int | None = None,
        start_ms: int = 0,
    ) -> ProducerIdQuotaManager:
        """Build cache and manager from KIP-936 config names (spec §8).

        ``user_quotas`` maps ``/config/users/<user>`` entity names to ``producer_ids_rate``; the entity
        ``<default>`` is the default quota. The window size sets both the sensor sample span and the
        cache W; the cleanup interval is accepted but unused (the schedule is W, then every ΔT).
        """
        unknown = set(configs) - set(KIP_DEFAULTS)
        if unknown:
            raise ValueError(f"unknown producer-id quota configs: {sorted(unknown)}")
        merged = {**KIP_DEFAULTS, **configs}
        window_ms = int(merged[WINDOW_SIZE_SECONDS]) * 1000
        cache = ProducerIdQuotaManagerCache(
            window_ms,
            int(merged[LAYER_COUNT]),
            float(merged[FALSE_POSITIVE_RATE]),
            variant=variant,
            pid_hasher=pid_hasher,
        )
        return cls(
            cache,
            quotas={user: q for user, q in user_quotas.items() if user != DEFAULT_ENTITY},
            default_quota=user_quotas.get(DEFAULT_ENTITY),
            enforcement=enforcement,
            rate_unit=rate_unit,
            window_num=int(merged[WINDOW_NUM]),
            window_size_ms=window_ms,
            max_throttle_ms=max_throttle_ms,
            start_ms=start_ms,
        )

    # --- introspection ---------------------------------------------------------------------------

    def quota_of(self, principal: Principal) -> float | None:
        """``quotas[p]``, else ``default_quota``; ``None`` means unlimited."""
        return self.quotas.get(principal, self.default_quota)

    def pids_per_hour(self, principal: Principal) -> float | None:
        quota = self.quota_of(principal)
        if quota is None:
            return None
        return quota if self.rate_unit == "per_hour" else quota * 3600

    def sensor_of(self, principal: Principal) -> Sensor | None:
        return self._sensors.get(principal)

    # --- operations ------------------------------------------------------------------------------

    def maybe_clean(self, now: int) -> None:
        """Run ``cache.clean_map(s)`` for every scheduled ``s <= now``, oldest first, each at its own time.

        The cache clock must not be ahead of the schedule (drive a shared cache through the manager).
        """
        self._advance_clock(now)
        while self.next_cleanup_ms <= now:
            self.cache.clean_map(self.next_cleanup_ms)
            self.next_cleanup_ms += self.cache.delta_t

    def on_produce(self, principal: Principal, pids: Sequence[int], now: int) -> ProduceOutcome:
        self.maybe_clean(now)
        q_h = self.pids_per_hour(principal)
        if q_h is None:
            return ProduceOutcome(0, False, (), None)
        sensor = self._sensor(principal, q_h)
        distinct = list(dict.fromkeys(pids))
        if self.enforcement == "rate_permissive":
            return self._produce_rate_permissive(principal, q_h, sensor, distinct, now)
        return self._produce_token_strict(principal, q_h, sensor, distinct, now)

    # --- internals -------------------------------------------------------------------------------

    def _advance_clock(self, now: int) -> None:
        if self.now is not None and now < self.now:
            raise ValueError(f"time went backwards: {now} < {self.now}")
        self.now = now

    def _sensor(self, principal: Principal, q_h: float) -> Sensor:
        sensor = self._sensors.get(principal)
        if sensor is None:
            config = MetricConfig(self.window_num, self.window_size_ms, Quota(q_h / 3600))
            stat: Stat = Rate() if self.enforcement == "rate_permissive" else TokenBucket()
            sensor = Sensor([(stat, config)])
            self._sensors[principal] = sensor
        return sensor

    def _produce_rate_permissive(
        self, principal: Principal, q_h: float, sensor: Sensor, pids: list[int], now: int
    ) -> ProduceOutcome:
        """ClientQuotaManager-like: every unseen PID is recorded; violations only set the throttle."""
        throttle = 0
        new_pids: list[int] = []
        for pid in pids:
            if self.cache.track(principal, q_h, pid, now):
                continue
            new_pids.append(pid)
            try:
                sensor.record(1, now)
            except QuotaViolation as v:
                if self.max_throttle_ms is None:
                    throttle = max(throttle, throttle_time(v, now))
                else:
                    throttle = max(throttle, bounded_throttle_time(v, self.max_throttle_ms, now))
        return ProduceOutcome(throttle, False, tuple(new_pids), None)

    def _produce_token_strict(
        self, principal: Principal, q_h: float, sensor: Sensor, pids: list[int], now: int
    ) -> ProduceOutcome:
        """ControllerMutationQuotaManager-like: an unseen PID that finds the bucket in debt rejects the
        request; it and the later PIDs are neither tracked nor recorded. ``max_throttle_ms`` does not
        apply (Kafka does not bound the controller-mutation throttle)."""
        quota = StrictTokenQuota(sensor)
        new_pids: list[int] = []
        for pid in pids:
            if self.cache.is_seen(principal, pid, now):
                self.cache.track(principal, q_h, pid, now)  # a hit; it may re-add
                continue
            try:
                quota.record(1, now)
            except ThrottlingQuotaExceeded as e:
                return ProduceOutcome(e.throttle_ms, True, tuple(new_pids), THROTTLING_QUOTA_EXCEEDED)
            self.cache.track(principal, q_h, pid, now)
            new_pids.append(pid)
        return ProduceOutcome(0, False, tuple(new_pids), None)
