"""The check as a gate: explored graphs kept between runs, mechanisms in parallel, the profiles, `bench --gate`.

Each speed-up must leave the verdicts alone: a graph read from the cache gives the rows a search gives, a
changed model is explored again, a parallel check prints the serial check's rows in the same order, and a
worker that fails or finds a bug under `--fail-fast` ends the check at once.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from models.core import Json
from properties import registry
from properties.cli import PASS, VIOLATED, check, main
from properties.cli.gate_bench import CheckRun, markdown
from properties.engines import cache, explorer
from properties.engines.conformance import Tour, conform
from properties.engines.explorer import explore
from properties.engines.graphs import Graphs
from properties.engines.result import CheckResult
from tests.engines import tiny
from tests.engines.tiny import CounterImpl, CounterModel

pytestmark = pytest.mark.usefixtures("tiny_registered")


def _rows(out: str) -> list[dict[str, object]]:
    """The rows of `check --json`, without what depends on the machine (times, CPU) or on the cache."""
    rows: list[dict[str, object]] = json.loads(out)["rows"]
    for row in rows:
        for key in ("time", "after_s", "cpu_s"):
            row.pop(key)
        row["detail"] = str(row["detail"]).split(" (graph cached")[0]
    return rows


def test_a_second_search_is_read_from_the_cache_with_the_same_facts(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    first = Graphs(tmp_path, None)
    explored = first.explored(tiny.MECHANISM, "overflow", "small")
    tour = first.tour(tiny.MECHANISM, "fixed", "small", 1000)
    assert not explored.cached and explored.findings

    def no_search(*_: object, **__: object) -> None:
        raise AssertionError("the graph was searched again")

    monkeypatch.setattr("properties.engines.graphs.explore", no_search)
    again = Graphs(tmp_path, None)
    kept = again.explored(tiny.MECHANISM, "overflow", "small")
    assert kept.cached and (kept.states, kept.transitions, kept.findings) == (
        explored.states, explored.transitions, explored.findings)
    assert again.tour(tiny.MECHANISM, "fixed", "small", 1000) == tour
    with pytest.raises(AssertionError, match="searched again"):  # another budget is another tour
        again.tour(tiny.MECHANISM, "fixed", "small", 10)


def test_a_changed_model_source_misses(tmp_path: Path) -> None:
    package = tmp_path / "models"
    package.mkdir()
    (package / "m.py").write_text("LIMIT = 3\n")
    before = cache.code_digest([package])
    (package / "m.py").write_text("LIMIT = 4\n")
    assert cache.code_digest([package]) != before
    (package / "m.py").write_text("LIMIT = 3\n")
    assert cache.code_digest([package]) == before


def test_an_unreadable_entry_is_a_miss_and_no_cache_keeps_nothing(tmp_path: Path) -> None:
    kept = cache.GraphCache(tmp_path)
    kept.put("explored", "k", {"states": 3})
    assert kept.get("explored", "k") == {"states": 3}
    (tmp_path / "explored" / "k.pickle").write_bytes(b"not a pickle")
    assert kept.get("explored", "k") is None
    nothing = cache.GraphCache(None)
    nothing.put("explored", "k", 1)
    assert nothing.get("explored", "k") is None


def test_a_planned_tour_replays_as_a_fresh_search_does() -> None:
    """The cached tour is the search's: the same walks, and the same shortened deviation on a broken reference."""
    model = CounterModel({"limit": 3}, "fixed")
    planned = Tour.of(explore(model, record_labels=True), model, None)

    class Broken(CounterImpl):
        def vars(self) -> dict[str, Json]:
            seen = super().vars()
            return {**seen, "x": 99} if seen.get("x") == 2 else seen

    for implementation in (CounterImpl, Broken):
        fresh = conform(lambda: CounterModel({"limit": 3}, "fixed"), implementation)
        kept = conform(lambda: CounterModel({"limit": 3}, "fixed"), implementation, planned=planned)
        assert (fresh.states, fresh.edges, fresh.covered, fresh.walks, fresh.steps, fresh.deviation) == (
            kept.states, kept.edges, kept.covered, kept.walks, kept.steps, kept.deviation)
    assert conform(lambda: CounterModel({"limit": 3}, "fixed"), Broken, planned=planned).deviation is not None


def test_the_parallel_check_prints_the_serial_rows_in_the_same_order(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["check", "--mechanism", "tiny", "--mechanism", "pidquota", "--profile", "quick", "--json", "--out",
            str(tmp_path)]
    assert main([*argv, "--workers", "1"]) == PASS
    serial = _rows(capsys.readouterr().out)
    assert main([*argv, "--workers", "2"]) == PASS
    parallel = _rows(capsys.readouterr().out)
    assert parallel == serial
    assert {row["mechanism"] for row in serial} == {"tiny", "pidquota"}


def test_fail_fast_stops_every_worker_at_the_first_failing_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    def fake(args: object, mechanism: object, report: check.Report) -> None:
        if getattr(mechanism, "name", "") == "tiny":
            report.add(CheckResult("tiny", "conformance", "small", "fixed", failures=("C-I1",), seconds=0.0,
                                   detail="planted"))
        time.sleep(120)  # the other worker is still busy: the check must not wait for it

    monkeypatch.setattr(check, "_check_mechanism", fake)
    started = time.perf_counter()
    code = main(["check", "--mechanism", "pidquota", "--mechanism", "tiny", "--workers", "2", "--fail-fast",
                 "--json", "--out", str(tmp_path)])
    assert code == VIOLATED and time.perf_counter() - started < 60
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [row["verdict"] for row in rows] == ["VIOLATED C-I1"]


def test_a_worker_that_fails_is_said_not_waited_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(*_: object) -> None:
        raise ValueError("a defect of the harness")

    monkeypatch.setattr(check, "_check_mechanism", broken)
    with pytest.raises(RuntimeError, match="a check worker failed: ValueError: a defect of the harness"):
        main(["check", "--mechanism", "pidquota", "--mechanism", "tiny", "--workers", "2", "--out", str(tmp_path)])


def test_forking_is_refused_while_other_threads_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("threading.active_count", lambda: 2)
    assert not explorer.can_fork()


def test_the_quick_profile_replays_the_quick_configurations_of_the_current_variant_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--mechanism", "pidquota", "--profile", "quick", "--json", "--out", str(tmp_path)]) == PASS
    rows = json.loads(capsys.readouterr().out)["rows"]
    quick = registry.get("pidquota").quick_configs
    assert {row["engine"] for row in rows} == {f"{e}[{c}]" for e in ("conformance", "explorer") for c in quick}
    assert {row["subject"] for row in rows} == {"current"}
    steps = [int(re.search(r"(\d+) steps", str(row["detail"])).group(1))  # type: ignore[union-attr]
             for row in rows if str(row["engine"]).startswith("conformance")]
    assert max(steps) <= 10_000 < sum(steps)  # the profile's cap, and it was reached


def test_the_gate_table_sums_each_mechanism_and_engine() -> None:
    rows: list[dict[str, object]] = [
        {"mechanism": "m", "engine": "conformance[a]", "time": "2.0s", "cpu_s": 1.5},
        {"mechanism": "m", "engine": "conformance[b]", "time": "3.0s", "cpu_s": 2.5},
        {"mechanism": "m", "engine": "z3[x]", "time": "", "cpu_s": 0.25},
    ]
    cold, warm = CheckRun("cold", 10.0, 12.0, 0, rows), CheckRun("warm", 4.0, 5.0, 0, rows[:1])
    table = markdown([cold, warm], [])
    assert "| m | conformance | 2 | 5.0 | 4.0 | 2.0 | 1.5 |" in table
    assert "| m | z3 | 1 | 0.0 | 0.2 | 0.0 | 0.0 |" in table
    assert table.startswith("Default `brokerspec check`: 10 s wall, 12 s CPU")


def test_pruning_drops_the_entries_used_longest_ago(tmp_path: Path) -> None:
    kept = cache.GraphCache(tmp_path)
    for name in ("old", "used", "new"):
        kept.put("tour", name, b"x" * 1000)
    for age, name in ((300, "old"), (200, "used"), (100, "new")):
        stamp = time.time() - age
        os.utime(tmp_path / "tour" / f"{name}.pickle", (stamp, stamp))
    assert kept.get("tour", "used") is not None  # reading marks it used now
    assert kept.prune(limit_bytes=2500) == 1
    assert sorted(p.stem for p in (tmp_path / "tour").glob("*.pickle")) == ["new", "used"]
