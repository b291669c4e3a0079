"""The Key_Shared pipeline on Spark: exactly the faulted subscriptions, every malformed line quarantined,
the SQL rules equal to their plain-Python statement, traces that replay to the violation, and the bench table.

One Spark run per test (each checks several things about its run), so pytest-xdist never repeats a run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from models.keyshared import sticky_hash
from properties.cli.pipeline_bench import pipeline_bench
from properties.engines.lockstep import DIVERGENCE
from properties.keyshared.eventlog.check import python_replay, python_sql_checks, read_table
from properties.keyshared.eventlog.records import Record, client_verdict
from properties.keyshared.eventlog.simulate import to_table, walk
from properties.pipeline.check import check, sql_checks
from properties.pipeline.ingest import checkable, prepare, read_log
from properties.pipeline.simulate import Simulation, simulate
from properties.registry import replay
from traces.format import load

pytestmark = pytest.mark.spark

FAULTED = (3, 411, 998)
SUBSCRIPTIONS = 1000
EVENTS = 30 * SUBSCRIPTIONS


def _run(spark: SparkSession, tmp: Path, fault: str | None, suffix: str,
         corrupt: float = 0.0) -> tuple[Simulation, dict[str, Any], list[dict[str, Any]]]:
    sim = simulate("keyshared", EVENTS, tmp / f"log{suffix}", partitions=SUBSCRIPTIONS, fault=fault,
                   faulted=FAULTED if fault else (), seed=7, corrupt=corrupt)
    summary = check("keyshared", sim.path, tmp / "out", spark=spark)
    violations = [json.loads(line) for line in (tmp / "out" / "violations.jsonl").read_text().splitlines()]
    return sim, summary, violations


def _found_exactly(sim: Simulation, summary: dict[str, Any], violations: list[dict[str, Any]]) -> None:
    """Exactly the faulted subscriptions, by SQL (KS-I1) and by the replay, as the plain-Python rules say."""
    assert sim.faulted == FAULTED
    assert summary["partitions"] == SUBSCRIPTIONS and summary["checked"] == EVENTS
    assert summary["violating_partitions"] == list(FAULTED)
    assert {r["key"] for r in violations if r["source"] == "sql" and r["check"] == "KS-I1"} == set(FAULTED)
    assert {r["key"] for r in violations if r["source"] == "model"} == set(FAULTED)
    table = read_table(sim.path)
    assert python_sql_checks(table) == sorted((r["key"], r["seq"], r["check"]) for r in violations
                                              if r["source"] == "sql")
    assert sorted(python_replay(table)) == list(FAULTED)


def test_classic_in_three_of_a_thousand_subscriptions_is_found_and_its_traces_replay_to_the_bug(
    spark: SparkSession, tmp_path: Path,
) -> None:
    sim, summary, violations = _run(spark, tmp_path, "classic", ".parquet")
    _found_exactly(sim, summary, violations)
    assert all("classic" in str(v).split(",") for v in summary["explained_by"].values())
    model_rows = {r["key"]: r for r in violations if r["source"] == "model"}
    assert sorted(summary["traces"]) == sorted(str(k) for k in FAULTED)
    for key, path in summary["traces"].items():
        trace = load(Path(path))
        assert trace.engine == "pipeline" and trace.variant == "classic"
        for against in ("model", "reference"):
            result = replay(trace, path, against=against)
            assert result.step == trace.failure["step"] == len(trace.actions)
            assert list(result.failures) == trace.failure["names"]
            # The log shows what it can (KS-I1); the explaining variant's run may break more at that step (classic's
            # #21199 wait is a KS-S1 stall), never less.
            assert set(model_rows[int(key)]["check"].split(",")) <= set(trace.failure["names"])


def test_a_dispatch_to_a_second_consumer_is_found_and_its_traces_replay_to_the_divergence(
    spark: SparkSession, tmp_path: Path,
) -> None:
    sim, summary, violations = _run(spark, tmp_path, "second_consumer", ".jsonl")
    _found_exactly(sim, summary, violations)
    assert set(summary["explained_by"].values()) == {None}  # no variant of the model makes that dispatch
    assert sorted(summary["traces"]) == sorted(str(k) for k in FAULTED)
    for path in summary["traces"].values():
        trace = load(Path(path))
        result = replay(trace, path)
        assert result.step == trace.failure["step"] and result.failures == (DIVERGENCE,)
        assert "held" in result.detail


def test_clean_log_with_corrupt_lines_checks_every_valid_record_and_quarantines_every_corrupt_one(
    spark: SparkSession, tmp_path: Path,
) -> None:
    sim, summary, violations = _run(spark, tmp_path, None, ".jsonl", corrupt=0.01)
    assert sim.corrupt_lines == round(EVENTS * 0.01 / 0.99) > 0
    assert summary["records"] == EVENTS + sim.corrupt_lines
    assert summary["checked"] == EVENTS == sum(summary["coverage"].values())
    assert summary["quarantined"] == sim.corrupt_lines == sum(summary["quarantine_reasons"].values())
    quarantine = [json.loads(line) for f in (tmp_path / "out" / "quarantine").glob("*.json")
                  for line in f.read_text().splitlines()]
    assert len(quarantine) == sim.corrupt_lines and all(q["reason"] for q in quarantine)
    assert "missing required field event" in summary["quarantine_reasons"]
    assert summary["violating_partitions"] == [] and violations == []
    assert set(summary["coverage"]) == {"add", "remove", "publish", "flow", "ack", "redeliver", "redeliver_all",
                                        "read", "run", "dispatch"}


def _subscription(key: int, *rows: tuple[str, int | None, int | None]) -> list[Record]:
    """Records of one subscription from (event, consumer, position); every message has key "k"."""
    h = sticky_hash("k", 65535)
    return [(key, seq, event, consumer, position, None if position is None else h,
             "k" if event == "publish" else None, "consumer1" if event == "add" else None,
             1 if event == "add" else None) for seq, (event, consumer, position) in enumerate(rows)]


def test_each_sql_rule_fires_on_its_own_case_and_nowhere_else(spark: SparkSession, tmp_path: Path) -> None:
    out_of_order = _subscription(0, ("add", 1, None), ("publish", None, 0), ("publish", None, 1), ("read", None, None),
                                 ("dispatch", 1, 1), ("dispatch", 1, 0))
    two_holders = _subscription(1, ("add", 1, None), ("add", 2, None), ("publish", None, 0), ("publish", None, 1),
                                ("read", None, None), ("dispatch", 1, 0), ("dispatch", 2, 1))
    reused_id = _subscription(2, ("add", 5, None), ("remove", 5, None), ("add", 5, None))
    released_by_ack = _subscription(3, ("add", 1, None), ("add", 2, None), ("publish", None, 0), ("publish", None, 1),
                                    ("read", None, None), ("dispatch", 1, 0), ("ack", 1, 0), ("read", None, None),
                                    ("dispatch", 2, 1))
    released_by_remove = _subscription(4, ("add", 1, None), ("add", 2, None), ("publish", None, 0),
                                       ("publish", None, 1), ("read", None, None), ("dispatch", 1, 0),
                                       ("remove", 1, None), ("read", None, None), ("dispatch", 2, 0),
                                       ("dispatch", 2, 1))
    log = tmp_path / "cases.parquet"
    pq.write_table(to_table(out_of_order + two_holders + reused_id + released_by_ack + released_by_remove), log)
    valid = checkable("keyshared", prepare("keyshared", read_log(spark, "keyshared", log)))
    found = sorted((r["subscription"], r["seq"], r["check"]) for r in sql_checks("keyshared", valid).collect())
    assert found == [(0, 5, "KS-I4"), (1, 6, "KS-I1"), (2, 2, "LOG-ID")] == python_sql_checks(read_table(log))


def test_bench_produces_the_table_its_page_and_its_plot(spark: SparkSession, tmp_path: Path) -> None:
    text = pipeline_bench(["keyshared"], 4000, tmp_path, masters=(str(spark.sparkContext.master),))
    lines = text.splitlines()
    assert lines[0].startswith("pipeline keyshared: 4,000 events")
    assert [line.split("  ")[0] for line in lines[2:]] == [
        "ingest: read, quarantine, partition, sort, cache", "SQL window checks",
        "client-record replay (default check)", "full-model conformance replay"]
    assert "× of 500,000" in lines[3] and "× of 100,000" in lines[4] and "× of 100,000" in lines[5]
    assert all(line.endswith(("met", "NOT MET")) for line in lines[3:])
    page = (tmp_path / "pipeline-keyshared.md").read_text()
    assert "| SQL window checks |" in page and "pipeline-keyshared.md" in (tmp_path / "README.md").read_text()
    assert "![pipeline-keyshared](pipeline-keyshared.png)" in page
    assert (tmp_path / "pipeline-keyshared.png").stat().st_size > 0


def test_conformance_replays_every_subscription_through_pip379_and_flags_a_log_that_leaves_it(
    spark: SparkSession, tmp_path: Path,
) -> None:
    """Subscription 5 is a classic run that delivers differently from pip379 yet keeps KS-I1 and KS-I4:
    the default check (client record) passes it, `conformance` flags exactly it, and its trace replays."""
    records = [r for key in range(10) if key != 5 for r in walk("pip379", key, 30, random.Random(f"clean:{key}"))]
    leaver = walk("classic", 5, 30, random.Random("conf:classic:22"))
    assert client_verdict(leaver).step is None
    log = tmp_path / "log.parquet"
    pq.write_table(to_table(sorted(records + leaver)), log)
    default = check("keyshared", log, tmp_path / "default", spark=spark)
    assert default["violating_partitions"] == [] and default["conformance"] is False
    strict = check("keyshared", log, tmp_path / "strict", spark=spark, conformance=True)
    assert strict["violating_partitions"] == [5] and strict["explained_by"] == {"5": None}
    violations = [json.loads(line) for line in (tmp_path / "strict" / "violations.jsonl").read_text().splitlines()]
    assert [(v["key"], v["source"], v["check"]) for v in violations] == [(5, "model", DIVERGENCE)]
    path = strict["traces"]["5"]
    trace = load(Path(path))
    result = replay(trace, path)
    assert result.step == trace.failure["step"] and result.failures == (DIVERGENCE,)
