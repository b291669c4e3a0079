"""`brokerspec bench`'s output folder: a Markdown page per mechanism with PNG plots, and an index linking them.

The real benches take minutes (the delayed memory experiment alone about three), so the writer is
tested on made-up results for every registered mechanism, and the command end to end on the tiny
counter of `tests/engines` (seconds).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from properties import registry
from properties.cli import PASS, USAGE, bench, main
from properties.engines.mechanism import Mechanism

PNG = b"\x89PNG\r\n\x1a\n"


def _result(mechanism: Mechanism) -> dict[str, object]:
    """A bench result with every key the page needs: the first twin missed by Hypothesis, the rest found."""
    result: dict[str, object] = {"mechanism": mechanism.name, "explorer_config": "small",
                                 "explorer_states_per_s": 20_742, "explorer_vs_goal": 0.21,
                                 "stateful_steps_per_s": 4_624, "stateful_vs_goal": 2.31}
    for i, (variant, invariant) in enumerate(mechanism.twins.items()):
        for config in mechanism.explore_configs:
            result[bench.time_to_bug_key(invariant, variant, "explorer", config)] = 0.01
        for config in mechanism.hypothesis_configs:
            missed = i == 0 and config == next(iter(mechanism.hypothesis_configs))
            result[bench.time_to_bug_key(invariant, variant, "hypothesis", config)] = (
                "not found in 60s" if missed else 5.07)
    result["track_per_s"] = 86_750
    return result


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 5_000, path


def _rows(page: str, heading: str) -> list[str]:
    """The table rows under `## heading` (header and separator excluded)."""
    section = page.split(f"\n## {heading}\n\n")[1].split("\n\n")[0]
    return section.splitlines()[2:]


def test_page_has_the_goals_the_time_to_each_bug_and_every_other_measure(tmp_path: Path) -> None:
    mechanism = registry.get("pidquota")
    page_path = bench.write_report(tmp_path, mechanism, _result(mechanism))
    assert page_path == tmp_path / "pidquota.md"
    page = page_path.read_text()
    runs = len(mechanism.explore_configs) + len(mechanism.hypothesis_configs)
    assert page.startswith("# bench: pidquota\n\nexplorer 20,742 distinct states/s (0.21× the goal); "
                           f"Hypothesis lockstep 4,624 steps/s (2.31× the goal); known bugs found by {runs - 1} of "
                           f"{runs} engine runs.\n")
    assert _rows(page, "Speed against the goals") == [
        "| explorer | 20,742 distinct states/s | 100,000 distinct states/s | 0.21× | below the goal |",
        "| Hypothesis lockstep | 4,624 steps/s | 2,000 steps/s | 2.31× | meets the goal |",
    ]
    first, *rest = mechanism.hypothesis_configs
    assert _rows(page, "Time to find the known bugs") == [
        *(f"| no_readd | PQ-I1 | explorer[{config}] | 0.01 s |" for config in mechanism.explore_configs),
        f"| no_readd | PQ-I1 | hypothesis[{first}] | not found in 60s |",
        *(f"| no_readd | PQ-I1 | hypothesis[{config}] | 5.07 s |" for config in rest),
    ]
    assert _rows(page, "All measurements") == ["| `explorer_config` | small |", "| `track_per_s` | 86750 |"]
    for figure in ("pidquota-goals.png", "pidquota-time-to-bug.png"):
        assert f"]({figure})" in page
        _assert_png(tmp_path / figure)


def test_index_links_every_mechanism_page_and_other_benches_pages(tmp_path: Path) -> None:
    mechanisms = registry.mechanisms()
    for mechanism in mechanisms.values():
        bench.write_report(tmp_path, mechanism, _result(mechanism))
    pipeline = bench.Section("Throughput", ["measure", "value"], [["`local[2]_sql_events_per_s`", 612_000]])
    bench.write_markdown(tmp_path, "pipeline-delayed", [pipeline], title="bench: pipeline delayed",
                         summary="SQL checks 612,000 events/s.")
    index = (tmp_path / bench.INDEX).read_text()
    links = [line.split("](")[1].split(")")[0] for line in index.splitlines() if line.startswith("| [")]
    assert links == sorted([*(f"{name}.md" for name in mechanisms), "pipeline-delayed.md"])
    assert all((tmp_path / link).is_file() for link in links)
    assert "| [bench: pipeline delayed](pipeline-delayed.md) | SQL checks 612,000 events/s. |" in index
    assert "| [bench: pidquota](pidquota.md) | explorer 20,742 distinct states/s (0.21× the goal); " in index


def test_a_page_links_a_figure_the_mechanism_drew_itself(tmp_path: Path) -> None:
    mechanism = registry.get("pidquota")
    (tmp_path / "pidquota-own.png").write_bytes(PNG)
    result = {**_result(mechanism), "own_plot": str(tmp_path / "pidquota-own.png")}
    page = bench.write_report(tmp_path, mechanism, result).read_text()
    assert "![pidquota-own](pidquota-own.png)" in page


def test_the_delayed_memory_plot_lands_in_the_bench_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from properties.delayed import binding as delayed

    monkeypatch.setattr(delayed, "SEED_N", 40_000)
    monkeypatch.setattr(delayed, "PLOT_N", 20_000)
    monkeypatch.setattr(delayed, "PLOT_YS", (4, 8))
    row = bench._own_bench(registry.get("delayed"), tmp_path)
    assert row["memory_plot"] == str(tmp_path / "delayed-memory-per-message.png")
    _assert_png(tmp_path / "delayed-memory-per-message.png")


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny counter, registered with a bench of its own that draws (well, writes) a figure in the folder."""
    from tests.engines import tiny as module

    def own(folder: Path = bench.OUT) -> dict[str, object]:
        (folder / "tiny-own.png").write_bytes(PNG)
        return {"own_plot": str(folder / "tiny-own.png")}

    monkeypatch.setattr(registry, "_ORDER", (*registry._ORDER, replace(module.MECHANISM, bench=own)))


@pytest.mark.usefixtures("tiny")
def test_bench_command_prints_the_table_and_writes_the_folder(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    assert main(["bench", "--mechanism", "tiny", "--seconds", "0.2", "--out", str(out)]) == PASS
    captured = capsys.readouterr()
    assert [line.split()[:2] for line in captured.out.splitlines()[2:4]] == [
        ["tiny", "explorer_config"], ["tiny", "explorer_states"]]
    assert f"bench pages: {out / bench.INDEX}" in captured.err
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md", "tiny-goals.png", "tiny-own.png", "tiny-time-to-bug.png", "tiny.md"]
    page = (out / "tiny.md").read_text()
    for heading in ("# bench: tiny", "## Speed against the goals", "## Time to find the known bugs",
                    "## All measurements"):
        assert f"\n{heading}\n" in f"\n{page}"
    assert _rows(page, "Time to find the known bugs")[0].startswith("| overflow | C-I1 | explorer[small] | ")
    assert "![tiny-own](tiny-own.png)" in page
    _assert_png(out / "tiny-goals.png")
    _assert_png(out / "tiny-time-to-bug.png")
    assert "[bench: tiny](tiny.md)" in (out / bench.INDEX).read_text()


@pytest.mark.usefixtures("tiny")
def test_bench_json_is_still_the_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--mechanism", "tiny", "--seconds", "0.2", "--json", "--out", str(tmp_path)]) == PASS
    (result,) = json.loads(capsys.readouterr().out)
    assert result["mechanism"] == "tiny" and result["stateful_current_passed"] is True
    assert isinstance(result[bench.time_to_bug_key("C-I1", "overflow", "explorer", "small")], float)
    assert (tmp_path / "tiny.md").is_file()


def test_an_unwritable_folder_is_a_one_line_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["bench", "--mechanism", "pidquota", "--out", str(tmp_path / "file" / "bench")]) == USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "cannot write" in err and "\n" not in err


def test_page_reports_the_time_to_kill_each_planted_bug(tmp_path: Path) -> None:
    mechanism = registry.get("pidquota")
    result = {**_result(mechanism),
              bench.mutant_key("expire-early"): 1.25, "mutant_expire-early_found": "PQ-I1 (must break PQ-I1) by "
              "conformance[small], 3 steps (at most 4)",
              bench.mutant_key("forgets"): "survived: divergence", "mutant_forgets_found": "divergence"}
    page = bench.write_report(tmp_path, mechanism, result).read_text()
    assert _rows(page, "Time to kill the planted bugs (tests/mutants, default check)") == [
        "| expire-early | PQ-I1 (must break PQ-I1) by conformance[small], 3 steps (at most 4) | 1.25 s |",
        "| forgets | divergence | survived: divergence |",
    ]
    assert "1 of 2 planted bugs killed by name." in page.splitlines()[2]
    assert "mutant_" not in page.split("## All measurements")[1]


def test_the_reduction_figures_are_measured_in_one_run_and_keep_every_shortest_finding() -> None:
    """`bench_reduction` on two lock configurations: fewer states with partial-order reduction, the lost wake-up
    at its full search's length (17 for locks-batch, which the reduced graph first reaches in 18)."""
    from properties.keyshared.binding import LOCKS_EXPLORE_CONFIGS

    keyshared = replace(registry.get("keyshared"), nightly_configs={},
                        explore_configs={n: LOCKS_EXPLORE_CONFIGS[n] for n in ("locks", "locks-batch")})
    figures = bench.bench_reduction(keyshared)
    assert str(figures["reduction[locks-batch]_full"]).startswith("133 states in ")
    assert figures["reduction[locks-batch]_por_findings"] == "same, at their shortest lengths: LK-6 in 21"
    assert figures["reduction[locks]_por_findings"] == "same, at their shortest lengths: LK-6 in 17"
    assert 0 < float(str(figures["reduction[locks]_por_states_ratio"])) < 1
    assert str(figures["reduction[locks]_preemptions_1"]).endswith("found LK-6")
