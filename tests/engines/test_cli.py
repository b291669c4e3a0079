"""The command line on the tiny counter: verdict table, exit codes, one-line errors, reproduction hints."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from models.core import Action
from properties import registry
from properties.cli import DIVERGED, PASS, USAGE, VIOLATED, main
from properties.engines.replay import record
from tests.engines.tiny import CounterModel
from traces.format import TraceError, load, save

pytestmark = pytest.mark.usefixtures("tiny_registered")


def test_check_passes_current_and_catches_the_twin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--mechanism", "tiny", "--batches", "2", "--profile", "dev", "--out", str(tmp_path)])
    out = capsys.readouterr()
    assert code == PASS, out.out
    assert "twin caught (C-I1)" in out.out and "brokerspec check: PASS" in out.out
    assert list((tmp_path / "tiny").glob("overflow-explorer-small-C-I1.json"))


def test_check_fails_when_a_twin_is_not_caught(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from tests.engines import tiny

    blind = replace(tiny.MECHANISM, twins={"stuck": "C-I1"})
    monkeypatch.setattr(registry, "_ORDER", tuple(blind if m is tiny.MECHANISM else m for m in registry._ORDER))
    code = main(["check", "--mechanism", "tiny", "--batches", "1", "--profile", "dev", "--out", str(tmp_path)])
    assert code == VIOLATED
    assert "TWIN MISSED (C-I1)" in capsys.readouterr().out


def test_replay_reports_the_violation_and_how_to_reproduce(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = record(CounterModel({"limit": 3}, "overflow"), [Action.of("add", n=2)] * 2, engine="test")
    path = save(trace, tmp_path / "t.json")
    assert main(["replay", str(path)]) == VIOLATED
    assert f"{path}: step 2: C-I1" in capsys.readouterr().out
    assert main(["replay", str(path), "--against", "reference"]) == VIOLATED


def test_replay_of_a_tampered_trace_is_a_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = record(CounterModel({"limit": 3}, "fixed"), [Action.of("add", n=2)], engine="test")
    path = save(trace, tmp_path / "t.json")
    doc = json.loads(path.read_text())
    doc["states"][1]["x"] = 3
    path.write_text(json.dumps(doc))
    assert main(["replay", str(path)]) == DIVERGED
    assert "variable 'x': recorded 3, replayed 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["replay", "missing.json"], ["check", "--mechanism", "nope"], ["explore", "--mechanism", "tiny", "--config", "x"],
     ["frobnicate"], ["check", "--variant", "nope", "--mechanism", "tiny"]],
)
def test_bad_input_is_one_line_and_exit_3(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err


def test_shrink_and_promote_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long_run = [Action.of("inc"), Action.of("reset"), Action.of("add", n=1), Action.of("add", n=1),
                Action.of("add", n=2)]
    path = save(record(CounterModel({"limit": 3}, "overflow"), long_run, engine="test"), tmp_path / "long.json")
    assert main(["shrink", str(path), "-o", str(tmp_path / "short.json")]) == PASS
    assert "5 -> 2 steps, still C-I1" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "short.json")]) == VIOLATED


DELAYED_TRACE = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "delayed" / "pr23611-strict-explorer.json"


def test_replay_flags_a_recorded_observation_the_model_does_not_predict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(DELAYED_TRACE.read_text())
    assert doc["states"][1]["brokerspec::observation"]["delivered"] is False
    doc["states"][1]["brokerspec::observation"]["delivered"] = True
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main(["replay", str(path)]) == DIVERGED
    assert "step 1: divergence" in (out := capsys.readouterr().out)
    assert "observation 'delivered': recorded true, model false" in out
    assert main(["replay", str(path), "--against", "reference"]) == DIVERGED
    assert "observation 'delivered': recorded true, reference false" in capsys.readouterr().out


def test_a_trace_missing_a_model_variable_is_an_input_error_for_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(DELAYED_TRACE.read_text())
    doc["vars"].remove("buckets")
    for state in doc["states"]:
        del state["buckets"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    for argv in (["replay", str(path)], ["shrink", str(path)], ["report", str(path)],
                 ["promote", str(path), "--tests-dir", str(tmp_path / "tests"), "--corpus", str(tmp_path / "c")]):
        assert main(argv) == USAGE, argv
        assert capsys.readouterr().err == f"error: {path}: step 0: missing variable 'buckets' of the delayed model\n"


def test_shrink_refuses_an_output_folder_that_does_not_exist(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "no" / "such" / "x.json"
    assert main(["shrink", str(DELAYED_TRACE), "-o", str(out)]) == USAGE
    assert capsys.readouterr().err == f"error: {out}: cannot write: the folder {out.parent} does not exist\n"
    assert not (tmp_path / "no").exists()


def test_check_lines_fit_160_columns_with_paths_whole_and_json_unchanged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / ("a-long-folder-name-" * 6)  # a trace path of ~170 characters: longer than a row's room
    argv = ["check", "--mechanism", "tiny", "--batches", "1", "--profile", "dev", "--out", str(out)]
    assert main(argv) == PASS
    lines = capsys.readouterr().out.splitlines()  # not a terminal: 160 columns
    traces = sorted(str(p) for p in out.rglob("*.json"))
    assert traces
    for line in lines:
        assert len(line) <= 160 or line.strip().rstrip(";:,") in traces, line
    printed = {word.rstrip(";:,") for line in lines for word in line.split()}
    assert set(traces) <= printed  # every trace path printed whole, on one line
    assert main([*argv, "--json"]) == PASS
    rows = json.loads(capsys.readouterr().out)["rows"]
    keys = ["mechanism", "engine", "subject", "verdict", "detail", "time"]
    assert [list(row)[:6] for row in rows] == [keys] * len(rows)
    assert {t for t in traces if any(t in row["detail"] for row in rows)} == set(traces)


def test_check_on_a_terminal_fits_its_width(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "100")  # what shutil.get_terminal_size reads first
    assert main(["check", "--mechanism", "tiny", "--batches", "1", "--profile", "dev", "--out", str(tmp_path)]) == PASS
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines if not line.strip().startswith(str(tmp_path))) <= 100
    assert max(len(line) for line in lines) > 60  # the table is there, and uses the width


def test_a_replay_that_does_not_compare_states_does_not_ask_for_the_model_variables(tmp_path: Path) -> None:
    """`replay --port` and `shrink --port` compare the port, not the recorded states (a port's own)."""
    doc = json.loads(DELAYED_TRACE.read_text())
    doc["vars"].remove("buckets")
    for state in doc["states"]:
        del state["buckets"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    trace = load(path)
    assert "DD-I1" in registry.replay(trace, str(path), check_vars=False).failures
    with pytest.raises(TraceError, match="missing variable 'buckets'"):
        registry.replay(trace, str(path))
