"""One result type for every checker: `check` judges results alone, and `--json` says what a result found.

The same failures are a bug on the current variant and a catch on a twin; a known finding must still be
found; a mutant's proof must fail. These tests pin each verdict `judge` draws, the failure facts a row adds to
`--json` (which the mutants read), and that a port's verdict reads as every other checker's.
"""

from __future__ import annotations

import pickle

import pytest

from models.core import Action
from properties.cli import PASS, VIOLATED
from properties.cli.check import Row, judge
from properties.engines.result import CheckResult, Target
from properties.engines.verify import Failure, PortSpec, TourPart, Verdict
from tests.engines.tiny import MECHANISM as TINY


def _result(**facts: object) -> CheckResult:
    return CheckResult("tiny", str(facts.pop("engine", "explorer")), "small", str(facts.pop("variant", "fixed")),
                       **facts)  # type: ignore[arg-type]


@pytest.mark.parametrize(("facts", "verdict", "code"), [
    ({}, "pass", PASS),
    ({"failures": ("C-I1", "divergence")}, "VIOLATED C-I1,divergence", VIOLATED),
    ({"variant": "overflow", "expected": "C-I1", "failures": ("C-I1",)}, "twin caught (C-I1)", PASS),
    ({"variant": "overflow", "expected": "C-I1", "failures": ("C-I2",)}, "not reached here", PASS),
    ({"variant": "overflow", "expected": "C-I1", "judged": False}, "not judged (the current variant fails here)", PASS),
    ({"known": ("C-I2", "C-I3"), "failures": ("C-I3", "C-I2")}, "known finding(s) found", PASS),
    ({"known": ("C-I2", "C-I3"), "failures": ("C-I3",)}, "FINDING MISSED C-I2", VIOLATED),
    ({"engine": "conformance", "ran": False, "detail": "model only: finer than the code"}, "not replayed", PASS),
    ({"engine": "z3", "subject": "C-I1"}, "proved", PASS),
    ({"engine": "z3", "subject": "C-I1", "failures": ("C-I1",)}, "PROOF FAILED", VIOLATED),
    ({"engine": "z3", "subject": "C-I1", "expected": "C-I1", "failures": ("C-I1",)}, "twin caught", PASS),
    ({"engine": "z3", "subject": "C-I1", "expected": "C-I1"}, "TWIN MISSED", VIOLATED),
])
def test_each_result_gets_its_verdict(facts: dict[str, object], verdict: str, code: int) -> None:
    assert judge(_result(**facts)) == (verdict, code)


def test_json_says_what_failed_only_where_a_result_names_a_target() -> None:
    assert _result(variant="overflow", expected="C-I1", failures=("C-I2",)).found() == {}
    assert _result(known=("C-I2",)).found() == {"failures": []}  # a known finding missed still says so
    named = _result(failures=("C-I1",), target=Target("C-I1", 3, "out/t.json", "x stays below the limit"))
    assert named.found() == {"failures": ["C-I1"], "target": "C-I1", "steps": 3, "trace": "out/t.json",
                             "statement": "x stays below the limit"}
    unsaved = _result(engine="hypothesis", failures=("exception",), target=Target("exception", 0))
    assert unsaved.found() == {"failures": ["exception"], "target": "exception", "steps": 0}


def test_a_row_crosses_a_process_boundary_whole() -> None:
    """A forked check streams its rows to the parent, coverage included."""
    row = Row(_result(failures=("C-I1",), target=Target("C-I1", 2, "t.json"), work={"states": 4}, seconds=0.5),
              "VIOLATED C-I1", VIOLATED, 1.25)
    assert pickle.loads(pickle.dumps(row)) == row
    assert row.as_json() == {"mechanism": "tiny", "engine": "explorer[small]", "subject": "fixed",
                             "verdict": "VIOLATED C-I1", "detail": "", "time": "0.5s", "code": VIOLATED,
                             "after_s": 1.25, "cpu_s": 0.0, "failures": ["C-I1"], "target": "C-I1", "steps": 2,
                             "trace": "t.json"}


def test_a_port_verdict_reads_as_every_checker_result() -> None:
    spec = PortSpec(("port",), TINY, "fixed", {"limit": 3})
    tour = (TourPart("small", 10, 12, 3, 40, 0.5),)
    passed = Verdict(None, spec, runs=7, steps=90, elapsed_s=1.0, tour=tour, processes=2).result("default")
    assert (passed.engine, passed.config, passed.failures, passed.target, passed.complete) == (
        "verify", "default", (), None, False)
    assert judge(passed) == ("pass", PASS)
    assert passed.detail.endswith("(the tour covered 10 of 12 transitions: raise --budget)")
    failure = Failure((Action.of("add"), Action.of("add")), "divergence", "state x: model 2 != port 3", "tour")
    failed = Verdict(failure, spec, runs=3, steps=20, elapsed_s=1.0).result("default", "out/t.json")
    assert failed.target == Target("divergence", 2, "out/t.json") and failed.complete
    assert judge(failed) == ("VIOLATED divergence", VIOLATED)
    assert failed.detail.startswith("divergence at step 2 (found by tour, shrunk on the port")
