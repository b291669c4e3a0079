"""keyshared at the tracker scope: PendingAcksMap + DrainingHashesTracker (models/keyshared/tracker.py).

The model runs in lockstep with the reference's own classes, the explorer covers its small
configuration completely and finds planted bugs through KS-I2 and KS-I3, and the §4.2/§4.3/§4.5
semantics are pinned step by step on the model and the reference at once.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import settings

from models.core import Action, ActionNotEnabled, Json, Observation, Param
from models.keyshared import KeySharedModel
from models.keyshared import tracker as keyshared_tracker
from models.keyshared.tracker import (
    EXPLORE_CONFIG,
    HYPOTHESIS_CONFIG,
    WIDE_EXPLORE_CONFIG,
    KeySharedTrackerModel,
    TrackerState,
)
from properties import registry
from properties.engines.explorer import explore
from properties.engines.lockstep import DIVERGENCE, Lockstep, first_failure
from properties.engines.stateful import build_state_machine, find_failure
from properties.keyshared.binding import MECHANISM, make_model, make_reference
from properties.keyshared.tracker import KeySharedTrackerReference
from reference_impl.keyshared import Consumer

FAST = settings(max_examples=60, stateful_step_count=30, derandomize=True, database=None, deadline=None)
THREE: dict[str, Param] = {**EXPLORE_CONFIG, "consumers": 3}
"""A third consumer lets a hash move on while it drains (the entry must survive the move)."""

A, B = 11707, 4850  # the sticky hashes of keys "4" (positions 0 and 1) and "0" (position 2)


def add(consumer: int, position: int, h: int, batch_size: int = 1) -> Action:
    return Action.of("add_pending_ack_if_allowed", consumer=consumer, position=position, batch_size=batch_size, hash=h)


def move(h: int, consumer: int) -> Action:
    return Action.of("move_hash", hash=h, consumer=consumer)


def block(consumer: int, h: int) -> Action:
    return Action.of("should_block_sticky_key_hash", consumer=consumer, hash=h)


def remove(consumer: int, position: int) -> Action:
    return Action.of("remove", consumer=consumer, position=position)


def run(
    actions: Sequence[Action], config: Mapping[str, Param] = EXPLORE_CONFIG
) -> tuple[list[Observation], dict[str, Json]]:
    """The actions on the model and the reference in lockstep: every step must agree and hold every invariant."""
    lockstep = Lockstep(KeySharedTrackerModel(config), KeySharedTrackerReference(config, "pip379"))
    observations = []
    for action in actions:
        outcome = lockstep.apply(action)
        assert outcome.failures == (), (action, outcome.failures, outcome.detail)
        observations.append(outcome.observation)
    return observations, lockstep.model.vars(lockstep.state)


def _random_run(config: Mapping[str, Param], variant: str, seed: int, steps: int) -> tuple[str, ...]:
    lockstep = Lockstep(KeySharedTrackerModel(config, variant), KeySharedTrackerReference(config, variant))
    outcome = first_failure(lockstep, random.Random(seed), steps)
    return (*outcome.failures, outcome.detail) if outcome else ()


# --- the semantics of §4.2, §4.3 and §4.5, on the model and the reference at once ----------------------------
# Initially hash B (the smaller) belongs to consumer 1 and hash A to consumer 2.


def test_a_moved_hash_drains_and_blocks_only_its_new_owner() -> None:
    observations, state = run([add(2, 0, A), add(2, 1, A), move(A, 1), block(1, A), add(1, 2, B)])
    assert observations[3] == {"blocked": True, "unblocked": []}
    assert state["draining"] == [[A, 2, 2, True]]  # one ref per pending ack of the hash, blocked once
    assert state["owners"] == [[B, 1], [A, 1]]


def test_the_add_handler_refuses_a_draining_hash_and_queues_it_for_replay_until_it_is_sent() -> None:
    observations, state = run([add(2, 0, A), move(A, 1), add(1, 1, A)])
    assert observations[2] == {"added": False, "unblocked": []}
    assert state["replay"] == [[1, 1, A]] and state["pending"] == [[1, []], [2, [[1, 0, 1, A]]]]
    observations, state = run([add(2, 0, A), move(A, 1), add(1, 1, A), remove(2, 0), add(1, 1, A)])
    assert observations[3] == {"removed": True, "unblocked": []}  # never blocked: no unblocking call
    assert observations[4] == {"added": True, "unblocked": []}
    assert state["replay"] == [] and state["draining"] == []


def test_the_last_ack_of_a_blocked_hash_unblocks_it_once_with_its_hash() -> None:
    observations, state = run([add(2, 0, A), add(2, 1, A), move(A, 1), block(1, A), remove(2, 0), remove(2, 1)])
    assert observations[4] == {"removed": True, "unblocked": []}
    assert observations[5] == {"removed": True, "unblocked": [A]}
    assert state["draining"] == []


def test_s5_unblockings_inside_a_batch_are_reported_once_with_minus_one_at_the_outermost_end() -> None:
    start, end = Action.of("start_batch"), Action.of("end_batch")
    clear_1, clear_2 = (Action.of("for_each_and_clear", consumer=c) for c in (1, 2))
    drained = [add(2, 0, A), add(1, 2, B), move(A, 3), move(B, 3), block(3, A), block(3, B), start]
    observations, state = run([*drained, clear_2, clear_1], THREE)
    assert observations[-2:] == [{"removed": [[1, 0, A]], "unblocked": []}, {"removed": [[1, 2, B]], "unblocked": []}]
    assert state["unblocked_while_batching"] is True and state["batch_level"] == 1 and state["draining"] == []
    observations, state = run([*drained, clear_2, clear_1, end], THREE)
    assert observations[-1] == {"unblocked": [-1]}
    assert state["unblocked_while_batching"] is False and state["batch_level"] == 0


def test_a_mark_delete_move_is_one_batch_too() -> None:
    up_to = Action.of("remove_all_up_to", consumer=2, position=1)
    observations, _ = run([add(2, 0, A), add(2, 1, A), move(A, 1), block(1, A), up_to])
    assert observations[4] == {"removed": [[1, 0, A], [1, 1, A]], "unblocked": [-1]}


def test_a_closing_removal_never_unblocks_and_a_closed_map_refuses_adds_without_replay() -> None:
    close_1, close_2 = (Action.of("for_each_and_close", consumer=c) for c in (1, 2))
    observations, state = run([add(2, 0, A), move(A, 1), block(1, A), close_2, close_1, add(1, 1, A)])
    assert observations[3] == {"removed": [[1, 0, A]], "unblocked": []}
    assert observations[5] == {"added": False, "unblocked": []}
    assert state["draining"] == [] and state["replay"] == []
    assert state["consumers"] == [[1, "consumer1", True], [2, "consumer2", True]]


def test_a_hash_that_comes_back_releases_its_entry_and_unblocks_at_once() -> None:
    observations, state = run([add(2, 0, A), add(2, 1, A), move(A, 1), block(1, A), move(A, 2)])
    assert observations[4] == {"unblocked": [A]}
    pending = state["pending"]
    assert state["draining"] == [] and isinstance(pending, list) and pending[1] == [2, [[1, 0, 1, A], [1, 1, 1, A]]]


def test_a_draining_hash_that_moves_on_keeps_its_entry() -> None:
    _, state = run([add(2, 0, A), move(A, 1), block(1, A), move(A, 3), block(3, A)], THREE)
    assert state["draining"] == [[A, 2, 1, True]] and state["owners"] == [[B, 1], [A, 3]]


def test_the_model_refuses_what_the_dispatcher_never_does() -> None:
    model = KeySharedTrackerModel()
    state = model.initial()
    for action in (add(1, 0, A), block(1, A), move(A, 2), remove(2, 0), Action.of("end_batch")):
        with pytest.raises(ActionNotEnabled):
            model.step(state, action)  # not the owner / already the owner / not held / no batch open


def test_configuration_errors_are_reported() -> None:
    with pytest.raises(ValueError, match=r"unknown config key\(s\) of keyshared \(tracker scope\)"):
        KeySharedTrackerModel({"scope": "tracker", "keys": ("4",)})
    with pytest.raises(ValueError, match="hashes in"):
        KeySharedTrackerModel({"position_hashes": (-1, 1)})
    with pytest.raises(ValueError, match="one ledger id"):
        KeySharedTrackerModel({"position_ledgers": (1, 2)})
    with pytest.raises(ValueError, match="batch_sizes"):
        KeySharedTrackerModel({"batch_sizes": ()})
    with pytest.raises(ValueError, match="unknown variant"):
        KeySharedTrackerModel(None, "pip380")


# --- lockstep with the reference -----------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "runs"), [(EXPLORE_CONFIG, 300), (WIDE_EXPLORE_CONFIG, 300),
                                              (HYPOTHESIS_CONFIG, 300)], ids=["explore", "wide", "hypothesis"])
def test_the_reference_never_diverges_nor_breaks_an_invariant_on_random_runs(config: Mapping[str, Param],
                                                                           runs: int) -> None:
    failures = {seed: f for seed in range(runs) if (f := _random_run(config, "pip379", seed, 60))}
    assert failures == {}


def test_hypothesis_machine_passes_the_reference() -> None:
    machine = build_state_machine(lambda: KeySharedTrackerModel(HYPOTHESIS_CONFIG),
                                  keyshared_tracker.ACTION_NAMES,
                                  lambda: KeySharedTrackerReference(HYPOTHESIS_CONFIG, "pip379"))
    assert find_failure(machine, FAST) is None


def test_the_adapter_checks_ks_i2_on_the_references_own_tracker() -> None:
    reference = KeySharedTrackerReference(EXPLORE_CONFIG, "pip379")
    for action in (add(2, 0, A), move(A, 1)):
        reference.apply(action)
    assert reference.violations() == []
    reference.tracker.add_entry(reference.consumers[2], A)  # a second ref for one pending ack
    assert reference.violations() == ["KS-I2"]


def test_a_buggy_reference_tracker_diverges_from_the_model() -> None:
    """A tracker that forgets blocked attempts would never unblock: lockstep sees the entry's flag differ."""
    reference = KeySharedTrackerReference(EXPLORE_CONFIG, "pip379")
    tracker = reference.tracker
    original = tracker.should_block_sticky_key_hash

    def forgetful(consumer: Consumer, sticky_hash: int) -> bool:
        blocked = original(consumer, sticky_hash)
        entry = tracker.get_entry(sticky_hash)
        if entry is not None:
            entry.blocked_count = 0
        return blocked

    tracker.should_block_sticky_key_hash = forgetful  # type: ignore[method-assign,assignment]
    lockstep = Lockstep(KeySharedTrackerModel(), reference)
    outcomes = [lockstep.apply(a) for a in (add(2, 0, A), move(A, 1), block(1, A))]
    assert [o.failures for o in outcomes] == [(), (), (DIVERGENCE,)]
    assert outcomes[2].detail.startswith("state draining")


# --- explorer ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [EXPLORE_CONFIG, THREE, WIDE_EXPLORE_CONFIG], ids=["two", "three", "wide"])
def test_explorer_passes_completely_and_takes_every_action(config: Mapping[str, Param]) -> None:
    model = KeySharedTrackerModel(config)
    result = explore(model, terminal_ok=model.terminal_ok)
    assert result.ok and result.complete, result.findings
    batches = () if model.max_batch_level else ("start_batch", "end_batch")  # the wide one nests none
    assert set(result.coverage) == set(keyshared_tracker.ACTION_NAMES) - set(batches)


def test_explorer_reaches_the_interesting_states() -> None:
    """Non-vacuity: two refs on one entry, blocked entries, a pending batch unblocking, refusals, closed maps."""
    model = KeySharedTrackerModel()
    states: list[TrackerState] = explore(model, terminal_ok=model.terminal_ok).states
    assert any(d.ref_count == 2 and d.blocked for s in states for d in s.draining)
    assert any(len(s.draining) == 2 for s in states)
    assert any(s.unblocked_while_batching for s in states)
    assert any(s.replay for s in states)
    assert any(all(s.closed) for s in states)


def _planted(monkeypatch: pytest.MonkeyPatch, name: str, bug: object) -> list[tuple[str, tuple[Action, ...]]]:
    monkeypatch.setattr(keyshared_tracker._Step, name, bug)
    model = KeySharedTrackerModel()
    result = explore(model, terminal_ok=model.terminal_ok, check_liveness=False)
    return [(f.name, tuple(f.path)) for f in result.findings]


def test_explorer_catches_a_post_decrement_ref_count_through_ks_i2(monkeypatch: pytest.MonkeyPatch) -> None:
    """`if entry.ref_count-- > 0: return`: the last ack leaves the entry behind with 0 refs (a stuck hash)."""

    def reduce_ref_count(self: keyshared_tracker._Step, sticky_hash: int, closing: bool) -> None:
        entry = self.entries.get(sticky_hash)
        if entry is not None:
            entry.ref_count -= 1
            if entry.ref_count + 1 == 0:
                del self.entries[sticky_hash]

    findings = _planted(monkeypatch, "reduce_ref_count", reduce_ref_count)
    assert [name for name, _ in findings] == ["KS-I2"]
    ((_, path),) = findings  # the hash's one message sent, the hash moved, the message acked (any way)
    assert [a.name for a in path[:2]] == ["add_pending_ack_if_allowed", "move_hash"] and len(path) == 3


def test_explorer_catches_a_batch_end_that_keeps_the_flag_through_ks_i3(monkeypatch: pytest.MonkeyPatch) -> None:
    def end_batch(self: keyshared_tracker._Step) -> None:
        self.batch_level -= 1
        if self.batch_level == 0 and self.unblocked_while_batching:
            self.unblocked.append(-1)  # reported, but the flag is never cleared

    findings = _planted(monkeypatch, "end_batch", end_batch)
    assert [name for name, _ in findings] == ["KS-I3"]
    ((_, path),) = findings  # sent, moved, blocked, then released inside the map's own batch
    assert path[-1].name in ("remove_all_up_to", "for_each_and_clear") and len(path) == 4


# --- the registry ----------------------------------------------------------------------------------------------


def test_the_mechanism_dispatches_on_the_scope_and_keeps_the_dispatcher_configs_first() -> None:
    assert registry.get("keyshared") is MECHANISM
    assert MECHANISM.explore_configs["tracker"] is EXPLORE_CONFIG
    assert MECHANISM.hypothesis_configs["tracker"] is HYPOTHESIS_CONFIG
    assert MECHANISM.explore_configs["tracker-wide"] is WIDE_EXPLORE_CONFIG
    assert list(MECHANISM.hypothesis_configs)[-2:] == ["tracker", "locks"]  # the lock scope's last
    names = list(MECHANISM.explore_configs)
    assert "scope" not in MECHANISM.explore_configs[names[0]]  # the default explore configuration is a dispatcher one
    # replayed in full before the broad, bounded dispatcher configurations
    assert names.index("tracker-wide") == names.index("tracker") + 1 < names.index("small")
    assert isinstance(make_model(EXPLORE_CONFIG, "pip379"), KeySharedTrackerModel)
    assert isinstance(make_reference(EXPLORE_CONFIG, "pip379"), KeySharedTrackerReference)
    assert isinstance(make_model(None, "pip379"), KeySharedModel)


@pytest.mark.parametrize("variant", ["classic", "pip282"])
def test_every_variant_runs_the_same_classes_at_this_scope(variant: str) -> None:
    """The historical variants differ in the dispatcher only; here they pass like pip379 (their twins are
    caught at the dispatcher scope)."""
    model = KeySharedTrackerModel(EXPLORE_CONFIG, variant)
    result = explore(model, terminal_ok=model.terminal_ok)
    assert result.ok and len(result.states) == 1530  # as many as pip379's (the explorer test's config)
    assert all(_random_run(EXPLORE_CONFIG, variant, seed, 40) == () for seed in range(20))
