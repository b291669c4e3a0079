"""The pidquota model (`models/pidquota.py`) on the spec's worked examples, its bounds and its invariants.

Times are the D examples' minutes read as ms (W = 60, L = 2, ΔT = 30, H = 30); the model is unit-free.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from models.core import Action, ActionNotEnabled, Json, Param, violated
from models.pidquota import EXPLORE_CONFIG, Entry, PidQuotaModel, PQState, Slot

D_CONFIG: dict[str, Param] = {
    "window_ms": 60, "layer_count": 2, "n_layer": 50, "principals": ("A", "B"), "pids": (7, 42, 424242),
    "max_batch": 1, "dts": (5, 10, 29, 30, 32), "boundaries": False, "cleanup": False,
}


def produce(principal: str, *pids: int) -> Action:
    return Action.of("produce", principal=principal, pids=pids)


def advance(dt: int) -> Action:
    return Action.of("advance", dt=dt)


def run(model: PidQuotaModel, actions: Sequence[Action]) -> tuple[PQState, list[dict[str, Json]]]:
    """Step through `actions`; the final state and every observation."""
    state, observed = model.initial(), []
    for action in actions:
        state, observation = model.step(state, action)
        assert observation is not None
        observed.append(observation)
    return state, observed


def layers(model: PidQuotaModel, state: PQState, principal: str) -> list[tuple[int, int, list[int]]]:
    """The principal's layers as `vars` reports them: (created, expires, PIDs)."""
    entries = model.vars(state)["entries"]
    assert isinstance(entries, dict)
    entry = entries[principal]
    assert isinstance(entry, dict) and isinstance(entry["layers"], list)
    out = []
    for layer in entry["layers"]:
        assert isinstance(layer, list)
        created, expires, pids = layer
        assert isinstance(created, int) and isinstance(expires, int) and isinstance(pids, list)
        out.append((created, expires, [int(str(p)) for p in pids]))
    return out


# --- worked examples ---------------------------------------------------------------------------------


def test_d1_new_then_hit() -> None:
    model = PidQuotaModel(D_CONFIG)
    state, observed = run(model, [produce("A", 42), advance(10), produce("A", 42)])
    assert [observed[0], observed[2]] == [{"new": [42]}, {"new": []}]
    assert layers(model, state, "A") == [(0, 60, [42])]
    assert violated(model, state) == []


def test_d5_idle_principal_removed_at_the_second_scheduled_cleanup_and_counted_again() -> None:
    model = PidQuotaModel(D_CONFIG)
    state, observed = run(model, [produce("B", 7), advance(30), advance(30), advance(30), advance(5), produce("B", 7)])
    assert observed[1:4] == [{"removed": []}, {"removed": []}, {"removed": ["B"]}]  # kept at 60, gone at 90
    assert observed[5] == {"new": [7]}  # 95 > 0 + H: forgetting is allowed
    assert violated(model, state) == []
    assert model.vars(state)["next_cleanup"] == 120


def _d6(variant: str) -> tuple[PidQuotaModel, list[PQState], list[dict[str, Json]]]:
    """D6: PID 424242 every 10 from 0 to 180; the state and observation after each produce."""
    model = PidQuotaModel(D_CONFIG, variant)
    state, states, observed = model.initial(), [], []
    for minute in range(0, 181, 10):
        if minute:
            state, _ = model.step(state, advance(10))
        state, observation = model.step(state, produce("A", 424242))
        assert observation is not None
        states.append(state)
        observed.append(observation)
    return model, states, observed


def test_d6_no_readd_counts_the_long_running_pid_at_0_90_180_and_breaks_pq_i1_pq_i2() -> None:
    model, states, observed = _d6("no_readd")
    assert [10 * i for i, o in enumerate(observed) if o == {"new": [424242]}] == [0, 90, 180]
    assert [10 * i for i, s in enumerate(states) if violated(model, s)] == [90, 180]
    assert violated(model, states[9]) == ["PQ-I1", "PQ-I2"]


def test_d6_current_counts_once_re_adds_every_40_and_has_the_spec_depths() -> None:
    model, states, observed = _d6("current")
    assert [10 * i for i, o in enumerate(observed) if o == {"new": [424242]}] == [0]
    assert all(violated(model, s) == [] for s in states)
    created = [[c for c, _, _ in layers(model, s, "A")] for s in states]
    readds = [10 * i for i in range(1, len(states)) if created[i][-1] == 10 * i]
    assert readds == [40, 80, 120, 160]
    depths = {10 * i: len(c) for i, c in enumerate(created)}
    assert {t for t, d in depths.items() if d == 1} == {0, 10, 20, 30, 150}
    assert {t for t, d in depths.items() if d == 2} == {*range(40, 141, 10), 160, 170, 180}


def test_pq_i1_example_a_pid_merged_at_29_is_gone_after_a_rotation_at_61() -> None:
    """§5 PQ-I1: beyond H a PID may be forgotten (merged at 29 into the layer created at 0)."""
    model = PidQuotaModel(D_CONFIG)
    state, _ = run(model, [produce("A", 7), advance(29), produce("A", 42), advance(32), produce("A", 424242)])
    assert [c for c, _, _ in layers(model, state, "A")] == [61]
    state, observation = model.step(state, produce("A", 42))
    assert observation == {"new": [42]}
    assert violated(model, state) == []  # 61 > 29 + H


def test_count_check_rotates_every_n_layer_merges_and_the_first_layer_gets_one_less() -> None:
    """§4.3: the check runs before the merge, so layers get N-1, N, ... merges (PQ-I10)."""
    model = PidQuotaModel({**D_CONFIG, "n_layer": 2, "max_batch": 3})
    state, observed = run(model, [produce("A", 7, 42, 424242)])
    assert observed == [{"new": [7, 42, 424242]}]
    assert [p for _, _, p in layers(model, state, "A")] == [[7], [42, 424242]]
    assert model.vars(state)["entries"] == {"A": {"count": 1, "next_rotation": 30, "layers": [[0, 60, [7]],
                                                                                             [0, 60, [42, 424242]]]}}


# --- the state space and the protocol ----------------------------------------------------------------


def test_enabled_offers_batches_cleanup_and_boundary_advances() -> None:
    model = PidQuotaModel(EXPLORE_CONFIG)
    state, _ = model.step(model.initial(), produce("A", 1))
    names = [str(a) for a in model.enabled(state)]
    assert names[:4] == [str(produce("A", 1)), str(produce("A", 2)), str(produce("A", 1, 2)), str(produce("A", 2, 1))]
    # dt 1, the timer due at ΔT = 2, the layer ceasing to be recent at 3, the cleanup at W = 4, expiry at 5
    assert [a for a in model.enabled(state) if a.name == "advance"] == [advance(d) for d in (1, 2, 3, 4, 5)]
    assert Action.of("cleanup") in model.enabled(state)


@pytest.mark.parametrize(
    "action",
    [advance(6), advance(0), produce("C", 1), produce("A", 1, 1), produce("A", 3), Action.of("merge"),
     Action.of("advance", dt=1, extra=True)],
)
def test_step_rejects_actions_that_are_not_enabled(action: Action) -> None:
    model = PidQuotaModel(EXPLORE_CONFIG)
    with pytest.raises(ActionNotEnabled):
        model.step(model.initial(), action)


def test_cleanup_is_not_enabled_unless_configured() -> None:
    model = PidQuotaModel(D_CONFIG)
    assert all(a.name != "cleanup" for a in model.enabled(model.initial()))
    with pytest.raises(ActionNotEnabled):
        model.step(model.initial(), Action.of("cleanup"))


@pytest.mark.parametrize(
    "override",
    [{"window_ms": 5}, {"layer_count": 1}, {"n_layer": 0}, {"pids": ()}, {"pids": (1, 1)}, {"pids": (-1,)},
     {"principals": ("A", 1)}, {"max_batch": 3}, {"dts": (0,)}, {"cleanup": 1}, {"bogus": 1}],
)
def test_bad_configuration_is_a_value_error(override: dict[str, Param]) -> None:
    with pytest.raises(ValueError, match="pidquota"):
        PidQuotaModel({**EXPLORE_CONFIG, **override})


def test_unknown_variant_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="variant"):
        PidQuotaModel(None, "bogus")


def test_key_ignores_a_shift_of_the_clock_and_vars_report_absolute_times() -> None:
    model = PidQuotaModel(EXPLORE_CONFIG)
    state, _ = model.step(model.initial(), produce("A", 1))
    later = state._replace(now=state.now + 100)
    assert model.key(later) == model.key(state)
    assert model.vars(later)["entries"] == {"A": {"count": 1, "next_rotation": 102, "layers": [[100, 104, [1]]]}}


def test_an_overdue_timer_is_reported_as_due_now() -> None:
    model = PidQuotaModel(EXPLORE_CONFIG)
    state, _ = run(model, [produce("A", 1), advance(1), advance(1), advance(1)])
    entries = model.vars(state)["entries"]
    assert entries == {"A": {"count": 1, "next_rotation": 3, "layers": [[0, 4, [1]]]}}


# --- every invariant can fail ------------------------------------------------------------------------


def _state(model: PidQuotaModel, slot: Slot) -> PQState:
    return model.initial()._replace(slots=(slot,))


def test_pq_i4a_flags_a_third_merge_within_delta_t() -> None:
    model = PidQuotaModel(EXPLORE_CONFIG)
    slot = Slot(Entry(((0, 0b100),), 0, 2), (-1, 0), (1, 2, -1, -1), True)  # pid 1 merged 1 and 2 ms ago
    state, observation = model.step(_state(model, slot), produce("A", 1))
    assert observation == {"new": [1]}
    assert violated(model, state) == ["PQ-I4a"]


def test_pq_i5_flags_a_cleanup_that_keeps_an_idle_principal() -> None:
    model = PidQuotaModel(EXPLORE_CONFIG)
    slot = Slot(Entry(((1, 0b10),), 0, 0), (-1, -1), (-1,) * 4, True)  # a live layer, no track within W
    state, _ = model.step(_state(model, slot), Action.of("cleanup"))
    assert violated(model, state) == ["PQ-I5"]


def test_pq_i4b_and_pq_i10_judge_depth_and_layer_order() -> None:
    model = PidQuotaModel(EXPLORE_CONFIG)
    deep = Entry(tuple((0, 1) for _ in range(2 * 2 + 4)), 0, 0)
    assert violated(model, _state(model, Slot(deep, (0, -1), (-1,) * 4, True))) == ["PQ-I4b"]
    assert violated(model, _state(model, Slot(deep, (0, -1), (-1,) * 4, False))) == []  # above the rate
    unordered = Entry(((0, 1), (1, 2)), 0, 0)
    assert violated(model, _state(model, Slot(unordered, (0, 0), (-1,) * 4, True))) == ["PQ-I10"]
    assert violated(model, _state(model, Slot(Entry((), 0, 0), (0, 0), (-1,) * 4, True))) == ["PQ-I10"]
