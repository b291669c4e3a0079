"""`brokerspec explore --symmetry --workers N`: fewer states where the model declares a symmetry, the same
counterexample, on the processes asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from properties.cli import PASS, VIOLATED, main


def _explore(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["explore", *argv])
    return code, capsys.readouterr().out


def test_symmetry_and_workers_keep_the_counterexample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ("--mechanism", "pidquota", "--config", "two_principals", "--variant", "no_readd", "--out", str(tmp_path))
    code, plain = _explore(capsys, *common)
    assert code == VIOLATED and "1217 states, " in plain and "on 1 process(es)" in plain
    code, reduced = _explore(capsys, *common, "--symmetry", "--workers", "2")
    assert code == VIOLATED
    assert "636 states (one per orbit of the model's symmetry)" in reduced and "on 2 process(es)" in reduced
    assert "invariant PQ-I1: 5 steps" in plain and "invariant PQ-I1: 5 steps" in reduced


@pytest.mark.usefixtures("tiny_registered")
def test_symmetry_where_none_is_declared_is_the_plain_search(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _explore(capsys, "--mechanism", "tiny", "--symmetry")
    assert code == PASS and "8 states (no symmetry here)" in out
