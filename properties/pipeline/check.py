"""Check an event log with Spark: quarantine, SQL window checks, and an Arrow-batched model replay.

Every record either reaches the checks or lands in the quarantine with a reason (nothing is dropped
silently). Checks that relate a record to its neighbours in the same partition are SQL window
queries; the rest replay each partition through the current model in lockstep with the logged
observations and states (`replay`: `mapInArrow` over Arrow batches of whole partitions, through the
model's compiled transition, the full model for a partition that fails). A partition that diverges
is replayed on each known-bad variant: the one that reproduces the log names the bug, and its run
is saved as a trace `brokerspec replay` reproduces. A mechanism adds its own window checks
(`EventLog.window_checks`), and a broker event log its own quarantine rule, `mapInArrow` replay and traces
(`BrokerLog`); the flow around them is this module's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.accumulators import Accumulator
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from properties import registry
from properties.engines.records import ending_in_refusal
from properties.engines.replay import record
from properties.engines.result import CheckResult, Target
from properties.pipeline import replay
from properties.pipeline.ingest import (
    UnusableInput,
    checkable,
    duplicate_reason,
    prepare,
    quarantine,
    read_log,
    tally,
)
from properties.pipeline.schema import event_log, spec
from traces.format import Trace, load, save

Progress = Callable[[str], None]


DRIVER_MEMORY = "3g"
"""The driver's heap (in local mode, the executors' too): Spark's default 1 GB runs out with two tasks
caching topic-list records (3 KB of JSON text each) side by side."""


class SparkUnavailable(Exception):
    """Spark (the JVM) could not start: an infrastructure failure, not a verdict on the log."""


def session(master: str = "local[*]", shuffle_partitions: int = 8) -> SparkSession:
    """A quiet local (or `master`) session whose Python workers import this project."""
    root = str(Path(__file__).resolve().parents[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = Path(__file__).with_name("log4j2.properties")
    try:
        spark = (
            SparkSession.builder.master(master)
            .appName("brokerspec-pipeline")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.driver.memory", DRIVER_MEMORY)
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
            .getOrCreate()
        )
    except Exception as exc:  # the JVM gateway raises several unrelated types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SparkUnavailable(f"Spark did not start on {master}: {first}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def replay_all(mechanism: str, valid: DataFrame, conformance: bool = False,
               replayed: Accumulator[int] | None = None) -> DataFrame:
    """One verdict row per partition, from `mapInArrow` tasks over `valid` (partitioned by the key and
    sorted by seq within, as `prepare` leaves it); `conformance` is a broker log's (its default replay is a
    faster check; a model-action log always replays the whole model). `replayed` counts the records replayed,
    for the progress line."""
    broker = event_log(mechanism).broker
    if broker is not None:
        return broker.replay(valid, conformance, replayed)
    return replay.replay_all(mechanism, valid, replayed)


def sql_checks(mechanism: str, valid: DataFrame) -> DataFrame:
    """Window-query checks: (key, seq, check, detail) rows, one per violating record.

    LOG-SEQ: each partition's sequence numbers run 0, 1, 2, ... without gaps or repeats (a gap means
    lost events, which would make any replay verdict meaningless); then the mechanism's own
    (`EventLog.window_checks`).
    """
    key = spec(mechanism).key
    previous = F.col("previous")
    gaps = valid.select(key, "seq", F.lag("seq").over(Window.partitionBy(key).orderBy("seq")).alias("previous")).select(
        key, "seq",
        F.when(previous.isNull() & (F.col("seq") != 0), F.lit(NO_FIRST))
        .when(previous.isNotNull() & (F.col("seq") != previous + 1), F.format_string("seq follows %d", previous))
        .alias("detail"),
    ).where(F.col("detail").isNotNull()).withColumn("check", F.lit("LOG-SEQ"))
    own = event_log(mechanism).window_checks
    return gaps if own is None else gaps.unionByName(own(valid))


NO_FIRST = "first record is not seq 0"
"""LOG-SEQ's detail for a partition whose seq 0 is missing (any other gap says which seq the record follows)."""


def _quarantined_gaps(mechanism: str, sql_rows: list[dict[str, Any]], raw: DataFrame, prepared: DataFrame,
                      blocks: DataFrame, reasons: dict[str, int]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The SQL rows without the LOG-SEQ gaps that quarantined records fill, and per partition those gaps
    explain, a note: which seqs were quarantined, at which line and why, and that the partition was
    replayed up to the gap. A quarantined line that is not JSON still names its partition and seq where
    its text shows them; a gap not wholly filled so stays a violation (lost events)."""
    key = spec(mechanism).key
    gaps = [r for r in sql_rows if r["check"] == "LOG-SEQ"]
    kept_back = {k: n for k, n in reasons.items() if k != duplicate_reason(mechanism)}
    if not gaps or not kept_back:
        return sql_rows, {}

    def legible(name: str) -> Any:
        found = F.regexp_extract("text", f'"{name}"\\s*:\\s*(-?[0-9]{{1,18}})\\b', 1)
        return F.coalesce(F.col(name), F.when(found != "", found.cast("long"))).alias(f"_{name}")

    holes: dict[int, dict[int, str]] = {}
    rows = quarantine(mechanism, raw, prepared, blocks).where(F.col("reason") != duplicate_reason(mechanism)).select(
        "file", "line", "reason", legible(key), legible("seq"))
    for row in rows.where(F.col(f"_{key}").isin(sorted({int(g[key]) for g in gaps}))).collect():
        if row["_seq"] is not None:
            holes.setdefault(int(row[f"_{key}"]), {})[int(row["_seq"])] = (
                f"{row['file']}:{row['line']} ({row['reason']})")
    kept: list[dict[str, Any]] = []
    incomplete: dict[str, str] = {}
    for gap in sql_rows:
        if gap["check"] != "LOG-SEQ":
            kept.append(gap)
            continue
        here = holes.get(int(gap[key]), {})
        after = -1 if gap["detail"] == NO_FIRST else int(str(gap["detail"]).rsplit(" ", 1)[1])  # "seq follows N"
        missing = range(after + 1, int(gap["seq"]))
        if not missing or any(s not in here for s in missing):
            kept.append(gap)
            continue
        seqs = f"seq {missing[0]}" + (f"-{missing[-1]}" if len(missing) > 1 else "")
        where = "; ".join(here[s] for s in missing)
        replayed = f"replayed up to seq {after}" if after >= 0 else "not replayed"
        incomplete.setdefault(str(gap[key]), f"{seqs} quarantined at {where}; {replayed}")
    return kept, incomplete


def _write_json(frame: DataFrame, path: Path) -> None:
    frame.coalesce(1).write.mode("overwrite").json(str(path))


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


TASK_RECORDS = 250_000
"""Records per Spark task at most (beyond the session's shuffle partitions): a task reports its records
replayed when it ends, and short tasks also even out the load."""


def spark_partitions(spark: SparkSession, records: int) -> int:
    """Spark partitions for `records` valid records: the session's shuffle partitions, more for a large log."""
    return max(int(spark.conf.get("spark.sql.shuffle.partitions") or 8), -(-records // TASK_RECORDS))


class Heartbeat:
    """Reports, every `every` seconds while a check runs, Spark's stages done and the records replayed so far
    (of `total`, once ingest has counted them), so a long run shows it is alive and how far it got. A
    task adds its records when it ends: `TASK_RECORDS` keeps tasks short enough for the count to move."""

    def __init__(self, spark: SparkSession, say: Progress, replayed: Accumulator[int], every: float = 5.0) -> None:
        self._context = spark.sparkContext
        self._group = f"brokerspec-pipeline-check-{id(self)}"
        self._say, self._replayed, self._every = say, replayed, every
        self.total: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="pipeline-progress", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._context.setJobGroup(self._group, "brokerspec pipeline check")
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def line(self) -> str:
        """Stages finished (all tasks done) and running among this check's jobs, and records replayed."""
        tracker = self._context.statusTracker()
        jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(self._group)]
        stages = [tracker.getStageInfo(s) for job in jobs if job is not None for s in job.stageIds]
        done = sum(1 for s in stages if s is not None and 0 < s.numTasks <= s.numCompletedTasks)
        running = sum(1 for s in stages if s is not None and s.numActiveTasks > 0)
        replayed = f"{self._replayed.value:,}" + (f"/{self.total:,}" if self.total is not None else "")
        return f"progress: {done} Spark stages done, {running} running, {replayed} records replayed"

    def _beat(self) -> None:
        while not self._stop.wait(self._every):
            self._say(self.line())


def check(
    mechanism: str,
    input_path: Path,
    out: Path,
    *,
    master: str = "local[*]",
    spark: SparkSession | None = None,
    progress: Progress | None = None,
    conformance: bool = False,
    every: float = 5.0,
) -> dict[str, Any]:
    """Check the log at `input_path`, write the outputs under `out`, and return the summary.

    `conformance` (Key_Shared) also replays every subscription through the full current model, not
    only those the client record fails (the other mechanisms always replay the full model). With
    `progress`, a progress line goes to it every `every` seconds.

    `out` receives quarantine/ (Spark JSON-lines parts), first_divergence/, violations.jsonl,
    coverage.json, summary.json and traces/<mechanism>-<key>-<n>.json (one per violating partition).
    The summary's `unusable` says why nothing could be checked (no valid record, or no log at all), and
    `spark_error` why Spark did not start (`SparkUnavailable` is raised then); summary.json is written
    in both cases too. Results that are a row per finding or per failing partition are
    collected and sorted here rather than by Spark: they are few, and every Spark job costs a fixed
    second or so.
    """
    started = time.perf_counter()
    report = progress or (lambda _: None)

    def say(message: str) -> None:
        report(f"[{time.perf_counter() - started:6.1f}s] {message}")

    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "mechanism": mechanism, "input": str(input_path), "conformance": conformance, "unusable": None,
        "spark_error": None, "records": 0, "checked": 0, "quarantined": 0, "quarantine_reasons": {},
        "partitions": 0, "incomplete_partitions": {}, "violating_partitions": [], "sql_violations": 0,
        "model_violations": 0, "explained_by": {}, "coverage": {}, "traces": {}, "failures": [],
    }
    try:
        spark = spark or session(master)
    except SparkUnavailable as exc:
        summary.update(spark_error=str(exc), elapsed_s=round(time.perf_counter() - started, 3))
        (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
        raise
    replayed = spark.sparkContext.accumulator(0)
    heartbeat = Heartbeat(spark, say, replayed, every) if progress is not None else None
    with heartbeat or contextlib.nullcontext():
        try:
            _check(mechanism, input_path, out, spark, say, summary, conformance, replayed, heartbeat)
        except UnusableInput as exc:
            summary["unusable"] = str(exc)
    summary["elapsed_s"] = round(time.perf_counter() - started, 3)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    found = len(summary["violating_partitions"])
    say(f"pipeline {mechanism}: {found} violating partition(s) in {summary['elapsed_s']}s")
    return summary


def _check(mechanism: str, input_path: Path, out: Path, spark: SparkSession, say: Progress,
           summary: dict[str, Any], conformance: bool, replayed: Accumulator[int],
           heartbeat: Heartbeat | None) -> None:
    """`check`'s work, filling `summary` in as it goes (so an unusable input still leaves one)."""
    log = spec(mechanism)
    say(f"pipeline {mechanism}: reading {input_path}")
    raw = read_log(spark, mechanism, input_path).cache()
    counts, blocks = tally(spark, raw)
    prepared = prepare(mechanism, raw, spark_partitions(spark, counts.get(None, 0))).cache()
    kind = log.fields[1][0]  # the action (or event) column
    tallied = _rows(prepared.groupBy(kind, "duplicate").count())
    duplicates = sum(int(r["count"]) for r in tallied if r["duplicate"])
    if duplicates:  # checkable as far as its fields go, but quarantined
        counts[None] -= duplicates
        counts[duplicate_reason(mechanism)] = duplicates
    coverage = {str(r[kind]): int(r["count"]) for r in sorted(tallied, key=lambda r: str(r[kind]))
                if not r["duplicate"]}
    reasons = {str(reason): n for reason, n in sorted(counts.items(), key=lambda item: str(item[0]))
               if reason is not None}
    checked = counts.get(None, 0)
    if heartbeat is not None:
        heartbeat.total = checked
    summary.update(records=sum(counts.values()), checked=checked, quarantined=sum(reasons.values()),
                   quarantine_reasons=reasons, coverage=coverage)
    shutil.rmtree(out / "quarantine", ignore_errors=True)  # a rerun into the same folder leaves nothing stale
    if reasons:
        _write_json(quarantine(mechanism, raw, prepared, blocks), out / "quarantine")
    else:
        (out / "quarantine").mkdir()
    say(f"pipeline {mechanism}: {summary['records']} records, {checked} valid, {summary['quarantined']} quarantined")
    if not checked:
        raise UnusableInput(f"{input_path}: no valid {mechanism} record")
    valid = checkable(mechanism, prepared)
    (out / "coverage.json").write_text(json.dumps(coverage, indent=1, sort_keys=True))

    say(f"pipeline {mechanism}: SQL window checks")
    sql_rows = sorted(_rows(sql_checks(mechanism, valid)), key=lambda r: (r[log.key], r["seq"], r["check"]))
    sql_rows, incomplete = _quarantined_gaps(mechanism, sql_rows, raw, prepared, blocks, reasons)
    say(f"pipeline {mechanism}: model replay of every partition")
    verdicts = replay_all(mechanism, valid, conformance, replayed).cache()  # each up to its first gap in seq
    failing = sorted(_rows(verdicts.where(F.col("step").isNotNull())), key=lambda r: int(r["key"]))
    partitions = verdicts.count()

    violations = [
        {"key": r[log.key], "source": "sql", "check": r["check"], "seq": r["seq"], "detail": r["detail"]}
        for r in sql_rows
    ] + [
        {"key": r["key"], "source": "model", "check": r["failures"],
         "seq": r["seq"] if "seq" in r else int(r["step"]) - 1, "detail": r["detail"],
         "explained_by": r["explained_by"]}
        for r in failing
    ]
    (out / "violations.jsonl").write_text("".join(json.dumps(v) + "\n" for v in violations))
    shutil.rmtree(out / "first_divergence", ignore_errors=True)
    (out / "first_divergence").mkdir()
    (out / "first_divergence" / "part-00000.json").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in failing))

    broker = event_log(mechanism).broker
    if broker is not None:
        traces = broker.traces(valid, failing, out / "traces")
    else:
        traces = _save_traces(mechanism, valid, failing, out / "traces")
    summary.update(
        failures=sorted({str(v["check"]) for v in sql_rows} | {name for r in failing for name in
                                                                 str(r["failures"]).split(",") if name}),
        partitions=partitions,
        incomplete_partitions=incomplete,
        violating_partitions=sorted({int(v["key"]) for v in violations}),
        sql_violations=len(sql_rows),
        model_violations=len(failing),
        explained_by={str(r["key"]): r["explained_by"] for r in failing},
        traces=traces,
    )
    for cached in (raw, prepared, verdicts):
        cached.unpersist()


def _save_traces(mechanism: str, valid: DataFrame, failing: list[dict[str, Any]], out: Path) -> dict[str, str]:
    """One trace per model-violating partition: the explaining variant's run (so replay reproduces the
    bug), else the current model against the log up to the divergence (`ending_in_refusal` where the
    model cannot take the logged step, or record the log's values there)."""
    key = spec(mechanism).key
    keys = [int(r["key"]) for r in failing]
    if not keys:
        return {}
    rows: dict[int, list[Row]] = {}
    for found in valid.where(F.col(key).isin(keys)).select(key, "seq", *replay.LOGGED).orderBy(key, "seq").collect():
        rows.setdefault(int(found[key]), []).append(found)
    mechanism_ = registry.get(mechanism)
    saved: dict[str, str] = {}
    for row in failing:
        mine = rows[int(row["key"])]
        records = replay.Records(*([r[name] for r in mine] for name in replay.LOGGED))
        actions = records.actions()
        if row["explained_by"] is not None:
            variant = str(row["explained_by"])
            reference = mechanism_.make_reference
            config = replay.model(mechanism, variant).config
            trace = record(replay.model(mechanism, variant), actions, engine="pipeline", seed=int(row["key"]),
                           implementation=reference(config, variant) if reference is not None else None)
            saved[str(row["key"])] = str(save(trace, out / f"{mechanism}-{key}-{row['key']}.json"))
            continue
        step, path = int(row["step"]), out / f"{mechanism}-{key}-{row['key']}.json"
        try:
            save(_logged(mechanism, records, step, int(row["key"])), path)
        except Exception:  # the model does not take the step, or the log's values there are not its variables
            try:
                prefix = _logged(mechanism, records, step - 1, int(row["key"]))
                save(ending_in_refusal(prefix, actions[step - 1], str(row["detail"])), path)
            except Exception:  # values no trace can hold (a float): the violation still says what the log did
                continue
        saved[str(row["key"])] = str(path)
    return saved


def _logged(mechanism: str, records: replay.Records, steps: int, key: int) -> Trace:
    """The current model's run of a partition's first `steps` logged actions, the log as its implementation."""
    current = replay.model(mechanism, registry.get(mechanism).current)
    return record(current, records.actions()[:steps], engine="pipeline", seed=key,
                  implementation=replay.LoggedImplementation(current.vars(current.initial()), records.events()))


def result(summary: dict[str, Any]) -> CheckResult:
    """The run as every checker reports it: the checks that broke, the trace of the lowest violating partition
    that has one as the target, and what was read and checked as its work."""
    mechanism = registry.get(summary["mechanism"])
    failures = tuple(summary["failures"])
    target = None
    if failures:
        traced = sorted(summary["traces"].items(), key=lambda item: int(item[0]))
        if traced:
            trace = load(Path(traced[0][1]))
            names = trace.failure.get("names")
            name = str(names[0]) if isinstance(names, list) and names else failures[0]
            target = Target(name, len(trace.steps) - 1, traced[0][1])
        else:
            target = Target(failures[0], 0)
    violating = summary["violating_partitions"]
    counts = ("records", "checked", "quarantined", "partitions")
    return CheckResult(
        mechanism=mechanism.name, engine="pipeline", config=Path(summary["input"]).name, variant=mechanism.current,
        failures=failures, target=target, work={**{name: int(summary[name]) for name in counts},
                                                "violating": len(violating)},
        complete=summary["unusable"] is None, seconds=summary.get("elapsed_s"),
        detail=f"{mechanism.name}: {summary['records']} records, {summary['checked']} checked, "
               f"{summary['quarantined']} quarantined, {summary['partitions']} partitions, "
               f"{len(violating)} violating: {violating}")
