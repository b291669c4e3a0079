"""What a damaged log still tells: a record lost to the quarantine (bytes that are not UTF-8, a truncated
line) leaves its partition incomplete, reported as that with the line and reason, replayed up to the gap,
and neither a sequence violation nor a model failure; a record simply missing still breaks LOG-SEQ, with no
model failure past it; a logged observation the model does not predict is a divergence; and every model
divergence has a trace that `brokerspec replay` reproduces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from properties.cli import DIVERGED, USAGE, main
from properties.pipeline.check import check
from properties.pipeline.ingest import NOT_UTF8
from properties.pipeline.simulate import simulate

pytestmark = pytest.mark.spark


def _index(lines: list[bytes], tracker: int, seq: int) -> int:
    return next(i for i, line in enumerate(lines)
                if line and json.loads(line)["tracker"] == tracker and json.loads(line)["seq"] == seq)


def _violations(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "violations.jsonl").read_text().splitlines()]


def test_a_record_lost_to_the_quarantine_leaves_its_partition_incomplete_not_violating(
        spark: SparkSession, tmp_path: Path) -> None:
    sim = simulate("delayed", 400, tmp_path / "log.jsonl", partitions=20, seed=1)
    lines = sim.path.read_bytes().split(b"\n")
    undecodable, truncated, lost = _index(lines, 5, 4), _index(lines, 7, 3), _index(lines, 9, 6)
    lines[undecodable] = lines[undecodable].replace(b'"action": "', b'"action": "\xff\xfe', 1)
    lines[truncated] = lines[truncated][: len(lines[truncated]) // 2]
    path = sim.path.as_posix()
    sim.path.write_bytes(b"\n".join(lines[:lost] + lines[lost + 1:]))
    summary = check("delayed", sim.path, tmp_path / "out", spark=spark)
    assert summary["partitions"] == 20 and summary["checked"] == 397
    assert summary["quarantine_reasons"] == {NOT_UTF8: 1, "not JSON (malformed or truncated line)": 1}
    assert summary["incomplete_partitions"] == {
        "5": f"seq 4 quarantined at {path}:{undecodable + 1} ({NOT_UTF8}); replayed up to seq 3",
        "7": f"seq 3 quarantined at {path}:{truncated + 1} (not JSON (malformed or truncated line)); "
             "replayed up to seq 2",
    }
    assert summary["violating_partitions"] == [9]  # a record missing with no trace of it is lost events
    assert [(v["key"], v["source"], v["check"]) for v in _violations(tmp_path / "out")] == [(9, "sql", "LOG-SEQ")]


def test_every_model_divergence_has_a_trace_that_replay_reproduces_an_unpredicted_observation_among_them(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim = simulate("delayed", 200, tmp_path / "log.jsonl", partitions=5, seed=4)
    records = [json.loads(line) for line in sim.path.read_text().splitlines()]
    said = next(r for r in records if r["tracker"] == 2 and r["action"] == "advance")
    assert said["observation"] is None  # the model predicts nothing for a clock advance
    said["observation"] = json.dumps({"x": 1})
    odd = next(r for r in records if r["tracker"] == 3 and r["seq"] > 0 and r["action"] == "add")
    odd["params"] = json.dumps({"ledger": "x", "entry": [1], "deliver_at": {"a": 1}})  # no run of the model takes it
    sim.path.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = check("delayed", sim.path, tmp_path / "out", spark=spark)
    assert summary["violating_partitions"] == [2, 3] and summary["model_violations"] == 2
    assert sorted(summary["traces"]) == ["2", "3"]
    found = {v["key"]: v for v in _violations(tmp_path / "out")}
    assert found[2]["source"] == "model" and found[2]["seq"] == said["seq"] and '"x": 1' in str(found[2]["detail"])
    assert main(["replay", summary["traces"]["2"]]) == DIVERGED
    assert f"step {said['seq'] + 1}: divergence" in capsys.readouterr().out
    assert main(["replay", summary["traces"]["3"]]) == USAGE  # the trace ends at the step the model refuses
    err = capsys.readouterr().err
    assert err.startswith(f"error: {summary['traces']['3']}: step {odd['seq'] + 1}: ") and len(err.splitlines()) == 1


def test_a_key_shared_log_with_sql_findings_and_a_quarantined_gap_keeps_both_apart(
        spark: SparkSession, tmp_path: Path) -> None:
    sim = simulate("keyshared", 600, tmp_path / "log.jsonl", partitions=6, fault="classic", faulted=(1,), seed=6)
    lines = sim.path.read_text().splitlines()
    lost = next(i for i, line in enumerate(lines)
                if json.loads(line)["subscription"] == 4 and json.loads(line)["seq"] == 5)
    lines[lost] = lines[lost][: len(lines[lost]) // 2 + 8]  # "subscription" and "seq" still legible
    sim.path.write_text("\n".join(lines) + "\n")
    summary = check("keyshared", sim.path, tmp_path / "out", spark=spark)
    assert summary["violating_partitions"] == [1] and summary["partitions"] == 6
    assert list(summary["incomplete_partitions"]) == ["4"]
    assert summary["incomplete_partitions"]["4"].startswith(f"seq 5 quarantined at {sim.path.as_posix()}:{lost + 1} ")
