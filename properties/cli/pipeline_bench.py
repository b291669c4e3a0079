"""Pipeline throughput: events/s of the SQL checks and the model replay on Spark vs one Python process.

For `brokerspec bench --pipeline [EVENTS]`. JVM start is excluded (each master's session is started
before its clock runs); ingest (read, quarantine, partition by key, sort, cache) is timed separately
from the checks, so the SQL and replay figures are the checks themselves, each forced to completion
with Spark's `noop` sink. The plain-Python baseline runs the same checks over the same file in this
process: for Key_Shared, the SQL rules rewritten as one sweep per subscription and the very replay
function the Spark tasks run; for the other logs, the sequence and early-offer checks and the
lockstep replay. Key_Shared's replay is the client-record fast path (KS-I1, KS-I4, record validity)
with the full model only for failing subscriptions, so the full model's own speed is measured too,
on a sample of the subscriptions.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from properties import registry
from properties.cli.bench import Section, write_markdown
from properties.pipeline import keyshared_check, replay
from properties.pipeline.check import replay_all, session, sql_checks
from properties.pipeline.ingest import checkable, prepare, read_log
from properties.pipeline.keyshared_log import Record, full_verdict, partition
from properties.pipeline.schema import columns, spec
from properties.pipeline.simulate import simulate

SQL_GOAL = 500_000  # events/s on local[2]
REPLAY_GOAL = 100_000  # events/s on local[2]
MASTERS = ("local[1]", "local[2]")
FULL_MODEL_SAMPLE = 50  # Key_Shared subscriptions replayed through the full model for its figure
PHASES = (("ingest", "ingest: read, quarantine, partition, sort, cache", None),
          ("sql", "SQL window checks", SQL_GOAL),
          ("replay", "model replay", REPLAY_GOAL))
RUNS = {
    "ingest": "Spark: read (JSON lines parsed and type-checked per column), quarantine reasons, repartition by key, "
              "mark duplicates, sort by seq, cache; "
              "Python: read the whole file into Arrow",
    "sql": "LOG-SEQ and the mechanism's window checks (keyshared: KS-I1 holds, KS-I4 first-delivery order, "
           "LOG-ID); Python: the same rules, one sweep per partition",
    "replay": "keyshared: the client-record fast path (KS-I1, KS-I4, record validity), the full model only for "
              "failing subscriptions, in mapInArrow tasks or in this process; others: lockstep through the model",
}


def _keyshared_python(path: Path) -> tuple[set[int], dict[str, float]]:
    started = time.perf_counter()
    table = keyshared_check.read_table(path)
    ingest = time.perf_counter()
    bad = {k for k, _, _ in keyshared_check.python_sql_checks(table)}
    sql = time.perf_counter()
    bad |= set(keyshared_check.python_replay(table))
    return bad, {"ingest": ingest - started, "sql": sql - ingest, "replay": time.perf_counter() - sql}


def _python_sql(mechanism: str, table: pa.Table) -> set[int]:
    """LOG-SEQ and (delayed) DD-I1 in this process, one sweep per partition: the violating keys."""
    key = spec(mechanism).key
    ordered = table.sort_by([(key, "ascending"), ("seq", "ascending")])
    keys = np.asarray(ordered.column(key))
    seq, action, params, observation, vars_ = (ordered.column(c).to_pylist()
                                               for c in ("seq", "action", "params", "observation", "vars"))
    tick = int(cast(int, registry.get("delayed").hypothesis_configs[spec("delayed").config_name]["tick"]))
    bad: set[int] = set()
    for lo, hi in replay.runs(keys):
        k = int(keys[lo])
        if seq[lo:hi] != list(range(hi - lo)):
            bad.add(k)
        if mechanism != "delayed":
            continue
        due: dict[tuple[int, int], int] = {}
        for i in range(lo, hi):
            if action[i] == "add":
                p = json.loads(params[i])
                due[int(p["ledger"]), int(p["entry"])] = int(p["deliver_at"])
            seen = observation[i]
            if seen is not None and '"offered"' in seen:
                now = int(json.loads(vars_[i])["now"])
                for ledger, entry in json.loads(seen)["offered"]:
                    if now < due.get((ledger, entry), now) - tick:
                        bad.add(k)
    return bad


def python_checks(mechanism: str, path: Path) -> tuple[set[int], dict[str, float]]:
    """The pipeline's checks in one plain Python process: violating keys and seconds per phase."""
    if mechanism == "keyshared":
        return _keyshared_python(path)
    started = time.perf_counter()
    table = replay.read_log_table(mechanism, path)
    ingest = time.perf_counter()
    bad = _python_sql(mechanism, table)
    sql = time.perf_counter()
    bad |= set(replay.python_replay(mechanism, table))
    return bad, {"ingest": ingest - started, "sql": sql - ingest, "replay": time.perf_counter() - sql}


def _full_model_rate(path: Path, sample: int) -> tuple[float, int]:
    """Key_Shared events/s of the full model (pip379, every delivery compared with the log's) over the
    first `sample` subscriptions (the first row group holds whole subscriptions, as `simulate` writes
    it), and how many subscriptions that was."""
    table = pq.ParquetFile(path).read_row_group(0).select(list(columns("keyshared")))
    by_key: dict[int, list[Record]] = defaultdict(list)
    for row in table.to_pylist():
        by_key[int(row["subscription"])].append(cast(Record, tuple(row.values())))
    chosen = sorted(by_key)[:sample]
    started = time.perf_counter()
    for k in chosen:
        if full_verdict(partition(by_key[k]), "pip379").step is not None:
            raise ValueError(f"{path}: subscription {k} does not follow pip379; bench a clean log")
    return sum(len(by_key[k]) for k in chosen) / (time.perf_counter() - started), len(chosen)


def _run(frame: DataFrame) -> None:
    """Compute every row of `frame` and throw them away (Spark's `noop` sink): what a check costs."""
    frame.write.format("noop").mode("overwrite").save()


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
        per = 1000 if mechanism == "keyshared" else 100
        simulate(mechanism, events, log, partitions=partitions or max(1, events // per), seed=seed, progress=progress)
    out: dict[str, object] = {"mechanism": mechanism, "events": events, "log": str(log)}
    for master in masters:
        running = SparkSession.getActiveSession()
        if running is not None and running.sparkContext.master != master:
            raise ValueError(f"a Spark session on {running.sparkContext.master} is running; cannot measure {master}")
        spark = running or session(master)
        say(f"bench pipeline {mechanism}: {master}")
        started = time.perf_counter()
        prepared = prepare(mechanism, read_log(spark, mechanism, log)).cache()
        valid = checkable(mechanism, prepared)
        n = valid.count()
        ingested = time.perf_counter()
        _run(sql_checks(mechanism, valid))
        checked = time.perf_counter()
        _run(replay_all(mechanism, valid))
        replayed = time.perf_counter()
        prepared.unpersist()
        if running is None:
            spark.stop()  # one SparkContext per process: the next master needs a fresh one
        for phase, spent in (("ingest", ingested - started), ("sql", checked - ingested),
                             ("replay", replayed - checked)):
            out[f"{master}_{phase}_events_per_s"] = round(n / spent)
    say(f"bench pipeline {mechanism}: one Python process")
    _, seconds = python_checks(mechanism, log)
    for phase, elapsed in seconds.items():
        out[f"python_{phase}_events_per_s"] = round(events / elapsed) if elapsed else 0
    if mechanism == "keyshared":
        say(f"bench pipeline {mechanism}: full model on {FULL_MODEL_SAMPLE} subscriptions")
        rate, out["python_full_model_subscriptions"] = _full_model_rate(log, FULL_MODEL_SAMPLE)
        out["python_full_model_events_per_s"] = round(rate)
    last = masters[-1]
    for phase, _, goal in PHASES:
        spark_rate = cast(int, out[f"{last}_{phase}_events_per_s"])
        if goal is not None:
            out[f"{last}_{phase}_vs_goal"] = round(spark_rate / goal, 2)
        baseline = cast(int, out[f"python_{phase}_events_per_s"])
        out[f"{last}_{phase}_vs_python"] = round(spark_rate / baseline, 2) if baseline else 0
    return out


def _rows(result: dict[str, object], masters: Sequence[str]) -> list[list[object]]:
    """The table: one row per phase, events/s per engine, and the last master against the goal and Python."""
    last = masters[-1]
    rows: list[list[object]] = []
    for phase, label, goal in PHASES:
        if phase == "replay" and result["mechanism"] == "keyshared":
            label = f"{label} (client-record fast path)"
        rates = [f"{cast(int, result[f'{m}_{phase}_events_per_s']):,}" for m in (*masters, "python")]
        versus_goal = f"{result[f'{last}_{phase}_vs_goal']}× of {goal:,}" if goal is not None else "-"
        rows.append([label, *rates, versus_goal, f"{result[f'{last}_{phase}_vs_python']}×"])
    if "python_full_model_events_per_s" in result:
        rows.append([f"full model lockstep ({result['python_full_model_subscriptions']} subscriptions)",
                     *["-"] * len(masters),
                     f"{cast(int, result['python_full_model_events_per_s']):,}", "-", "-"])
    return rows


def pipeline_bench(mechanisms: Sequence[str], events: int, folder: Path, *, seed: int = 0, as_json: bool = False,
                   masters: Sequence[str] = MASTERS, progress: Callable[[str], None] | None = None) -> str:
    """`brokerspec bench --pipeline`: measure each mechanism's pipeline on an `events`-event log (made once
    under `folder/logs/` and reused), write `folder/pipeline-<mechanism>.md`, and return the report text."""
    results: list[dict[str, object]] = []
    text: list[str] = []
    for mechanism in mechanisms:
        spec(mechanism)
        suffix = ".parquet" if mechanism == "keyshared" else ".jsonl"
        log = folder / "logs" / f"{mechanism}-{events}-seed{seed}{suffix}"
        result = bench_pipeline(mechanism, events, log=log, masters=masters, seed=seed, progress=progress)
        results.append(result)
        last = masters[-1]
        headers = ["phase", *(f"{m} events/s" for m in masters), "python events/s", f"{last} vs goal",
                   f"{last} vs python"]
        rows = _rows(result, masters)
        summary = (f"{events:,} events: {last} SQL {result[f'{last}_sql_vs_goal']}× and replay "
                   f"{result[f'{last}_replay_vs_goal']}× of the goals ({SQL_GOAL:,} and {REPLAY_GOAL:,} events/s).")
        page = write_markdown(folder, f"pipeline-{mechanism}",
                              [Section("Throughput (one run, JVM start excluded)", headers, rows),
                               Section("What each phase runs", ["phase", "runs"],
                                       [[label, RUNS[phase]] for phase, label, _ in PHASES]),
                               Section("All measurements", ["measure", "value"],
                                       [[f"`{k}`", v] for k, v in result.items()])],
                              title=f"bench: pipeline {mechanism}", summary=summary)
        if progress is not None:
            progress(f"wrote {page}")
        table: list[Sequence[object]] = [headers, *rows]
        widths = [max(len(str(r[i])) for r in table) for i in range(len(headers))]
        text.append(f"pipeline {mechanism}: {events:,} events ({log})")
        text += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in table]
    return json.dumps(results, indent=1) if as_json else "\n".join(text)
