"""The conformance engine replays every explored transition on the implementation, deterministically."""

from __future__ import annotations

import itertools

import networkx as nx

from models.core import Action, Json, Observation
from properties.engines.conformance import Deviation, conform, run_walk, tour
from properties.engines.explorer import explore
from properties.engines.lockstep import DIVERGENCE
from tests.engines.tiny import CounterImpl, CounterModel


class ResetFromLockedAtOne(CounterImpl):
    """Wrong on one edge only: `reset` from (x=1, locked) answers the old value. Its target, (0, unlocked),
    is the initial state, so a replay of the shortest path to every *state* never takes this edge."""

    def apply(self, action: Action) -> Observation:
        before = (self.x, self.locked)
        observed = super().apply(action)
        return {"x": 1} if action.name == "reset" and before == (1, True) else observed


class OverflowReported(CounterImpl):
    """Diverges first (add counts one too many), and says so by name only once x passes the limit."""

    def __init__(self) -> None:
        super().__init__(off_by_one=True)

    def violations(self) -> list[str]:
        return ["C-I1"] if self.x > 3 else []


def _model() -> CounterModel:
    return CounterModel({"limit": 3}, "fixed")


def test_the_tour_covers_every_edge_of_the_explored_graph() -> None:
    exploration = explore(_model(), record_labels=True)
    walks = list(tour(exploration, _model()))
    assert {e for walk in walks for e in walk} == set(range(exploration.transitions))
    sources, targets = exploration.edges
    for walk in walks:  # each walk is a path from the initial state
        assert sources[walk[0]] == 0
        assert all(targets[a] == sources[b] for a, b in itertools.pairwise(walk))


def test_a_correct_implementation_passes_with_every_transition_replayed() -> None:
    result = conform(_model, CounterImpl)
    assert result.ok and result.complete
    assert result.covered == result.edges > 0


def test_a_bug_on_one_edge_is_found_although_every_state_is_reached_without_it() -> None:
    exploration = explore(_model(), record_labels=True)
    shortest = nx.single_source_shortest_path(exploration.graph, 0)
    for node in shortest:  # the state cover: shortest path to every state, replayed
        found, _ = run_walk(_model(), ResetFromLockedAtOne(), exploration.path_to(node))
        assert found is None
    result = conform(_model, ResetFromLockedAtOne)
    assert result.deviation is not None and result.deviation.target == DIVERGENCE
    assert [str(a) for a in result.deviation.actions] == ["inc()", "lock()", "reset()"]
    assert "observation" in result.deviation.detail


def test_a_divergence_is_followed_until_the_invariant_the_implementation_breaks() -> None:
    result = conform(_model, OverflowReported)
    found = result.deviation
    assert isinstance(found, Deviation)
    assert found.target == "C-I1" and DIVERGENCE in found.failures
    assert "after a divergence" in found.detail


def test_the_same_inputs_give_the_same_walks_and_the_same_counterexample() -> None:
    first = conform(_model, ResetFromLockedAtOne)
    again = conform(_model, ResetFromLockedAtOne)
    assert (first.deviation, first.steps, first.walks) == (again.deviation, again.steps, again.walks)


def test_a_step_budget_bounds_the_replay_and_says_so() -> None:
    full = conform(_model, CounterImpl)
    bounded = conform(_model, CounterImpl, max_steps=full.steps // 2)
    assert not bounded.complete and bounded.covered < bounded.edges
    assert bounded.steps <= full.steps // 2 and "(bounded)" in bounded.summary()


def test_two_workers_give_the_same_verdict_and_counts_as_one() -> None:
    for implementation in (CounterImpl, ResetFromLockedAtOne, OverflowReported):
        alone = conform(_model, implementation)
        shared = conform(_model, implementation, workers=2)
        assert (shared.deviation, shared.steps, shared.walks, shared.covered) == (
            alone.deviation, alone.steps, alone.walks, alone.covered)


class RaisesOnLock(CounterImpl):
    def apply(self, action: Action) -> Observation:
        if action.name == "lock" and self.x == 2:
            raise KeyError("lock")
        return super().apply(action)


def test_an_exception_in_the_implementation_is_a_failure_with_its_step() -> None:
    found = conform(_model, RaisesOnLock).deviation
    assert found is not None and found.target == "exception" and found.detail == "KeyError: 'lock'"
    assert [a.name for a in found.actions][-1] == "lock"


class AnswersOneForTrue(CounterImpl):
    """Projects `locked` as 1/0, as a port in a language without booleans might: equal in Python, not in JSON."""

    strict_json = True

    def vars(self) -> dict[str, Json]:
        return {"x": self.x, "locked": int(self.locked)}


class ReferenceOneForTrue(AnswersOneForTrue):
    """The same projection from a reference in Python: compared with Python's equality, as every step is."""

    strict_json = False


def test_a_number_is_not_a_boolean_and_the_message_is_json() -> None:
    assert conform(_model, ReferenceOneForTrue).ok
    found = conform(_model, AnswersOneForTrue).deviation
    assert found is not None and found.target == DIVERGENCE
    assert found.detail == "state locked: model false != implementation 0"  # from the initial state on


def test_a_walk_that_ends_on_a_divergence_goes_on_until_the_invariant_is_named() -> None:
    found, ran = run_walk(_model(), OverflowReported(), [Action.of("add", n=1)])
    assert found is not None and found.target == "C-I1" and DIVERGENCE in found.failures
    assert found.actions[0] == Action.of("add", n=1) and 1 < ran == len(found.actions) <= 1 + 8
    again, _ = run_walk(_model(), OverflowReported(), [Action.of("add", n=1)])
    assert again == found  # the steps beyond the walk are chosen deterministically
