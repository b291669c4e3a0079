"""`brokerspec bench`: throughput of the engines and time-to-bug on the known-bad variants.

Speed goals live here, never in timed tests: the figures are measured in one run, on one
process, and reported as numbers (and ratios against the goals) for the issue notes. Besides the
table on stdout, a run writes under one folder a Markdown page per mechanism with its PNG plots,
and an index (`README.md`) linking every page in the folder, so results can be read and diffed
later. `write_markdown` is the one writer: other benches (the pipeline's) add their pages with it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from models.core import Model
from properties.cli import mutants
from properties.cli.common import progress
from properties.cli.ports import bench_port_tour
from properties.engines.checks import run_conformance, run_stateful
from properties.engines.explorer import Exploration, explore
from properties.engines.mechanism import Mechanism
from properties.engines.reduction import PartialOrder, PreemptionBounded, shortest_path

EXPLORER_GOAL = 100_000  # distinct states per second
STATEFUL_GOAL = 2_000  # lockstep steps per second
HYPOTHESIS_LIMIT_S = 60.0  # time a Hypothesis search gets to find a twin's bug
CONFORMANCE_BENCH_STEPS = 150_000  # replayed steps the conformance rate is measured on (check's default budget)

OUT = Path("brokerspec-out") / "bench"
"""The default output folder."""
INDEX = "README.md"
"""The index page's name: a folder browser on a code host shows it first."""

GOALS = (
    ("explorer", "explorer_states_per_s", "explorer_vs_goal", EXPLORER_GOAL, "distinct states/s"),
    ("Hypothesis lockstep", "stateful_steps_per_s", "stateful_vs_goal", STATEFUL_GOAL, "steps/s"),
)
"""Label, measure key, ratio key, goal and unit of each speed goal."""


def time_to_bug_key(invariant: str, variant: str, engine: str, config: str) -> str:
    """The result key of one time-to-bug figure (the JSON keeps these names)."""
    return f"time_to_{invariant}_{variant}_{engine}[{config}]_s"


def _own_bench(mechanism: Mechanism, folder: Path) -> dict[str, object]:
    """The mechanism's own measurements, drawing its figures (if any) in `folder`."""
    return mechanism.bench(folder) if mechanism.bench is not None else {}


def mutant_key(name: str) -> str:
    """The result key of one planted bug's time to kill (the JSON keeps these names)."""
    return f"mutant_{name}_kill_s"


def bench_mutants(mechanism: Mechanism, folder: Path = mutants.FOLDER) -> dict[str, object]:
    """Time to kill each of the mechanism's planted bugs with the default check (a patched copy each).

    Per mutant: the seconds the check took to the failing row (interpreter start and imports
    excluded), or why it survived; and what was found, by which engine, in how many steps.
    """
    out: dict[str, object] = {}
    if not folder.is_dir():
        return out
    for mutant in mutants.discover(folder, [mechanism.name]):
        kill = mutants.run(mutant, current=mechanism.current)
        out[mutant_key(mutant.name)] = round(kill.after_s, 2) if kill.killed else f"survived: {kill.target}"
        out[f"mutant_{mutant.name}_found"] = (f"{kill.target} (must break {mutant.kills}) by {kill.engine}, "
                                              f"{kill.steps} steps (at most {mutant.max_steps})")
    return out


def bench_workers(model: Model[Any], alone: Exploration[Any], workers: int = 2) -> dict[str, object]:
    """The explorer's rate on `workers` processes against `alone` (the same model on one process, just before),
    and whether the search was the same. Wall-clock rates: the ratio says something only on free cores."""
    shared = explore(model, check_liveness=False, max_states=2_000_000, workers=workers)
    return {
        f"explorer_states_per_s_{workers}_workers": round(shared.states_per_second),
        f"explorer_{workers}_workers_vs_1": round(shared.states_per_second / alone.states_per_second, 2),
        f"explorer_{workers}_workers_processes": shared.workers,
        f"explorer_{workers}_workers_same_search": shared.states == alone.states and shared.edges == alone.edges,
    }


def _found(result: Exploration[Any]) -> str:
    return ", ".join(f"{f.name} in {len(f.path)}" for f in result.findings) or "nothing"


def bench_symmetry(mechanism: Mechanism) -> dict[str, object]:
    """Per configuration whose model declares a symmetry: states without and with it, and whether the current
    variant and every twin find the same verdicts at the same shortest lengths up to symmetry."""
    out: dict[str, object] = {}
    for name, config in mechanism.explore_configs.items():
        if mechanism.make_model(config, mechanism.current).symmetric_key is None:
            continue
        verdicts = []
        for variant in (mechanism.current, *mechanism.twins):
            model = mechanism.make_model(config, variant)
            terminal_ok = model.terminal_ok
            plain = explore(model, max_states=2_000_000, terminal_ok=terminal_ok)
            reduced = explore(model, max_states=2_000_000, terminal_ok=terminal_ok, symmetry=True)
            if variant == mechanism.current:
                out[f"symmetry[{name}]_states"] = f"{len(plain.states)} -> {len(reduced.states)}"
                out[f"symmetry[{name}]_ratio"] = round(len(reduced.states) / len(plain.states), 2)
            same = "same" if _found(plain) == _found(reduced) else f"DIFFERENT (without: {_found(plain)})"
            verdicts.append(f"{variant}: {same}, {_found(reduced)}")
        out[f"symmetry[{name}]_verdicts"] = "; ".join(verdicts)
    return out


REDUCTION_MAX_STATES = 1_500_000
"""The most states a search of `bench_reduction` keeps (about 3 GB for the lock model's states)."""


def _search(model: Model[Any]) -> tuple[Exploration[Any], str]:
    """A search of `model` and its figure: "N states in S s", or "over N states in S s" where it stopped."""
    result = explore(model, check_liveness=False, max_states=REDUCTION_MAX_STATES,
                     terminal_ok=model.terminal_ok)
    over = "" if result.complete else "over "
    return result, f"{over}{len(result.states):,} states in {result.elapsed_s:.1f} s"


def bench_reduction(mechanism: Mechanism) -> dict[str, object]:
    """Per configuration (the default gate's and the nightly ones) of a model of threads that declares footprints:
    states and seconds of the full search, of the partial-order reduced one (with the findings brought back to
    their shortest paths, in its time) and of the preemption-bounded ones (1 and 2), measured in one run; the
    reduced/full ratios; and whether the reduced search kept every finding at its shortest length."""
    out: dict[str, object] = {}
    for name, config in mechanism.every_explore_config.items():
        model = mechanism.make_model(config, mechanism.current)
        if model.threaded is None:
            continue
        full, full_figure = _search(model)
        started = time.perf_counter()
        reduced, _ = _search(PartialOrder(model))
        shortest = {(f.name, len(shortest_path(model, f.path, f.name).path)) for f in reduced.findings}
        seconds = time.perf_counter() - started
        out[f"reduction[{name}]_full"] = full_figure
        out[f"reduction[{name}]_por"] = f"{len(reduced.states):,} states in {seconds:.1f} s"
        out[f"reduction[{name}]_por_states_ratio"] = round(len(reduced.states) / len(full.states), 3)
        out[f"reduction[{name}]_por_time_ratio"] = round(seconds / max(full.elapsed_s, 1e-9), 2)
        if full.complete:
            same = shortest == {(f.name, len(f.path)) for f in full.findings}
            found = ", ".join(f"{n} in {k}" for n, k in sorted(shortest)) or "none"
            verdict = "same, at their shortest lengths" if same else "DIFFERENT"
            out[f"reduction[{name}]_por_findings"] = f"{verdict}: {found}"
        for bound in (1, 2):
            bounded, figure = _search(PreemptionBounded(model, bound))
            out[f"reduction[{name}]_preemptions_{bound}"] = (
                f"{figure}, found {', '.join(sorted({f.name for f in bounded.findings})) or 'nothing'}")
    return out


def bench(mechanism: Mechanism, *, seconds: float, seed: int, folder: Path = OUT) -> dict[str, object]:
    """Measure one mechanism; every value is a plain number or string for the table and JSON."""
    out: dict[str, object] = {"mechanism": mechanism.name}
    runs = {
        name: explore(mechanism.make_model(config, mechanism.current), check_liveness=False, max_states=2_000_000)
        for name, config in mechanism.explore_configs.items()
    }
    name, result = max(runs.items(), key=lambda item: len(item[1].states))  # the largest space is the fairest rate
    model = mechanism.make_model(mechanism.explore_configs[name], mechanism.current)
    out["explorer_config"] = name
    out["explorer_states"] = len(result.states)
    out["explorer_states_per_s"] = round(result.states_per_second)
    out["explorer_vs_goal"] = round(result.states_per_second / EXPLORER_GOAL, 2)
    # What the rate is made of: the goal asks a transition (step, key, dedup) of at most this many µs.
    per_state = result.transitions / len(result.states)
    out["explorer_transitions_per_state"] = round(per_state, 1)
    out["explorer_us_per_transition"] = round(result.elapsed_s / max(result.transitions, 1) * 1e6, 2)
    out["explorer_goal_us_per_transition"] = round(1e6 / EXPLORER_GOAL / max(per_state, 1e-9), 2)
    started = time.perf_counter()
    explore(model, check_liveness=True, max_states=2_000_000)
    out["explorer_with_liveness_s"] = round(time.perf_counter() - started, 2)
    out.update(bench_workers(model, result))
    out.update(bench_symmetry(mechanism))
    out.update(bench_reduction(mechanism))
    first_config = next(iter(mechanism.hypothesis_configs.values()))
    run, _, steps, elapsed = run_stateful(mechanism, mechanism.current, first_config, seed, seconds, "ci")
    out["stateful_steps"] = steps
    out["stateful_steps_per_s"] = round(steps / elapsed) if elapsed else 0
    out["stateful_vs_goal"] = round(steps / elapsed / STATEFUL_GOAL, 2) if elapsed else 0
    out["stateful_current_passed"] = run is None
    for variant, invariant in mechanism.twins.items():
        for config_name, twin_config in mechanism.explore_configs.items():
            started = time.perf_counter()
            found = explore(mechanism.make_model(twin_config, variant), stop_on_violation=True, check_liveness=False)
            hit = [f for f in found.findings if f.name == invariant]
            key = time_to_bug_key(invariant, variant, "explorer", config_name)
            out[key] = round(time.perf_counter() - started, 2) if hit else "not found"
        for config_name, config in mechanism.hypothesis_configs.items():
            run, _, _, elapsed = run_stateful(mechanism, variant, config, seed, HYPOTHESIS_LIMIT_S, "ci")
            caught = run is not None and invariant in run.failures
            key = time_to_bug_key(invariant, variant, "hypothesis", config_name)
            out[key] = round(elapsed, 2) if caught else f"not found in {HYPOTHESIS_LIMIT_S:g}s"
    if mechanism.make_reference is not None:
        conformance = run_conformance(mechanism, mechanism.current, name, CONFORMANCE_BENCH_STEPS, say=progress)
        out["conformance_config"] = name
        out["conformance_steps_per_s"] = round(conformance.steps_per_second)
        out["conformance_transitions_per_s"] = round(conformance.covered / conformance.elapsed_s)
        out["conformance_covered"] = f"{conformance.covered} of {conformance.edges} transitions"
    out.update(bench_port_tour(mechanism))
    out.update(bench_mutants(mechanism))
    out.update(_own_bench(mechanism, folder))
    return out


# --- the output folder ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One heading of a bench page: a table, then its figures (PNG files, linked relative to the page)."""

    heading: str
    headers: Sequence[str]
    rows: Sequence[Sequence[object]]
    figures: Sequence[Path] = ()


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def write_markdown(folder: Path, name: str, sections: Sequence[Section], *, title: str, summary: str) -> Path:
    """Write `folder/<name>.md` (title, one-line summary, sections) and rewrite the folder's index.

    The summary is what the index shows next to the link, so it should carry the headline figures.
    """
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / f"{name}.md"
    lines = [f"# {title}", "", summary]
    for section in sections:
        lines += ["", f"## {section.heading}", "", *table(section.headers, section.rows)]
        for figure in section.figures:
            lines += ["", f"![{figure.stem}]({Path(os.path.relpath(figure, folder)).as_posix()})"]
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_index(folder)
    return page


def write_index(folder: Path) -> Path:
    """`folder/README.md`: every page in the folder (sorted by name) with its title and summary.

    Built from the pages on disk, so a bench of one mechanism keeps the others' latest pages linked.
    """
    rows = []
    for page in sorted(p for p in folder.glob("*.md") if p.name != INDEX):
        lines = page.read_text(encoding="utf-8").splitlines()
        title = lines[0].removeprefix("# ") if lines else page.stem
        summary = next((line for line in lines[1:] if line.strip()), "")
        rows.append([f"[{title}]({page.name})", summary])
    intro = (f"Written by `brokerspec bench`: one page per mechanism (and per pipeline bench), each from its "
             f"latest run, with its plots beside it. Goals: explorer {EXPLORER_GOAL:,} distinct states/s, "
             f"Hypothesis lockstep {STATEFUL_GOAL:,} steps/s.")
    index = folder / INDEX
    index.write_text("\n".join(["# brokerspec bench", "", intro, "", *table(["page", "summary"], rows)]) + "\n",
                     encoding="utf-8")
    return index


def _plot_goals(path: Path, name: str, rows: Sequence[tuple[str, float, str]]) -> Path:
    """Horizontal bars of measured/goal per engine, with the goal at 1."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 1.2 + 0.6 * len(rows)), dpi=100)
    axes = figure.add_subplot()
    ratios = [ratio for _, ratio, _ in rows]
    axes.barh([label for label, _, _ in rows], ratios, color=["tab:green" if r >= 1 else "tab:red" for r in ratios])
    for i, (_, ratio, text) in enumerate(rows):
        axes.text(ratio, i, f" {ratio:g}× ({text})", va="center", fontsize="small")
    axes.axvline(1.0, color="black", linestyle="--")
    axes.set_xlim(0, max([1.0, *ratios]) * 1.6)
    axes.invert_yaxis()
    axes.set_xlabel("measured / goal (dashed: the goal)")
    axes.set_title(f"{name}: speed against the goals")
    figure.tight_layout()
    figure.savefig(path)
    return path


def _plot_time_to_bug(path: Path, name: str, rows: Sequence[tuple[str, str, object]]) -> Path:
    """Seconds to each known bug per engine run (log scale); a run that missed it is labelled, not drawn."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 1.2 + 0.45 * len(rows)), dpi=100)
    axes = figure.add_subplot()
    floor = 0.01  # the figures are rounded to 10 ms; a 0 s bar needs a height on a log axis
    seconds = [max(float(v), floor) if isinstance(v, int | float) else math.nan for _, _, v in rows]
    colours = ["tab:blue" if engine.startswith("explorer") else "tab:orange" for _, engine, _ in rows]
    labels = [f"{twin}\n{engine}" for twin, engine, _ in rows]
    axes.barh(labels, seconds, color=colours)
    for i, (_, _, value) in enumerate(rows):
        found = isinstance(value, int | float)
        axes.text(seconds[i] if found else floor, i, f" {value}{' s' if found else ''}", va="center",
                  fontsize="small", color="black" if found else "tab:red")
    axes.axvline(HYPOTHESIS_LIMIT_S, color="grey", linestyle=":")
    axes.set_xscale("log")
    axes.set_xlim(floor / 2, max([HYPOTHESIS_LIMIT_S, *(s for s in seconds if not math.isnan(s))]) * 10)
    axes.invert_yaxis()
    axes.set_xlabel(f"seconds to find the bug (log scale; dotted: Hypothesis gives up at {HYPOTHESIS_LIMIT_S:g} s)")
    axes.set_title(f"{name}: time to find each known bug")
    figure.tight_layout()
    figure.savefig(path)
    return path


def write_report(folder: Path, mechanism: Mechanism, result: Mapping[str, object]) -> Path:
    """`folder/<mechanism>.md` from one `bench` result: speed against the goals, time to each known bug, the rest.

    Draws `<mechanism>-goals.png` and `<mechanism>-time-to-bug.png` beside it; a measure whose value
    is a PNG path (a figure the mechanism's own bench drew) is shown on the page too.
    """
    name = mechanism.name
    folder.mkdir(parents=True, exist_ok=True)
    used = {"mechanism"}
    goal_rows: list[list[object]] = []
    plotted: list[tuple[str, float, str]] = []
    for label, key, ratio_key, goal, unit in GOALS:
        value, ratio = cast(int, result[key]), float(cast(float, result[ratio_key]))
        used |= {key, ratio_key}
        goal_rows.append([label, f"{value:,} {unit}", f"{goal:,} {unit}", f"{ratio:g}×",
                          "meets the goal" if ratio >= 1 else "below the goal"])
        plotted.append((label, ratio, f"{value:,} {unit}"))
    bug_rows: list[list[object]] = []
    bugs: list[tuple[str, str, object]] = []
    for variant, invariant in mechanism.twins.items():
        runs = [("explorer", c) for c in mechanism.explore_configs] + [("hypothesis", c)
                                                                       for c in mechanism.hypothesis_configs]
        for engine, config in runs:
            key = time_to_bug_key(invariant, variant, engine, config)
            used.add(key)
            found = isinstance(result[key], int | float)
            bug_rows.append([variant, invariant, f"{engine}[{config}]", f"{result[key]} s" if found else result[key]])
            bugs.append((f"{variant} ({invariant})", f"{engine}[{config}]", result[key]))
    kill_rows: list[list[object]] = []
    for key, seconds in result.items():
        if key.startswith("mutant_") and key.endswith("_kill_s"):
            planted = key.removeprefix("mutant_").removesuffix("_kill_s")
            found_key = f"mutant_{planted}_found"
            used |= {key, found_key}
            kill_rows.append([planted, result.get(found_key, ""),
                              f"{seconds} s" if isinstance(seconds, int | float) else seconds])
    own_figures = [Path(str(v)) for k, v in result.items() if k not in used and str(v).endswith(".png")]
    sections = [
        Section("Speed against the goals", ["engine", "measured", "goal", "ratio", "verdict"], goal_rows,
                [_plot_goals(folder / f"{name}-goals.png", name, plotted)]),
    ]
    if bugs:
        sections.append(Section("Time to find the known bugs", ["twin", "invariant", "engine[config]", "time"],
                                bug_rows, [_plot_time_to_bug(folder / f"{name}-time-to-bug.png", name, bugs)]))
    if kill_rows:
        sections.append(Section("Time to kill the planted bugs (tests/mutants, default check)",
                                ["mutant", "found", "time to kill"], kill_rows))
    sections.append(Section("All measurements", ["measure", "value"],
                            [[f"`{k}`", v] for k, v in result.items() if k not in used], own_figures))
    caught = sum(isinstance(v, int | float) for _, _, v in bugs)
    killed = sum(isinstance(row[2], str) and row[2].endswith(" s") for row in kill_rows)
    summary = "; ".join(
        [*(f"{label} {text} ({ratio:g}× the goal)" for label, ratio, text in plotted),
         f"known bugs found by {caught} of {len(bugs)} engine runs"]
        + ([f"{killed} of {len(kill_rows)} planted bugs killed by name"] if kill_rows else [])
    )
    return write_markdown(folder, name, sections, title=f"bench: {name}", summary=f"{summary}.")
