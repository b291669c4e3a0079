"""A twin is judged only where the current variant passes: no `TWIN MISSED` where the catch could not count.

The engines are replaced by a checker that returns the failures a scenario sets, so the rows the check adds
are exactly those its judging makes of them (issue 46, item 7: the current variant failing the configuration
that catches a twin made the twin's row "not judged" and then a spurious `TWIN MISSED` row).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from properties import registry
from properties.cli import check
from properties.cli.main import parser
from properties.engines.mechanism import Mechanism
from properties.engines.result import CheckResult

DELAYED = registry.get("delayed")
TWIN, EXPECTED = next(iter(DELAYED.twins.items()))
Failures = Mapping[tuple[str, str, str], tuple[str, ...]]
"""By (variant, engine, configuration), the failures the run finds (before judging)."""


def _checker(failures: Failures) -> type:
    class Scripted:
        """The engines' interface, answering from `failures`; a run not judged reports none, as the real ones."""

        def __init__(self, *_: Any) -> None:
            pass

        def conformance(self, mechanism: Mechanism, variant: str, config_name: str, **_: Any) -> CheckResult:
            return CheckResult(mechanism.name, "conformance", config_name, variant)

        def explorer(self, mechanism: Mechanism, variant: str, config_name: str, *, expected: str | None = None,
                     judged: bool = True) -> list[CheckResult]:
            return [self._result(mechanism, "explorer", variant, config_name, expected, judged)]

        def hypothesis(self, mechanism: Mechanism, variant: str, config_name: str, *, expected: str | None = None,
                       judged: bool = True, **_: Any) -> CheckResult:
            return self._result(mechanism, "hypothesis", variant, config_name, expected, judged)

        def proofs(self, mechanism: Mechanism, depth: int) -> list[CheckResult]:
            return []

        def _result(self, mechanism: Mechanism, engine: str, variant: str, config_name: str, expected: str | None,
                    judged: bool) -> CheckResult:
            found = failures.get((variant, engine, config_name), ()) if judged else ()
            return CheckResult(mechanism.name, engine, config_name, variant, failures=found, expected=expected,
                               judged=judged)

    return Scripted


def _rows(failures: Failures, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> set[tuple[str, str, str, str]]:
    monkeypatch.setattr(check, "Checker", _checker(failures))
    args = parser().parse_args(["check", "--mechanism", "delayed", "--no-cache", "--out", str(tmp_path)])
    report = check.Report()
    check._check_mechanism(args, DELAYED, report)
    return {(row.result.engine, row.result.config, row.result.variant, row.verdict) for row in report.rows}


def test_a_twin_caught_only_where_the_current_variant_fails_is_not_judged_and_not_missed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    first, second = DELAYED.explore_configs
    rows = _rows({("current", "explorer", first): ("DD-I2",), (TWIN, "explorer", first): (EXPECTED,),
                  (TWIN, "hypothesis", "default"): (EXPECTED,)}, monkeypatch, tmp_path)
    twin = {row for row in rows if row[2] == TWIN}
    assert twin == {
        ("explorer", first, TWIN, "not judged (the current variant fails here)"),
        ("explorer", second, TWIN, "not reached here"),
        ("explorer", "", TWIN, f"not judged ({EXPECTED})"),
        ("hypothesis", "default", TWIN, f"twin caught ({EXPECTED})"),
    }
    assert ("explorer", first, "current", "VIOLATED DD-I2") in rows  # the current variant's failure fails the check


def test_a_twin_no_judged_configuration_catches_is_missed(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The twin of the test above: with every configuration judged, the same miss is a `TWIN MISSED` row."""
    first, second = DELAYED.explore_configs
    rows = _rows({(TWIN, "hypothesis", "default"): (EXPECTED,)}, monkeypatch, tmp_path)
    twin = {row for row in rows if row[2] == TWIN and row[0] == "explorer"}
    assert twin == {
        ("explorer", first, TWIN, "not reached here"),
        ("explorer", second, TWIN, "not reached here"),
        ("explorer", "", TWIN, f"TWIN MISSED ({EXPECTED})"),
    }
