"""Partial-order reduction and the preemption bound (properties/engines/reduction.py) on the lock models.

The reduced searches must keep every verdict of the full one on fewer states, and `shortest_path` must give
back every shortest counterexample (a persistent set may reach a flag by a longer path first); the independence
a model declares, its futures and the locks that bound them are audited on its reachable states (and an
under-declared one is caught); a preemption bound finds the lost wake-up with one preemption, and nothing with
none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from models.core import Footprint, ModelWrapper, Param
from models.keyshared.lock_state import LocksState
from models.keyshared.locks import KeySharedLocksModel
from properties.engines.explorer import Exploration, explore
from properties.engines.reduction import PartialOrder, PreemptionBounded, independence_error, shortest_path
from properties.keyshared.binding import LOCKS_EXPLORE_CONFIGS, LOCKS_NIGHTLY_CONFIGS
from tests.engines.tiny import CounterModel


def _verdicts(result: Exploration[Any]) -> set[tuple[str, int]]:
    return {(f.name, len(f.path)) for f in result.findings}


def _full(config: Mapping[str, Param]) -> tuple[KeySharedLocksModel, Exploration[LocksState]]:
    model = KeySharedLocksModel(config)
    return model, explore(model, terminal_ok=model.terminal_ok, check_liveness=False)


SMALL = {**LOCKS_EXPLORE_CONFIGS, "locks-wide-small": LOCKS_NIGHTLY_CONFIGS["locks-wide-small"]}


@pytest.mark.parametrize("name", list(SMALL))
def test_partial_order_reduction_keeps_every_verdict_and_shortest_trace_on_fewer_states(name: str) -> None:
    model, full = _full(SMALL[name])
    assert independence_error(model, full.states) is None
    reduced = PartialOrder(model)
    result = explore(reduced, terminal_ok=reduced.terminal_ok, check_liveness=False)
    assert result.complete and {f.name for f in result.findings} == {f.name for f in full.findings}
    shortest = {(f.name, len(shortest_path(model, f.path, f.name).path)) for f in result.findings}
    assert shortest == _verdicts(full)
    assert len(result.states) < len(full.states)


def test_a_reduced_search_may_reach_a_flag_late_and_the_shortest_path_is_restored() -> None:
    """locks-batch: the persistent sets reach the lost wake-up in 18 steps; cut to its causal past and checked by a
    full search to 16 steps, the path is the full search's 17."""
    model, full = _full(LOCKS_EXPLORE_CONFIGS["locks-batch"])
    reduced = PartialOrder(model)
    (late,) = explore(reduced, terminal_ok=reduced.terminal_ok, check_liveness=False).findings
    found = shortest_path(model, late.path, "LK-6")
    assert (found.reduced, len(found.path)) == (24, 21) and 0 < found.confirmed_states < len(full.states)
    assert _verdicts(full) == {("LK-6", 21)}


class _Careless(KeySharedLocksModel):
    """Declares that no step touches anything: every pair of threads' steps would commute."""

    def footprint(self, state: LocksState, thread: str) -> Footprint:
        return frozenset(), frozenset()


def test_three_threads_are_explored_completely_with_and_without_reduction() -> None:
    """The membership configuration: a dispatcher, an acker and a membership thread under the dispatcher's monitor."""
    model, full = _full(LOCKS_EXPLORE_CONFIGS["locks-membership"])
    reduced = PartialOrder(model)
    result = explore(reduced, terminal_ok=reduced.terminal_ok, check_liveness=False)
    assert len(full.states) == 2971 and len(result.states) < 2500
    assert _verdicts(result) == _verdicts(full) == {("LK-6", 19)}


class _Overlocked(KeySharedLocksModel):
    """Declares that a thread holding any lock keeps every other thread out of every lock."""

    def held(self, state: LocksState, thread: str) -> frozenset[str]:
        mine = super().held(state, thread)
        return frozenset({"tlock", "dispatcher", "map1", "map2", "map1:read", "map2:read"}) if mine else mine


def test_futures_bounded_by_locks_nobody_holds_are_caught_by_the_audit() -> None:
    model = _Overlocked(LOCKS_EXPLORE_CONFIGS["locks"])
    states = explore(model, terminal_ok=model.terminal_ok, check_liveness=False).states
    error = independence_error(model, states)
    assert error is not None and "outside its declared future" in error


class _Misled(KeySharedLocksModel):
    """Declares that a waiting thread waits for the dispatcher, whoever holds what it waits for."""

    def waits_for(self, state: LocksState, thread: str) -> frozenset[str]:
        waits = super().waits_for(state, thread)
        return frozenset({"dispatcher"}) if waits and thread != "dispatcher" else waits


def test_a_thread_said_to_wait_for_the_wrong_thread_is_caught_by_the_audit() -> None:
    model = _Misled(LOCKS_EXPLORE_CONFIGS["locks-membership"])
    states = explore(model, terminal_ok=model.terminal_ok, check_liveness=False).states
    error = independence_error(model, states)
    assert error is not None and "is said to wait only for ['dispatcher']" in error


def test_an_under_declared_independence_is_caught_by_the_audit() -> None:
    model = _Careless(LOCKS_EXPLORE_CONFIGS["locks"])
    states = explore(model, terminal_ok=model.terminal_ok, check_liveness=False).states
    error = independence_error(model, states)
    assert error is not None and "declared independent" in error


def test_one_preemption_finds_the_lost_wake_up_and_none_finds_nothing() -> None:
    model, full = _full(LOCKS_EXPLORE_CONFIGS["locks"])
    found = {}
    for bound in (0, 1, 3):
        bounded = PreemptionBounded(model, bound)
        result = explore(bounded, terminal_ok=bounded.terminal_ok, check_liveness=False)
        found[bound] = _verdicts(result)
        assert len({model.key(s.inner) for s in result.states}) <= len(full.states)
    assert found[0] == set()  # without a preemption the dispatcher's read and increment are never split
    assert {name for name, _ in found[1]} == {"LK-6"} and found[3] == _verdicts(full)  # 17 steps need 3


def test_a_model_without_threads_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a model of threads"):
        PartialOrder(CounterModel())
    with pytest.raises(ValueError, match="needs a model of threads"):
        PreemptionBounded(CounterModel(), 1)


def test_the_declaration_passes_through_what_keeps_the_model_s_states() -> None:
    """`Model.threaded`: a wrapper and a partial-order reduction keep the model's states, so they pass its declaration
    on (`explore --por --preemption-bound K` bounds a reduced model); a preemption-bounded model's states are no longer
    the model's, so nothing reduces it further."""
    model = KeySharedLocksModel(LOCKS_EXPLORE_CONFIGS["locks"])
    assert model.threaded is model
    assert ModelWrapper(model).threaded is model and PartialOrder(model).threaded is model
    bounded = PreemptionBounded(PartialOrder(model), 1)
    assert bounded.threaded is None and bounded.threads == model.threads
    with pytest.raises(ValueError, match="needs a model of threads"):
        PartialOrder(bounded)
