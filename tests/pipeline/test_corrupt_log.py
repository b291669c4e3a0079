"""Corrupt logs: every valid record is checked, every corrupt one is quarantined with its line and reason,
and the exit code is the real records' verdict (1 only where a partition violates), never a crash.

Each way of corrupting a record makes about 1% of the log: corrupt copies of real records are inserted
right after them (so the real record is still there to check), duplicates repeat a record exactly.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from properties.cli import PASS, USAGE, VIOLATED, main
from properties.keyshared.eventlog.records import ARROW_SCHEMA
from properties.pipeline.check import check
from properties.pipeline.schema import spec
from properties.pipeline.simulate import simulate

pytestmark = pytest.mark.spark

PARTITIONS, EVENTS = 20, 1000
FAULTS = {"delayed": "pr23611", "topiclist": "no_exceptional_release", "keyshared": "classic"}

Corruption = Callable[[dict[str, Any]], tuple[str, str]]
"""A record -> (the corrupt line derived from it, the quarantine reason expected for it)."""


def _set(field: str, value: Any, reason: str) -> Corruption:
    return lambda record: (json.dumps({**record, field: value}), reason)


def _corruptions(mechanism: str) -> list[Corruption]:
    """One corruption per way a user met: bad JSON text, wrong types, the action or event as a number, an
    object where a string is expected, a duplicate event, a truncated line."""
    key = spec(mechanism).key
    common = [
        _set("seq", "3", "field seq is not an integer"),
        _set(key, 1.5, f"field {key} is not an integer"),
        lambda record: (json.dumps(record), f"duplicate of an earlier record with the same {key} and seq"),
        lambda record: (json.dumps(record)[: len(json.dumps(record)) // 2], "not JSON (malformed or truncated line)"),
    ]
    if mechanism == "keyshared":
        return [
            *common,
            _set("event", 7, "field event is not a string"),
            _set("key", {"k": 1}, "field key is not a string"),
            _set("position", "3", "field position is not an integer"),
        ]
    return [
        *common,
        _set("params", "{not json", "field params is not the text of a JSON object"),
        _set("vars", "7", "field vars is not the text of a JSON object"),
        _set("vars", 7, "field vars is not a string"),
        _set("action", 7, "field action is not a string"),
        _set("params", {"entry": 1}, "field params is not a string"),
    ]


def _corrupt(mechanism: str, log: Path) -> dict[int, str]:
    """Insert 1% corrupt lines per corruption into `log`; their 1-based line numbers and expected reasons."""
    lines = log.read_text().splitlines()
    rng = random.Random(f"corrupt:{mechanism}")
    corruptions = _corruptions(mechanism)
    picked = rng.sample(range(len(lines)), len(corruptions) * (len(lines) // 100))
    chosen = {i: corruptions[n % len(corruptions)] for n, i in enumerate(picked)}
    out: list[str] = []
    expected: dict[int, str] = {}
    for index, line in enumerate(lines):
        out.append(line)
        if index in chosen:
            corrupt, reason = chosen[index](json.loads(line))
            out.append(corrupt)
            expected[len(out)] = reason
    log.write_text("\n".join(out) + "\n")
    return expected


def _quarantine(out: Path) -> dict[int, str]:
    rows = [json.loads(line) for f in sorted((out / "quarantine").glob("*.json"))
            for line in f.read_text().splitlines()]
    return {int(r["line"]): str(r["reason"]) for r in rows}


@pytest.mark.parametrize("mechanism", sorted(FAULTS))
def test_corrupt_log_quarantines_every_corrupt_line_with_its_line_and_reason_and_keeps_the_verdicts(
    spark: SparkSession, tmp_path: Path, mechanism: str,
) -> None:
    sim = simulate(mechanism, EVENTS, tmp_path / "faulted.jsonl", partitions=PARTITIONS, fault=FAULTS[mechanism],
                   faulted=(3,), seed=5)
    expected = _corrupt(mechanism, sim.path)
    assert len(expected) == len(_corruptions(mechanism)) * sim.events // 100
    assert len(set(expected.values())) == len(_corruptions(mechanism))
    summary = check(mechanism, sim.path, tmp_path / "faulted", spark=spark)
    assert summary["records"] == sim.events + len(expected) and summary["checked"] == sim.events
    assert summary["quarantined"] == len(expected) and summary["unusable"] is None
    assert _quarantine(tmp_path / "faulted") == expected
    assert summary["violating_partitions"] == [3]

    clean = simulate(mechanism, EVENTS, tmp_path / "clean.jsonl", partitions=PARTITIONS, seed=5)
    expected = _corrupt(mechanism, clean.path)
    out = tmp_path / "clean"
    assert main(["pipeline", "check", "--mechanism", mechanism, "--input", str(clean.path), "--out", str(out),
                 "--master", str(spark.sparkContext.master), "--json"]) == PASS
    written = json.loads((out / "summary.json").read_text())
    assert written["checked"] == clean.events and written["quarantined"] == len(expected)
    assert written["violating_partitions"] == [] and _quarantine(out) == expected


def test_faulted_corrupt_log_exits_1_and_json_mode_prints_only_the_summary(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    sim = simulate("delayed", 400, tmp_path / "log.jsonl", partitions=10, fault="pr23611", faulted=(4,), seed=2)
    _corrupt("delayed", sim.path)
    argv = ["pipeline", "check", "--mechanism", "delayed", "--input", str(sim.path), "--out", str(tmp_path / "o"),
            "--master", str(spark.sparkContext.master), "--json"]
    assert main(argv) == VIOLATED
    printed = capsys.readouterr()
    assert json.loads(printed.out)["violating_partitions"] == [4] and printed.err == ""


def test_no_log_at_all_exits_3_with_a_summary(spark: SparkSession, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    master = str(spark.sparkContext.master)
    text = tmp_path / "notes.jsonl"
    text.write_text("this is not\na log\n")
    argv = ["pipeline", "check", "--mechanism", "topiclist", "--input", str(text), "--out", str(tmp_path / "a"),
            "--master", master]
    assert main(argv) == USAGE
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["checked"] == 0 and summary["quarantined"] == 2 and "no valid" in summary["unusable"]
    assert _quarantine(tmp_path / "a") == {1: "not JSON (malformed or truncated line)",
                                          2: "not JSON (malformed or truncated line)"}
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"subscription": ["a"], "seq": [0]}), other)
    argv = ["pipeline", "check", "--mechanism", "keyshared", "--input", str(other), "--out", str(tmp_path / "b"),
            "--master", master]
    assert main(argv) == USAGE
    assert "column subscription is string, not bigint" in json.loads((tmp_path / "b" / "summary.json").read_text())[
        "unusable"]
    assert "error: pipeline check:" in capsys.readouterr().err


def test_a_long_check_reports_progress(spark: SparkSession, tmp_path: Path) -> None:
    sim = simulate("delayed", 200, tmp_path / "log.jsonl", partitions=5, seed=3)
    lines: list[str] = []
    check("delayed", sim.path, tmp_path / "out", spark=spark, progress=lines.append, every=0.2)
    beats = [line for line in lines if "progress:" in line]
    assert beats and "Spark stages done" in beats[-1] and "records replayed" in beats[-1]


@pytest.mark.parametrize(("mechanism", "field", "value"), [
    ("delayed", "params", '{"ledger": "x", "entry": [1], "deliver_at": {"a": 1}}'),
    ("topiclist", "vars", '{"a": [1]}'),
])
def test_well_typed_records_the_model_cannot_take_are_violations_not_crashes(
    spark: SparkSession, tmp_path: Path, mechanism: str, field: str, value: str,
) -> None:
    sim = simulate(mechanism, 200, tmp_path / "log.jsonl", partitions=5, seed=4)
    records = [json.loads(line) for line in sim.path.read_text().splitlines()]
    key = spec(mechanism).key
    odd = next(r for r in records if r[key] == 2 and r["seq"] > 0 and (mechanism != "delayed" or r["action"] == "add"))
    odd[field] = value
    sim.path.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = check(mechanism, sim.path, tmp_path / "out", spark=spark)
    assert summary["checked"] == sim.events and summary["quarantined"] == 0
    assert summary["violating_partitions"] == [2]


def test_line_numbers_count_per_file_in_a_directory_and_per_row_in_parquet(spark: SparkSession,
                                                                          tmp_path: Path) -> None:
    sim = simulate("keyshared", 300, tmp_path / "log.jsonl", partitions=3, seed=6)
    lines = sim.path.read_text().splitlines()
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part-0.json").write_text("\n".join(lines[:100]) + "\n")
    (parts / "part-1.json").write_text("\n".join([*lines[100:102], "{not json", *lines[102:]]) + "\n")
    check("keyshared", parts, tmp_path / "out", spark=spark)
    rows = [json.loads(line) for f in (tmp_path / "out" / "quarantine").glob("*.json")
            for line in f.read_text().splitlines()]
    assert [(Path(r["file"]).name, r["line"]) for r in rows] == [("part-1.json", 3)]

    records = [json.loads(line) for line in lines]
    log = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pylist([*records[:50], records[10], *records[50:]], schema=ARROW_SCHEMA), log)
    summary = check("keyshared", log, tmp_path / "pout", spark=spark)
    assert summary["checked"] == 300 and summary["quarantine_reasons"] == {
        "duplicate of an earlier record with the same subscription and seq": 1}
    assert _quarantine(tmp_path / "pout") == {51: "duplicate of an earlier record with the same subscription and seq"}
