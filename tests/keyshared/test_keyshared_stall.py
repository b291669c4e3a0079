"""Issue 45: no stall (KS-S1, a read from a state where an entry may go to a consumer with permits makes progress)
and the look-ahead a dispatch pass owes (KS-S2, reference only).

The corner: consumer "4"'s owner nacks its only message and has no permits left, so a Replay read of it sends
nothing, while the other consumer has a permit and an unread message of its own key. Upstream's look-ahead
(#23231, 77570d5db5) makes the next read skip the replay and read ahead. With the look-ahead limit at one entry the
queue is full and no read may read ahead (`isNormalReadAllowed`); the first Replay read learns the nacked entry's
hash, the replay filter skips it from then on, and every later read does nothing: the idle consumer #25992 warns
of ("a low value can leave some consumers idle"), which KS-S1 names on the model and on the reference.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Action, Param, violated
from models.keyshared import KeySharedModel, KSState
from properties.engines.lockstep import Lockstep
from properties.keyshared.dispatcher import TWO, KeySharedReference
from reference_impl.keyshared import KeySharedDispatcher, ReadOp
from reference_impl.keyshared.dispatcher import Interleave, ReadResult

STALL: dict[str, Param] = {**TWO, "actions": ("add", "publish", "redeliver", "read", "run")}
LOW_LOOK_AHEAD: dict[str, Param] = {**STALL, "look_ahead_per_consumer": 0, "look_ahead_per_subscription": 1}


def _a(action: str, **params: Param) -> Action:
    return Action(action, tuple(sorted(params.items())))


# Two instances of consumer1: the second takes key "4", the first keeps "5" (TWO's ring).
_SCRIPT = (
    _a("add", consumer=1, name="consumer1", permits=1),
    _a("add", consumer=2, name="consumer1", permits=1),
    _a("publish", key="4"),
    _a("read"),  # entry 0 to consumer 2, which has no permit left
    _a("redeliver", consumer=2, position=0),  # back to replay, with no hash
    _a("publish", key="5"),  # consumer 1's, unread
)


def _lockstep(config: Mapping[str, Param], reference: KeySharedReference | None = None) -> Lockstep[KSState]:
    """The script in lockstep, each step clean but the last publish's, whose state KS-S1 may judge."""
    model = KeySharedModel(config, "pip379")
    lockstep = Lockstep(model, reference or KeySharedReference(model.config, "pip379"))
    for action in _SCRIPT[:-1]:
        outcome = lockstep.apply(action)
        assert not outcome.failures, (action, outcome.failures, outcome.detail)
    lockstep.apply(_SCRIPT[-1])
    return lockstep


def test_the_look_ahead_gets_past_a_replayed_entry_nobody_can_take() -> None:
    lockstep = _lockstep(STALL)
    assert not violated(lockstep.model, lockstep.state)
    outcome = lockstep.apply(_a("read"))  # the Replay read sends nothing and triggers the look-ahead
    assert not outcome.failures and lockstep.state.skip_next_replay
    outcome = lockstep.apply(_a("read"))  # the look-ahead: entry 1 to consumer 1
    assert not outcome.failures and outcome.observation is not None
    assert outcome.observation["delivered"] == [[1, 1]]


def test_a_full_look_ahead_queue_is_a_stall_on_both_sides() -> None:
    reference = KeySharedReference(KeySharedModel(LOW_LOOK_AHEAD, "pip379").config, "pip379")
    lockstep = _lockstep(LOW_LOOK_AHEAD, reference)
    assert not violated(lockstep.model, lockstep.state)  # the next read learns the nacked entry's hash
    outcome = lockstep.apply(_a("read"))
    assert lockstep.state.replay != ((0, 0),) and reference.violations() == []  # progress, on both sides
    state = lockstep.state
    assert violated(lockstep.model, state) == ["KS-S1"] == list(outcome.failures)  # but from here on, none
    assert [(c.id, c.permits) for c in state.consumers] == [(1, 1), (2, 0)] and len(state.replay) == 1
    outcome = lockstep.apply(_a("read"))
    assert lockstep.state == state and "KS-S1" in outcome.failures
    assert reference.violations() == ["KS-S1"]  # the reference's read changed nothing too


def test_nothing_to_go_is_no_stall() -> None:
    """Without consumer 1's unread entry, nothing may go to a consumer with permits: KS-S1 holds though the read
    changes nothing (the replayed entry's owner has no permits)."""
    model = KeySharedModel(LOW_LOOK_AHEAD, "pip379")
    state = model.initial()
    for action in _SCRIPT[:-1]:
        state, _ = model.step(state, action)
    assert "KS-S1" not in violated(model, state)


class _ForgetsLookAhead(KeySharedDispatcher):
    """A dispatcher whose dispatch pass never leaves the look-ahead pending."""

    def complete_read(self, op: ReadOp, interleave: Interleave | None = None) -> ReadResult:
        result = super().complete_read(op, interleave)
        self.skip_next_replay_to_trigger_look_ahead = False
        return result


def test_a_pass_that_owes_the_look_ahead_and_leaves_none_breaks_ks_s2() -> None:
    reference = KeySharedReference(KeySharedModel(STALL, "pip379").config, "pip379")
    reference.d.__class__ = _ForgetsLookAhead
    lockstep = _lockstep(STALL, reference)
    outcome = lockstep.apply(_a("read"))
    assert "KS-S2" in outcome.failures
    assert reference.violations() == ["KS-S2"]  # the read learnt the replayed entry's hash: progress, no stall
