"""Broker and proxy get-topics flows (spec §4.7, §4.8) under variant "current"."""

from __future__ import annotations

import pytest

from reference_impl.topiclist import (
    DEFAULT_TOPIC_LIST_SIZE,
    Broker,
    GetTopicsResponse,
    LimitType,
    LookupSemaphore,
    Outcome,
    ServerError,
    SizeHolder,
    SizeState,
    heap_size,
    topics_hash,
    wire_size,
)

from .worlds import HEAP_MSG, MODE, NS, TMR, TOPICS, assert_quiescent_and_clean, broker_world, error, proxy_world

# -- building blocks -------------------------------------------------------------------------------------


def test_lookup_semaphore_is_non_blocking() -> None:
    lookup = LookupSemaphore(1)
    assert lookup.try_acquire()
    assert not lookup.try_acquire()
    lookup.release()
    assert lookup.available == 1


def test_size_holder_states() -> None:
    holder = SizeHolder()

    def state() -> SizeState:
        return holder.state

    first = holder.get_size_async()
    assert first.result() == DEFAULT_TOPIC_LIST_SIZE
    assert state() is SizeState.INITIALIZING
    waiting = [holder.get_size_async(), holder.get_size_async()]
    assert not any(w.done() for w in waiting)
    holder.reset_if_initializing()
    assert [w.result() for w in waiting] == [DEFAULT_TOPIC_LIST_SIZE] * 2
    assert state() is SizeState.UNSET
    holder.get_size_async()
    late = holder.get_size_async()
    holder.update_size(777)
    assert late.result() == 777
    assert (state(), holder.get_size_async().result()) == (SizeState.KNOWN, 777)
    holder.reset_if_initializing()
    assert state() is SizeState.KNOWN
    holder.update_size(5)
    assert holder.get_size_async().result() == 5


def test_size_holder_waiters_share_the_one_pending_future() -> None:
    """Spec §4.7 (upstream TopicListSizeResultCache): every caller waits on the one pending future."""
    holder = SizeHolder()
    holder.get_size_async()
    f2, f3 = holder.get_size_async(), holder.get_size_async()
    assert f2 is f3 and holder.waiters == 2
    holder.update_size(321)
    assert (f2.result(), f3.result(), holder.waiters) == (321, 321, 0)


# -- broker get-topics --------------------------------------------------------------------------------------


def test_broker_happy_path() -> None:
    broker, conn, ex = broker_world()
    lim = broker.limiter
    broker.handle_get_topics(conn, 1, NS, MODE)
    assert broker.lookup.available == broker.lookup.max - 1
    assert lim.heap.queue_size == 1  # estimate requested, granted by the next pass
    ex.run()
    assert lim.heap.acquired_permits == DEFAULT_TOPIC_LIST_SIZE
    assert list(broker.pending_listings) == [1]
    assert broker.pending_listings[1].mode == MODE
    broker.complete_listing(1, TOPICS)
    ex.run()
    response = GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), changed=True)
    assert conn.replies == [response]
    assert list(broker.pending_writes) == [1] and list(conn.pending_writes) == [1]
    assert lim.heap.acquired_permits == 0
    assert lim.direct.acquired_permits == wire_size(response)
    assert broker.lookup.available == broker.lookup.max
    assert broker.size_cache.holder(NS, MODE).size == heap_size(TOPICS)
    broker.complete_write(1, True)
    assert lim.direct.acquired_permits == 0
    assert_quiescent_and_clean(broker, ex, 1)


def test_broker_unchanged_hash_sends_an_empty_unchanged_response() -> None:
    broker, conn, ex = broker_world()
    broker.handle_get_topics(conn, 1, NS, MODE, topics_hash=topics_hash(TOPICS))
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()
    assert conn.replies == [GetTopicsResponse(1, (), topics_hash(TOPICS), changed=False)]
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 1)


def test_broker_large_listing_grows_the_permit_and_next_request_uses_the_known_size() -> None:
    broker, conn, ex = broker_world()
    lim = broker.limiter
    topics = [f"persistent://public/default/{'x' * 80}-{i}" for i in range(100)]
    actual = heap_size(topics)
    assert actual > DEFAULT_TOPIC_LIST_SIZE
    broker.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    broker.complete_listing(1, topics)
    assert lim.heap.snapshot().queue[0][1:] == (actual, DEFAULT_TOPIC_LIST_SIZE)  # growing update queued
    ex.run()
    assert isinstance(conn.replies[0], GetTopicsResponse)
    broker.complete_write(1, True)
    broker.handle_get_topics(conn, 2, NS, MODE)
    ex.run()
    assert lim.heap.acquired_permits == actual
    broker.complete_listing(2, topics)
    ex.run()
    broker.complete_write(2, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_concurrent_listers_wait_for_the_first_actual_size() -> None:
    broker, conn, ex = broker_world()
    lim = broker.limiter
    broker.handle_get_topics(conn, 1, NS, MODE)
    broker.handle_get_topics(conn, 2, NS, MODE)
    ex.run()
    assert lim.heap.request_count == 1  # the second waits for the estimate
    broker.complete_listing(1, TOPICS)
    ex.run()
    assert lim.heap.acquired_permits == heap_size(TOPICS)  # request 2 acquired the actual size
    broker.complete_listing(2, TOPICS)
    ex.run()
    for write_id in list(broker.pending_writes):
        broker.complete_write(write_id, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_broker_lookup_refused() -> None:
    broker, conn, ex = broker_world(lookup_max=1)
    broker.handle_get_topics(conn, 1, NS, MODE)
    broker.handle_get_topics(conn, 2, NS, MODE)
    assert conn.replies == [error(2, TMR, "Failed due to too many pending lookup requests")]
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_broker_authorization_denied() -> None:
    broker, conn, ex = broker_world()
    broker.deny_authorization(NS)
    broker.handle_get_topics(conn, 1, NS, MODE)
    assert conn.replies == [
        error(1, ServerError.AUTHORIZATION_ERROR, "Client is not authorized to GetTopicsOfNamespace")
    ]
    assert broker.limiter.heap.request_count == 0
    assert_quiescent_and_clean(broker, ex, 1)


def test_broker_listing_error() -> None:
    broker, conn, ex = broker_world()
    broker.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    broker.complete_listing(1, error="metadata store unavailable")
    assert conn.replies == [error(1, ServerError.METADATA_ERROR, "metadata store unavailable")]
    assert broker.size_cache.holder(NS, MODE).state is SizeState.UNSET
    assert_quiescent_and_clean(broker, ex, 1)


def test_broker_heap_acquire_timeout_and_queue_full() -> None:
    broker, conn, ex = broker_world(heap=DEFAULT_TOPIC_LIST_SIZE, queue=1, timeout=500)
    broker.handle_get_topics(conn, 1, "ns/one", MODE)
    ex.run()  # request 1 holds the whole heap pool while listing
    broker.handle_get_topics(conn, 2, "ns/two", MODE)  # queued
    broker.handle_get_topics(conn, 3, "ns/three", MODE)  # queue full: refused at once
    assert conn.replies == [error(3, TMR, HEAP_MSG)]
    assert broker.size_cache.holder("ns/three", MODE).state is SizeState.UNSET
    ex.advance_to(500)
    assert conn.replies[1:] == [error(2, TMR, HEAP_MSG)]
    assert broker.size_cache.holder("ns/two", MODE).state is SizeState.UNSET
    assert broker.lookup.available == broker.lookup.max - 1
    broker.complete_listing(1, TOPICS)
    ex.run()
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 3)


def test_broker_update_failure() -> None:
    broker, conn, ex = broker_world(heap=20_000, timeout=500)
    lim = broker.limiter
    broker.handle_get_topics(conn, 1, "ns/small", MODE)
    ex.run()
    broker.complete_listing(1, TOPICS)  # shrinks to the actual size; write pending
    ex.run()
    broker.handle_get_topics(conn, 2, NS, MODE)
    ex.run()
    blocker = lim.acquire(20_000 - DEFAULT_TOPIC_LIST_SIZE, LimitType.HEAP_MEMORY)  # pool now full
    ex.run()
    big = [f"persistent://public/default/{'y' * 60}-{i}" for i in range(120)]
    assert DEFAULT_TOPIC_LIST_SIZE < heap_size(big) <= 20_000
    broker.complete_listing(2, big)  # growing update cannot be granted
    ex.advance_to(ex.now + 500)
    assert conn.replies[1:] == [error(2, TMR, HEAP_MSG)]
    assert lim.heap.acquired_permits == blocker.result().permits  # the initial estimate came back
    lim.release(blocker.result())
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_broker_listing_larger_than_the_heap_pool_is_a_metadata_error() -> None:
    broker, conn, ex = broker_world(heap=5_000)
    broker.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    assert broker.limiter.heap.acquired_permits == 5_000  # min(10240, heap_max)
    big = [f"persistent://public/default/{'z' * 40}-{i}" for i in range(100)]
    broker.complete_listing(1, big)
    assert conn.replies == [
        error(1, ServerError.METADATA_ERROR, f"Requested permits={heap_size(big)} is larger than maxPermits=5000")
    ]
    assert_quiescent_and_clean(broker, ex, 1)


def test_broker_serialization_fault() -> None:
    broker, conn, ex = broker_world()
    broker.arm_serialization_fault(1)
    broker.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()
    assert conn.replies == [error(1, ServerError.METADATA_ERROR, "Failed to serialize the response to request 1")]
    assert broker.pending_writes == {}
    assert broker.armed_faults == set()
    assert_quiescent_and_clean(broker, ex, 1)


def test_broker_direct_acquire_timeout() -> None:
    response_size = wire_size(GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), True))
    broker, conn, ex = broker_world(direct=response_size, timeout=300)
    for request_id in (1, 2):
        broker.handle_get_topics(conn, request_id, f"ns/{request_id}", MODE)
    ex.run()
    broker.complete_listing(1, TOPICS)
    broker.complete_listing(2, TOPICS)
    ex.run()  # request 1 holds the whole direct pool until its write completes
    assert broker.limiter.heap.acquired_permits == heap_size(TOPICS)  # request 2's p1 while it waits
    ex.advance_to(ex.now + 300)
    assert conn.replies[1] == error(2, TMR, "Cannot acquire permits for direct memory")
    assert broker.limiter.heap.acquired_permits == 0
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_broker_reply_larger_than_the_direct_pool_is_a_metadata_error() -> None:
    broker, conn, ex = broker_world(direct=50)
    broker.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    broker.complete_listing(1, TOPICS)
    size = wire_size(GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), True))
    assert conn.replies == [
        error(1, ServerError.METADATA_ERROR, f"Requested permits={size} is larger than maxPermits=50")
    ]
    assert_quiescent_and_clean(broker, ex, 1)


def test_broker_write_failure_still_releases_direct() -> None:
    broker, conn, ex = broker_world()
    broker.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()
    broker.complete_write(1, False)
    assert broker.limiter.direct.acquired_permits == 0
    assert isinstance(conn.replies[0], GetTopicsResponse)
    with pytest.raises(ValueError, match="No pending write with id 1"):
        broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 1)


@pytest.mark.parametrize("stage", ["heap", "listing", "direct"])
def test_broker_disconnect_at_each_stage(stage: str) -> None:
    response_size = wire_size(GetTopicsResponse(2, tuple(TOPICS), topics_hash(TOPICS), True))
    broker, conn, ex = broker_world(heap=DEFAULT_TOPIC_LIST_SIZE, direct=response_size, timeout=5_000)
    other = broker.connect()
    broker.handle_get_topics(other, 1, "ns/other", MODE)  # holds the heap pool, then the direct pool
    ex.run()
    broker.handle_get_topics(conn, 2, NS, MODE)
    ex.run()
    if stage == "heap":
        broker.disconnect(conn)
        broker.complete_listing(1, TOPICS)  # frees heap: the head is cancelled at the next pass
        ex.run()
        assert conn.replies == [error(2, TMR, HEAP_MSG)]
    else:
        broker.complete_listing(1, TOPICS)
        ex.run()
        if stage == "listing":
            broker.complete_write(1, True)
            broker.disconnect(conn)
            broker.complete_listing(2, TOPICS)
            ex.run()
        else:
            broker.complete_listing(2, TOPICS)
            ex.run()
            broker.disconnect(conn)
            broker.complete_write(1, True)
            ex.run()
        assert conn.replies == [error(2, TMR, "Cannot acquire permits for direct memory")]
    assert not conn.active
    cancelled_in = broker.limiter.heap if stage == "heap" else broker.limiter.direct
    assert cancelled_in.outcomes[Outcome.CANCELLED] == 1
    for write_id in list(broker.pending_writes):
        broker.complete_write(write_id, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_harness_actions_reject_unknown_ids_and_bad_arguments() -> None:
    broker, _conn, ex = broker_world()
    with pytest.raises(ValueError, match="No pending listing with id 9"):
        broker.complete_listing(9, TOPICS)
    with pytest.raises(ValueError, match="exactly one"):
        broker.complete_listing(9)
    with pytest.raises(ValueError, match="Unknown variant"):
        Broker(broker.limiter, ex, variant="draft")  # type: ignore[arg-type]


# -- proxy get-topics ------------------------------------------------------------------------------------------


def test_proxy_happy_path_holds_lookup_only_inside_the_handler() -> None:
    proxy, conn, ex = proxy_world()
    proxy.handle_get_topics(conn, 1, NS, MODE, topics_hash="abcd0123")
    assert proxy.lookup.available == proxy.lookup.max
    ex.run()
    pending = proxy.pending_broker_responses[1]
    assert (pending.request_id, pending.namespace, pending.topics_hash) == (1, NS, "abcd0123")
    assert proxy.limiter.heap.acquired_permits == DEFAULT_TOPIC_LIST_SIZE
    proxy.complete_broker_response(1, TOPICS)
    ex.run()
    assert conn.replies == [GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), True)]
    assert proxy.size_cache.holder(NS, MODE).size == heap_size(TOPICS)
    proxy.complete_write(1, True)
    assert_quiescent_and_clean(proxy, ex, 1)


def test_proxy_forwards_an_unchanged_broker_answer() -> None:
    proxy, conn, ex = proxy_world()
    proxy.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    proxy.complete_broker_response(1, [], "e4a876e3", changed=False)
    ex.run()
    assert conn.replies == [GetTopicsResponse(1, (), "e4a876e3", False)]
    proxy.complete_write(1, True)
    assert_quiescent_and_clean(proxy, ex, 1)


def test_proxy_lookup_refused() -> None:
    proxy, conn, _ex = proxy_world(lookup_max=0)
    proxy.handle_get_topics(conn, 1, NS, MODE)
    assert conn.replies == [
        error(1, ServerError.SERVICE_NOT_READY, "Too many concurrent lookup and partitionsMetadata requests")
    ]


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("AuthorizationError", ServerError.AUTHORIZATION_ERROR),
        ("AuthenticationError", ServerError.AUTHENTICATION_ERROR),
        ("TopicNotFound", ServerError.SERVICE_NOT_READY),
    ],
)
def test_proxy_broker_error_kinds(kind: str, code: ServerError) -> None:
    proxy, conn, ex = proxy_world()
    proxy.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    proxy.complete_broker_response(1, error_kind=kind, message="broker said no")
    assert conn.replies == [error(1, code, "broker said no")]
    assert proxy.size_cache.holder(NS, MODE).state is SizeState.UNSET
    assert_quiescent_and_clean(proxy, ex, 1)


def test_proxy_heap_update_and_direct_failures() -> None:
    response_size = wire_size(GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), True))
    proxy, conn, ex = proxy_world(heap=DEFAULT_TOPIC_LIST_SIZE, direct=response_size, queue=1, timeout=400)
    proxy.handle_get_topics(conn, 1, "ns/1", MODE)
    ex.run()
    proxy.handle_get_topics(conn, 2, "ns/2", MODE)  # waits for heap
    proxy.handle_get_topics(conn, 3, "ns/3", MODE)  # heap queue full
    assert conn.replies == [error(3, TMR, HEAP_MSG)]
    ex.advance_to(400)
    assert conn.replies[1] == error(2, TMR, HEAP_MSG)
    proxy.complete_broker_response(1, TOPICS)
    ex.run()  # request 1 holds the direct pool
    proxy.handle_get_topics(conn, 4, "ns/4", MODE)
    ex.run()
    proxy.complete_broker_response(2, TOPICS)
    ex.advance_to(ex.now + 400)
    assert conn.replies[3] == error(4, TMR, "Failed due to direct memory limit exceeded")
    proxy.complete_write(1, True)
    assert_quiescent_and_clean(proxy, ex, 4)


def test_proxy_update_failure_and_serialization_fault() -> None:
    proxy, conn, ex = proxy_world(heap=DEFAULT_TOPIC_LIST_SIZE + 100, queue=1, timeout=400)
    proxy.handle_get_topics(conn, 1, NS, MODE)
    ex.run()
    blocker = proxy.limiter.acquire(100, LimitType.HEAP_MEMORY)
    ex.run()
    big = [f"persistent://public/default/{i:040d}" for i in range(103)]
    assert heap_size(big) == 10_300  # needs 60 more bytes than the estimate; the blocker holds the rest
    proxy.complete_broker_response(1, big)
    ex.advance_to(ex.now + 400)
    assert conn.replies == [error(1, TMR, HEAP_MSG)]
    proxy.limiter.release(blocker.result())
    proxy.arm_serialization_fault(2)
    proxy.handle_get_topics(conn, 2, "ns/2", MODE)
    ex.run()
    proxy.complete_broker_response(2, TOPICS)
    ex.run()
    assert conn.replies[1] == error(2, ServerError.SERVICE_NOT_READY, "Failed to serialize the response to request 2")
    assert_quiescent_and_clean(proxy, ex, 2)
