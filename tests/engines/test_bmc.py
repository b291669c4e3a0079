"""BMC finds the planted bug at the explorer's depth, and k-induction proves the fixed counter."""

from __future__ import annotations

from properties.engines.bmc import bmc, k_induction, prove
from properties.engines.explorer import explore
from tests.engines.tiny import CounterModel, symbolic


def test_bmc_finds_overflow_at_the_same_depth_as_the_explorer() -> None:
    [result] = bmc(symbolic(3, "overflow"), depth=6)
    assert result.status == "counterexample"
    shortest = explore(CounterModel({"limit": 3}, "overflow")).findings[0]
    assert result.depth == len(shortest.path) == 2
    model = CounterModel({"limit": 3}, "overflow")
    state = model.initial()
    for action in result.actions:
        state, _ = model.step(state, action)
    assert state.x > 3
    assert result.states[-1]["x"] == state.x


def test_fixed_counter_holds_to_depth_and_is_inductive() -> None:
    [bounded] = bmc(symbolic(3, "fixed"), depth=8)
    assert bounded.status == "bounded" and bounded.depth == 8
    assert k_induction(symbolic(3, "fixed"), 3) == 1
    [proved] = prove(symbolic(3, "fixed"), depth=4)
    assert proved.status == "inductive" and proved.holds


def test_induction_fails_for_the_overflow_variant() -> None:
    assert k_induction(symbolic(3, "overflow"), 3) is None
    [result] = prove(symbolic(3, "overflow"), depth=4)
    assert not result.holds
