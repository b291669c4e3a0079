"""`brokerspec bench --gate`: what the default check costs, and which engine kills each planted bug first.

A gate is kept only while it is fast, and it is worth its time only where it finds bugs. So this measures the
default `brokerspec check` as a user runs it (a fresh interpreter, its default workers), once with an empty
graph cache and once again with the cache that run left, and reports wall and CPU seconds per mechanism and
engine from the rows' own figures; then it runs every planted bug (`tests/mutants/`) with `check --fail-fast`
and reports the engine that named it, in how many steps, and after how many seconds. The Markdown table it
prints is the one the README keeps.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from properties.cli import mutants
from properties.engines import cache
from properties.engines.mechanism import Mechanism


@dataclass(frozen=True)
class CheckRun:
    """One default check in a fresh interpreter: its totals and its rows (`check --json`)."""

    label: str
    wall_s: float
    cpu_s: float
    code: int
    rows: list[dict[str, object]]

    def by_engine(self) -> dict[tuple[str, str], tuple[int, float, float]]:
        """(mechanism, engine) -> (rows, wall seconds, CPU seconds), summed over the rows."""
        out: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        for row in self.rows:
            engine = str(row["engine"]).split("[")[0]
            cell = out[(str(row["mechanism"]), engine)]
            cell[0] += 1
            cell[1] += float(str(row["time"]).removesuffix("s") or 0)
            cell[2] += float(str(row.get("cpu_s", 0)))
        return {k: (int(v[0]), v[1], v[2]) for k, v in out.items()}


def run_check(label: str, folder: Path, extra: Sequence[str] = ()) -> CheckRun:
    """`brokerspec check --json` in a fresh interpreter with its graph cache in `folder`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "properties.cli", "check", "--json", "--out", str(folder / "out"),
                           *extra], env={**os.environ, cache.ENV: str(folder / "cache")}, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"check ({label}) printed no JSON: {last}") from None
    return CheckRun(label, wall, cpu, int(report["code"]), list(report["rows"]))


def gate_bench(
    mechanisms: Sequence[Mechanism], *, with_mutants: bool = True, progress: Callable[[str], None] = print
) -> tuple[list[CheckRun], list[mutants.Kill]]:
    """The default check cold and warm, then every planted bug of `mechanisms` (in one scratch folder)."""
    names = [m.name for m in mechanisms]
    extra = [arg for name in names for arg in ("--mechanism", name)]
    with tempfile.TemporaryDirectory(prefix="brokerspec-gate-") as scratch:
        folder = Path(scratch)
        progress("  gate: the default check with an empty graph cache")
        cold = run_check("cold", folder, extra)
        progress(f"  gate: cold {cold.wall_s:.1f}s wall; again with the cache it left")
        warm = run_check("warm", folder, extra)
        progress(f"  gate: warm {warm.wall_s:.1f}s wall")
        kills: list[mutants.Kill] = []
        if with_mutants:
            current = {m.name: m.current for m in mechanisms}
            for mutant in mutants.discover(mechanisms=names):
                progress(f"  gate: mutant {mutant.name}")
                kills.append(mutants.run(mutant, current=current[mutant.mechanism],
                                         env={cache.ENV: str(folder / "cache")}))
    return [cold, warm], kills


def markdown(runs: Sequence[CheckRun], kills: Sequence[mutants.Kill]) -> str:
    """The two tables: the check's cost per mechanism and engine, and the planted bugs' kills."""
    cold, warm = runs
    lines = [f"Default `brokerspec check`: {cold.wall_s:.0f} s wall, {cold.cpu_s:.0f} s CPU with an empty graph "
             f"cache; {warm.wall_s:.0f} s wall, {warm.cpu_s:.0f} s CPU with a warm one ({os.cpu_count()} cores).",
             "", "| mechanism | engine | rows | cold wall s | cold CPU s | warm wall s | warm CPU s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    warm_cells = warm.by_engine()
    for (mechanism, engine), (rows, wall, cpu) in cold.by_engine().items():
        _, warm_wall, warm_cpu = warm_cells.get((mechanism, engine), (0, 0.0, 0.0))
        lines.append(f"| {mechanism} | {engine} | {rows} | {wall:.1f} | {cpu:.1f} | {warm_wall:.1f} | {warm_cpu:.1f} |")
    if kills:
        lines += ["", "| planted bug | must break | killed | by | steps | after s |", "|---|---|---|---|---:|---:|"]
        for kill in kills:
            verdict = "yes" if kill.killed else f"no ({kill.target})"
            lines.append(f"| {kill.mutant.name} | {kill.mutant.kills} | {verdict} | {kill.engine} | {kill.steps} | "
                         f"{kill.after_s:.1f} |")
        slowest = max(kills, key=lambda k: k.after_s)
        lines += ["", f"{sum(k.killed for k in kills)} of {len(kills)} killed by name; the slowest named after "
                      f"{slowest.after_s:.1f} s ({slowest.mutant.name})."]
    return "\n".join(lines)


def as_json(runs: Sequence[CheckRun], kills: Sequence[mutants.Kill]) -> dict[str, object]:
    """The same figures for `--json`."""
    return {
        "runs": {run.label: {"wall_s": round(run.wall_s, 2), "cpu_s": round(run.cpu_s, 2), "code": run.code,
                             "by_engine": [{"mechanism": m, "engine": e, "rows": n, "wall_s": round(w, 2),
                                            "cpu_s": round(c, 2)} for (m, e), (n, w, c) in run.by_engine().items()]}
                 for run in runs},
        "mutants": [{"name": k.mutant.name, "kills": k.mutant.kills, "killed": k.killed, "engine": k.engine,
                     "target": k.target, "steps": k.steps, "after_s": round(k.after_s, 2)} for k in kills],
    }
