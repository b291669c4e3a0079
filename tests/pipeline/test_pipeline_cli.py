"""The pipeline commands' usage errors and the simulate command (no Spark needed for these)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import pytest

from properties.cli import INFRA, PASS, USAGE, main


@pytest.mark.parametrize("argv", [
    ["simulate", "--mechanism", "metadata", "--events", "10", "--out", "x.jsonl"],
    ["simulate", "--mechanism", "delayed", "--events", "10", "--fault", "nope", "--out", "x.jsonl"],
    ["simulate", "--mechanism", "delayed", "--events", "5", "--partitions", "10", "--out", "x.jsonl"],
    ["simulate", "--mechanism", "delayed", "--events", "10", "--corrupt", "0.1", "--out", "x.parquet"],
    ["pipeline", "check", "--mechanism", "metadata", "--input", "x.jsonl", "--out", "o"],
    ["pipeline", "check", "--mechanism", "delayed", "--input", "does-not-exist.jsonl", "--out", "o"],
    ["pipeline", "explore", "--mechanism", "delayed", "--variant", "nope", "--seeds", "3"],
    ["pipeline"],
    ["simulate", "--mechanism", "keyshared", "--events", "100", "--fault", "pip379", "--out", "x.parquet"],
    ["bench", "--pipeline", "100", "--mechanism", "metadata"],
])
def test_usage_errors_exit_3_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == USAGE
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_simulate_writes_the_requested_events_and_fault(tmp_path: Path) -> None:
    out = tmp_path / "log.jsonl"
    argv = ["simulate", "--mechanism", "delayed", "--events", "200", "--partitions", "10", "--fault", "pr23611",
            "--out", str(out)]
    assert main(argv) == PASS
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 200 and {r["tracker"] for r in records} == set(range(10))
    assert all(set(r) == {"tracker", "seq", "action", "params", "observation", "vars"} for r in records)


def test_spark_not_starting_is_an_infrastructure_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from properties.pipeline import check

    def no_spark(master: str = "local[*]", shuffle_partitions: int = 8) -> NoReturn:
        raise check.SparkUnavailable(f"Spark did not start on {master}: no JVM")

    monkeypatch.setattr(check, "session", no_spark)
    log = tmp_path / "log.jsonl"
    assert main(["simulate", "--mechanism", "delayed", "--events", "20", "--partitions", "2", "--out", str(log)]) == 0
    argv = ["pipeline", "check", "--mechanism", "delayed", "--input", str(log), "--out", str(tmp_path / "o")]
    assert main(argv) == INFRA
    assert main(["pipeline", "explore", "--mechanism", "delayed", "--seeds", "3"]) == INFRA
    assert "Spark did not start" in capsys.readouterr().err


def test_simulate_keyshared_writes_broker_events_with_the_documented_fields(tmp_path: Path) -> None:
    out = tmp_path / "log.jsonl"
    argv = ["simulate", "--mechanism", "keyshared", "--events", "600", "--partitions", "6", "--fault",
            "second_consumer", "--out", str(out)]
    assert main(argv) == PASS
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 600 and {r["subscription"] for r in records} == set(range(6))
    fields = {"subscription", "seq", "event", "consumer", "position", "hash", "key", "name", "permits"}
    assert all({"subscription", "seq", "event"} <= set(r) <= fields for r in records)
    assert {r["event"] for r in records} >= {"add", "publish", "dispatch", "ack"}
