"""Pipeline throughput: events/s of each phase on Spark local[1], local[2] and one plain Python process.

For `brokerspec bench --pipeline [EVENTS]`. JVM start is excluded (each master's session is started
before its clock runs), and so is the Python workers' (a job of one task per core starts them and
builds their replays before the checks are timed); ingest (read, quarantine, partition by key, sort,
cache: what `pipeline check` does before any check) is timed on its own, so the SQL and replay
figures are the checks themselves, each forced to completion with Spark's `noop` sink, over the
whole log. The plain-Python baseline runs the same checks over the same file in this process: the
SQL rules as one sweep per partition, and the very replay function the Spark tasks run. Every
mechanism has a conformance phase: each step of the log is the one the current model would make
(through each model's compiled transition, the full model only for a failing partition; a broker log's is
`pipeline check --conformance`, e.g. Key_Shared's client record, then its compiled dispatcher); a broker log's
default replay, its fast path, is its own phase.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from properties.cli.bench import Section, write_markdown
from properties.engines.records import runs
from properties.pipeline import replay
from properties.pipeline.check import replay_all, session, spark_partitions, sql_checks
from properties.pipeline.ingest import checkable, prepare, read_log, tally
from properties.pipeline.schema import event_log, spec
from properties.pipeline.simulate import simulate

SQL_GOAL = 500_000  # events/s on local[2]
REPLAY_GOAL = 100_000  # events/s on local[2]
MASTERS = ("local[1]", "local[2]")
Phase = tuple[str, str, int | None]
INGEST: Phase = ("ingest", "ingest: read, quarantine, partition, sort, cache", None)
SQL: Phase = ("sql", "SQL window checks", SQL_GOAL)
CLIENT: Phase = ("replay", "client-record replay (default check)", REPLAY_GOAL)
CONFORMANCE: Phase = ("conformance", "full-model conformance replay", REPLAY_GOAL)
RUNS = {
    "ingest": "Spark: read (JSON text parsed and type-checked per column, the SQL checks' values extracted), "
              "quarantine reasons, repartition by key, mark duplicates, sort by seq, cache; Python: read the whole "
              "file into Arrow",
    "sql": "LOG-SEQ and the mechanism's window checks (e.g. DD-I1; KS-I1 holds, KS-I4 first-delivery order, "
           "LOG-ID); Python: the same rules, one sweep per partition",
    "replay": "a broker log's fast path (e.g. Key_Shared's client record: KS-I1, KS-I4, record validity), the full "
              "model only for failing partitions, in mapInArrow tasks or in this process",
    "conformance": "every step the one the current model makes, on the whole log, through the model's compiled "
                   "transition (the full model only for a failing partition; a broker log: its fast path, then "
                   "the compiled current model, as `pipeline check --conformance`)",
}


def phases(mechanism: str) -> tuple[Phase, ...]:
    """What the bench measures for `mechanism`, in order."""
    broker = event_log(mechanism).broker is not None
    return (INGEST, SQL, CLIENT, CONFORMANCE) if broker else (INGEST, SQL, CONFORMANCE)


def _python_sql(mechanism: str, table: pa.Table) -> set[int]:
    """LOG-SEQ and the mechanism's window checks in this process, one sweep per partition: the violating keys."""
    key = spec(mechanism).key
    ordered = replay.in_order(table, key)
    keys = np.asarray(ordered.column(key))
    seq = ordered.column("seq").to_pylist()
    bad = {int(keys[lo]) for lo, hi in runs(keys) if seq[lo:hi] != list(range(hi - lo))}
    own = event_log(mechanism).python_window_checks
    return bad if own is None else bad | own(ordered)


def python_checks(mechanism: str, path: Path) -> tuple[set[int], dict[str, float]]:
    """The pipeline's checks in one plain Python process: violating keys and seconds per phase."""
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    broker = event_log(mechanism).broker
    if broker is not None:
        table = broker.read_table(path)
        seconds["ingest"] = time.perf_counter() - started
        checks: list[tuple[str, Callable[[], set[int]]]] = [
            ("sql", lambda: broker.python_sql(table)),
            ("replay", lambda: broker.python_replay(table, False)),
            ("conformance", lambda: broker.python_replay(table, True)),
        ]
    else:
        table = replay.read_log_table(mechanism, path)
        seconds["ingest"] = time.perf_counter() - started
        checks = [("sql", lambda: _python_sql(mechanism, table)),
                  ("conformance", lambda: set(replay.python_replay(mechanism, table)))]
    bad: set[int] = set()
    for phase, run in checks:
        started = time.perf_counter()
        bad |= run()
        seconds[phase] = time.perf_counter() - started
    return bad, seconds


def _run(frame: DataFrame) -> None:
    """Compute every row of `frame` and throw them away (Spark's `noop` sink): what a check costs."""
    frame.write.format("noop").mode("overwrite").save()


def _spark_seconds(spark: SparkSession, mechanism: str, log: Path) -> tuple[int, dict[str, float]]:
    """Valid records and seconds per phase on `spark`, ingest as `pipeline check` does it."""
    started = time.perf_counter()
    raw = read_log(spark, mechanism, log).cache()
    counts, _ = tally(spark, raw)
    prepared = prepare(mechanism, raw, spark_partitions(spark, counts.get(None, 0))).cache()
    valid = checkable(mechanism, prepared)
    n = valid.count()
    raw.unpersist()
    seconds = {"ingest": time.perf_counter() - started}
    replay.start_workers(spark, mechanism)
    checks = {"sql": sql_checks(mechanism, valid), "conformance": replay_all(mechanism, valid, conformance=True)}
    if event_log(mechanism).broker is not None:
        checks["replay"] = replay_all(mechanism, valid)
    for phase, _, _ in phases(mechanism)[1:]:
        started = time.perf_counter()
        _run(checks[phase])
        seconds[phase] = time.perf_counter() - started
    prepared.unpersist()
    return n, seconds


def bench_pipeline(
    mechanism: str, events: int, *, log: Path, masters: Sequence[str] = MASTERS, partitions: int | None = None,
    seed: int = 0, progress: Callable[[str], None] | None = None,
) -> dict[str, object]:
    """Simulate `events` events into `log` (if absent) and measure every master and the Python baseline.

    A session already running on a master is used (and left running) instead of a fresh one.
    """
    say = progress or (lambda _: None)
    if not log.exists():
        say(f"bench pipeline {mechanism}: simulating {events:,} events into {log}")
        per = spec(mechanism).events_per_partition
        simulate(mechanism, events, log, partitions=partitions or max(1, events // per), seed=seed, progress=progress)
    out: dict[str, object] = {"mechanism": mechanism, "events": events, "log": str(log)}
    for master in masters:
        running = SparkSession.getActiveSession()
        if running is not None and running.sparkContext.master != master:
            raise ValueError(f"a Spark session on {running.sparkContext.master} is running; cannot measure {master}")
        spark = running or session(master)
        say(f"bench pipeline {mechanism}: {master}")
        n, seconds = _spark_seconds(spark, mechanism, log)
        if running is None:
            spark.stop()  # one SparkContext per process: the next master needs a fresh one
        for phase, spent in seconds.items():
            out[f"{master}_{phase}_events_per_s"] = round(n / spent)
    say(f"bench pipeline {mechanism}: one Python process")
    _, seconds = python_checks(mechanism, log)
    for phase, elapsed in seconds.items():
        out[f"python_{phase}_events_per_s"] = round(events / elapsed) if elapsed else 0
    first, last = masters[0], masters[-1]
    for phase, _, goal in phases(mechanism):
        rate = cast(int, out[f"{last}_{phase}_events_per_s"])
        if goal is not None:
            out[f"{last}_{phase}_vs_goal"] = round(rate / goal, 2)
        baseline = cast(int, out[f"python_{phase}_events_per_s"])
        out[f"{last}_{phase}_vs_python"] = round(rate / baseline, 2) if baseline else 0
        if last != first:
            alone = cast(int, out[f"{first}_{phase}_events_per_s"])
            out[f"{last}_{phase}_vs_{first}"] = round(rate / alone, 2) if alone else 0
    return out


def _rows(result: dict[str, object], masters: Sequence[str]) -> list[list[object]]:
    """The table: one row per phase, events/s per engine, and the last master against the first, Python and
    the goal, saying whether the goal is met."""
    first, last = masters[0], masters[-1]
    rows: list[list[object]] = []
    for phase, label, goal in phases(str(result["mechanism"])):
        rates = [f"{cast(int, result[f'{m}_{phase}_events_per_s']):,}" for m in (*masters, "python")]
        scaling = [f"{result[f'{last}_{phase}_vs_{first}']}×"] if last != first else []
        if goal is None:
            versus_goal, verdict = "-", "-"
        else:
            ratio = cast(float, result[f"{last}_{phase}_vs_goal"])
            versus_goal, verdict = f"{ratio}× of {goal:,}", "met" if ratio >= 1 else "NOT MET"
        rows.append([label, *rates, *scaling, f"{result[f'{last}_{phase}_vs_python']}×", versus_goal, verdict])
    return rows


def _headers(masters: Sequence[str]) -> list[str]:
    first, last = masters[0], masters[-1]
    scaling = [f"{last} / {first}"] if last != first else []
    return ["phase", *(f"{m} events/s" for m in masters), "python events/s", *scaling, f"{last} / python",
            f"{last} / goal", "goal"]


def _plot(path: Path, result: dict[str, object], masters: Sequence[str]) -> Path:
    """Events/s per phase (log scale), one bar per engine, the goal as a black tick on its phase."""
    from matplotlib.figure import Figure

    shown = phases(str(result["mechanism"]))
    engines = [*masters, "python"]
    figure = Figure(figsize=(9, 1.5 + 0.9 * len(shown)), dpi=100)
    axes = figure.add_subplot()
    height = 0.8 / len(engines)
    highest = 1
    for e, engine in enumerate(engines):
        rates = [max(1, cast(int, result[f"{engine}_{phase}_events_per_s"])) for phase, _, _ in shown]
        positions = [i + (e - (len(engines) - 1) / 2) * height for i in range(len(shown))]
        axes.barh(positions, rates, height=height, label=engine)
        highest = max(highest, *rates)
        for y, rate in zip(positions, rates, strict=True):
            axes.text(rate, y, f" {rate:,}", va="center", fontsize="x-small")
    for i, (_, _, goal) in enumerate(shown):
        if goal is not None:
            axes.plot([goal, goal], [i - 0.45, i + 0.45], color="black", linewidth=2)
    axes.set_yticks(range(len(shown)), [label for _, label, _ in shown], fontsize="small")
    axes.set_xscale("log")
    axes.set_xlim(right=max(highest, SQL_GOAL) * 6)
    axes.invert_yaxis()
    axes.set_xlabel("events/s (log scale; black tick: the goal on local[2])")
    axes.set_title(f"pipeline {result['mechanism']}: {cast(int, result['events']):,} events")
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path)
    return path


def pipeline_bench(mechanisms: Sequence[str], events: int, folder: Path, *, seed: int = 0, as_json: bool = False,
                   masters: Sequence[str] = MASTERS, progress: Callable[[str], None] | None = None) -> str:
    """`brokerspec bench --pipeline`: measure each mechanism's pipeline on an `events`-event Parquet log (made
    once under `folder/logs/` and reused), write `folder/pipeline-<mechanism>.md` and its plot, and return
    the report text."""
    results: list[dict[str, object]] = []
    text: list[str] = []
    for mechanism in mechanisms:
        spec(mechanism)
        log = folder / "logs" / f"{mechanism}-{events}-seed{seed}.parquet"
        result = bench_pipeline(mechanism, events, log=log, masters=masters, seed=seed, progress=progress)
        results.append(result)
        headers, rows = _headers(masters), _rows(result, masters)
        last = masters[-1]
        goals = [(label, result[f"{last}_{phase}_vs_goal"]) for phase, label, goal in phases(mechanism) if goal]
        summary = (f"{events:,} events on {last}: " + ", ".join(f"{label} {ratio}×" for label, ratio in goals)
                   + f" of the goals ({SQL_GOAL:,} SQL, {REPLAY_GOAL:,} replay events/s); "
                   + ("every goal met." if all(cast(float, r) >= 1 for _, r in goals) else "NOT every goal met."))
        folder.mkdir(parents=True, exist_ok=True)
        plot = _plot(folder / f"pipeline-{mechanism}.png", result, masters)
        page = write_markdown(folder, f"pipeline-{mechanism}",
                              [Section("Throughput (one run, JVM start excluded)", headers, rows, [plot]),
                               Section("What each phase runs", ["phase", "runs"],
                                       [[label, RUNS[phase]] for phase, label, _ in phases(mechanism)]),
                               Section("All measurements", ["measure", "value"],
                                       [[f"`{k}`", v] for k, v in result.items()])],
                              title=f"bench: pipeline {mechanism}", summary=summary)
        if progress is not None:
            progress(f"wrote {page}")
        table: list[Sequence[object]] = [headers, *rows]
        widths = [max(len(str(r[i])) for r in table) for i in range(len(headers))]
        text.append(f"pipeline {mechanism}: {events:,} events ({log})")
        text += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return json.dumps(results, indent=1) if as_json else "\n".join(text)
