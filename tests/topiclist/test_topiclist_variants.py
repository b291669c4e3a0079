"""The §6(a) leak variant: the three traces that break TL-I7, and "current" leaving nothing behind."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reference_impl.topiclist import (
    DEFAULT_TOPIC_LIST_SIZE,
    VARIANTS,
    Broker,
    Connection,
    GetTopicsResponse,
    Proxy,
    Reply,
    Variant,
    VirtualExecutor,
    WatchSuccess,
    topics_hash,
    wire_size,
)

from .worlds import MODE, NS, TOPICS, broker_world, proxy_world, replies_per_request, settle

RESPONSE = GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), True)

World = Broker | Proxy
Scenario = Callable[[World, Connection, VirtualExecutor], None]


def answer(world: World, topics: list[str] | None = None, failure: str | None = None) -> None:
    """Complete item 1: the listing (broker) or the forwarded broker request (proxy)."""
    if isinstance(world, Broker):
        world.complete_listing(1, topics, failure)
    elif failure is not None:
        world.complete_broker_response(1, error_kind="ServiceNotReady", message=failure)
    else:
        world.complete_broker_response(1, topics)


def listing_error(world: World, conn: Connection, ex: VirtualExecutor) -> None:
    world.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    answer(world, failure="listing failed")


def serialization_fault(world: World, conn: Connection, ex: VirtualExecutor) -> None:
    world.arm_serialization_fault(1)
    world.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    answer(world, TOPICS)
    ex.run()


def write_failure(world: World, conn: Connection, ex: VirtualExecutor) -> None:
    world.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    answer(world, TOPICS)
    ex.run()
    world.complete_write(1, False)


def write_success(world: World, conn: Connection, ex: VirtualExecutor) -> None:
    world.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    answer(world, TOPICS)
    ex.run()
    world.complete_write(1, True)


def play(kind: str, variant: Variant, scenario: Scenario, heap: int = 100_000) -> tuple[World, list[Reply]]:
    """Run `scenario` on a fresh broker or proxy and bring it to quiescence."""
    world, conn, ex = (broker_world if kind == "broker" else proxy_world)(heap=heap, variant=variant)
    scenario(world, conn, ex)
    settle(world, ex)
    assert world.lookup.available == world.lookup.max
    assert replies_per_request(world) == {1: 1}  # TL-I8 holds in both variants
    for pool in (world.limiter.heap, world.limiter.direct):  # TL-I1, TL-I2
        assert 0 <= pool.available_permits <= pool.max_permits
        assert pool.acquired_permits == sum(p.permits for p in pool.live.values())
    return world, list(conn.replies)


KINDS = ["broker", "proxy"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("heap", [100_000, 5_000])
def test_trace_i_listing_error_leaks_the_initial_estimate(kind: str, heap: int) -> None:
    leaky, leaky_replies = play(kind, "no_exceptional_release", listing_error, heap=heap)
    assert leaky.limiter.heap.acquired_permits == min(DEFAULT_TOPIC_LIST_SIZE, heap)
    assert leaky.limiter.direct.acquired_permits == 0
    current, current_replies = play(kind, "current", listing_error, heap=heap)
    assert current.limiter.heap.acquired_permits == 0
    assert leaky_replies == current_replies
    assert "listing failed" in repr(current_replies[0])


@pytest.mark.parametrize("kind", KINDS)
def test_trace_ii_serialization_fault_leaks_the_direct_permit(kind: str) -> None:
    leaky, leaky_replies = play(kind, "no_exceptional_release", serialization_fault)
    assert leaky.limiter.heap.acquired_permits == 0
    assert leaky.limiter.direct.acquired_permits == wire_size(RESPONSE)
    current, current_replies = play(kind, "current", serialization_fault)
    assert (current.limiter.heap.acquired_permits, current.limiter.direct.acquired_permits) == (0, 0)
    assert leaky_replies == current_replies


@pytest.mark.parametrize("kind", KINDS)
def test_trace_iii_failed_write_leaks_the_direct_permit(kind: str) -> None:
    leaky, leaky_replies = play(kind, "no_exceptional_release", write_failure)
    assert leaky.limiter.heap.acquired_permits == 0
    assert leaky.limiter.direct.acquired_permits == wire_size(RESPONSE)
    current, current_replies = play(kind, "current", write_failure)
    assert (current.limiter.heap.acquired_permits, current.limiter.direct.acquired_permits) == (0, 0)
    assert leaky_replies == current_replies == [RESPONSE]


@pytest.mark.parametrize("kind", KINDS)
def test_variant_releases_normally_on_the_happy_path(kind: str) -> None:
    world, replies = play(kind, "no_exceptional_release", write_success)
    assert (world.limiter.heap.acquired_permits, world.limiter.direct.acquired_permits) == (0, 0)
    assert replies == [RESPONSE]


def test_watcher_listing_failure_releases_heap_in_both_variants() -> None:
    for variant in VARIANTS:
        broker, conn, ex = broker_world(variant=variant)
        broker.handle_watch(conn, 10, 1, NS)
        ex.run()
        broker.complete_listing(1, error="listing failed")
        settle(broker, ex)
        assert broker.limiter.heap.acquired_permits == 0, variant
        assert len(conn.replies) == 1


def test_watcher_failed_write_leaks_direct_in_the_variant_only() -> None:
    success = WatchSuccess(10, 1, topics_hash(TOPICS), tuple(TOPICS))
    for variant in VARIANTS:
        broker, conn, ex = broker_world(variant=variant)
        broker.handle_watch(conn, 10, 1, NS)
        ex.run()
        broker.complete_listing(1, TOPICS)
        ex.run()
        assert conn.replies == [success]
        broker.complete_write(1, False)
        settle(broker, ex)
        leaked = wire_size(success) if variant == "no_exceptional_release" else 0
        assert broker.limiter.direct.acquired_permits == leaked, variant
