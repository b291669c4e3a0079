"""Pipeline throughput: events/s of the SQL checks and the model replay on Spark vs one Python process.

For `brokerspec bench --pipeline`. JVM start is excluded (each master's session is started before
its clock runs); ingest (parse + quarantine + cache) is timed separately from the checks, so the
SQL and replay figures are the checks themselves. The plain-Python baseline runs the same checks
(sequence, early offers, lockstep replay) over the same file in this process.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

import pandas as pd
from pyspark.sql import functions as F

from properties import registry
from traces.pipeline.check import quarantine_reason, read_log, replay_all, replay_partition, session, sql_checks
from traces.pipeline.schema import columns, spec
from traces.pipeline.simulate import simulate

SQL_GOAL = 500_000  # events/s on local[2]
REPLAY_GOAL = 100_000  # events/s on local[2]


def python_checks(mechanism: str, path: Path) -> tuple[set[int], dict[str, float]]:
    """The pipeline's checks in one plain Python process: violating keys and seconds per phase."""
    key = spec(mechanism).key
    started = time.perf_counter()
    partitions: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the quarantine's count is the Spark job's; the baseline only needs the valid records
        if isinstance(record, dict) and all(record.get(c) is not None for c in columns(mechanism)
                                            if c != "observation"):
            partitions[int(record[key])].append(record)
    ingest = time.perf_counter()
    bad: set[int] = set()
    tick = int(cast(int, registry.get("delayed").hypothesis_configs[spec("delayed").config_name]["tick"]))
    for k, records in partitions.items():
        records.sort(key=lambda r: int(r["seq"]))
        if [int(r["seq"]) for r in records] != list(range(len(records))):
            bad.add(k)
        if mechanism == "delayed":
            due: dict[tuple[int, int], int] = {}
            for r in records:
                if r["action"] == "add":
                    p = json.loads(r["params"])
                    due[int(p["ledger"]), int(p["entry"])] = int(p["deliver_at"])
                if r["observation"] is not None:
                    now = int(json.loads(r["vars"])["now"])
                    for ledger, entry in json.loads(r["observation"]).get("offered", []):
                        if now < due.get((ledger, entry), now) - tick:
                            bad.add(k)
    sql = time.perf_counter()
    for k, records in partitions.items():
        if replay_partition(mechanism, pd.DataFrame(records)).step is not None:
            bad.add(k)
    done = time.perf_counter()
    return bad, {"ingest": ingest - started, "sql": sql - ingest, "replay": done - sql}


def bench_pipeline(
    mechanism: str, events: int, *, log: Path, masters: tuple[str, ...] = ("local[1]", "local[2]"),
    partitions: int | None = None,
) -> dict[str, object]:
    """Simulate `events` events into `log` (if absent) and measure every master and the Python baseline."""
    if not log.exists():
        simulate(mechanism, events, log, partitions=partitions or max(1, events // 100))
    key = spec(mechanism).key
    out: dict[str, object] = {"mechanism": mechanism, "events": events}
    for master in masters:
        spark = session(master)
        started = time.perf_counter()
        raw = read_log(spark, mechanism, log).withColumn("reason", quarantine_reason(mechanism))
        valid = raw.where(F.col("reason").isNull()).select(*columns(mechanism)).repartition(key).cache()
        n = valid.count()
        ingested = time.perf_counter()
        sql_checks(mechanism, valid).count()
        checked = time.perf_counter()
        replay_all(mechanism, valid).count()
        replayed = time.perf_counter()
        valid.unpersist()
        spark.stop()  # one SparkContext per process: the next master needs a fresh one
        out[f"{master}_ingest_events_per_s"] = round(n / (ingested - started))
        out[f"{master}_sql_events_per_s"] = round(n / (checked - ingested))
        out[f"{master}_replay_events_per_s"] = round(n / (replayed - checked))
    _, seconds = python_checks(mechanism, log)
    for phase, elapsed in seconds.items():
        out[f"python_{phase}_events_per_s"] = round(events / elapsed) if elapsed else 0
    last = masters[-1]
    out[f"{last}_sql_vs_goal"] = round(cast(int, out[f"{last}_sql_events_per_s"]) / SQL_GOAL, 2)
    out[f"{last}_replay_vs_goal"] = round(cast(int, out[f"{last}_replay_events_per_s"]) / REPLAY_GOAL, 2)
    for phase in ("sql", "replay"):
        baseline = cast(int, out[f"python_{phase}_events_per_s"])
        out[f"{last}_{phase}_vs_python"] = round(cast(int, out[f"{last}_{phase}_events_per_s"]) / baseline, 2) \
            if baseline else 0
    return out
