"""Shared scenario builders for the topic-list flow tests."""

from __future__ import annotations

from collections import Counter

from reference_impl.topiclist import (
    AsyncDualMemoryLimiter,
    Broker,
    Connection,
    ErrorReply,
    Proxy,
    ServerError,
    Variant,
    VirtualExecutor,
    WatchUpdate,
)

NS = "public/default"
MODE = "PERSISTENT"
TOPICS = [f"persistent://public/default/t{i}" for i in range(3)]
TMR = ServerError.TOO_MANY_REQUESTS
HEAP_MSG = "Failed due to heap memory limit exceeded"


def make_limiter(heap: int, direct: int, queue: int, timeout: int) -> tuple[AsyncDualMemoryLimiter, VirtualExecutor]:
    ex = VirtualExecutor()
    return AsyncDualMemoryLimiter(heap, queue, timeout, direct, queue, timeout, executor=ex), ex


def broker_world(
    heap: int = 100_000,
    direct: int = 100_000,
    queue: int = 10,
    timeout: int = 1000,
    lookup_max: int = 50_000,
    variant: Variant = "current",
) -> tuple[Broker, Connection, VirtualExecutor]:
    lim, ex = make_limiter(heap, direct, queue, timeout)
    broker = Broker(lim, ex, lookup_max=lookup_max, variant=variant)
    return broker, broker.connect(), ex


def proxy_world(
    heap: int = 100_000,
    direct: int = 100_000,
    queue: int = 10,
    timeout: int = 1000,
    lookup_max: int = 50_000,
    variant: Variant = "current",
) -> tuple[Proxy, Connection, VirtualExecutor]:
    lim, ex = make_limiter(heap, direct, queue, timeout)
    proxy = Proxy(lim, ex, lookup_max=lookup_max, variant=variant)
    return proxy, proxy.connect(), ex


def error(request_id: int, code: ServerError, message: str) -> ErrorReply:
    return ErrorReply(request_id, code, message)


def replies_per_request(world: Broker | Proxy) -> Counter[int]:
    """Reply attempts per request id (watch updates answer no request)."""
    return Counter(
        r.request_id for c in world.connections.values() for r in c.replies if not isinstance(r, WatchUpdate)
    )


def settle(world: Broker | Proxy, ex: VirtualExecutor) -> None:
    """Let every timer fire so the world can reach quiescence."""
    ex.advance_to(ex.now + 100_000)
    assert world.is_quiescent()


def assert_quiescent_and_clean(world: Broker | Proxy, ex: VirtualExecutor, requests: int) -> None:
    """TL-I7 and TL-I8 at the end of a scenario: no permit held, lookup at max, one reply each."""
    settle(world, ex)
    assert world.limiter.heap.acquired_permits == 0
    assert world.limiter.direct.acquired_permits == 0
    assert world.lookup.available == world.lookup.max
    assert sorted(replies_per_request(world).values()) == [1] * requests
