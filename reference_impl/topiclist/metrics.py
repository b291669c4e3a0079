"""``TopicListMemoryLimiter`` metrics (spec §4.9): 12 collectors over a dual limiter.

The instance installs itself as the queue-latency recorder of both pools.  Recorder protocol,
as in Java: a queued grant records its wait age; a timeout records ``LONG_MAX`` (counted as a
timeout) and then its age.  The exact observations are kept for checks (TL-I9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dual_limiter import AsyncDualMemoryLimiter, LimitType
from .semaphore import LONG_MAX

PREFIXES = ("pulsar_broker_", "pulsar_proxy_")
QUANTILES = (0.5, 0.95, 0.99, 1.0)


@dataclass(frozen=True)
class SummaryValue:
    """A wait-time summary; a quantile is ``None`` before the first observation."""

    count: int
    sum: int
    quantiles: tuple[tuple[float, int | None], ...]


MetricValue = int | SummaryValue


def _quantile(ordered: list[int], q: float) -> int | None:
    """Nearest-rank quantile of exact observations (the reference keeps them all)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class TopicListMetrics:
    """Gauges, wait-time summaries and timeout counters of the heap and direct pools."""

    def __init__(self, limiter: AsyncDualMemoryLimiter, prefix: str) -> None:
        if prefix not in PREFIXES:
            raise ValueError(f"Unknown metrics prefix {prefix!r}; expected one of {', '.join(PREFIXES)}")
        self.limiter = limiter
        self.prefix = prefix
        self.observations: dict[LimitType, list[int]] = {t: [] for t in LimitType}
        self.timeouts: dict[LimitType, int] = dict.fromkeys(LimitType, 0)
        limiter.heap.queue_latency_recorder = self.recorder(LimitType.HEAP_MEMORY)
        limiter.direct.queue_latency_recorder = self.recorder(LimitType.DIRECT_MEMORY)

    def recorder(self, limit_type: LimitType) -> _Recorder:
        return _Recorder(self, limit_type)

    def record(self, limit_type: LimitType, value: int) -> None:
        if value == LONG_MAX:
            self.timeouts[limit_type] += 1
        else:
            self.observations[limit_type].append(value)

    def collect(self) -> dict[str, MetricValue]:
        """Name -> value for the 12 collectors (names are ``prefix + topic_list_...``)."""
        out: dict[str, MetricValue] = {}
        for limit_type in LimitType:
            pool = self.limiter.limiter(limit_type)
            base = f"{self.prefix}topic_list_{limit_type.value}_"
            observed = sorted(self.observations[limit_type])
            out[base + "memory_used_bytes"] = pool.acquired_permits
            out[base + "memory_limit_bytes"] = max(pool.max_permits, 0)
            out[base + "queue_size"] = pool.queue_size
            out[base + "queue_max_size"] = pool.max_queue_size
            out[base + "wait_time_ms"] = SummaryValue(
                len(observed), sum(observed), tuple((q, _quantile(observed, q)) for q in QUANTILES)
            )
            out[base + "timeout_total"] = self.timeouts[limit_type]
        return out


@dataclass(frozen=True)
class _Recorder:
    """The ``LongConsumer`` handed to one pool."""

    metrics: TopicListMetrics
    limit_type: LimitType

    def __call__(self, value: int) -> None:
        self.metrics.record(self.limit_type, value)
