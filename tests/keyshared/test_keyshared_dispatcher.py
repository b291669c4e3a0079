"""Dispatcher rules (§4.4–§4.6) and worked example S18."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest

from reference_impl.keyshared import (
    DISPATCHER_LOCK,
    TRACKER_LOCK,
    Consumer,
    IllegalStateError,
    KeySharedDispatcher,
    LockTracer,
    ReadType,
    RecentlyJoinedConsumers,
    advance_last_sent_position,
)

from .client_log import ClientLog, ks_i2_violations

H4, H0, H5 = 11707, 4850, 35071


def d3(variant: str = "pip379", **kwargs: Any) -> KeySharedDispatcher:
    return KeySharedDispatcher(variant, replica_points=3, **kwargs)


def keys_of(d: KeySharedDispatcher, positions: list[tuple[int, int]]) -> str:
    return "".join(d.key_of(p).decode() for p in positions)


def test_unknown_variant_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        KeySharedDispatcher("pip999")


def test_s18() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 1000)
    d.add_consumer(c1)
    for key in "0123456789":
        d.publish(key)
    d.run_until_quiescent()
    assert d.received_by(c1) == [(1, e) for e in range(10)]
    c2 = Consumer("consumer2", 2, 1000)
    d.add_consumer(c2)
    assert d.tracker is not None
    moved = sorted(d.hash_of((1, int(k))) for k in "013679")
    assert sorted(d.tracker.draining_hashes) == moved
    assert all(e.consumer is c1 and e.ref_count == 1 for e in d.tracker.draining_hashes.values())
    for key in "0123456789":
        d.publish(key)
    d.run_until_quiescent()
    assert d.received_by(c2) == []
    assert d.received_by(c1)[10:] == [(1, 12), (1, 14), (1, 15), (1, 18)]
    assert keys_of(d, d.received_by(c1)[10:]) == "2458"
    assert [p for p, _ in d.replay_queue.items()] == [(1, 10), (1, 11), (1, 13), (1, 16), (1, 17), (1, 19)]
    assert c1.pending_acks.size() == 14
    d.remove_consumer(c1)
    assert d.replay_queue.size() == 20  # the 14 pending acks joined the 6 queued entries
    assert d.unblock_calls == [] and d.tracker.draining_hashes == {}
    d.run_until_quiescent()
    assert d.received_by(c2) == [(1, e) for e in range(20)]


def test_first_consumer_rewinds_and_last_consumer_clears() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    for key in "04":
        d.publish(key)
    d.run_until_quiescent()
    c2 = Consumer("consumer2", 2, 10)
    d.add_consumer(c2)
    assert d.tracker is not None and d.tracker.draining_hashes
    d.remove_consumer(c2)
    d.remove_consumer(c1)
    assert d.consumers == [] and not c1.connected and c1.pending_acks.closed and c1.pending_acks.size() == 0
    assert d.replay_queue.size() == 0 and d.tracker.draining_hashes == {} and d.unblock_calls == []
    assert d.read_position == (1, 2)
    c3 = Consumer("consumer3", 3, 10)
    d.add_consumer(c3)
    assert d.read_position == (1, 0)
    d.run_until_quiescent()
    assert d.received_by(c3) == [(1, 0), (1, 1)]


def test_add_consumer_rejects_duplicates_and_removed_consumers() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1)
    d.add_consumer(c1)
    with pytest.raises(ValueError):
        d.add_consumer(c1)
    d.remove_consumer(c1)
    d.remove_consumer(c1)  # a disconnected consumer: no-op
    with pytest.raises(ValueError):
        d.add_consumer(c1)
    assert d.consumers == []


def test_remove_consumer_requeues_pending_acks_with_their_hash() -> None:
    d = d3()
    c1, c2 = Consumer("consumer1", 1, 10), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.add_consumer(c2)
    d.publish("4")
    d.publish("0")
    d.run_until_quiescent()
    assert not d.scheduled_read
    d.remove_consumer(c1)
    assert d.replay_queue.items() == [((1, 0), H4)]
    assert d.scheduled_read and not c1.connected and d.available_permits(c1) == 0
    assert d.selector.select(H4) is c2
    d.run_until_quiescent()
    assert d.received_by(c2) == [(1, 1), (1, 0)]
    assert [x.read_type for x in d.deliveries if x.consumer is c2] == [ReadType.NORMAL, ReadType.REPLAY]


def test_available_permits() -> None:
    d = d3(max_unacked_per_consumer=2)
    c1 = Consumer("consumer1", 1, -3)
    d.add_consumer(c1)
    assert d.available_permits(c1) == 0
    d.flow(c1, 13)
    assert c1.permits == 10 and d.available_permits(c1) == 2
    for key in "44":
        d.publish(key)
    d.run_until_quiescent()
    assert c1.pending_acks.size() == 2 and c1.permits == 8 and d.available_permits(c1) == 0
    d.publish("4")
    d.run_until_quiescent()
    assert d.received_by(c1) == [(1, 0), (1, 1)]
    d.ack(c1, (1, 0))
    assert d.available_permits(c1) == 1
    d.run_until_quiescent()
    assert d.received_by(c1) == [(1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize(
    ("kwargs", "consumers", "limit"),
    [
        ({}, 3, 12000),
        ({"look_ahead_per_consumer": 4000, "look_ahead_per_subscription": 10000}, 3, 10000),
        ({"look_ahead_per_consumer": 0, "look_ahead_per_subscription": 7}, 3, 7),
        ({"look_ahead_per_consumer": 0, "look_ahead_per_subscription": 0}, 3, 2**31 - 1),
        (
            {"look_ahead_per_consumer": -1, "look_ahead_per_subscription": 0, "max_unacked_per_consumer": 5},
            3,
            15,
        ),
        (
            {
                "look_ahead_per_consumer": 0,
                "look_ahead_per_subscription": 0,
                "max_unacked_per_consumer": 5,
                "max_unacked_per_subscription": 9,
            },
            3,
            9,
        ),
    ],
)
def test_look_ahead_limit(kwargs: dict[str, int], consumers: int, limit: int) -> None:
    d = d3("pip379", **kwargs)
    for i in range(consumers):
        d.add_consumer(Consumer(f"c{i}", i))
    assert d.look_ahead_limit() == limit


def test_normal_read_is_capped_by_the_look_ahead_limit() -> None:
    d = d3(look_ahead_per_consumer=0, look_ahead_per_subscription=3)
    c1, c2 = Consumer("consumer1", 1, 1), Consumer("consumer2", 2, 100)
    d.add_consumer(c1)
    d.add_consumer(c2)
    for key in "44440000":
        d.publish(key)
    op = d.begin_read()
    assert op is not None and op.positions == ((1, 0), (1, 1), (1, 2))  # limit 3, replay empty
    d.complete_read(op)
    assert [p for p, _ in d.replay_queue.items()] == [(1, 1), (1, 2)]
    op = d.begin_read()  # replay entries are blocked (no permits): Normal read of max(3 - 2, 1) entry
    assert op is not None and op.read_type is ReadType.NORMAL and op.positions == ((1, 3),)
    d.complete_read(op)
    assert d.replay_queue.size() == 3
    assert d.begin_read() is None  # replay size reached the limit: no Normal read


def test_look_ahead_skips_the_next_replay_when_a_blocked_consumer_has_permits() -> None:
    d = d3()
    c1, c2 = Consumer("consumer1", 1, 10), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.publish("0")
    d.run_until_quiescent()
    d.add_consumer(c2)  # key "0" moves to consumer2 and drains on consumer1
    d.publish("0")
    result = d.read_more_entries()
    assert result.read_type is ReadType.NORMAL and result.dispatched == {} and result.to_replay == ((1, 1),)
    assert d.skip_next_replay_to_trigger_look_ahead
    assert d.begin_read() is None  # the replay is skipped once; the Normal read finds nothing
    assert not d.skip_next_replay_to_trigger_look_ahead


def test_look_ahead_when_another_consumer_has_no_entry_in_the_batch() -> None:
    d = d3()
    c1, c2 = Consumer("consumer1", 1, 1), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.add_consumer(c2)
    d.publish("4")
    d.run_until_quiescent()
    d.publish("4")
    result = d.read_more_entries()  # consumer1 has no permits left; consumer2 has no entry
    assert result.dispatched == {} and d.skip_next_replay_to_trigger_look_ahead


def test_replay_first_with_per_pass_permits() -> None:
    d = d3()
    c1, c2 = Consumer("consumer1", 1, 1), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.add_consumer(c2)
    for key in "4440":
        d.publish(key)
    d.read_more_entries()
    d.flow(c1, 1)
    d.publish("0")
    result = d.read_more_entries()
    assert result.read_type is ReadType.REPLAY and result.dispatched == {c1: [(1, 1)]}
    assert [p for p, _ in d.replay_queue.items()] == [(1, 2)]
    result = d.read_more_entries()
    assert result.read_type is ReadType.NORMAL and result.dispatched == {c2: [(1, 4)]}


def test_a_held_back_hash_stays_blocked_for_the_rest_of_the_pass() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    for key in "444":
        d.publish(key)
    d.run_until_quiescent()
    d.redeliver_unacknowledged(c1, [(1, 1), (1, 2)])
    assert d.replay_queue.items() == [((1, 1), None), ((1, 2), None)]
    c3 = Consumer("consumer3", 3, 10)
    d.add_consumer(Consumer("consumer2", 2, 10))
    d.add_consumer(c3)  # key "4" moves to consumer3 while consumer1 still holds 1:0
    assert d.tracker is not None
    entry = d.tracker.get_entry(H4)
    assert entry is not None and entry.consumer is c1
    result = d.read_more_entries()  # unknown hashes pass the replay filter and are checked at dispatch
    assert result.read_type is ReadType.REPLAY and result.dispatched == {}
    assert result.to_replay == ((1, 1), (1, 2))
    assert entry.blocked_count == 1  # the second entry of the hash was not even checked


def test_replay_filter_remembers_blocked_hashes() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 1)
    d.add_consumer(c1)
    d.add_consumer(Consumer("consumer2", 2, 10))
    for key in "444":
        d.publish(key)
    d.read_more_entries()
    assert [p for p, _ in d.replay_queue.items()] == [(1, 1), (1, 2)]
    d.add_consumer(Consumer("consumer3", 3, 10))
    assert d.tracker is not None
    entry = d.tracker.get_entry(H4)
    assert entry is not None and entry.consumer is c1
    assert d.begin_read() is None
    assert entry.blocked_count == 1  # two queued entries of the hash, one should_block call


def test_ack_advances_mark_delete_and_cleans_up() -> None:
    d = d3()
    c1, c2 = Consumer("consumer1", 1, 10), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.add_consumer(c2)
    for key in "4040":
        d.publish(key)
    d.run_until_quiescent()
    with pytest.raises(ValueError):
        d.ack(c1, (1, 9))
    d.ack(c1, (1, 1))  # held by consumer2: removed from the first other consumer holding it
    assert not c2.pending_acks.contains(1, 1)
    assert d.mark_delete_position == (1, -1) and d.individually_acked == {(1, 1)}
    assert not d.scheduled_read
    d.ack(c1, (1, 0))
    assert d.mark_delete_position == (1, 1) and d.individually_acked == set()
    assert d.scheduled_read  # pip379 mark-delete hook
    d.ack(c2, (1, 3))
    d.ack(c2, (1, 3))  # acking twice changes nothing
    assert d.mark_delete_position == (1, 1) and d.individually_acked == {(1, 3)}
    # A position both pending and below mark-delete is dropped by remove_all_up_to.
    c1.pending_acks.add_pending_ack_if_allowed(1, 0, 1, H4)
    d.ack(c1, (1, 2))
    assert d.mark_delete_position == (1, 3) and c1.pending_acks.size() == 0


def test_redelivery_requeues_without_hash_and_never_acked_positions() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    for key in "4455":
        d.publish(key)
    d.run_until_quiescent()
    d.redeliver_unacknowledged(c1, [(1, 1), (1, 3), (1, 3)])
    assert d.replay_queue.items() == [((1, 1), None), ((1, 3), None)] and d.scheduled_read
    assert c1.pending_acks.size() == 2
    d.run_until_quiescent()
    assert d.received_by(c1) == [(1, 0), (1, 1), (1, 2), (1, 3), (1, 1), (1, 3)]
    d.ack(c1, (1, 0))
    c1.pending_acks.add_pending_ack_if_allowed(1, 0, 1, H4)  # stale: already acked at the cursor
    d.scheduled_read = False
    d.redeliver_unacknowledged(c1)
    assert c1.pending_acks.size() == 0 and not c1.pending_acks.closed
    assert [p for p, h in d.replay_queue.items()] == [(1, 1), (1, 2), (1, 3)]
    assert all(h is None for _, h in d.replay_queue.items()) and d.scheduled_read


def test_redelivery_releases_draining_hashes_and_unblocks() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    d.publish("4")
    d.run_until_quiescent()
    d.add_consumer(Consumer("consumer2", 2, 10))
    c3 = Consumer("consumer3", 3, 10)
    d.add_consumer(c3)
    d.publish("4")
    d.run_until_quiescent()
    assert d.received_by(c3) == []
    d.redeliver_unacknowledged(c1)  # for_each_and_clear: one batch, closing=False
    assert d.unblock_calls == [-1]
    d.run_until_quiescent()
    assert d.received_by(c3) == [(1, 0), (1, 1)]


def test_handle_adding_pending_ack() -> None:
    d = d3()
    c1, c2 = Consumer("consumer1", 1, 10), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.add_consumer(c2)
    assert d.tracker is not None
    with pytest.raises(ValueError):
        d.handle_adding_pending_ack(c1, 1, 0, 0)
    d.publish("0")
    d.tracker.add_entry(c1, H0)
    assert d.handle_adding_pending_ack(c1, 1, 0, H0)
    # The last-moment check: consumer2 may not take a hash consumer1 drains; the entry goes to replay.
    assert not c2.pending_acks.add_pending_ack_if_allowed(1, 0, 1, H0)
    assert d.replay_queue.items() == [((1, 0), H0)] and c2.pending_acks.size() == 0


def test_read_racing_a_consumer_change_is_retried_in_order() -> None:
    d = d3()
    c1, c2 = Consumer("consumer1", 1, 1), Consumer("consumer2", 2, 1000)
    d.add_consumer(c1)
    d.add_consumer(c2)
    for key in "440":
        d.publish(key)
    d.read_more_entries()
    assert d.replay_queue.items() == [((1, 1), H4)]
    d.publish("0")
    op = d.begin_read()
    assert op is not None and op.read_type is ReadType.NORMAL and d.min_replayed_position == (1, 1)
    d.remove_consumer(c1)  # in the gap: 1:0 is queued, below the replay position seen at begin
    result = d.complete_read(op)
    assert result.dispatched == {} and result.to_replay == ((1, 3),)
    with pytest.raises(IllegalStateError):
        d.complete_read(op)
    d.run_until_quiescent()
    assert d.received_by(c2) == [(1, 2), (1, 0), (1, 1), (1, 3)]


def test_completing_a_read_without_consumers_rewinds() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    d.publish("4")
    op = d.begin_read()
    assert op is not None and d.read_position == (1, 1)
    d.remove_consumer(c1)
    assert d.complete_read(op).dispatched == {}
    assert d.read_position == (1, 0) and d.deliveries == []


def test_interleaved_ack_unblocks_during_a_pass() -> None:
    tracer = LockTracer()
    d = KeySharedDispatcher("pip379", replica_points=3, lock_tracer=tracer)
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    for key in "45":
        d.publish(key)
    d.run_until_quiescent()
    c3 = Consumer("consumer3", 3, 10)
    d.add_consumer(Consumer("consumer2", 2, 10))
    d.add_consumer(c3)
    for key in "4044":
        d.publish(key)
    stats = c1.get_draining_hashes_stats()  # the stats path: stats[c] then tracker
    assert stats is not None and stats.draining_hashes == ((H4, 1, 0),)
    calls: list[tuple[str, int]] = []
    held_in_interleave: list[frozenset[str]] = []

    def interleave(stage: str, index: int) -> None:
        calls.append((stage, index))
        held_in_interleave.append(tracer.held)
        if index == 2:
            d.ack(c1, (1, 0))  # consumer1's last pending ack of key "4": the hash unblocks
        with pytest.raises(IllegalStateError):
            d.add_consumer(Consumer("x", 9))

    d.scheduled_read = False
    result = d.read_more_entries(interleave)
    assert calls == [("dispatch", 1), ("dispatch", 2), ("dispatch", 3)]
    assert held_in_interleave == [frozenset()] * 3  # acks run on another thread
    assert d.unblock_calls == [H4] and d.scheduled_read
    assert c3 not in result.dispatched
    assert d.received_by(c3) == []  # the whole hash was held back in this pass
    d.run_until_quiescent()
    assert d.received_by(c3) == [(1, 2), (1, 4), (1, 5)]
    edges = tracer.order_edges()
    assert {(DISPATCHER_LOCK, TRACKER_LOCK), ("stats[1]", TRACKER_LOCK), (DISPATCHER_LOCK, "pending[1]")} <= edges
    assert nx.is_directed_acyclic_graph(nx.DiGraph(edges))
    for event in tracer.events:
        if event.name == "unblock":
            assert TRACKER_LOCK not in event.held and not any(h.startswith("stats[") for h in event.held)


def test_interleave_runs_in_the_replay_filter_too() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    for key in "455":
        d.publish(key)
    d.run_until_quiescent()
    d.redeliver_unacknowledged(c1)
    stages: list[tuple[str, int]] = []
    d.read_more_entries(lambda stage, index: stages.append((stage, index)))
    assert stages[:2] == [("replay_filter", 1), ("replay_filter", 2)]
    assert stages[2:] == [("dispatch", 1), ("dispatch", 2)]


def test_quiescence_stops_when_the_look_ahead_flag_only_alternates() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    for key in "44":
        d.publish(key)
    d.run_until_quiescent()
    d.redeliver_unacknowledged(c1, [(1, 1)])
    d.add_consumer(Consumer("consumer2", 2, 10))
    c3 = Consumer("consumer3", 3, 10)
    d.add_consumer(c3)
    reads = d.run_until_quiescent()
    assert 1 < reads < 10 and not d.scheduled_read
    assert d.received_by(c3) == [] and d.replay_queue.items() == [((1, 1), H4)]  # its hash learnt by a replay
    d.ack(c1, (1, 0))  # KS-I5(a): the entry is gone at once and a read is scheduled
    assert d.tracker is not None and d.tracker.draining_hashes == {}
    assert d.unblock_calls == [H4] and d.scheduled_read
    d.run_until_quiescent()
    assert d.received_by(c3) == [(1, 1)]


def test_classic_stuck_on_replays_skips_one_replay() -> None:
    d = d3("classic")
    c1, c2 = Consumer("consumer1", 1, 1), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.add_consumer(c2)
    d.publish("4")
    d.read_more_entries()
    d.publish("4")
    d.read_more_entries()
    assert d.is_dispatcher_stuck_on_replays
    d.flow(c1, 1)
    assert d.read_more_entries().read_type is None  # the replay fetch returned nothing, once
    assert not d.is_dispatcher_stuck_on_replays
    assert d.read_more_entries().dispatched == {c1: [(1, 1)]}


def test_classic_mark_delete_pruning_is_deferred_to_the_end_of_the_pass() -> None:
    d = d3("classic")
    c1, c2 = Consumer("consumer1", 1, 10), Consumer("consumer2", 2, 10)
    d.add_consumer(c1)
    d.add_consumer(c2)
    d.publish("4")
    d.read_more_entries()
    c3 = Consumer("consumer3", 3, 10)
    d.add_consumer(c3)
    assert d.recently_joined is not None and d.recently_joined.items() == [(c3, (1, 1))]
    d.publish("4")
    d.publish("0")
    seen: list[bool] = []

    def interleave(_stage: str, _index: int) -> None:
        d.ack(c1, (1, 0))
        assert d.recently_joined is not None
        seen.append(c3 in d.recently_joined)

    d.scheduled_read = False
    d.read_more_entries(interleave)
    assert seen == [True]
    assert len(d.recently_joined) == 0 and d.scheduled_read
    d.run_until_quiescent()
    assert d.received_by(c3) == [(1, 1)]


def test_recently_joined_consumers_sort() -> None:
    a, b, c = Consumer("a", 1), Consumer("b", 2), Consumer("c", 3)
    joined = RecentlyJoinedConsumers()
    joined.put(a, (1, 5))
    joined.put(b, (1, 3))
    assert joined.items() == [(b, (1, 3)), (a, (1, 5))] and joined.sort_count == 1
    joined.put(c, (1, 9))
    assert joined.sort_count == 1 and joined.head() == (1, 3) and joined.get(c) == (1, 9)
    assert joined.remove_head_while_at_most((1, 5)) and joined.items() == [(c, (1, 9))]
    assert not joined.remove_head_while_at_most((1, 5))


def test_pip282_last_sent_position_example() -> None:
    sent = [(3, 1), (3, 2), (3, 3), (3, 5), (3, 8), (3, 9), (3, 10)]
    last, individually = advance_last_sent_position((3, 0), set(), sent, (3, -1))
    assert last == (3, 3) and individually == {(3, 5), (3, 8), (3, 9), (3, 10)}
    last, individually = advance_last_sent_position(last, individually, [(3, 7), (3, 6), (3, 4)], (3, -1))
    assert last == (3, 10) and individually == set()
    assert advance_last_sent_position((3, 0), {(3, 9)}, [], (3, 4)) == ((3, 4), {(3, 9)})


def test_pip282_tracks_last_sent_and_resets_when_empty() -> None:
    d = d3("pip282")
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    assert d.last_sent_position is None
    for key in "45":
        d.publish(key)
    d.run_until_quiescent()
    assert d.last_sent_position == (1, 1) and d.individually_sent_positions == set()
    d.remove_consumer(c1)
    assert d.last_sent_position is None


def test_client_log_sees_no_violation_in_s18() -> None:
    log = ClientLog(d3())
    c1 = log.add("consumer1", 1, 1000)
    for key in "0123456789":
        log.d.publish(key)
    log.run()
    log.add("consumer2", 2, 1000)
    assert ks_i2_violations(log.d) == []
    for key in "0123456789":
        log.d.publish(key)
    log.run()
    assert ks_i2_violations(log.d) == []
    log.ack(c1, (1, 0))
    assert ks_i2_violations(log.d) == []
    log.remove(c1)
    log.run()
    assert log.ks_i1 == [] and log.ks_i4 == [] and ks_i2_violations(log.d) == []


def test_view_is_identity_free() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    d.publish("4")
    d.run_until_quiescent()
    d.add_consumer(Consumer("consumer3", 3, 10))
    view = d.view()
    assert [c.consumer_id for c in view.consumers] == [1, 3]
    assert view.consumers[0].received == ((1, 0),) and view.consumers[0].pending_acks == (((1, 0), H4),)
    assert [(x.hash, x.consumer_id, x.ref_count, x.blocked_count) for x in view.draining_hashes] == [(H4, 1, 1, 0)]
    assert view.ring_ranges[0] == (1, 14358, 3) and view.ring_ranges[-1][1] == 65535
    assert view.read_position == (1, 1) and view.mark_delete_position == (1, -1)
    assert view.delivery_count == 1 and view.unblock_calls == ()


def test_one_outstanding_read_per_type() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 1)
    d.add_consumer(c1)
    d.add_consumer(Consumer("consumer2", 2, 10))
    for key in "440":
        d.publish(key)
    first = d.begin_read()
    assert first is not None and first.read_type is ReadType.NORMAL and d.have_pending_read
    assert d.begin_read() is None  # no second Normal read while one is in flight
    d.complete_read(first)
    assert not d.have_pending_read and d.replay_queue.items() == [((1, 1), H4)]
    d.flow(c1, 1)
    replay = d.begin_read()
    assert replay is not None and replay.read_type is ReadType.REPLAY and d.have_pending_replay_read
    d.publish("0")
    normal = d.begin_read()  # a Normal read may overlap the Replay read
    assert normal is not None and normal.read_type is ReadType.NORMAL and normal.positions == ((1, 3),)
    d.complete_read(replay)
    d.complete_read(normal)
    assert d.received_by(c1) == [(1, 0), (1, 1)]


@pytest.mark.parametrize("variant", ["pip379", "classic"])
def test_first_consumer_joining_during_a_read_rewinds_when_it_completes(variant: str) -> None:
    d = d3(variant)
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    for key in "45":
        d.publish(key)
    op = d.begin_read()
    assert op is not None and d.read_position == (1, 2)
    d.remove_consumer(c1)
    c2, c3 = Consumer("consumer2", 2, 10), Consumer("consumer3", 3, 10)
    d.add_consumer(c2)
    d.add_consumer(c3)  # classic: not recorded as recently joined while the rewind is pending
    assert d.should_rewind_before_reading_or_replaying and d.read_position == (1, 2)
    assert d.recently_joined is None or len(d.recently_joined) == 0
    assert d.complete_read(op).dispatched == {}
    assert not d.should_rewind_before_reading_or_replaying and d.read_position == (1, 0)
    d.run_until_quiescent()
    assert sorted(d.received_by(c2) + d.received_by(c3)) == [(1, 0), (1, 1)]  # once each


def test_replay_read_racing_a_disconnect_breaks_per_key_order() -> None:
    """Spec gap, reported: the #12885 retry only catches positions queued *below* the first queued
    position, so a Replay read in flight while the holder of an earlier message of the same hash
    disconnects delivers the later message first. The same steps break classic and pip282 too."""
    log = ClientLog(d3())
    d = log.d
    c1, c2 = log.add("consumer1", 1, 0), log.add("consumer2", 2, 1)
    c3 = log.add("consumer3", 3, 5)
    for key in "500":
        d.publish(key)
    log.read()
    assert log.received(c2) == [(1, 1)] and d.replay_queue.items() == [((1, 0), H5), ((1, 2), H0)]
    d.flow(c1, 1)
    d.flow(c2, 1)
    op = d.begin_read()
    assert op is not None and op.positions == ((1, 0), (1, 2)) and d.min_replayed_position == (1, 0)
    log.remove(c2)  # 1:1 (key "0") is queued above the first queued position 1:0
    d.complete_read(op)
    log.sync()
    log.run()
    assert log.received(c3) == [(1, 2), (1, 1)]
    assert log.ks_i4 == ["consumer3 got (1, 2) before (1, 1)"] and log.ks_i1 == []


def test_draining_stats_through_the_consumer() -> None:
    d = d3()
    c1 = Consumer("consumer1", 1, 10)
    d.add_consumer(c1)
    d.publish("4")
    d.run_until_quiescent()
    d.add_consumer(Consumer("consumer3", 3, 10))
    d.publish("4")
    d.run_until_quiescent()
    stats = c1.get_draining_hashes_stats()
    assert stats is not None
    assert (stats.draining_hashes_count, stats.draining_hashes_unacked_messages) == (1, 1)
    assert stats.draining_hashes == ((H4, 1, 2),)  # blocked once in the Normal pass, once in the replay filter
    d.ack(c1, (1, 0))
    stats = c1.get_draining_hashes_stats()
    assert stats is not None and stats.draining_hashes_count == 0 and stats.draining_hashes_cleared_total == 1
    classic = d3("classic")
    c2 = Consumer("consumer2", 2)
    classic.add_consumer(c2)
    assert c2.get_draining_hashes_stats() is None
