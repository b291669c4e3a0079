"""Vacuity guard: on the current variant every action runs and every named interesting state is reached.

The explorer configurations must cover every action between them; interesting states out of the
explorer's small bounds are listed explicitly below and must then be reached by Hypothesis.
A rule removed from the state machine (or filtered out of `enabled`) must make these checks fail.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from models.core import Action, Model, ModelWrapper
from properties import registry
from properties.cli import main
from properties.cli.check import Report
from properties.engines.coverage import Coverage, from_exploration, from_hypothesis
from properties.engines.explorer import explore
from properties.engines.mechanism import Mechanism
from properties.engines.result import CheckResult

MECHANISMS = list(registry.mechanisms())

HYPOTHESIS_ONLY: dict[str, set[str]] = {}
"""Interesting states that no explorer configuration reaches (too small), so Hypothesis must; none today."""

SETTINGS = settings.get_profile("ci")
"""The CI gate's profile (derandomized), so coverage here is what `brokerspec check` reaches."""
QUICK = settings(SETTINGS, max_examples=50)
"""Enough to run every pidquota rule: the rule-removal test only needs the full set to be covered."""


def _explore(mechanism: Mechanism, model: Model[Any]) -> Coverage:
    result = explore(model, terminal_ok=model.terminal_ok)
    assert result.complete
    return from_exploration(mechanism, model, result)


def explorer_coverage(name: str) -> Coverage:
    """All explore configurations of the mechanism's current variant, merged."""
    mechanism = registry.get(name)
    merged: Coverage | None = None
    for config in mechanism.explore_configs.values():
        coverage = _explore(mechanism, mechanism.make_model(config, mechanism.current))
        if merged is None:
            merged = coverage
        else:
            merged.merge(coverage)
    assert merged is not None
    return merged


def test_every_mechanism_names_interesting_states() -> None:
    assert all(registry.get(name).interesting for name in MECHANISMS)


@pytest.mark.parametrize("name", MECHANISMS)
def test_explorer_covers_every_action_and_interesting_state(name: str) -> None:
    coverage = explorer_coverage(name)
    assert coverage.missing_actions == [], coverage.summary()
    hypothesis_only = HYPOTHESIS_ONLY.get(name, set())
    assert set(coverage.missing_states) == hypothesis_only, coverage.summary()
    if hypothesis_only:
        mechanism = registry.get(name)
        reached: set[str] = set()
        for config in mechanism.hypothesis_configs.values():
            reached |= from_hypothesis(mechanism, mechanism.current, config, SETTINGS).reached
        assert hypothesis_only <= reached


@pytest.mark.parametrize("name", MECHANISMS)
def test_hypothesis_runs_every_rule(name: str) -> None:
    mechanism = registry.get(name)
    ran: set[str] = set()
    names: set[str] = set()
    # two batches, as `brokerspec check` runs batch after batch: seed 0 alone never fires
    # topiclist's `topics_changed` in the flows configuration (a rare rule; seed 1 fires it 6 times)
    for config, seed in itertools.product(mechanism.hypothesis_configs.values(), (0, 1)):
        coverage = from_hypothesis(mechanism, mechanism.current, config, SETTINGS, seed)
        ran |= {a for a, n in coverage.actions.items() if n}
        names |= set(coverage.action_names)
    exempt = mechanism.not_offered.get(mechanism.current, {})
    assert names - set(exempt) <= ran


def test_exempt_actions_are_really_not_offered() -> None:
    """An exemption is only honest while the variant never enables the action and another variant does."""
    exemptions = [(m, variant, actions) for m in registry.mechanisms().values()
                  for variant, actions in m.not_offered.items()]
    assert exemptions  # metadata's pip453 has one: this test must check something
    for mechanism, variant, actions in exemptions:
        config = next(iter(mechanism.explore_configs.values()))
        assert not set(actions) & set(_explore(mechanism, mechanism.make_model(config, variant)).actions)
        others = [v for v in mechanism.variants if v != variant]
        offered = set().union(*(_explore(mechanism, mechanism.make_model(config, v)).actions for v in others))
        assert set(actions) <= offered


class _Without(ModelWrapper[Any]):
    """The model with one action filtered out of `enabled`: a rule removed."""

    def __init__(self, model: Model[Any], dropped: str) -> None:
        super().__init__(model)
        self.dropped = dropped

    def enabled(self, state: Any) -> Sequence[Action]:
        return [a for a in self.inner.enabled(state) if a.name != self.dropped]


def test_filtering_an_action_out_of_enabled_fails_coverage() -> None:
    mechanism = registry.get("pidquota")
    model = mechanism.make_model(mechanism.explore_configs["small"], mechanism.current)
    assert _explore(mechanism, model).missing_actions == []
    crippled = _explore(mechanism, _Without(model, "advance"))
    assert crippled.missing_actions == ["advance"]
    assert "a layer expired" in crippled.missing_states  # without time passing no layer ages out


def test_removing_a_rule_from_the_state_machine_fails_coverage() -> None:
    mechanism = registry.get("pidquota")
    config = mechanism.hypothesis_configs["default"]
    names = mechanism.make_model(config, mechanism.current).action_names
    full = from_hypothesis(mechanism, mechanism.current, config, QUICK)
    assert full.missing_actions == []
    dropped = names[-1]
    partial = from_hypothesis(mechanism, mechanism.current, config, QUICK, action_names=names[:-1])
    assert partial.missing_actions == [dropped]


def test_check_prints_coverage_and_writes_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "junit.xml"
    argv = ["check", "--mechanism", "pidquota", "--variant", "current", "--batches", "1", "--profile", "ci",
            "--out", str(tmp_path / "out"), "--junit", str(junit)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for engine in ("explorer", "hypothesis"):
        assert f"coverage ({engine}, current variant):\n  pidquota: actions 3/3, interesting states 3/3\n" in out
    suite = ET.parse(junit).getroot()
    cases = suite.findall("testcase")
    rows = [line for line in out.splitlines() if line.startswith("pidquota ")]
    assert len(cases) == int(suite.get("tests", "")) == len(rows) and cases
    assert suite.get("failures") == "0" and suite.findall(".//failure") == []


def test_junit_marks_violated_rows(tmp_path: Path) -> None:
    report = Report()
    report.add(CheckResult("delayed", "explorer", "small", "current", seconds=0.1, detail="10 states"))
    report.add(CheckResult("delayed", "hypothesis", "default", "current", failures=("DD-I1",), seconds=2.0,
                           detail="<details & more>"))
    report.junit(tmp_path / "j.xml")
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert suite.get("failures") == "1"
    failures = [(case.get("name"), f) for case in suite.iter("testcase") for f in case.findall("failure")]
    assert [(name, f.get("message"), f.text) for name, f in failures] == [
        ("hypothesis[default] current", "VIOLATED DD-I1", "<details & more>")
    ]


def test_check_prints_a_rule_its_hypothesis_runs_never_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check's own Hypothesis runs feed the second coverage line: a removed rule is named there."""
    from properties.pidquota import binding as pidquota

    original = pidquota.MECHANISM
    crippled = replace(original, make_model=lambda config, variant: _Without(original.make_model(config, variant),
                                                                             "advance"))
    monkeypatch.setattr(registry, "_ORDER", tuple(crippled if m is original else m for m in registry._ORDER))
    argv = ["check", "--mechanism", "pidquota", "--variant", "current", "--batches", "1", "--profile", "ci",
            "--out", str(tmp_path)]
    assert main(argv) == 0  # coverage is reported, and asserted by these tests, not judged by the check
    out = capsys.readouterr().out
    line = out.split("coverage (hypothesis, current variant):\n")[1].splitlines()[0]
    assert line.startswith("  pidquota: actions 2/3, interesting states ")
    assert 'never reached: advance, "a layer expired"' in line  # without time passing no layer ages out
