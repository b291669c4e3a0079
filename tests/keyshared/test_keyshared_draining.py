"""DrainingHashesTracker (§4.3, worked examples S1, S3, S5; KS-I3, KS-I7, KS-I10)."""

from __future__ import annotations

import networkx as nx
import pytest

from reference_impl.keyshared import (
    TRACKER_LOCK,
    Consumer,
    ConsumerDrainingStats,
    DrainingHashesTracker,
    IllegalStateError,
    LockTracer,
    stats_lock,
)


def new_tracker(tracer: LockTracer | None = None) -> tuple[DrainingHashesTracker, list[int]]:
    calls: list[int] = []
    return DrainingHashesTracker("dispatcher", calls.append, lock_tracer=tracer), calls


C1, C2 = Consumer("c1", 1), Consumer("c2", 2)


def test_s1_add_entry_and_zero_hash() -> None:
    tracker, _ = new_tracker()
    tracker.add_entry(C1, 1)
    entry = tracker.get_entry(1)
    assert entry is not None and entry.consumer is C1 and entry.ref_count == 1 and entry.blocked_count == 0
    with pytest.raises(ValueError):
        tracker.add_entry(C1, 0)
    assert tracker.get_entry(0) is None


def test_s3_should_block() -> None:
    tracker, calls = new_tracker()
    tracker.add_entry(C1, 1)
    assert not tracker.should_block_sticky_key_hash(C1, 1)
    assert tracker.get_entry(1) is None and calls == []
    tracker.add_entry(C1, 1)
    assert tracker.should_block_sticky_key_hash(C2, 1)
    entry = tracker.get_entry(1)
    assert entry is not None and entry.blocked_count == 1
    empty, _ = new_tracker()
    assert not empty.should_block_sticky_key_hash(C1, 1)


def test_s5_batched_unblock_reports_minus_one_once() -> None:
    tracker, calls = new_tracker()
    tracker.add_entry(C1, 1)
    tracker.start_batch()
    assert tracker.should_block_sticky_key_hash(C2, 1)
    tracker.reduce_ref_count(C1, 1, False)
    assert calls == [] and tracker.unblocked_while_batching
    tracker.end_batch()
    assert calls == [-1]
    assert tracker.batch_level == 0 and not tracker.unblocked_while_batching


def test_nested_batches_report_at_the_outermost_end_only() -> None:
    tracker, calls = new_tracker()
    for h in (1, 2):
        tracker.add_entry(C1, h)
        assert tracker.should_block_sticky_key_hash(C2, h)
    tracker.start_batch()
    tracker.start_batch()
    tracker.reduce_ref_count(C1, 1, False)
    tracker.end_batch()
    assert calls == [] and tracker.batch_level == 1
    tracker.reduce_ref_count(C1, 2, False)
    tracker.end_batch()
    assert calls == [-1]
    tracker.start_batch()
    tracker.end_batch()
    assert calls == [-1]  # a batch with no unblocking makes no call


def test_unblock_callback_only_for_blocked_non_closing_removal() -> None:
    tracker, calls = new_tracker()
    tracker.add_entry(C1, 5)
    tracker.add_entry(C1, 5)
    assert tracker.should_block_sticky_key_hash(C2, 5)
    tracker.reduce_ref_count(C1, 5, False)
    assert calls == [] and tracker.get_entry(5) is not None  # ref 2 -> 1
    tracker.reduce_ref_count(C1, 5, False)
    assert calls == [5] and tracker.get_entry(5) is None
    tracker.add_entry(C1, 6)  # never blocked
    tracker.reduce_ref_count(C1, 6, False)
    tracker.add_entry(C1, 7)
    assert tracker.should_block_sticky_key_hash(C2, 7)
    tracker.reduce_ref_count(C1, 7, True)  # closing
    assert calls == [5]
    tracker.reduce_ref_count(C1, 8, False)  # no entry: no-op
    tracker.reduce_ref_count(C1, 0, False)
    assert calls == [5]


def test_other_owner_raises_illegal_state() -> None:
    tracker, _ = new_tracker()
    tracker.add_entry(C1, 3)
    with pytest.raises(IllegalStateError):
        tracker.add_entry(C2, 3)
    with pytest.raises(IllegalStateError):
        tracker.reduce_ref_count(C2, 3, False)
    entry = tracker.get_entry(3)
    assert entry is not None and entry.ref_count == 1
    assert issubclass(IllegalStateError, RuntimeError)


def test_zero_hash_is_never_draining() -> None:
    tracker, calls = new_tracker()
    assert not tracker.should_block_sticky_key_hash(C1, 0)
    tracker.reduce_ref_count(C1, 0, False)
    assert tracker.draining_hashes == {} and calls == []


def test_stats() -> None:
    tracker, _ = new_tracker()
    assert tracker.update_consumer_stats(C1) == ConsumerDrainingStats(0, 0, 0, ())
    tracker.add_entry(C1, 10)
    tracker.add_entry(C1, 10)
    tracker.add_entry(C1, 4)
    assert tracker.should_block_sticky_key_hash(C2, 10)
    assert tracker.should_block_sticky_key_hash(C2, 10)
    assert tracker.update_consumer_stats(C1) == ConsumerDrainingStats(2, 0, 3, ((4, 1, 0), (10, 2, 2)))
    tracker.reduce_ref_count(C1, 4, False)
    assert not tracker.should_block_sticky_key_hash(C1, 10)  # lazy removal counts as cleared too
    assert tracker.update_consumer_stats(C1) == ConsumerDrainingStats(0, 2, 0, ())
    tracker.consumer_removed(C1)
    assert tracker.update_consumer_stats(C1) == ConsumerDrainingStats(0, 0, 0, ())


def test_clear_drops_entries_and_stats_without_callbacks() -> None:
    tracker, calls = new_tracker()
    tracker.add_entry(C1, 1)
    assert tracker.should_block_sticky_key_hash(C2, 1)
    tracker.clear()
    assert tracker.draining_hashes == {} and calls == []
    assert tracker.update_consumer_stats(C1) == ConsumerDrainingStats(0, 0, 0, ())


def test_lock_discipline() -> None:
    tracer = LockTracer()
    calls: list[int] = []
    held_at_callback: list[frozenset[str]] = []

    def handler(h: int) -> None:
        held_at_callback.append(tracer.held)
        calls.append(h)

    tracker = DrainingHashesTracker("dispatcher", handler, lock_tracer=tracer)
    tracker.add_entry(C1, 1)
    assert tracker.should_block_sticky_key_hash(C2, 1)
    tracker.update_consumer_stats(C1)
    tracker.reduce_ref_count(C1, 1, False)
    assert calls == [1] and held_at_callback == [frozenset()]
    edges = tracer.order_edges()
    assert (stats_lock(1), TRACKER_LOCK) in edges  # the stats path reads the tracker
    assert (TRACKER_LOCK, stats_lock(1)) not in edges
    assert nx.is_directed_acyclic_graph(nx.DiGraph(edges))
    handler_events = [e for e in tracer.events if e.kind == "handler"]
    assert [e.name for e in handler_events] == ["unblock"] and handler_events[0].held == frozenset()
