"""Every variable conformance compares is pinned by a named invariant, or says why not (issue 33).

Conformance compares each of a model's `vars` with the reference's projection; a difference no named
invariant then reports ends as a bare `divergence`, which tells a user that something differs, not which
promise broke. Each mechanism therefore declares, per scope the reference replays, the oracle(s) judged on
the reference that a wrong value of each compared variable breaks (`Mechanism.guards`). The table is listed
here one variable a test (the test id is mechanism, scope, variable and guard); a compared variable missing
from it, a guard naming something the reference is not judged on, or a stale entry fails. The variables
still without an oracle are pinned in `UNGUARDED`, so that the list only shrinks on purpose, and `check`
reports a divergence there as a defect of the harness.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from properties import registry
from properties.cli.check import judge
from properties.cli.report import render
from properties.engines.checks import CONFORMANCE_STEPS, Checker, Traces
from properties.engines.graphs import Graphs
from properties.engines.mechanism import HARNESS_INPUT, Guard, Mechanism
from tests.engines.tiny import MECHANISM as TINY
from tests.engines.tiny import CounterImpl


def _compared() -> list[tuple[str, str, str]]:
    """(mechanism, scope, variable) of every variable conformance compares: the current variant's model vars in
    each scope whose reference is replayed (the nightly configurations too: `explore --conformance` replays them)."""
    out: dict[tuple[str, str, str], None] = {}
    for name in registry.mechanisms():
        mechanism = registry.get(name)
        for config in (*mechanism.every_explore_config.values(), *mechanism.hypothesis_configs.values()):
            if mechanism.for_config(config).make_reference is None:
                continue
            model = mechanism.make_model(config, mechanism.current)
            for variable in model.vars(model.initial()):
                out[(name, mechanism.scope(config), variable)] = None
    return list(out)


COMPARED = _compared()

UNGUARDED = {
    ("keyshared", "keyshared"): {"events"},
    ("keyshared", "keyshared/tracker"): {"replay", "events"},
    ("keyshared", "keyshared/locks"): {"closed", "stats", "replay", "threads"},
    ("topiclist", "topiclist/flows"): {"holders", "watchers", "denied"},
    ("topiclist", "topiclist/semaphore-locks"): {"timers", "threads", "locks"},
}
"""The compared variables no oracle guards yet, each with its reason in the mechanism's guards module."""


def _label(item: tuple[str, str, str]) -> str:
    name, scope, variable = item
    guard = registry.get(name).guards.get(scope, {}).get(variable)
    shown = "+".join(guard.by) if guard is not None and guard.by else "UNGUARDED"
    return f"{scope}:{variable}={shown}"


@pytest.mark.parametrize("item", COMPARED, ids=[_label(item) for item in COMPARED])
def test_each_compared_variable_names_its_guard(item: tuple[str, str, str]) -> None:
    name, scope, variable = item
    mechanism = registry.get(name)
    guard = mechanism.guards.get(scope, {}).get(variable)
    assert guard is not None, f"{name}: {scope} compares {variable!r} but its guards table does not list it"
    judged = set(mechanism.reference_judges.get(scope, ()))
    if guard.by:
        assert not guard.unguarded, f"{variable}: a guard and a reason for having none"
        assert set(guard.by) <= judged | {HARNESS_INPUT}, (
            f"{variable}: {sorted(set(guard.by) - judged)} is not among what the reference is judged on in {scope}")
    else:
        assert guard.unguarded, f"{name}: {scope}'s {variable!r} has no guard and no reason"
        assert variable in UNGUARDED.get((name, scope), set()), f"{variable!r} lost its guard"


def test_the_unguarded_list_is_exactly_the_variables_without_a_guard() -> None:
    """A variable that gains a guard leaves `UNGUARDED`; one that loses it must be added there on purpose."""
    without: dict[tuple[str, str], set[str]] = {}
    for name, scope, variable in COMPARED:
        guard = registry.get(name).guards[scope][variable]
        if not guard.by:
            without.setdefault((name, scope), set()).add(variable)
    assert without == UNGUARDED


@pytest.mark.parametrize("name", list(registry.mechanisms()))
def test_no_guard_names_a_variable_that_is_not_compared(name: str) -> None:
    compared = {(scope, variable) for n, scope, variable in COMPARED if n == name}
    listed = {(scope, variable) for scope, table in registry.get(name).guards.items() for variable in table}
    assert listed == compared


def test_a_bare_divergence_names_its_variable_and_guard_as_a_harness_defect() -> None:
    keyshared = registry.get("keyshared")
    config = keyshared.explore_configs["jump"]
    said = keyshared.unnamed_divergence(config, "state events: model [] != implementation ['promoted']")
    assert said.startswith("a defect of the harness: no named invariant guards 'events'")
    assert "coverage events" in said
    said = keyshared.unnamed_divergence(config, "state read_position: model 2 != implementation 3")
    assert said == ("a defect of the harness: 'read_position' differed and its guard(s) KS-J2 did not break in the "
                    "steps that followed")
    said = keyshared.unnamed_divergence(config, "observation: model {} != implementation {}")
    assert said == "a defect of the harness: an observation differed and no named invariant broke"


def _off_by_one(guards: dict[str, dict[str, Guard]]) -> Mechanism:
    """The tiny counter with an `add` that counts one too many: a divergence in `x` no invariant names."""
    return replace(TINY, make_reference=lambda config, variant: CounterImpl(off_by_one=True), guards=guards)


@pytest.mark.parametrize(("guards", "said"), [
    ({}, "no named invariant guards 'x'"),
    ({"tiny": {"x": Guard(unguarded="no oracle for the counter")}},
     "no named invariant guards 'x' (no oracle for the counter)"),
])
def test_check_reports_an_unguarded_divergence_as_a_defect_of_the_harness(
    tmp_path: Path, guards: dict[str, dict[str, Guard]], said: str,
) -> None:
    checker = Checker(Graphs(None, None), Traces(tmp_path, render, lambda _: None), lambda _: None)
    result = checker.conformance(_off_by_one(guards), "fixed", "small", steps=CONFORMANCE_STEPS, max_states=None,
                                 workers=1)
    row = result.found()
    assert judge(result)[0] == "VIOLATED divergence"
    assert row["harness_defect"] == f"a defect of the harness: {said}"
    assert str(row["harness_defect"]) in result.detail
