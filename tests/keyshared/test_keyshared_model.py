"""The Key_Shared model on the spec's worked examples: the exact ring, S18, the §6 flows, the hooks.

Everything here runs the model alone (`models.keyshared`); the reference is only used to cross-check
the ring. Deliveries are read from the observation each step returns.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

from models.core import Action, ActionNotEnabled, Param, violated
from models.keyshared import Draining, KeySharedModel, KSState, build_ring, sticky_hash
from models.keyshared.dispatch import Dispatch
from models.keyshared.state import ACTION_NAMES, DEFAULT_CONFIG
from properties.keyshared.dispatcher import GATE, HYPOTHESIS_CONFIGS
from reference_impl.keyshared import Consumer, KeySharedDispatcher

H4, H0, H5 = 11707, 4850, 35071
SPEC = {**GATE, "names": ("consumer1", "consumer2", "consumer3"), "keys": tuple("0123456789"), "max_messages": 20,
        "add_permits": (0, 1, 10, 1000), "max_permits": 1000}


def add(cid: int, name: str, permits: int) -> Action:
    return Action("add", (("consumer", cid), ("name", name), ("permits", permits)))


def publish(keys: str) -> list[Action]:
    return [Action.of("publish", key=k) for k in keys]


READ, RUN = Action.of("read"), Action.of("run")


class Run:
    """A model state advanced by actions, keeping what each consumer received in order."""

    def __init__(self, variant: str, config: Mapping[str, Param] = SPEC) -> None:
        self.model = KeySharedModel(config, variant)
        self.state = self.model.initial()
        self.received: dict[int, list[int]] = {}

    def do(self, *actions: Action) -> list[list[int]]:
        delivered: list[list[int]] = []
        for action in actions:
            self.state, observation = self.model.step(self.state, action)
            assert isinstance(observation, dict) and isinstance(observation["delivered"], list)
            for pair in observation["delivered"]:
                assert isinstance(pair, list)
                cid, position = (int(v) for v in pair if isinstance(v, int))
                self.received.setdefault(cid, []).append(position)
                delivered.append([cid, position])
        return delivered

    @property
    def failures(self) -> list[str]:
        return violated(self.model, self.state)

    def held(self, cid: int) -> tuple[int, ...]:
        return next(c.held for c in self.state.consumers if c.id == cid)


# --- hashing and the ring --------------------------------------------------------------------------


def test_sticky_hashes_of_the_spec_keys() -> None:
    assert [sticky_hash(k, 65535) for k in "405"] == [H4, H0, H5]
    assert all(1 <= sticky_hash(str(k), 7) <= 7 for k in range(100))


def test_ring_example_s12_gives_exactly_the_listed_ranges() -> None:
    run = Run("pip379")
    run.do(add(1, "consumer1", 0), add(2, "consumer2", 0), add(3, "consumer3", 0))
    ring = run.model.ring(run.state.consumers).ranges  # the slots are the ids 1..3 in join order
    assert run.model.vars(run.state)["ring"] == [[start, end, slot + 1] for start, end, slot in ring]
    by_consumer: dict[int, list[tuple[int, int]]] = {}
    for start, end, slot in ring:
        by_consumer.setdefault(slot + 1, []).append((start, end))
    assert by_consumer == {
        1: [(14359, 18366), (29991, 39817), (52980, 60442)],
        2: [(1, 6668), (39818, 52979), (60443, 63679), (65184, 65535)],
        3: [(6669, 14358), (18367, 29990), (63680, 65183)],
    }
    assert sum(end - start + 1 for start, end, _ in ring) == 65535


def test_two_consumer_ring_of_section_6_and_the_key_moves() -> None:
    join = [("consumer1", 0), ("consumer2", 0)]
    ring = build_ring(join, 3, 65535, [H4, H0, H5])
    assert ring.ranges == ((1, 6668, 1), (6669, 39817, 0), (39818, 52979, 1), (52980, 60442, 0), (60443, 65535, 1))
    assert ring.owners == {H4: 0, H0: 1, H5: 0}
    assert build_ring([*join, ("consumer3", 0)], 3, 65535, [H4, H0, H5]).owners == {H4: 2, H0: 1, H5: 0}


def test_ring_matches_the_reference_selector_for_same_name_consumers() -> None:
    """Name indexes: a second consumer1 gets index 1 and its own points; the earliest claimer wins."""
    d = KeySharedDispatcher("pip379", replica_points=3)
    first, second = Consumer("consumer1", 1), Consumer("consumer1", 2)
    d.add_consumer(first)
    d.add_consumer(second)
    expected = [(a.range.start, a.range.end, 0 if a.consumer is first else 1)
                for a in d.selector.get_consumer_hash_assignments_snapshot().assignments]
    assert list(build_ring([("consumer1", 0), ("consumer1", 1)], 3, 65535, []).ranges) == expected
    assert build_ring([], 3, 65535, [H4]) == build_ring([], 3, 65535, [H4])._replace(owners={}, ranges=())


def test_a_rejoining_name_gets_the_lowest_free_index_and_the_same_points_back() -> None:
    run = Run("pip379", {**SPEC, "names": ("consumer1",)})
    run.do(add(1, "consumer1", 0), add(2, "consumer1", 0), Action.of("remove", consumer=1), add(1, "consumer1", 0))
    assert [(c.id, c.name_index) for c in run.state.consumers] == [(2, 1), (1, 0)]
    assert run.model.vars(run.state)["consumers"] == [[2, "consumer1", 1, 0], [1, "consumer1", 0, 0]]


# --- S18 and the §6 flows --------------------------------------------------------------------------


def test_s18_draining_blocks_the_moved_keys_until_consumer1_leaves() -> None:
    run = Run("pip379")
    run.do(add(1, "consumer1", 1000), *publish("0123456789"), RUN)
    assert run.held(1) == tuple(range(10))
    run.do(add(2, "consumer2", 1000))
    moved = {sticky_hash(k, 65535) for k in "013679"}
    assert {(d.hash, d.owner, d.ref_count) for d in run.state.draining} == {(h, 1, 1) for h in moved}
    delivered = run.do(*publish("0123456789"), RUN)
    assert delivered == [[1, 12], [1, 14], [1, 15], [1, 18]]
    assert [p for p, _ in run.state.replay] == [10, 11, 13, 16, 17, 19]
    run.do(Action.of("remove", consumer=1))
    assert run.state.draining == () and len(run.state.replay) == 20
    assert run.do(RUN) == [[2, p] for p in range(20)]
    assert run.failures == []


@pytest.mark.parametrize(("variant", "broken"), [("classic", True), ("pip282", False), ("pip379", False)])
def test_issue_1_breaks_ks_i1_only_in_classic(variant: str, broken: bool) -> None:
    run = Run(variant)
    run.do(add(1, "consumer1", 1), add(2, "consumer2", 1000), *publish("444000"), READ)
    assert run.received == {1: [0], 2: [3, 4, 5]} and [p for p, _ in run.state.replay] == [1, 2]
    run.do(add(3, "consumer3", 1000), RUN)
    assert ("KS-I1" in run.failures) == broken
    run.do(Action.of("remove", consumer=1), RUN)
    assert ("KS-I4" in run.failures) == broken
    if variant == "pip282":  # consumer3 is pruned once it acks 1:0 and mark-delete reaches it
        assert run.received[3] == [0]
        run.do(Action.of("ack", consumer=3, position=0), RUN)
    assert run.received[3] == ([1, 2, 0] if broken else [0, 1, 2])


@pytest.mark.parametrize(("variant", "broken"), [("classic", True), ("pip282", False), ("pip379", False)])
def test_issue_2_breaks_ks_i1_only_in_classic(variant: str, broken: bool) -> None:
    run = Run(variant)
    run.do(add(1, "consumer1", 1), add(2, "consumer2", 1000), *publish("4"), READ, *publish("4"), READ)
    assert run.held(1) == (0,) and [p for p, _ in run.state.replay] == [1]
    run.do(add(3, "consumer3", 1000), RUN)
    assert ("KS-I1" in run.failures) == broken
    if variant == "pip379":
        assert [(d.hash, d.owner, d.ref_count, d.blocked) for d in run.state.draining] == [(H4, 1, 1, True)]
        run.do(Action.of("ack", consumer=1, position=0))
        assert run.state.scheduled_read and run.state.draining == ()  # the unblock callback
        run.do(Action.of("fire"))
        assert run.received[3] == [1]


@pytest.mark.parametrize(("variant", "broken"), [("classic", True), ("pip282", True), ("pip379", False)])
def test_reconnect_breaks_the_historical_variants(variant: str, broken: bool) -> None:
    run = Run(variant)
    run.do(add(1, "consumer1", 0), add(2, "consumer2", 10), *publish("00"), READ, Action.of("remove", consumer=2),
           Action.of("flow", consumer=1, n=1), READ)
    assert run.held(1) == (0,)
    run.do(add(2, "consumer2", 10), RUN)
    assert ("KS-I1" in run.failures) == broken
    run.do(Action.of("remove", consumer=1), RUN)
    assert run.received[2] == ([0, 1, 1, 0] if broken else [0, 1, 0, 1])
    assert run.failures == (["KS-I4"] if broken else [])


@pytest.mark.parametrize(("variant", "stuck"), [("classic", True), ("pip282", True), ("pip379", False)])
def test_21199_a_rejoined_consumer_is_stuck_behind_an_unacked_message_in_the_old_variants(
    variant: str, stuck: bool
) -> None:
    run = Run(variant)
    run.do(add(1, "consumer1", 10), add(2, "consumer2", 10), *publish("4"), READ, Action.of("remove", consumer=1), READ)
    assert run.held(2) == (0,)
    run.do(add(1, "consumer1", 10), *publish("50"), RUN)
    for cid in (1, 2):
        for position in run.held(cid):
            if position != 0:
                run.do(Action.of("ack", consumer=cid, position=position), RUN)
    assert (1 not in run.received[1]) == stuck  # 1:1 (key "5") never reaches the rejoined consumer1
    assert run.received[2] == [0, 2]
    # The rejoined consumer has permits and its own key's entry waits, yet a read changes nothing: KS-S1's stall.
    assert run.failures == (["KS-S1"] if stuck else [])


# --- the §4.6 hooks --------------------------------------------------------------------------------


def test_an_interleaved_ack_unblocks_during_the_pass_and_holds_the_whole_hash_back() -> None:
    run = Run("pip379")
    run.do(add(1, "consumer1", 10), *publish("45"), RUN, add(2, "consumer2", 10), add(3, "consumer3", 10))
    run.do(*publish("4044"))
    assert [(d.hash, d.owner, d.ref_count) for d in run.state.draining] == [(H4, 1, 1)]
    inner = ("ack", 1, 0)
    delivered = run.do(Action.of("interleaved_read", stage="dispatch", index=2, inner=inner))
    assert delivered == [[2, 3]]  # consumer3 gets nothing of key "4" in this pass
    assert run.state.draining == () and run.state.scheduled_read
    assert run.do(RUN) == [[3, 2], [3, 4], [3, 5]]


def test_the_storage_gap_admits_other_steps_and_the_read_completes_later() -> None:
    run = Run("pip379", {**SPEC, "actions": (*ACTION_NAMES[:-1],)})
    run.do(add(1, "consumer1", 1), *publish("4"))
    run.state, observation = run.model.step(run.state, Action.of("begin_read"))
    assert observation == {"read": ["Normal", [0]], "delivered": []}
    assert Action.of("complete_read", kind="Normal") in run.model.enabled(run.state)
    run.do(*publish("4"), Action.of("flow", consumer=1, n=1))
    assert run.do(Action.of("complete_read", kind="Normal")) == [[1, 0]]
    assert run.state.normal_read is None and run.state.min_replayed is None


def test_gap_a_a_disconnect_during_a_replay_read_breaks_ks_i4_as_the_spec_words_it() -> None:
    """The reference author's trace: 1:1 is queued above the first queued position 1:0, so the
    #12885 retry misses it and consumer3 gets 1:2 first. The gate disables the disconnect there."""
    steps = [add(1, "consumer1", 0), add(2, "consumer2", 1), add(3, "consumer3", 10), *publish("500"), READ,
             Action.of("flow", consumer=1, n=1), Action.of("flow", consumer=2, n=1), Action.of("begin_read")]
    literal = Run("pip379", {**SPEC, "disconnect_during_replay_read": True})
    literal.do(*steps, Action.of("remove", consumer=2))
    assert literal.do(Action.of("complete_read", kind="Replay")) == [[1, 0], [3, 2]]
    assert literal.failures == ["KS-I4"]
    gated = Run("pip379")
    gated.do(*steps)
    with pytest.raises(ActionNotEnabled):
        gated.do(Action.of("remove", consumer=2))


def test_gap_b_a_nacked_message_overtakes_an_earlier_one_released_by_a_disconnect() -> None:
    steps = [add(1, "consumer2", 10), add(2, "consumer3", 0), add(3, "consumer2", 1), *publish("00"), READ,
             Action.of("redeliver", consumer=1, position=1), Action.of("remove", consumer=1),
             Action.of("interleaved_read", stage="replay_filter", index=1, inner=("flow", 2, 1))]
    for exempt in (False, True):
        run = Run("pip379", {**SPEC, "keys": ("0",), "exempt_nacked_p": exempt})
        run.do(*steps)
        assert run.received[2] == [1] and [p for p, _ in run.state.replay] == [0]
        assert run.failures == ([] if exempt else ["KS-I4"])


# --- invariants and steps --------------------------------------------------------------------------


def test_invariants_judge_crafted_states() -> None:
    model = KeySharedModel(SPEC, "pip379")
    run = Run("pip379")
    run.do(add(1, "consumer1", 1), add(2, "consumer2", 1), *publish("04"), RUN)
    state = run.state
    assert violated(model, state) == []
    c1, c2 = state.consumers
    assert violated(model, state._replace(consumers=(c1._replace(held=(0,)), c2))) == ["KS-I1"]
    entry = Draining(sticky_hash("0", 65535), 1, 1, False)  # consumer1 draining key "0", which it holds
    assert violated(model, state._replace(draining=(entry,))) == ["KS-I2"]
    assert violated(model, state._replace(draining=(entry._replace(hash=0),))) == ["KS-I2", "KS-I7"]
    for name in ("KS-I4", "KS-I5a", "KS-I6"):
        assert violated(model, state._replace(broken=(name,))) == [name]


def test_a_release_without_a_scheduled_read_breaks_ks_i5a(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [add(1, "consumer1", 10), *publish("54"), RUN, add(2, "consumer3", 10), *publish("4"), READ]
    ack = Action.of("ack", consumer=1, position=1)  # consumer1's last pending ack of key "4"; 1:0 stays unacked
    run = Run("pip379")
    run.do(*steps)
    assert [(d.owner, d.blocked) for d in run.state.draining] == [(1, True)] and not run.state.scheduled_read
    run.do(ack)
    assert run.state.scheduled_read and run.failures == []
    monkeypatch.setattr(Dispatch, "unblock", lambda self: None)  # a handler that forgets to schedule
    broken = Run("pip379")
    broken.do(*steps, ack)
    assert broken.failures == ["KS-I5a"]


def test_bystander_moves_are_reported_as_ks_i6() -> None:
    d = Dispatch(KeySharedModel(SPEC, "pip379"), KeySharedModel(SPEC, "pip379").initial())
    d.check_bystanders({H4: 1, H0: 2}, {H4: 3, H0: 2}, 3, added=True)
    assert not d.broken
    d.check_bystanders({H4: 1, H0: 2}, {H4: 3, H0: 1}, 3, added=True)
    assert d.broken == {"KS-I6"}


def test_held_is_the_pending_acks_on_random_runs_of_every_variant() -> None:
    """§5: in-scope operations keep held(C) = keys(C.pending_acks); the model tracks both independently."""
    config = HYPOTHESIS_CONFIGS["spec"]
    for variant in ("pip379", "classic", "pip282"):
        model = KeySharedModel(config, variant)
        for seed in range(60):
            rnd, state = random.Random(seed), model.initial()
            for _ in range(40):
                state, _ = model.step(state, rnd.choice(model.enabled(state)))
                assert all(c.held == c.pending for c in state.consumers), (variant, seed)


def test_disabled_actions_raise_and_the_configuration_is_checked() -> None:
    model = KeySharedModel(None, "pip379")
    assert model.config == DEFAULT_CONFIG
    with pytest.raises(ActionNotEnabled):
        model.step(model.initial(), Action.of("remove", consumer=1))
    with pytest.raises(ActionNotEnabled):
        model.step(model.initial(), Action.of("fire"))
    with pytest.raises(ValueError, match="unknown variant"):
        KeySharedModel(None, "pip999")
    with pytest.raises(ValueError, match=r"unknown config key\(s\) of keyshared: colour"):
        KeySharedModel({"colour": "red"}, "pip379")
    with pytest.raises(ValueError, match="unknown keyshared action"):
        KeySharedModel({"actions": ("dance",)}, "pip379")


def test_settle_freezes_the_consumers_and_pins_the_stubborn_consumers_messages() -> None:
    run = Run("pip379")
    run.do(add(1, "consumer1", 10), *publish("45"), RUN, Action.of("settle", stubborn=1))
    assert run.state.settled and run.state.pinned == (0, 1)
    names = {a.name for a in run.model.enabled(run.state)}
    assert names == {"read", "run", "flow", "begin_read"}  # no ack of a pinned message, no changes


def test_the_key_renumbers_consumer_ids_in_join_order() -> None:
    model = KeySharedModel(SPEC, "classic")
    a, b = Run("classic"), Run("classic")
    a.do(add(1, "consumer1", 1), add(2, "consumer2", 1))
    b.do(add(1, "consumer2", 1), add(2, "consumer1", 1), Action.of("remove", consumer=1), add(1, "consumer2", 1))
    assert a.state != b.state
    assert model.key(a.state) == model.key(b.state)
    quiet = KeySharedModel({**SPEC, "actions": ("add", "read")}, "pip379")
    assert quiet.key(quiet.initial()._replace(scheduled_read=True)) == quiet.key(quiet.initial())


def _states(model: KeySharedModel, actions: Sequence[Action]) -> list[KSState]:
    state, out = model.initial(), []
    for action in actions:
        state, _ = model.step(state, action)
        out.append(state)
    return out


def test_states_are_immutable_and_steps_are_pure() -> None:
    model = KeySharedModel(SPEC, "pip379")
    actions = [add(1, "consumer1", 1), *publish("44"), READ, add(2, "consumer3", 1), READ]
    first, second = _states(model, actions), _states(model, actions)
    assert first == second
    assert hash(first[-1]) == hash(second[-1])
