"""Topic-list watcher flow (spec §4.8 watcher)."""

from __future__ import annotations

from reference_impl.topiclist import (
    DEFAULT_TOPIC_LIST_SIZE,
    Backoff,
    Broker,
    Connection,
    GetTopicsResponse,
    LimitType,
    Outcome,
    ServerError,
    SizeState,
    SuccessReply,
    VirtualExecutor,
    WatchSuccess,
    WatchUpdate,
    heap_size,
    topics_hash,
    wire_size,
)

from .worlds import NS, TMR, TOPICS, assert_quiescent_and_clean, broker_world, error, replies_per_request, settle

CLOSED_EARLY = "Closed watcher before creation was complete"
SUCCESS = WatchSuccess(10, 1, topics_hash(TOPICS), tuple(TOPICS))


def live_watcher(broker: Broker, conn: Connection, ex: VirtualExecutor) -> None:
    """Watcher 1 (request 10) on NS, listed with TOPICS; the success write is left pending."""
    broker.handle_watch(conn, 10, 1, NS)
    ex.run()
    listing_id = max(broker.pending_listings)
    broker.complete_listing(listing_id, TOPICS)
    ex.run()


def test_backoff_doubles_from_100_ms_caps_at_25_s_and_resets() -> None:
    backoff = Backoff()
    assert [backoff.next() for _ in range(10)] == [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25000, 25000]
    backoff.reset()
    assert backoff.next() == 100


def test_watch_success_path() -> None:
    broker, conn, ex = broker_world()
    broker.handle_watch(conn, 10, 1, NS)
    watcher = broker.watchers[1]
    assert (watcher.registered, watcher.initializing, watcher.live) == (True, True, False)
    ex.run()
    listing = broker.pending_listings[1]
    assert (listing.namespace, listing.mode) == (NS, "PERSISTENT")
    assert broker.limiter.heap.acquired_permits == DEFAULT_TOPIC_LIST_SIZE
    broker.complete_listing(1, TOPICS)
    assert watcher.live and not watcher.initializing
    assert broker.limiter.heap.acquired_permits == 0  # heap is released when listing ends
    assert broker.lookup.available == broker.lookup.max  # released once the first send started
    ex.run()
    assert conn.replies == [SUCCESS]
    assert broker.limiter.direct.acquired_permits == wire_size(SUCCESS)
    assert broker.size_cache.holder(NS, "PERSISTENT").size == heap_size(TOPICS)
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 1)
    assert watcher.registered


def test_watch_success_with_matching_hash_sends_no_topics() -> None:
    broker, conn, ex = broker_world()
    broker.handle_watch(conn, 10, 1, NS, topics_hash=topics_hash(TOPICS))
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()
    assert conn.replies == [WatchSuccess(10, 1, topics_hash(TOPICS), ())]


def test_watch_lookup_refused_and_authorization_denied() -> None:
    broker, conn, ex = broker_world(lookup_max=1)
    broker.handle_get_topics(conn, 1, "ns/other", "PERSISTENT")
    broker.handle_watch(conn, 10, 1, NS)
    assert conn.replies == [error(10, TMR, "Failed due to too many pending lookup requests")]
    broker.deny_authorization("ns/other")
    broker.handle_watch(conn, 11, 2, "ns/other")
    assert conn.replies[-1] == error(11, TMR, "Failed due to too many pending lookup requests")
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()
    broker.complete_write(1, True)
    broker.handle_watch(conn, 12, 3, "ns/other")
    assert conn.replies[-1] == error(
        12, ServerError.AUTHORIZATION_ERROR, "Proxy Client is not authorized to watchTopicList"
    )
    assert 3 not in broker.watchers
    assert_quiescent_and_clean(broker, ex, 4)


def test_updates_are_sent_one_at_a_time_after_the_success() -> None:
    broker, conn, ex = broker_world(direct=wire_size(SUCCESS))
    direct = broker.limiter.direct
    live_watcher(broker, conn, ex)  # the success write holds the whole direct pool
    broker.topics_changed(NS, ["persistent://public/default/new1"], [])
    broker.topics_changed(NS, ["persistent://public/default/new2"], [TOPICS[0]])
    broker.topics_changed("other/ns", ["persistent://other/ns/x"], [])
    watcher = broker.watchers[1]
    assert len(watcher.update_queue) == 1 and watcher.sending_in_progress
    assert direct.request_count == 2  # the success, then only the first update
    broker.complete_write(1, True)
    ex.run()
    first = WatchUpdate(
        1, ("persistent://public/default/new1",), (), topics_hash([*TOPICS, "persistent://public/default/new1"])
    )
    assert conn.replies == [SUCCESS, first]
    assert direct.request_count == 3  # the second update started after the first send completed
    broker.complete_write(2, True)
    ex.run()
    second_topics = [*TOPICS[1:], "persistent://public/default/new1", "persistent://public/default/new2"]
    assert conn.replies[2] == WatchUpdate(
        1, ("persistent://public/default/new2",), (TOPICS[0],), topics_hash(second_topics)
    )
    broker.complete_write(3, True)
    assert not watcher.sending_in_progress
    settle(broker, ex)
    assert direct.acquired_permits == 0


def test_events_during_the_success_send_wait_behind_it() -> None:
    broker, conn, ex = broker_world()
    broker.handle_watch(conn, 10, 1, NS)
    ex.run()
    broker.complete_listing(1, TOPICS)  # success send requested, not yet granted
    broker.topics_changed(NS, [], [TOPICS[2]])
    ex.run()
    assert conn.replies == [SUCCESS, WatchUpdate(1, (), (TOPICS[2],), topics_hash(TOPICS[:2]))]


def test_listing_retries_after_heap_timeout_with_doubling_backoff() -> None:
    broker, conn, ex = broker_world(heap=DEFAULT_TOPIC_LIST_SIZE, timeout=50)
    heap = broker.limiter.heap
    broker.handle_get_topics(conn, 1, "ns/blocker", "PERSISTENT")
    ex.run()  # request 1 holds the whole heap pool while its listing is pending
    broker.handle_watch(conn, 10, 1, NS)
    ex.run()
    attempts = [heap.queue[-1].created_at]
    seen = heap.request_count
    while len(attempts) < 6:
        nxt = ex.next_trigger_time()
        assert nxt is not None
        ex.advance_to(nxt)
        if heap.request_count != seen:
            seen = heap.request_count
            attempts.append(ex.now)
    # each attempt times out after 50 ms, then waits 100, 200, 400, 800, 1600 ms
    assert attempts == [0, 150, 400, 850, 1700, 3350]
    assert heap.outcomes[Outcome.TIMEOUT] == 5
    assert replies_per_request(broker)[10] == 0
    assert broker.lookup.available == broker.lookup.max - 2
    broker.complete_listing(1, TOPICS)
    ex.run()
    broker.complete_write(1, True)
    ex.advance_to(ex.now + 3200)  # the next retry gets the heap
    broker.complete_listing(2, TOPICS)
    ex.run()
    assert conn.replies[-1] == SUCCESS
    assert conn.retry_backoff.current_ms == 100  # reset by the success
    broker.complete_write(2, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_success_send_retries_direct_timeouts_until_it_fits() -> None:
    response = GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), True)
    broker, conn, ex = broker_world(direct=wire_size(response), timeout=50)
    broker.handle_get_topics(conn, 1, "ns/blocker", "PERSISTENT")
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()  # request 1's write holds the whole direct pool
    live_watcher(broker, conn, ex)
    assert broker.lookup.available == broker.lookup.max  # released at the first send attempt
    ex.advance_to(ex.now + 2000)
    assert broker.limiter.direct.outcomes[Outcome.TIMEOUT] >= 4
    assert replies_per_request(broker)[10] == 0
    broker.complete_write(1, True)
    ex.advance_to(ex.now + 30_000)
    assert conn.replies[-1] == SUCCESS
    broker.complete_write(2, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_send_stops_quietly_when_the_connection_goes_away() -> None:
    response = GetTopicsResponse(1, tuple(TOPICS), topics_hash(TOPICS), True)
    broker, conn, ex = broker_world(direct=wire_size(response), timeout=50)
    other = broker.connect()
    broker.handle_get_topics(other, 1, "ns/blocker", "PERSISTENT")
    ex.run()
    broker.complete_listing(1, TOPICS)
    ex.run()
    live_watcher(broker, conn, ex)
    broker.disconnect(conn)
    ex.advance_to(ex.now + 1000)
    broker.complete_write(1, True)
    settle(broker, ex)
    assert conn.replies == []  # the watch request stays unanswered (TL-I8 exemption)
    assert broker.limiter.direct.acquired_permits == 0
    assert broker.lookup.available == broker.lookup.max


def test_close_before_creation_complete_answers_the_watch_and_discards_the_late_result() -> None:
    broker, conn, ex = broker_world()
    broker.handle_watch(conn, 10, 1, NS)
    ex.run()
    broker.handle_watch_close(conn, 11, 1)
    assert conn.replies == [error(10, ServerError.METADATA_ERROR, CLOSED_EARLY), SuccessReply(11)]
    assert broker.lookup.available == broker.lookup.max
    watcher = broker.watchers[1]
    assert not watcher.registered
    broker.complete_listing(1, TOPICS)
    ex.run()
    assert len(conn.replies) == 2
    assert not watcher.live
    assert_quiescent_and_clean(broker, ex, 2)


def test_close_while_a_retry_is_waiting() -> None:
    broker, conn, ex = broker_world(heap=DEFAULT_TOPIC_LIST_SIZE, timeout=50)
    heap = broker.limiter.heap
    broker.handle_get_topics(conn, 1, "ns/blocker", "PERSISTENT")
    ex.run()
    broker.handle_watch(conn, 10, 1, NS)
    ex.advance_to(60)  # timed out, retry scheduled at 150
    attempts = heap.request_count
    broker.handle_watch_close(conn, 11, 1)
    ex.advance_to(1000)
    assert heap.request_count == attempts
    assert conn.replies == [error(10, ServerError.METADATA_ERROR, CLOSED_EARLY), SuccessReply(11)]
    broker.complete_listing(1, TOPICS)
    ex.run()
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 3)


def test_close_of_a_live_watcher_stops_updates() -> None:
    broker, conn, ex = broker_world()
    live_watcher(broker, conn, ex)
    broker.handle_watch_close(conn, 11, 1)
    broker.handle_watch_close(conn, 12, 99)  # unknown id: still Success
    broker.topics_changed(NS, ["persistent://public/default/late"], [])
    assert conn.replies == [SUCCESS, SuccessReply(11), SuccessReply(12)]
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 3)


def test_listing_error_replies_and_unregisters() -> None:
    broker, conn, ex = broker_world()
    broker.handle_watch(conn, 10, 1, NS)
    ex.run()
    broker.complete_listing(1, error="store down")
    assert conn.replies == [error(10, ServerError.METADATA_ERROR, "store down")]
    assert not broker.watchers[1].registered
    assert broker.size_cache.holder(NS, "PERSISTENT").state is SizeState.UNSET  # later listers do not hang
    broker.handle_get_topics(conn, 20, NS, "PERSISTENT")
    ex.run()
    broker.complete_listing(2, TOPICS)
    ex.run()
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_late_failure_after_close_still_resets_the_size_holder() -> None:
    broker, conn, ex = broker_world()
    broker.handle_watch(conn, 10, 1, NS)
    ex.run()
    broker.handle_watch_close(conn, 11, 1)
    broker.complete_listing(1, error="late")
    assert broker.size_cache.holder(NS, "PERSISTENT").state is SizeState.UNSET
    assert conn.replies == [error(10, ServerError.METADATA_ERROR, CLOSED_EARLY), SuccessReply(11)]
    assert_quiescent_and_clean(broker, ex, 2)


def test_heap_timeout_on_an_inactive_connection_is_a_final_error() -> None:
    broker, conn, ex = broker_world(heap=DEFAULT_TOPIC_LIST_SIZE, timeout=50)
    other = broker.connect()
    broker.handle_get_topics(other, 1, "ns/blocker", "PERSISTENT")
    ex.run()
    broker.handle_watch(conn, 10, 1, NS)
    broker.disconnect(conn)
    ex.advance_to(50)
    assert conn.replies == [error(10, ServerError.METADATA_ERROR, "Permit acquisition timed out")]
    broker.complete_listing(1, TOPICS)
    ex.run()
    broker.complete_write(1, True)
    assert_quiescent_and_clean(broker, ex, 2)


def test_serialization_fault_on_the_success_is_a_metadata_error() -> None:
    broker, conn, ex = broker_world()
    broker.arm_serialization_fault(10)
    live_watcher(broker, conn, ex)
    assert conn.replies == [error(10, ServerError.METADATA_ERROR, "Failed to serialize the response to request 10")]
    assert not broker.watchers[1].registered
    assert_quiescent_and_clean(broker, ex, 1)


def test_heap_update_to_the_actual_size_is_skipped_when_the_estimate_was_exact() -> None:
    broker, conn, ex = broker_world()
    live_watcher(broker, conn, ex)
    broker.complete_write(1, True)
    heap = broker.limiter.heap
    before = heap.request_count
    broker.handle_watch(conn, 20, 2, NS)  # the size is now KNOWN: the estimate equals the actual size
    ex.run()
    broker.complete_listing(2, TOPICS)
    assert heap.request_count == before + 1  # one acquire, no update
    assert heap.snapshot().acquired == 0
    ex.run()
    assert conn.replies[-1] == WatchSuccess(20, 2, topics_hash(TOPICS), tuple(TOPICS))
    assert broker.limiter.limiter(LimitType.DIRECT_MEMORY).acquired_permits == wire_size(SUCCESS)
