"""The reference adapter's independent oracles (`properties.topiclist.binding`): TL-I2, TL-I3, TL-I8, TL-I10.

Each test makes the reference answer wrongly behind its back and checks that the adapter names the
invariant from its own ledger (what it asked, what came back, and when); the twin in each pair is
the same run answered rightly. The planted bugs `tests/mutants/topiclist-*.patch` are the same
checks' twins under the default `check`.
"""

from __future__ import annotations

from models.core import Action
from models.topiclist import EXPLORE_CONFIG, EXPLORE_FLOWS_CONFIG
from properties.topiclist.binding import FlowsReferenceWorld, SemaphoreReferenceWorld, TopicListReference
from reference_impl.topiclist import Permit, PermitAcquireCancelledError

NS = "public/default"
STEP = Action.of("step")


def _semaphore(*actions: Action) -> tuple[TopicListReference, SemaphoreReferenceWorld]:
    reference = TopicListReference(EXPLORE_CONFIG, "current")
    for action in actions:
        reference.apply(action)
    assert isinstance(reference.world, SemaphoreReferenceWorld)
    assert reference.violations() == []
    return reference, reference.world


def _held_and_cancelled() -> tuple[TopicListReference, SemaphoreReferenceWorld]:
    """Request 0 holds all 4 permits; request 1 waits and its connection is gone."""
    return _semaphore(
        Action.of("acquire", permits=4), Action.of("acquire", permits=1), STEP, Action.of("disconnect", request=1)
    )


def test_tl_i10_cancelled_with_permits_available_passes() -> None:
    reference, _ = _held_and_cancelled()
    reference.apply(Action.of("release", permit=0))
    assert reference.apply(STEP) == {"completed": [{"request": 1, "status": "Cancelled"}]}
    assert reference.violations() == []


def test_tl_i10_cancelled_while_no_permit_is_available() -> None:
    reference, world = _held_and_cancelled()
    world.running = True  # as if a pass failed the head now, with available == 0
    world.futures[1].fail(PermitAcquireCancelledError())
    assert reference.violations() == ["TL-I10"]


def test_tl_i3_a_later_request_granted_before_a_waiting_one() -> None:
    reference, world = _semaphore(
        Action.of("acquire", permits=2), Action.of("acquire", permits=4), Action.of("acquire", permits=1), STEP
    )
    assert [f.done() for f in world.futures] == [True, False, False]
    world.running = True
    world.futures[2].complete(Permit(1, owner=world.sem))
    assert "TL-I3" in reference.violations()


def test_tl_i2_a_released_permit_that_still_holds_bytes() -> None:
    reference, world = _semaphore(Action.of("acquire", permits=2), STEP)
    reference.apply(Action.of("release", permit=0))
    assert reference.violations() == []
    world.permits[0]._permits = 2  # the release read the value but did not swap it to zero
    assert reference.violations() == ["TL-I2"]


def _failed_listing() -> tuple[TopicListReference, FlowsReferenceWorld]:
    reference = TopicListReference(EXPLORE_FLOWS_CONFIG, "current")
    assert isinstance(reference.world, FlowsReferenceWorld)
    reference.apply(Action.of("get_topics", conn=0, request_id=0, namespace=NS, mode="PERSISTENT", topics_hash=""))
    reference.apply(STEP)
    assert not reference.world.quiescent()  # the listing waits for the harness
    return reference, reference.world


def test_tl_i8_the_error_reply_makes_the_failed_listing_quiescent() -> None:
    reference, world = _failed_listing()
    reference.apply(Action.of("complete_listing", id=0, error="listing failed"))
    reference.apply(Action.of("advance", dt=50))  # the deferred passes: the executor is idle
    assert world.quiescent() and reference.violations() == []


def test_tl_i8_a_request_left_unanswered_once_nothing_more_can_happen() -> None:
    reference, world = _failed_listing()
    reference.apply(Action.of("complete_listing", id=0, error="listing failed"))
    reference.apply(Action.of("advance", dt=50))
    world.conns[0].replies.pop()  # as if the MetadataError reply had never been attempted
    # ... while its lookup permit went back: a request unanswered without its permit breaks TL-I11 too
    assert reference.violations() == ["TL-I11", "TL-I8"]
