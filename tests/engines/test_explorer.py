"""The explorer finds planted safety, deadlock and liveness bugs with shortest paths."""

from __future__ import annotations

from properties.engines.explorer import explore
from tests.engines.tiny import Counter, CounterModel


def test_fixed_counter_has_no_finding_and_exact_counts() -> None:
    result = explore(CounterModel({"limit": 3}, "fixed"))
    assert result.ok, result.findings
    assert result.complete
    assert len(result.states) == 8  # x in 0..3, locked or not
    assert result.graph.number_of_nodes() == 8 and result.graph.number_of_edges() <= result.transitions
    assert result.transitions == 28 == sum(result.coverage.values())  # inc 6, add 6+4, lock 4, reset 8
    assert set(result.coverage) == {"inc", "add", "lock", "reset"}


def test_planted_safety_bug_has_shortest_counterexample() -> None:
    result = explore(CounterModel({"limit": 3}, "overflow"))
    [finding] = [f for f in result.findings if f.kind == "invariant"]
    assert finding.name == "C-I1"
    assert len(finding.path) == 2
    model = CounterModel({"limit": 3}, "overflow")
    state = model.initial()
    for action in finding.path:
        state, _ = model.step(state, action)
    assert state.x > 3


def test_planted_liveness_bug_names_a_state_that_cannot_recover() -> None:
    result = explore(CounterModel({"limit": 3}, "stuck"))
    liveness = [f for f in result.findings if f.kind == "liveness"]
    assert [f.name for f in liveness] == ["C-L1"]
    assert len(liveness[0].path) == 2
    assert {a.name for a in liveness[0].path} == {"inc", "lock"} or {a.name for a in liveness[0].path} == {
        "add",
        "lock",
    }
    [deadlock] = [f for f in result.findings if f.kind == "deadlock"]
    model = CounterModel({"limit": 3}, "stuck")
    state = model.initial()
    for action in deadlock.path:
        state, _ = model.step(state, action)
    assert state == Counter(3, True) and not model.enabled(state)


def test_bounded_search_is_marked_incomplete_and_skips_liveness() -> None:
    result = explore(CounterModel({"limit": 3}, "stuck"), max_states=3)
    assert not result.complete
    assert len(result.states) == 3
    assert not [f for f in result.findings if f.kind == "liveness"]


def test_stop_on_violation_stops_early() -> None:
    result = explore(CounterModel({"limit": 30}, "overflow"), stop_on_violation=True)
    assert not result.complete
    assert [f.name for f in result.findings] == ["C-I1"]
