"""The Spark pipeline finds exactly the faulted partitions, quarantines every malformed line, and
saves traces that replay to the violation it reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from properties import registry
from properties.cli.check import judge
from properties.cli.common import PASS, VIOLATED
from properties.cli.pipeline_bench import python_checks
from properties.pipeline.check import check, result
from properties.pipeline.explore import explore
from properties.pipeline.simulate import simulate
from properties.registry import replay
from traces.format import load

pytestmark = pytest.mark.spark

FAULTED = (3, 411, 998)
PARTITIONS = 1000


def _run(spark: SparkSession, tmp: Path, mechanism: str, fault: str | None, events_per: int,
         **options: Any) -> tuple[Any, dict[str, Any]]:
    name = fault or "clean"
    sim = simulate(mechanism, events_per * options.get("partitions", PARTITIONS), tmp / f"{name}.jsonl",
                   fault=fault, faulted=FAULTED if fault else (), seed=7,
                   **{"partitions": PARTITIONS, **options})
    return sim, check(mechanism, sim.path, tmp / f"{name}-out", spark=spark)


@pytest.fixture(scope="module")
def logs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Thousand-partition runs, memoised so the tests that inspect the same run do not redo it."""
    done: dict[tuple[str, str | None], tuple[Any, dict[str, Any]]] = {}

    def get(mechanism: str, fault: str | None, events_per: int) -> tuple[Any, dict[str, Any]]:
        if (mechanism, fault) not in done:
            done[mechanism, fault] = _run(spark, tmp_path_factory.mktemp(mechanism), mechanism, fault, events_per)
        return done[mechanism, fault]

    return get


@pytest.fixture()
def delayed_fault(logs: Any) -> tuple[Any, dict[str, Any]]:
    return logs("delayed", "pr23611", 30)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("mechanism", "fault", "events_per"),
                         [("delayed", "pr23611", 30), ("topiclist", "no_exceptional_release", 25)])
def test_fault_in_three_of_a_thousand_partitions_is_found_exactly(
    logs: Any, mechanism: str, fault: str, events_per: int
) -> None:
    sim, summary = logs(mechanism, fault, events_per)
    assert sim.faulted == FAULTED
    assert summary["partitions"] == PARTITIONS
    assert summary["violating_partitions"] == list(FAULTED)
    assert set(summary["explained_by"].values()) == {fault}
    _, clean = logs(mechanism, None, events_per)
    assert clean["violating_partitions"] == []
    assert clean["checked"] == clean["records"] == PARTITIONS * events_per


@pytest.mark.parametrize(("mechanism", "fault", "events_per", "invariant"),
                         [("delayed", "pr23611", 30, "DD-I1"), ("topiclist", "no_exceptional_release", 25, "TL-I7")])
def test_the_pipeline_reports_as_every_checker_does(
    logs: Any, mechanism: str, fault: str, events_per: int, invariant: str
) -> None:
    """A run ends in a `CheckResult`, judged as the check judges any: what broke (a topic-list log leaves the current
    model as a divergence), with the lowest violating partition's trace as the target, the run of the variant that
    explains the log, which breaks the fault's invariant; the clean log passes."""
    _, summary = logs(mechanism, fault, events_per)
    ran = result(summary)
    assert (ran.engine, ran.mechanism, ran.variant) == ("pipeline", mechanism, registry.get(mechanism).current)
    assert ran.failures and ran.target is not None and ran.target.name == invariant
    assert ran.target.trace is not None and ran.target.trace == summary["traces"][str(FAULTED[0])]
    assert ran.target.steps == len(load(Path(ran.target.trace)).steps) - 1 > 0
    assert ran.work["violating"] == len(FAULTED) and ran.work["partitions"] == PARTITIONS
    assert judge(ran) == (f"VIOLATED {','.join(ran.failures)}", VIOLATED)
    _, clean = logs(mechanism, None, events_per)
    assert judge(result(clean)) == ("pass", PASS) and result(clean).target is None


def test_sql_window_check_alone_finds_early_delivery(delayed_fault: tuple[Any, dict[str, Any]]) -> None:
    sim, summary = delayed_fault
    rows = [json.loads(line) for line in Path(summary["traces"]["3"]).parent.parent.joinpath(
        "violations.jsonl").read_text().splitlines()]
    assert {r["key"] for r in rows if r["source"] == "sql" and r["check"] == "DD-I1"} == set(sim.faulted)


def test_violating_partition_trace_replays_to_the_same_violation(delayed_fault: tuple[Any, dict[str, Any]]) -> None:
    _, summary = delayed_fault
    assert sorted(summary["traces"]) == sorted(str(k) for k in FAULTED)
    for path in summary["traces"].values():
        trace = load(Path(path))
        assert trace.variant == "pr23611" and trace.engine == "pipeline"
        for against in ("model", "reference"):
            result = replay(trace, path, against=against)
            assert result.step == trace.failure["step"]
            assert "DD-I1" in result.failures
            assert list(result.failures) == trace.failure["names"]


def test_corrupt_lines_are_quarantined_and_counted_and_every_valid_record_checked(
    spark: SparkSession, tmp_path: Path
) -> None:
    sim, summary = _run(spark, tmp_path, "delayed", None, 20, partitions=200, corrupt=0.01)
    assert sim.corrupt_lines == round(sim.events * 0.01 / 0.99) > 0
    assert summary["records"] == sim.events + sim.corrupt_lines
    assert summary["checked"] == sim.events == sum(summary["coverage"].values())
    assert summary["quarantined"] == sim.corrupt_lines == sum(summary["quarantine_reasons"].values())
    quarantine = [json.loads(line) for f in (tmp_path / "clean-out" / "quarantine").glob("*.json")
                  for line in f.read_text().splitlines()]
    assert len(quarantine) == sim.corrupt_lines and all(q["reason"] for q in quarantine)
    assert summary["violating_partitions"] == []


def test_a_lost_event_breaks_the_sequence_check(spark: SparkSession, tmp_path: Path) -> None:
    sim = simulate("delayed", 400, tmp_path / "log.jsonl", partitions=20, seed=1)
    lines = sim.path.read_text().splitlines()
    lost = next(i for i, line in enumerate(lines) if json.loads(line)["tracker"] == 5 and json.loads(line)["seq"] == 4)
    sim.path.write_text("\n".join(lines[:lost] + lines[lost + 1:]) + "\n")
    summary = check("delayed", sim.path, tmp_path / "out", spark=spark)
    rows = [json.loads(line) for line in (tmp_path / "out" / "violations.jsonl").read_text().splitlines()]
    assert [(r["key"], r["check"], r["seq"]) for r in rows if r["source"] == "sql"] == [(5, "LOG-SEQ", 5)]
    assert summary["checked"] == 399


def test_parquet_log_reads_with_the_same_schema(spark: SparkSession, tmp_path: Path) -> None:
    sim = simulate("delayed", 600, tmp_path / "log.parquet", partitions=30, fault="pr23611", faulted=(4,), seed=2)
    summary = check("delayed", sim.path, tmp_path / "out", spark=spark)
    assert summary["checked"] == sim.events
    assert summary["violating_partitions"] == [4]


def test_explore_finds_and_shrinks_the_known_bug_and_nothing_on_current(spark: SparkSession, tmp_path: Path) -> None:
    findings, failing = explore(spark, "delayed", 200, tmp_path, variant="pr23611", max_findings=2)
    assert failing > 0 and len(findings) == 2
    for finding in findings:
        trace = load(finding.trace)
        assert finding.shrunk_steps <= finding.steps and len(trace.actions) == finding.shrunk_steps
        assert finding.invariant in replay(trace, str(finding.trace), against="reference").failures
    assert explore(spark, "delayed", 200, tmp_path, variant="current") == ([], 0)


def test_plain_python_baseline_agrees_with_spark(delayed_fault: tuple[Any, dict[str, Any]]) -> None:
    sim, summary = delayed_fault
    bad, seconds = python_checks("delayed", sim.path)
    assert sorted(bad) == summary["violating_partitions"] == list(FAULTED)
    assert set(seconds) == {"ingest", "sql", "conformance"}
