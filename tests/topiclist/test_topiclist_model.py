"""Unit tests of the topic-list limiter model (`models/topiclist.py`) on its own.

The spec's worked examples (§7 A1, A2, A3, A6, A8, A11, A12) replayed as model actions with the
exact numbers, the three §6(a) leak traces (TL-I7 in `no_exceptional_release`, not in `current`),
every invariant shown to fail on a corrupted state, TL-L1 on a small exhaustive exploration, and
the model's own contract (enabled/step agreement, time-shift-free keys, JSON-only vars).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, cast

import pytest

from models.core import Action, ActionNotEnabled, Param, violated
from models.topiclist import (
    EXPLORE_CONFIG,
    EXPLORE_FLOWS_CONFIG,
    HYPOTHESIS_CONFIG,
    HYPOTHESIS_FLOWS_CONFIG,
    INITIAL_ESTIMATE,
    LONG_MAX,
    FlowState,
    SemState,
    TLState,
    TopicListModel,
    heap_size,
    topics_hash,
    wire_size,
)

A = Action.of
NS = "public/default"
TA = "persistent://public/default/a"
TB = "persistent://public/default/b"


def sem_model(max_permits: int, queue: int, timeout: int, sizes: tuple[int, ...], **extra: Param) -> TopicListModel:
    cfg: dict[str, Param] = {
        "scope": "semaphore",
        "max_permits": max_permits,
        "max_queue_size": queue,
        "timeout_ms": timeout,
        "max_requests": 20,
        "sizes": sizes,
        "dts": (1000,),
        "release_zero": True,
    }
    cfg.update(extra)
    return TopicListModel(cfg)


class Driver:
    """Steps a model from its initial state, checking every invariant after every step."""

    def __init__(self, model: TopicListModel) -> None:
        self.m = model
        self.s: TLState = model.initial()

    def do(self, name: str, **params: Param) -> dict[str, Any]:
        action = A(name, **params)
        assert action in self.m.enabled(self.s), f"{action} should be enabled"
        self.s, obs = self.m.step(self.s, action)
        assert violated(self.m, self.s) == [] or self.m.variant != "current", violated(self.m, self.s)
        assert isinstance(obs, dict)
        return obs

    def run(self) -> list[Any]:
        """`executor.run()`: step while an entry is due; returns the completions."""
        done: list[Any] = []
        while A("step") in self.m.enabled(self.s):
            obs = self.do("step")
            done += obs["completed"] if "completed" in obs else obs["replies"]
        return done

    def settle(self) -> list[Any]:
        """Run and advance time until the executor is idle (flows); returns the replies."""
        replies: list[Any] = []
        for _ in range(1000):
            if not self.s.execq:
                return replies
            times = [a for a in self.m.enabled(self.s) if a.name in ("step", "advance")]
            self.s, obs = self.m.step(self.s, times[0])
            assert isinstance(obs, dict)
            replies += cast(list[Any], obs["replies"])
        raise AssertionError("the executor never went idle")

    @property
    def v(self) -> dict[str, Any]:
        return self.m.vars(self.s)


# -- §7 worked examples --------------------------------------------------------------------------


def test_a1_completion_is_asynchronous_and_release_returns_permits() -> None:
    d = Driver(sem_model(1, 10, 5000, (1,)))
    assert d.do("acquire", permits=1) == {"request": 0, "status": "pending"}
    assert d.v["available_permits"] == 1  # nothing granted before the pass runs
    assert d.run() == [{"request": 0, "status": "granted", "permit": 0, "permits": 1}]
    assert d.v["available_permits"] == 0
    d.do("release", permit=0)
    assert d.v["available_permits"] == 1

    d = Driver(sem_model(10, 10, 5000, (5,)))
    d.do("acquire", permits=5)
    assert d.run() == [{"request": 0, "status": "granted", "permit": 0, "permits": 5}]


def test_a2_pass_stops_at_zero_and_release_submits_a_pass() -> None:
    d = Driver(sem_model(5, 10, 5000, (3, 5)))
    d.do("acquire", permits=5)
    d.run()
    assert d.do("acquire", permits=3) == {"request": 1, "status": "pending"}
    assert d.run() == []  # the pass stops at available == 0
    assert d.v["requests"][1]["status"] == "pending"
    d.do("release", permit=0)
    assert d.v["available_permits"] == 5
    assert d.v["executor"][0] == 0  # a pass was submitted
    assert d.run() == [{"request": 1, "status": "granted", "permit": 1, "permits": 3}]
    assert d.v["available_permits"] == 2


def test_a3_queue_full_fails_synchronously() -> None:
    d = Driver(sem_model(1, 2, 5000, (1,)))
    d.do("acquire", permits=1)
    d.run()
    assert d.do("acquire", permits=1)["status"] == "pending"
    assert d.do("acquire", permits=1)["status"] == "pending"
    assert d.v["queue_size"] == 2
    assert d.do("acquire", permits=1) == {"request": 3, "status": "QueueFull"}
    assert d.v["queue_size"] == 2
    assert d.v["requests"][3]["status"] == "QueueFull"


def test_a6_invalid_counts_raise_value_error_and_leave_no_trace() -> None:
    d = Driver(sem_model(10, 10, 5000, (5,), invalid_sizes=True))
    d.do("acquire", permits=5)
    d.run()
    before = d.v
    assert d.do("acquire", permits=-1) == {"error": "ValueError", "message": "Invalid negative permits value: -1"}
    assert d.do("acquire", permits=11) == {
        "error": "ValueError",
        "message": "Requested permits=11 is larger than maxPermits=10",
    }
    assert d.do("update", permit=0, permits=-1)["message"] == "Invalid negative permits value: -1"
    assert d.do("update", permit=0, permits=11)["message"] == "Requested permits=11 is larger than maxPermits=10"
    assert d.v == before


def test_a8_growing_update_consumes_the_old_permit() -> None:
    d = Driver(sem_model(10, 10, 5000, (1, 2, 5, 8)))
    d.do("acquire", permits=5)
    d.run()
    assert d.v["available_permits"] == 5
    assert d.do("update", permit=0, permits=8) == {"request": 1, "status": "pending"}
    assert d.run() == [{"request": 1, "status": "granted", "permit": 1, "permits": 8}]
    assert d.v["available_permits"] == 2  # 5 - (8 - swap(p)=5)
    assert d.v["permits"][0] == 0  # p.permits is now 0
    d.do("acquire", permits=2)
    d.run()
    assert d.v["available_permits"] == 0
    assert d.do("acquire", permits=1) == {"request": 3, "status": "pending"}
    d.run()
    d.do("advance", dt=1000)
    assert d.v["now"] == 1000
    assert d.v["requests"][3]["status"] == "pending"
    d.do("release", permit=1)  # p8
    assert d.v["available_permits"] == 8
    assert d.run() == [{"request": 3, "status": "granted", "permit": 3, "permits": 1}]
    assert d.v["available_permits"] == 7
    d.do("release", permit=0)  # adds 0
    assert d.v["available_permits"] == 7


def test_a11_strict_fifo_with_head_of_line_blocking() -> None:
    d = Driver(sem_model(10, 10, 5000, (2, 3, 4)))
    for _ in range(5):
        d.do("acquire", permits=2)
    d.run()
    assert d.v["available_permits"] == 0
    for n in (3, 4, 2):
        d.do("acquire", permits=n)
    d.run()
    r3, r4, r2 = 5, 6, 7
    assert d.v["queue"] == [r3, r4, r2]
    expected = [  # (available after, queue, completions) per release(q_i); run()
        (2, [r3, r4, r2], []),
        (1, [r4, r2], [r3]),
        (3, [r4, r2], []),  # r2 (needs 2 <= 3) still waits behind r4
        (1, [r2], [r4]),
        (1, [], [r2]),
    ]
    for q, (available, queue, granted) in enumerate(expected):
        d.do("release", permit=q)
        done = d.run()
        assert [c["request"] for c in done] == granted
        assert d.v["available_permits"] == available
        assert d.v["queue"] == queue
    assert d.v["acquired_permits"] == 9
    assert d.v["waits"] == 8  # q0..q4, r3, r4, r2: all 0 ms, the clock never moved
    assert d.v["timeouts"] == 0
    assert d.v["now"] == 0


def test_a12_unbounded_pool_completes_at_once_and_keeps_no_accounting() -> None:
    d = Driver(sem_model(0, 10, 100, (1, 10, 50, 100, 1000), dts=(150,)))
    assert d.do("acquire", permits=1)["status"] == "granted"
    assert d.do("acquire", permits=100)["status"] == "granted"
    assert d.do("acquire", permits=1000) == {"request": 2, "status": "granted", "permit": 2, "permits": 1000}
    assert d.v["queue_size"] == 0
    assert d.v["available_permits"] == LONG_MAX
    assert d.v["acquired_permits"] == 0
    assert d.v["executor"] == []  # no deferred pass exists
    assert d.do("update", permit=0, permits=50)["permits"] == 50
    assert d.v["permits"][0] == 1  # the unbounded update leaves the old permit alone
    d.do("release", permit=2)
    assert d.v["permits"][2] == 1000


# -- timeouts, cancellation and close --------------------------------------------------------------


def test_timeout_fires_exactly_at_created_plus_timeout_and_submits_a_pass() -> None:
    d = Driver(sem_model(1, 10, 100, (1,), dts=(50, 99, 1)))
    d.do("acquire", permits=1)
    d.run()
    d.do("advance", dt=50)  # the deferred pass ran at 50
    assert d.do("acquire", permits=1) == {"request": 1, "status": "pending"}
    assert d.v["executor"] == [50, 150]  # the pass (due now), then the timeout
    assert d.do("advance", dt=99)["completed"] == []
    assert d.do("advance", dt=1)["completed"] == [{"request": 1, "status": "Timeout"}]
    assert d.v["timeouts"] == 1 and d.v["waits"] == 2


def test_caller_cancel_stays_queued_until_a_pass_drops_it() -> None:
    d = Driver(sem_model(1, 10, 100, (1,), dts=(100,)))
    d.do("acquire", permits=1)
    d.run()
    d.do("acquire", permits=1)
    assert d.do("cancel", request=1) == {"completed": [{"request": 1, "status": "caller_cancelled"}]}
    assert d.v["queue"] == [1]  # still queued
    assert d.do("advance", dt=100)["completed"] == []  # its timeout does nothing
    assert d.v["queue"] == [1]
    d.do("release", permit=0)
    assert d.run() == []  # dropped silently
    assert d.v["queue"] == [] and d.v["available_permits"] == 1


def test_is_cancelled_is_noticed_only_at_the_head_with_available_permits() -> None:
    d = Driver(sem_model(1, 10, 100, (1,), dts=(100,)))
    d.do("acquire", permits=1)
    d.run()
    d.do("acquire", permits=1)
    d.do("disconnect", request=1)
    d.run()
    assert d.v["requests"][1] == {"status": "pending", "cancelled": True}  # available == 0
    assert d.do("advance", dt=100)["completed"] == [{"request": 1, "status": "Timeout"}]  # not Cancelled

    d = Driver(sem_model(1, 10, 100, (1,)))
    d.do("acquire", permits=1)
    d.run()
    d.do("acquire", permits=1)
    d.do("disconnect", request=1)
    d.do("release", permit=0)
    assert d.run() == [{"request": 1, "status": "Cancelled"}]


def test_close_fails_queued_requests_and_keeps_shrinking_updates_working() -> None:
    d = Driver(sem_model(4, 10, 100, (1, 2, 4)))
    d.do("acquire", permits=4)
    d.run()
    d.do("acquire", permits=1)
    d.do("acquire", permits=2)
    assert d.do("close") == {
        "completed": [{"request": 1, "status": "AlreadyClosed"}, {"request": 2, "status": "AlreadyClosed"}]
    }
    assert d.v["executor"] == [0, 0]  # timeouts and the deferred pass cancelled; the two passes remain
    assert d.do("acquire", permits=1)["status"] == "AlreadyClosed"
    assert d.do("update", permit=0, permits=2) == {"request": 4, "status": "granted", "permit": 1, "permits": 2}
    assert d.v["available_permits"] == 2
    assert d.v["executor"] == [0, 0]  # a shrinking update after close submits no pass (issue 20 #4)
    assert d.do("update", permit=1, permits=4)["status"] == "AlreadyClosed"
    assert d.v["permits"][1] == 2  # a failed growing update leaves the old permit valid


# -- flows --------------------------------------------------------------------------------------


def flows_model(variant: str = "current", **extra: Param) -> TopicListModel:
    cfg = dict(EXPLORE_FLOWS_CONFIG)
    cfg["max_requests"] = 1
    cfg.update(extra)
    return TopicListModel(cfg, variant)


def get_topics(d: Driver, rid: int = 0, conn: int = 0, h: str = "") -> list[Any]:
    replies: list[Any] = d.do("get_topics", conn=conn, request_id=rid, namespace=NS, mode="PERSISTENT", topics_hash=h)[
        "replies"
    ]
    return replies


def test_broker_get_topics_happy_path_numbers() -> None:
    d = Driver(flows_model())
    get_topics(d)
    assert d.v["lookup_available"] == 1
    assert d.v["pools"][0]["queue"] == [[100, -1]]  # min(10240, heap_max) queued, completion async
    d.settle()
    assert d.v["listings"] == [0]
    assert d.v["pools"][0]["acquired"] == 100
    d.do("complete_listing", id=0, topics=(TA,))
    # the shrinking update is synchronous (100 -> 61); p1 is held until the direct send completes
    assert d.v["pools"][0]["acquired"] == 61
    assert d.v["pools"][1]["queue"] == [[77, -1]]
    d.settle()
    response = [TA, topics_hash((TA,))]
    assert d.v["pools"][1]["acquired"] == wire_size(response) == 77
    assert d.v["pools"][0]["acquired"] == 0
    assert d.v["connections"][0]["replies"][0] == {
        "conn": 0,
        "type": "GetTopicsResponse",
        "request": 0,
        "topics": [TA],
        "hash": "e4a876e3",
        "changed": True,
        "filtered": False,
    }
    assert d.v["holders"][0] == {"key": f"broker:{NS}:PERSISTENT", "state": "KNOWN", "size": 61, "waiters": 0}
    assert d.v["lookup_available"] == 2  # back at max: released once the send future completed
    d.do("complete_write", id=0, ok=True)
    d.settle()
    assert d.m.quiescent_and_free(d.s)


def test_heap_size_wire_size_and_hash_functions() -> None:
    assert topics_hash(()) == "00000000"
    assert topics_hash((TA,)) == "e4a876e3"
    assert heap_size((TA,)) == 61
    assert wire_size([TA, "e4a876e3"]) == 77
    assert INITIAL_ESTIMATE == 10240


def test_unchanged_hash_sends_an_empty_response() -> None:
    d = Driver(flows_model(use_hashes=True))
    get_topics(d, h=topics_hash((TA,)))
    d.settle()
    d.do("complete_listing", id=0, topics=(TA,))
    d.settle()
    reply = d.v["connections"][0]["replies"][0]
    assert reply["topics"] == [] and reply["changed"] is False
    assert d.v["pools"][1]["acquired"] == wire_size(["e4a876e3"]) == 44


def test_second_lister_waits_for_the_first_estimate() -> None:
    d = Driver(flows_model(max_requests=2, heap_max=200))
    get_topics(d, 0)
    get_topics(d, 1)
    assert d.v["holders"][0]["state"] == "INITIALIZING"
    assert d.v["holders"][0]["waiters"] == 1
    assert d.v["pools"][0]["queue"] == [[200, -1]]  # only the first acquires
    d.settle()
    d.do("complete_listing", id=0, topics=(TA,))
    assert d.v["holders"][0]["waiters"] == 0
    assert d.v["pools"][0]["queue"][-1] == [61, -1]  # the waiter acquires the actual size


@pytest.mark.parametrize("variant", ["current", "no_exceptional_release"])
def test_leak_i_listing_error(variant: str) -> None:
    d = Driver(flows_model(variant))
    get_topics(d)
    d.settle()
    replies = d.do("complete_listing", id=0, error="listing failed")["replies"]
    assert [(r["code"], r["message"]) for r in replies] == [("MetadataError", "listing failed")]
    d.settle()
    assert d.m.quiescent(d.s)
    leaked = d.m.acquired(d.s, 0)
    if variant == "current":
        assert leaked == 0 and violated(d.m, d.s) == []
    else:
        assert leaked == min(INITIAL_ESTIMATE, 100)
        assert violated(d.m, d.s) == ["TL-I7"]  # TL-I8 and TL-I1..I6 still hold


@pytest.mark.parametrize("variant", ["current", "no_exceptional_release"])
def test_leak_ii_serialization_fault(variant: str) -> None:
    d = Driver(flows_model(variant))
    get_topics(d)
    d.do("arm_serialization_fault", request_id=0)
    d.settle()
    d.do("complete_listing", id=0, topics=(TA,))
    replies = d.settle()
    assert [(r["code"], r["message"]) for r in replies] == [
        ("MetadataError", "Failed to serialize the response to request 0")
    ]
    assert d.m.quiescent(d.s)
    assert d.m.acquired(d.s, 0) == 0
    if variant == "current":
        assert d.m.acquired(d.s, 1) == 0 and violated(d.m, d.s) == []
    else:
        assert d.m.acquired(d.s, 1) == wire_size([TA, topics_hash((TA,))])
        assert violated(d.m, d.s) == ["TL-I7"]


@pytest.mark.parametrize("variant", ["current", "no_exceptional_release"])
def test_leak_iii_failed_write(variant: str) -> None:
    d = Driver(flows_model(variant))
    get_topics(d)
    d.settle()
    d.do("complete_listing", id=0, topics=(TA,))
    d.settle()
    assert not d.m.quiescent(d.s)  # the write is pending
    d.do("complete_write", id=0, ok=False)
    d.settle()
    assert d.m.quiescent(d.s)
    if variant == "current":
        assert d.m.acquired(d.s, 1) == 0 and violated(d.m, d.s) == []
    else:
        assert d.m.acquired(d.s, 1) == wire_size([TA, topics_hash((TA,))])
        assert violated(d.m, d.s) == ["TL-I7"]


@pytest.mark.parametrize("variant", ["current", "no_exceptional_release"])
def test_proxy_leak_on_a_broker_error(variant: str) -> None:
    d = Driver(flows_model(variant, flows=("proxy",), broker_errors=("AuthorizationError",)))
    d.do("proxy_get_topics", conn=0, request_id=0, namespace=NS, mode="PERSISTENT", topics_hash="")
    d.settle()
    assert d.v["responses"] == [0]
    replies = d.do("complete_broker_response", id=0, error_kind="AuthorizationError")["replies"]
    assert [r["code"] for r in replies] == ["AuthorizationError"]
    d.settle()
    assert (d.m.acquired(d.s, 0) == 0) == (variant == "current")
    assert ("TL-I7" in violated(d.m, d.s)) == (variant != "current")


def test_watcher_lists_sends_success_then_updates() -> None:
    d = Driver(flows_model(flows=("watch",), max_topic_changes=1, topic_changes=(((TB,), ()),)))
    d.do("watch", conn=0, request_id=0, namespace=NS, topics_hash="")
    d.settle()
    d.do("complete_listing", id=0, topics=(TA,))
    assert d.v["lookup_available"] == 2  # released as soon as the first send attempt started
    d.settle()
    assert d.v["connections"][0]["replies"][0]["type"] == "WatchSuccess"
    assert d.v["watchers"] == [
        {
            "id": 0,
            "registered": True,
            "initializing": False,
            "live": True,
            "sending": False,
            "queued_updates": 0,
            "topics": [TA],
        }
    ]
    d.do("complete_write", id=0, ok=True)  # else the update's direct acquire would retry forever
    d.do("topics_changed", namespace=NS, new=(TB,), deleted=())
    d.settle()
    update = d.v["connections"][0]["replies"][1]
    assert update == {
        "conn": 0,
        "type": "WatchUpdate",
        "watcher": 0,
        "new": [TB],
        "deleted": [],
        "hash": topics_hash((TA, TB)),
    }
    assert d.v["watchers"][0]["topics"] == [TA, TB]
    assert d.v["pools"][1]["acquired"] == wire_size([TB, topics_hash((TA, TB))])  # the update's write


def test_watch_close_during_initialization_answers_the_watch_first() -> None:
    d = Driver(flows_model(flows=("watch",), max_requests=2))
    d.do("watch", conn=0, request_id=0, namespace=NS, topics_hash="")
    replies = d.do("watch_close", conn=0, request_id=1, watcher_id=0)["replies"]
    assert [(r["type"], r["request"]) for r in replies] == [("Error", 0), ("Success", 1)]
    assert replies[0]["message"] == "Closed watcher before creation was complete"
    assert d.v["lookup_available"] == 2
    d.settle()  # the queued heap acquire is Cancelled at its pass (unregistered): nothing more is said
    assert len(d.v["connections"][0]["replies"]) == 2
    assert d.m.quiescent_and_free(d.s)


def test_watcher_retries_a_heap_timeout_after_the_backoff() -> None:
    d = Driver(flows_model(flows=("broker", "watch"), max_requests=2, modes=("ALL", "PERSISTENT")))
    d.do("get_topics", conn=0, request_id=0, namespace=NS, mode="ALL", topics_hash="")
    d.run()  # request 0 holds the whole heap (100) while its listing is pending
    d.do("watch", conn=0, request_id=1, namespace=NS, topics_hash="")
    assert d.v["pools"][0]["queue"] == [[100, -1]]
    while d.v["pools"][0]["timeouts"] == 0:
        d.do("advance", dt=next(a for a in d.m.enabled(d.s) if a.name == "advance")["dt"])
    assert d.v["now"] == 100  # the watcher's heap acquire timed out at created_at + 100
    assert d.v["connections"][0]["backoff_ms"] == 200  # a retry is scheduled after 100 ms
    assert d.v["executor"] == [200]
    assert d.v["holders"][2]["state"] == "UNSET"  # reset_if_initializing on the failure
    assert d.v["watchers"][0]["initializing"] is True
    assert d.v["connections"][0]["replies"] == []  # Timeout while active: retried, not answered
    d.do("complete_listing", id=0, error="listing failed")  # frees the heap
    d.do("advance", dt=100)  # the retry lists again and is granted at once
    assert d.v["listings"] == [1]
    d.do("complete_listing", id=1, topics=(TA,))
    d.settle()
    assert d.v["connections"][0]["replies"][-1]["type"] == "WatchSuccess"
    assert d.v["connections"][0]["backoff_ms"] == 100  # reset by the success


# -- invariants fail on corrupted states ---------------------------------------------------------


def _sem_state_after_grant() -> tuple[TopicListModel, SemState]:
    d = Driver(sem_model(4, 2, 100, (1, 2)))
    d.do("acquire", permits=2)
    d.run()
    d.do("acquire", permits=1)
    assert isinstance(d.s, SemState)
    return d.m, d.s


@pytest.mark.parametrize(
    ("name", "corrupt"),
    [
        ("TL-I1", lambda s: s._replace(avail=5, permits=(-1,))),
        ("TL-I2", lambda s: s._replace(avail=3)),
        ("TL-I3", lambda s: s._replace(queue=((0, 1, -1),), reqs=(16, s.reqs[0]))),  # 1 granted, 0 queued
        ("TL-I4", lambda s: s._replace(queue=())),
        ("TL-I5", lambda s: s._replace(permits=(6,), avail=-2)),
        ("TL-I6", lambda s: s._replace(queue=s.queue * 3)),
        ("TL-I7", lambda s: s._replace(queue=(), execq=(), permits=(0,), reqs=(s.reqs[0], 2 | 16), avail=3)),
        ("TL-I9", lambda s: s._replace(grants=0)),
        ("TL-I10", lambda s: s._replace(reqs=(s.reqs[0] | 8, s.reqs[1]))),
    ],
)
def test_each_semaphore_invariant_can_fail(name: str, corrupt: Any) -> None:
    m, s = _sem_state_after_grant()
    assert violated(m, s) == []
    assert name in violated(m, corrupt(s))


def test_each_flow_invariant_can_fail() -> None:
    d = Driver(flows_model(max_requests=2))
    get_topics(d)
    d.settle()
    s = d.s
    assert isinstance(s, FlowState)
    m = d.m
    assert violated(m, s) == []
    r0 = s.reqs[0]
    bad: dict[str, FlowState] = {
        "TL-I1": s._replace(avail=(101, 100)),
        "TL-I2": s._replace(reqs=(r0._replace(p0=50),)),
        "TL-I4": s._replace(queues=(((0, 5, -1),), ())),
        "TL-I5": s._replace(reqs=(r0._replace(p0=200),), avail=(-100, 100)),
        "TL-I6": s._replace(queues=(((0, 1, -1),) * 3, ())),
        "TL-I7": s._replace(reqs=(r0._replace(stage=0, replies=1),), execq=()),
        "TL-I8": s._replace(reqs=(r0._replace(replies=2),)),
    }
    for name, state in bad.items():
        assert name in violated(m, state), name


# -- exhaustive exploration of small bounds --------------------------------------------------------


def explore(m: TopicListModel, limit: int = 200_000) -> tuple[dict[Any, TLState], dict[Any, list[Any]], set[str]]:
    s0 = m.initial()
    seen = {m.key(s0): s0}
    rev: dict[Any, list[Any]] = {}
    broken: set[str] = set(violated(m, s0))
    queue = deque([s0])
    while queue:
        s = queue.popleft()
        k = m.key(s)
        for a in m.enabled(s):
            t, _ = m.step(s, a)
            kt = m.key(t)
            rev.setdefault(kt, []).append(k)
            if kt not in seen:
                seen[kt] = t
                broken.update(violated(m, t))
                queue.append(t)
                assert len(seen) < limit, "state space larger than expected"
    return seen, rev, broken


def live_everywhere(m: TopicListModel, seen: Mapping[Any, TLState], rev: Mapping[Any, list[Any]]) -> bool:
    (live,) = m.liveness
    good = {k for k, s in seen.items() if live.good(s)}
    frontier = deque(good)
    while frontier:
        for p in rev.get(frontier.popleft(), []):
            if p not in good:
                good.add(p)
                frontier.append(p)
    return len(good) == len(seen)


def test_flows_explore_config_current_passes_every_invariant_and_tl_l1() -> None:
    m = TopicListModel(EXPLORE_FLOWS_CONFIG, "current")
    seen, rev, broken = explore(m)
    assert broken == set()
    assert live_everywhere(m, seen, rev)
    assert sum(1 for s in seen.values() if m.quiescent_and_free(s)) > 1


def test_flows_explore_config_variant_breaks_only_tl_i7() -> None:
    m = TopicListModel(EXPLORE_FLOWS_CONFIG, "no_exceptional_release")
    seen, rev, broken = explore(m)
    assert broken == {"TL-I7"}
    assert not live_everywhere(m, seen, rev)


def test_small_semaphore_exploration_passes_every_invariant_and_tl_l1() -> None:
    cfg = dict(EXPLORE_CONFIG)
    cfg["max_requests"] = 3
    cfg["max_queue_size"] = 2
    m = TopicListModel(cfg)
    seen, rev, broken = explore(m)
    assert broken == set()
    assert live_everywhere(m, seen, rev)
    statuses = {r["status"] for s in seen.values() for r in cast(list[dict[str, Any]], m.vars(s)["requests"])}
    assert statuses == {"pending", "granted", "Timeout", "QueueFull", "AlreadyClosed", "Cancelled", "caller_cancelled"}


def test_watch_exploration_passes_every_invariant_and_tl_l1() -> None:
    m = flows_model(flows=("watch",), max_topic_changes=1, topic_changes=(((TB,), ()),), heap_queue=1)
    seen, rev, broken = explore(m)
    assert broken == set()
    assert live_everywhere(m, seen, rev)


# -- the model's contract ------------------------------------------------------------------------


@pytest.mark.parametrize("config", [EXPLORE_CONFIG, HYPOTHESIS_CONFIG, EXPLORE_FLOWS_CONFIG, HYPOTHESIS_FLOWS_CONFIG])
def test_enabled_actions_step_and_others_do_not(config: Mapping[str, Param]) -> None:
    m = TopicListModel(config)
    s = m.initial()
    for a in m.enabled(s):
        m.step(s, a)
    for bogus in (A("release", permit=7), A("complete_write", id=3, ok=True), A("step"), A("nope")):
        with pytest.raises(ActionNotEnabled):
            m.step(s, bogus)


def test_key_ignores_a_shift_of_the_clock() -> None:
    m = sem_model(2, 2, 100, (1,), dts=(100,))
    s = m.initial()
    t = m.step(m.step(s, A("advance", dt=100))[0], A("acquire", permits=1))[0]
    u = m.step(s, A("acquire", permits=1))[0]
    assert m.vars(t)["now"] == 100 and m.vars(u)["now"] == 0
    # after the deferred pass (at 50) both wait on their own timeout at now + 100 and a pass now
    u = m.step(u, A("advance", dt=50))[0]
    assert m.key(t) != m.key(u)  # u still has its timeout at +50, t at +100
    t = m.step(t, A("step"))[0]
    u2 = m.step(m.step(m.step(s, A("advance", dt=50))[0], A("acquire", permits=1))[0], A("step"))[0]
    assert m.vars(u2)["now"] == 50
    assert m.key(t) == m.key(u2)


def test_vars_are_json_without_null() -> None:
    def check(value: object) -> None:
        assert value is not None
        if isinstance(value, dict):
            assert all(isinstance(k, str) for k in value)
            for v in value.values():
                check(v)
        elif isinstance(value, list):
            for v in value:
                check(v)
        else:
            assert isinstance(value, int | str | bool)

    for config in (HYPOTHESIS_CONFIG, HYPOTHESIS_FLOWS_CONFIG):
        m = TopicListModel(config)
        s = m.initial()
        for _ in range(30):
            check(m.vars(s))
            acts = m.enabled(s)
            if not acts:
                break
            s = m.step(s, acts[len(acts) // 2])[0]


def test_bad_configs_are_rejected() -> None:
    with pytest.raises(ValueError, match="variant"):
        TopicListModel(EXPLORE_CONFIG, "nope")
    with pytest.raises(ValueError, match="scope"):
        TopicListModel({"scope": "bogus"})
    with pytest.raises(ValueError, match="max_permits"):
        TopicListModel({"scope": "semaphore", "max_permits": "4"})
