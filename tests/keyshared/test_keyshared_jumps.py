"""Issue 33's cursor jumps: skip, clear backlog, expire and reset, in the model and on the reference.

The planted bugs `tests/mutants/keyshared-{skip,clear-backlog,expire,reset}-*.patch` are the twins of
the jump invariants (KS-J1, KS-J2, KS-C1 and KS-I2 after a jump); here the scripted corners show what
each jump does to pending acks, draining hashes and the client record, and that the jump
configurations stay reached and replayed whole within `brokerspec check`'s budget.
"""

from __future__ import annotations

import pytest

from models.core import Action, Param
from models.keyshared import JUMP_RELEASED, RESET_BACK, KeySharedModel, KSState
from properties.engines.checks import CONFORMANCE_STEPS
from properties.engines.conformance import conform
from properties.engines.coverage import from_exploration
from properties.engines.explorer import explore
from properties.engines.lockstep import Lockstep
from properties.keyshared.binding import MECHANISM, make_model
from properties.keyshared.dispatcher import EXPLORE_CONFIGS, TWO, KeySharedReference
from properties.keyshared.eventlog import records as keyshared_log
from properties.keyshared.eventlog import replay as keyshared_replay

JUMP_MARKS = {
    "jump": {"a draining hash released by a cursor jump", "a cursor jump passed a message a consumer still holds",
             "a hash is draining"},
    "reset": {"a cursor reset went back over acknowledged messages"},
}
ALL_JUMPS = {**TWO, "max_messages": 3, "add_permits": (1, 3), "max_permits": 3,
             "actions": ("add", "publish", "ack", "read", "run", "remove", "skip", "clear_backlog", "expire", "reset")}


def _a(action: str, **params: Param) -> Action:
    return Action(action, tuple(sorted(params.items())))


# consumer1 holds message 0 of key "4"; a second consumer1 joins and takes key "4", so the first drains it.
DRAINING = (_a("add", consumer=1, name="consumer1", permits=1), _a("publish", key="4"), _a("read"),
            _a("add", consumer=2, name="consumer1", permits=1), _a("publish", key="4"))


def _lockstep(*actions: Action) -> Lockstep[KSState]:
    model = KeySharedModel(ALL_JUMPS, "pip379")
    lockstep = Lockstep(model, KeySharedReference(model.config, "pip379"))
    for action in actions:
        outcome = lockstep.apply(action)
        assert not outcome.failures, (action, outcome.failures, outcome.detail)
    return lockstep


def test_a_skip_releases_the_draining_hash_and_the_new_owner_gets_the_next_message() -> None:
    lockstep = _lockstep(*DRAINING, _a("read"))
    assert lockstep.state.draining and lockstep.state.replay  # message 1 waits behind the drainer's message 0
    outcome = lockstep.apply(_a("skip", n=1))
    assert not outcome.failures, outcome.detail
    state = lockstep.state
    assert JUMP_RELEASED in state.events and not state.draining and state.mark_delete == 0
    assert state.consumers[0].held == (0,) and state.consumers[0].pending == ()  # the client was not told
    outcome = lockstep.apply(_a("run"))
    assert outcome.observation == {"delivered": [[2, 1]]} and not outcome.failures


def test_clear_backlog_and_expire_move_mark_delete_and_empty_the_replay_queue() -> None:
    lockstep = _lockstep(*DRAINING, _a("read"), _a("expire", position=1))
    assert lockstep.state.mark_delete == 1 and not lockstep.state.replay and not lockstep.state.draining
    lockstep = _lockstep(*DRAINING, _a("read"), _a("clear_backlog"))
    assert lockstep.state.mark_delete == 1 and lockstep.state.read_position == 2


def test_skip_steps_over_individually_acked_entries() -> None:
    """asyncSkipEntries(n, Exclude): an entry a client acked does not count among the n skipped."""
    lockstep = _lockstep(_a("add", consumer=1, name="consumer2", permits=3), *[_a("publish", key="5")] * 3,
                         _a("read"), _a("ack", consumer=1, position=1), _a("skip", n=1))
    assert (lockstep.state.mark_delete, lockstep.state.acked) == (0, (1,))
    lockstep.apply(_a("skip", n=1))
    assert (lockstep.state.mark_delete, lockstep.state.acked) == (2, ())


def test_a_reset_back_disconnects_everyone_and_reads_again_from_the_position() -> None:
    lockstep = _lockstep(_a("add", consumer=1, name="consumer2", permits=1), _a("publish", key="5"), _a("read"),
                         _a("ack", consumer=1, position=0), _a("reset", position=0))
    state = lockstep.state
    assert RESET_BACK in state.events and not state.consumers and state.mark_delete == -1 and state.read_position == 0
    outcome = lockstep.apply(_a("add", consumer=1, name="consumer2", permits=1))
    outcome = lockstep.apply(_a("read"))
    assert outcome.observation == {"delivered": [[1, 0]]} and not outcome.failures


def test_a_jump_passed_message_still_held_is_not_a_second_holder() -> None:
    """KS-I1 as PIP-379 words it: after the skip, consumer 1 still holds message 0 (issue #25627), and
    consumer 2 gets message 1 of the same key: the cursor acknowledged message 0, so it no longer counts."""
    lockstep = _lockstep(*DRAINING, _a("read"), _a("skip", n=1), _a("run"))
    held = {c.id: c.held for c in lockstep.state.consumers}
    assert held == {1: (0,), 2: (1,)}


@pytest.mark.parametrize("name", sorted(JUMP_MARKS))
def test_jump_configuration_reaches_its_marks_and_is_replayed_whole(name: str) -> None:
    config = EXPLORE_CONFIGS[name]
    model = make_model(config, "pip379")
    exploration = explore(model, check_liveness=False, check_deadlock=False)
    assert exploration.complete and not exploration.findings
    assert JUMP_MARKS[name] <= from_exploration(MECHANISM, model, exploration).reached
    result = conform(lambda: make_model(config, "pip379"),
                     lambda: MECHANISM.make_reference(model.config, "pip379"),  # type: ignore[misc]
                     max_steps=CONFORMANCE_STEPS)
    assert result.ok and result.complete and result.covered == result.edges, result.summary()


def test_the_compiled_pipeline_replay_refuses_a_model_that_takes_jumps(monkeypatch: pytest.MonkeyPatch) -> None:
    assert keyshared_replay.compiled("pip379") is not None
    base = keyshared_log.base_config()
    actions = base["actions"]
    assert isinstance(actions, tuple)
    monkeypatch.setattr(keyshared_replay, "base_config", lambda: {**base, "actions": (*actions, "skip")})
    assert keyshared_replay.compiled("pip379") is None
