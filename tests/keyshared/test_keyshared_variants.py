"""§6: the flows that break `classic` and `pip282`, and that `pip379` must pass.

Each historical variant is shown to actually violate the invariant the spec says it breaks, and
pip379 is run on the very same steps and keeps it.
"""

from __future__ import annotations

from typing import Any

import pytest

from reference_impl.keyshared import KeySharedDispatcher, ReadType

from .client_log import ClientLog

H4 = 11707  # hash("4"): consumer1 with {consumer1, consumer2}, consumer3 once it joins
H0 = 4850  # hash("0"): consumer2 in every ring of these flows
H5 = 35071  # hash("5"): consumer1


def new_log(variant: str) -> ClientLog:
    return ClientLog(KeySharedDispatcher(variant, replica_points=3))


def test_keys_of_the_flows_map_as_the_spec_says() -> None:
    log = new_log("pip379")
    d = log.d
    assert [d.hash_of(d.publish(k)) for k in "405"] == [H4, H0, H5]
    c1 = log.add("consumer1", 1, 0)
    c2 = log.add("consumer2", 2, 0)
    assert [
        (a.range.start, a.range.end, a.consumer.name)
        for a in d.selector.get_consumer_hash_assignments_snapshot().assignments
    ] == [
        (1, 6668, "consumer2"),
        (6669, 39817, "consumer1"),
        (39818, 52979, "consumer2"),
        (52980, 60442, "consumer1"),
        (60443, 65535, "consumer2"),
    ]
    assert d.selector.select(H4) is c1 and d.selector.select(H0) is c2 and d.selector.select(H5) is c1
    c3 = log.add("consumer3", 3, 0)
    assert d.selector.select(H4) is c3 and d.selector.select(H0) is c2 and d.selector.select(H5) is c1


def issue_1(variant: str) -> tuple[ClientLog, dict[str, Any]]:
    """Race between read and join (§6a issue-1), up to and including the removal of consumer1."""
    log = new_log(variant)
    d = log.d
    c1 = log.add("consumer1", 1, 1)
    c2 = log.add("consumer2", 2, 1000)
    for key in "444000":
        d.publish(key)
    log.read()
    after_first_read = {
        "c1": log.received(c1),
        "c2": log.received(c2),
        "replay": [p for p, _ in d.replay_queue.items()],
        "read_position": d.read_position,
    }
    c3 = log.add("consumer3", 3, 1000)
    joined_at = d.recently_joined.get(c3) if d.recently_joined is not None else None
    log.run()
    c3_before_removal = log.received(c3)
    i1_before_removal = list(log.ks_i1)
    log.remove(c1)
    log.run()
    return log, {
        "first_read": after_first_read,
        "joined_at": joined_at,
        "c3_before_removal": c3_before_removal,
        "i1_before_removal": i1_before_removal,
        "c3": c3,
    }


@pytest.mark.parametrize("variant", ["classic", "pip282", "pip379"])
def test_issue_1_first_read_is_the_same_for_all_variants(variant: str) -> None:
    _, facts = issue_1(variant)
    assert facts["first_read"] == {
        "c1": [(1, 0)],
        "c2": [(1, 3), (1, 4), (1, 5)],
        "replay": [(1, 1), (1, 2)],
        "read_position": (1, 6),
    }


def test_issue_1_classic_breaks_ks_i1_then_ks_i4() -> None:
    log, facts = issue_1("classic")
    assert facts["joined_at"] == (1, 6)
    assert facts["c3_before_removal"] == [(1, 1), (1, 2)]
    assert facts["i1_before_removal"], "consumer3 got key 4 while consumer1 held 1:0"
    assert log.received(facts["c3"]) == [(1, 1), (1, 2), (1, 0)]
    assert log.ks_i4 == ["consumer3 got (1, 1) before (1, 0)", "consumer3 got (1, 2) before (1, 0)"]


def test_issue_1_pip282_passes() -> None:
    log, facts = issue_1("pip282")
    c3 = facts["c3"]
    assert facts["joined_at"] == (1, 0)
    assert facts["c3_before_removal"] == []
    assert log.received(c3) == [(1, 0)]
    log.ack(c3, (1, 0))
    assert log.d.mark_delete_position == (1, 0)
    assert len(log.d.recently_joined or []) == 0
    log.run()
    assert log.received(c3) == [(1, 0), (1, 1), (1, 2)]
    assert log.ks_i1 == [] and log.ks_i4 == []


def test_issue_1_pip379_blocks_with_a_draining_entry_until_consumer1_leaves() -> None:
    log = new_log("pip379")
    d = log.d
    c1 = log.add("consumer1", 1, 1)
    log.add("consumer2", 2, 1000)
    for key in "444000":
        d.publish(key)
    log.read()
    c3 = log.add("consumer3", 3, 1000)
    assert d.tracker is not None
    entry = d.tracker.get_entry(H4)
    assert entry is not None and entry.consumer is c1 and entry.ref_count == 1
    log.run()
    assert log.received(c3) == []
    assert entry.blocked_count > 0
    log.remove(c1)  # closing: no unblock callback, but the replay notification schedules a read
    assert d.unblock_calls == [] and d.scheduled_read
    log.run()
    assert log.received(c3) == [(1, 0), (1, 1), (1, 2)]
    assert log.ks_i1 == [] and log.ks_i4 == []


def test_issue_1_pip379_ack_path_unblocks_with_a_callback() -> None:
    log = new_log("pip379")
    d = log.d
    c1 = log.add("consumer1", 1, 1)
    log.add("consumer2", 2, 1000)
    for key in "444000":
        d.publish(key)
    log.read()
    c3 = log.add("consumer3", 3, 1000)
    log.run()
    assert log.received(c3) == []
    log.ack(c1, (1, 0))
    assert d.unblock_calls == [H4] and d.scheduled_read
    assert d.tracker is not None and d.tracker.get_entry(H4) is None
    log.run()
    assert log.received(c3) == [(1, 1), (1, 2)]
    assert log.ks_i1 == [] and log.ks_i4 == []


def issue_2(variant: str) -> tuple[ClientLog, list[Any]]:
    """Replay without any consumer action (§6a issue-2)."""
    log = new_log(variant)
    d = log.d
    c1 = log.add("consumer1", 1, 1)
    log.add("consumer2", 2, 1000)
    d.publish("4")
    log.read()
    d.publish("4")
    log.read()
    assert log.received(c1) == [(1, 0)]
    assert [p for p, _ in d.replay_queue.items()] == [(1, 1)] and d.read_position == (1, 2)
    c3 = log.add("consumer3", 3, 1000)
    joined_at = d.recently_joined.get(c3) if d.recently_joined is not None else None
    log.run()
    c3_before_removal = log.received(c3)
    log.remove(c1)
    log.run()
    return log, [c3, joined_at, c3_before_removal]


def test_issue_2_classic_breaks_ks_i1_then_ks_i4() -> None:
    log, (c3, joined_at, before) = issue_2("classic")
    assert joined_at == (1, 2)
    assert before == [(1, 1)]
    assert log.ks_i1 == [f"hash {H4} held by ['consumer1', 'consumer3'] after (1, 1)"]
    assert log.received(c3) == [(1, 1), (1, 0)]
    assert log.ks_i4 == ["consumer3 got (1, 1) before (1, 0)"]


def test_issue_2_pip282_passes() -> None:
    log, (c3, joined_at, before) = issue_2("pip282")
    assert joined_at == (1, 0)
    assert before == []
    assert log.received(c3) == [(1, 0)]
    log.ack(c3, (1, 0))
    log.run()
    assert log.received(c3) == [(1, 0), (1, 1)]
    assert log.ks_i1 == [] and log.ks_i4 == []


def test_issue_2_pip379_passes() -> None:
    log, (c3, joined_at, before) = issue_2("pip379")
    assert joined_at is None
    assert before == []
    # consumer1 left (closing): the draining entry is gone and consumer3 gets key 4 in order.
    assert log.received(c3) == [(1, 0), (1, 1)]
    assert log.d.unblock_calls == []
    assert log.ks_i1 == [] and log.ks_i4 == []


def liveness_21199(variant: str) -> tuple[ClientLog, list[Any]]:
    """#21199: a reconnecting consumer behind an unacked message of another key."""
    log = new_log(variant)
    d = log.d
    c1 = log.add("consumer1", 1, 10)
    c2 = log.add("consumer2", 2, 10)
    d.publish("4")
    log.read()
    assert log.received(c1) == [(1, 0)]
    log.remove(c1)
    log.run()
    assert log.received(c2) == [(1, 0)]
    c1b = log.add("consumer1", 3, 10)
    assert d.selector.consumer_name_index_tracker.get_tracked_index(c1b) == 0
    joined_at = d.recently_joined.get(c1b) if d.recently_joined is not None else None
    d.publish("5")
    d.publish("0")
    for _ in range(10):
        log.run()
        if not log.ack_everything_except({(1, 0)}):
            break
    log.run()
    return log, [c1b, c2, joined_at]


@pytest.mark.parametrize(("variant", "joined_at"), [("classic", (1, 1)), ("pip282", (1, 0))])
def test_21199_historical_variants_never_deliver_1_1(variant: str, joined_at: tuple[int, int]) -> None:
    log, (c1b, c2, recorded) = liveness_21199(variant)
    assert recorded == joined_at
    assert log.received(c2) == [(1, 0), (1, 2)]
    assert log.received(c1b) == []
    assert log.d.mark_delete_position == (1, -1)
    assert log.d.recently_joined is not None and log.d.recently_joined.get(c1b) == joined_at
    # KS-I5(b): 1:1 is held by nobody, its owner is connected with permits, and no one holds its hash.
    assert log.stuck_messages() == [(1, 1)]
    assert log.d.run_until_quiescent() == 1  # quiescent: nothing more will ever happen


def test_21199_pip379_blocks_only_the_moved_key() -> None:
    log, (c1b, c2, _) = liveness_21199("pip379")
    d = log.d
    assert log.received(c1b) == [(1, 1)]
    assert log.received(c2) == [(1, 0), (1, 2)]
    assert d.tracker is not None
    entry = d.tracker.get_entry(H4)
    assert entry is not None and entry.consumer is c2 and entry.ref_count == 1
    assert log.stuck_messages() == []
    assert log.ks_i1 == [] and log.ks_i4 == []


def reconnect(variant: str) -> tuple[ClientLog, list[Any]]:
    """§6b reconnect + replay."""
    log = new_log(variant)
    d = log.d
    c1 = log.add("consumer1", 1, 0)
    c2 = log.add("consumer2", 2, 10)
    d.publish("0")
    d.publish("0")
    log.read()
    assert log.received(c2) == [(1, 0), (1, 1)]
    log.remove(c2)
    assert d.selector.select(H0) is c1
    d.flow(c1, 1)
    log.read()
    assert log.received(c1) == [(1, 0)]
    c2b = log.add("consumer2", 3, 10)
    assert d.selector.select(H0) is c2b
    joined_at = d.recently_joined.get(c2b) if d.recently_joined is not None else None
    log.run()
    before = log.received(c2b)
    log.remove(c1)
    log.run()
    return log, [c2b, joined_at, before]


@pytest.mark.parametrize(("variant", "joined_at"), [("pip282", (1, 1)), ("classic", (1, 2))])
def test_reconnect_breaks_historical_variants(variant: str, joined_at: tuple[int, int]) -> None:
    log, (c2b, recorded, before) = reconnect(variant)
    assert recorded == joined_at
    assert before == [(1, 1)]
    assert log.ks_i1 == [f"hash {H0} held by ['consumer1', 'consumer2'] after (1, 1)"]
    assert log.received(c2b) == [(1, 1), (1, 0)]
    assert log.ks_i4 == ["consumer2 got (1, 1) before (1, 0)"]


def test_reconnect_pip379_drains_consumer1_first() -> None:
    log, (c2b, _, before) = reconnect("pip379")
    assert before == []
    assert log.received(c2b) == [(1, 0), (1, 1)]
    assert log.ks_i1 == [] and log.ks_i4 == []
    assert all(d.read_type is ReadType.REPLAY for d in log.d.deliveries if d.consumer is c2b)
