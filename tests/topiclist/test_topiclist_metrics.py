"""Metrics: the 12 collectors, the recorder protocol and TL-I9 (spec §4.9)."""

from __future__ import annotations

import pytest

from reference_impl.topiclist import (
    LONG_MAX,
    AsyncDualMemoryLimiter,
    AsyncSemaphore,
    LimitType,
    Outcome,
    TopicListMetrics,
    VirtualExecutor,
)
from reference_impl.topiclist.metrics import SummaryValue

HEAP = LimitType.HEAP_MEMORY
DIRECT = LimitType.DIRECT_MEMORY


def test_twelve_collectors_with_the_prefix() -> None:
    lim = AsyncDualMemoryLimiter(100, 3, 50, 0, 4, 60, executor=VirtualExecutor())
    metrics = TopicListMetrics(lim, "pulsar_proxy_")
    names = set(metrics.collect())
    expected = {
        f"pulsar_proxy_topic_list_{pool}_{suffix}"
        for pool in ("heap", "direct")
        for suffix in (
            "memory_used_bytes",
            "memory_limit_bytes",
            "queue_size",
            "queue_max_size",
            "wait_time_ms",
            "timeout_total",
        )
    }
    assert names == expected
    values = metrics.collect()
    assert values["pulsar_proxy_topic_list_heap_memory_limit_bytes"] == 100
    assert values["pulsar_proxy_topic_list_direct_memory_limit_bytes"] == 0  # unbounded
    assert values["pulsar_proxy_topic_list_heap_queue_max_size"] == 3
    assert values["pulsar_proxy_topic_list_direct_queue_max_size"] == 4
    assert values["pulsar_proxy_topic_list_heap_wait_time_ms"] == SummaryValue(
        0, 0, ((0.5, None), (0.95, None), (0.99, None), (1.0, None))
    )
    with pytest.raises(ValueError, match="prefix"):
        TopicListMetrics(lim, "pulsar_")


def test_recorder_protocol_grant_records_age_timeout_records_long_max_then_age() -> None:
    ex = VirtualExecutor()
    recorded: list[int] = []
    sem = AsyncSemaphore(10, 2, 100, executor=ex, queue_latency_recorder=recorded.append)
    f = sem.acquire(10)
    ex.set_clock(30)
    ex.run()
    assert recorded == [30]
    timed_out = sem.acquire(5)
    ex.set_clock(250)  # the executor thread is late: the age is 250 - 30
    ex.run()
    assert timed_out.exception() is not None
    assert recorded == [30, LONG_MAX, 220]
    # Nothing is recorded for queue-full, cancelled, caller-cancelled, shrinking or closed requests.
    sem.acquire(1)
    sem.acquire(1, is_cancelled=lambda: True)
    sem.acquire(1)  # queue full
    sem.queue[0].future.cancel()
    sem.update(f.result(), 4)  # shrinking: returns 6, the pass drops both heads
    ex.run()
    sem.close()
    sem.acquire(1)
    assert recorded == [30, LONG_MAX, 220]


def test_unbounded_pool_records_nothing() -> None:
    ex = VirtualExecutor()
    recorded: list[int] = []
    sem = AsyncSemaphore(0, 2, 100, executor=ex, queue_latency_recorder=recorded.append)
    sem.acquire(5)
    ex.advance_to(1000)
    assert recorded == []


def test_tl_i9_metrics_agree_with_the_pools() -> None:
    ex = VirtualExecutor()
    lim = AsyncDualMemoryLimiter(10, 2, 100, 10, 2, 100, executor=ex)
    metrics = TopicListMetrics(lim, "pulsar_broker_")
    h1 = lim.acquire(6, HEAP)
    ex.set_clock(10)
    ex.run()  # grant, waited 10
    lim.acquire(6, HEAP)  # queued at 10, times out at 110
    ex.set_clock(20)
    lim.acquire(2, HEAP)  # queued at 20 behind it
    lim.acquire(1, HEAP)  # queue full
    d = lim.acquire(4, DIRECT)
    ex.set_clock(40)
    ex.run()  # direct grant, waited 20
    ex.advance_to(110)  # the 6 times out at age 100; the pass it submits grants the 2, age 90
    pre = "pulsar_broker_topic_list_"
    values = metrics.collect()
    assert values[pre + "heap_memory_used_bytes"] == lim.heap.acquired_permits == 8
    assert values[pre + "direct_memory_used_bytes"] == lim.direct.acquired_permits == 4
    assert values[pre + "heap_queue_size"] == lim.heap.queue_size == 0
    assert values[pre + "heap_timeout_total"] == 1
    assert values[pre + "direct_timeout_total"] == 0
    assert values[pre + "heap_wait_time_ms"] == SummaryValue(3, 200, ((0.5, 90), (0.95, 100), (0.99, 100), (1.0, 100)))
    assert values[pre + "direct_wait_time_ms"] == SummaryValue(1, 20, ((0.5, 20), (0.95, 20), (0.99, 20), (1.0, 20)))
    assert metrics.observations[HEAP] == [10, 100, 90]
    assert lim.heap.outcomes[Outcome.GRANTED] + lim.heap.outcomes[Outcome.TIMEOUT] == 3
    # a queued request shows in the queue gauge
    lim.acquire(5, HEAP)
    assert metrics.collect()[pre + "heap_queue_size"] == 1
    lim.release(h1.result())
    lim.release(d.result())
    ex.run()
    assert metrics.collect()[pre + "heap_memory_used_bytes"] == 7
