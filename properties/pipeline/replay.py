"""The model replay of the model-action logs: the full model, and its compiled fast path.

A partition is replayed in lockstep through the current model with the logged observations and
`vars` as the implementation (`replay_records`, the authority: any divergence from the spec is
found, and a failing partition is replayed on each known-bad variant to name the bug). That costs
40 to 120 µs an event, so the pipeline runs each mechanism's compiled transition instead
(`EventLog.compiled`, declared in the mechanism's `eventlog` module: the same steps on a mutable state, the
variables compared as canonical JSON text), which only says where a partition first leaves the
model; a partition it fails goes through `replay_records` for the verdict. `mapInArrow` hands the
records to Python as Arrow batches of whole partitions (`whole_partitions`, slices that copy no text),
each partition's columns become plain lists when it is replayed (a few hundred KB of strings at a
time, which the allocator reuses: a whole batch's 30 MB of fresh pages cost more than its replay), and
nothing is built per row but what the step needs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq
from pyspark.accumulators import Accumulator
from pyspark.sql import DataFrame, SparkSession

from models.core import Action, ActionNotEnabled, Json, Model, Observation
from properties import registry
from properties.engines.eventlog import FastReplay
from properties.engines.lockstep import DIVERGENCE, BaseImplementation, Lockstep
from properties.engines.records import action_of, gap_free, runs, strings
from properties.pipeline.schema import event_log, spec
from properties.pipeline.simulate import model as build_model

REPLAY_SCHEMA = "key long, events long, step long, failures string, detail string, explained_by string"
LOGGED = ("action", "params", "observation", "vars")
"""The columns a replay reads besides the key and seq."""


@functools.cache
def model(mechanism: str, variant: str) -> Model[Any]:
    """Models are pure, so one per (mechanism, variant) serves every partition a worker replays."""
    return build_model(mechanism, variant)


class LoggedImplementation(BaseImplementation):
    """The log seen as an implementation: each `apply` returns the next logged observation and state."""

    def __init__(self, initial: dict[str, Json], events: list[tuple[str | None, str]]) -> None:
        self._vars = initial
        self._events = iter(events)

    def apply(self, action: Action) -> Observation:
        observation, state = next(self._events)
        self._vars = json.loads(state)
        return None if observation is None else cast(dict[str, Json], json.loads(observation))

    def vars(self) -> dict[str, Json]:
        return self._vars

    def violations(self) -> list[str]:
        return []


@dataclass(frozen=True)
class Verdict:
    """How a partition replayed: the first failing step (None if none) and the variant explaining it."""

    step: int | None
    failures: tuple[str, ...]
    detail: str
    explained_by: str | None = None


@dataclass(frozen=True)
class Records:
    """One partition's logged columns, in seq order."""

    action: Sequence[str]
    params: Sequence[str]
    observation: Sequence[str | None]
    vars: Sequence[str]

    def actions(self) -> list[Action]:
        return [action_of(a, p) for a, p in zip(self.action, self.params, strict=True)]

    def events(self) -> list[tuple[str | None, str]]:
        """What the log says each action returned and left: (observation, vars) as text."""
        return list(zip(self.observation, self.vars, strict=True))


def run(model_: Model[Any], records: Records) -> Verdict:
    """The full model in lockstep with the log: the first step that fails, and why."""
    lockstep = Lockstep(model_, LoggedImplementation(model_.vars(model_.initial()), records.events()))
    for index, action in enumerate(records.actions(), start=1):
        try:
            outcome = lockstep.apply(action)
        except ActionNotEnabled as exc:
            return Verdict(index, (DIVERGENCE,), f"not enabled in the model: {exc.reason}")
        except Exception as exc:  # well-typed parameters the model cannot take (a missing or odd one)
            return Verdict(index, (DIVERGENCE,), f"not replayable through the model: {exc!r}")
        if outcome.failures:
            return Verdict(index, outcome.failures, outcome.detail)
    return Verdict(None, (), "")


def replay_records(mechanism: str, records: Records) -> Verdict:
    """Replay one partition on the current model; on a failure, find the known-bad variant that explains it.

    A variant explains the log when its model follows the log without diverging until one of its
    own invariants breaks.
    """
    mechanism_ = registry.get(mechanism)
    verdict = run(model(mechanism, mechanism_.current), records)
    if verdict.step is None:
        return verdict
    for twin in mechanism_.twins:
        explained = run(model(mechanism, twin), records)
        if explained.step is not None and DIVERGENCE not in explained.failures:
            return Verdict(verdict.step, verdict.failures, verdict.detail, twin)
    return verdict


# --- the compiled fast path ------------------------------------------------------------------------


class FullReplay:
    """The full model as a `FastReplay`, for a mechanism whose transition is not compiled."""

    def __init__(self, model_: Model[Any]) -> None:
        self.model = model_

    def first_failure(self, action: Sequence[str], params: Sequence[str], observation: Sequence[str | None],
                      vars_: Sequence[str], lo: int, hi: int) -> int | None:
        return run(self.model, Records(action[lo:hi], params[lo:hi], observation[lo:hi], vars_[lo:hi])).step


@functools.cache
def fast_replay(mechanism: str) -> FastReplay:
    """The compiled transition of the current model of `mechanism` (one per worker process)."""
    current = model(mechanism, registry.get(mechanism).current)
    compile_ = event_log(mechanism).compiled
    compiled = compile_(current) if compile_ is not None else None
    return compiled if compiled is not None else FullReplay(current)


def whole_partitions(batches: Iterator[pa.RecordBatch], key: str,
                     replayed: Accumulator[int] | None = None) -> Iterator[pa.Table]:
    """Tables of whole partitions from batches sorted by `key` that may cut one: the last partition of a
    batch waits for the next (chunked tables: nothing is copied). `replayed` counts the rows once the
    consumer is done with a table."""
    carry: pa.Table | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        if carry is not None:
            table = pa.concat_tables([carry, table])
        keys = table.column(key)
        last = keys[len(keys) - 1].as_py()
        cut = len(keys) - int(np.count_nonzero(np.asarray(keys) == last))
        if cut:
            yield table.slice(0, cut)
            if replayed is not None:
                replayed.add(cut)
        carry = table.slice(cut)
    if carry is not None and carry.num_rows:
        yield carry
        if replayed is not None:
            replayed.add(carry.num_rows)


def verdicts(mechanism: str, table: pa.Table) -> pa.RecordBatch:
    """One verdict row per partition of `table` (whole partitions, sorted by key and seq), of its records up
    to its first gap in seq (`gap_free`): the fast path for every partition, the full model for those it
    fails. Each partition's columns become lists on their own, so their strings reuse the memory the last
    partition's freed."""
    fast = fast_replay(mechanism)
    keys = np.asarray(table.column(spec(mechanism).key))
    logged = table.select(LOGGED)
    out: dict[str, list[Any]] = {name: [] for name in ("key", "events", "step", "failures", "detail", "explained_by")}
    seqs = np.asarray(table.column("seq"))
    for lo, everything in runs(keys):
        hi = gap_free(seqs, lo, everything)
        part = logged.slice(lo, hi - lo)
        action, params, observation, vars_ = (strings(part.column(name)) for name in LOGGED)
        verdict = Verdict(None, (), "")
        if fast.first_failure(action, params, observation, vars_, 0, hi - lo) is not None:
            verdict = replay_records(mechanism, Records(action, params, observation, vars_))
        for name, value in (("key", int(keys[lo])), ("events", hi - lo), ("step", verdict.step),
                            ("failures", ",".join(verdict.failures)), ("detail", verdict.detail),
                            ("explained_by", verdict.explained_by)):
            out[name].append(value)
    types = {"key": pa.int64(), "events": pa.int64(), "step": pa.int64()}
    return pa.RecordBatch.from_arrays([pa.array(v, type=types.get(n, pa.string())) for n, v in out.items()],
                                      names=list(out))


def replay_batches(mechanism: str, batches: Iterator[pa.RecordBatch],
                   replayed: Accumulator[int] | None = None) -> Iterator[pa.RecordBatch]:
    """The `mapInArrow` function: rows sorted by (key, seq), in batches that may cut a partition."""
    for table in whole_partitions(batches, spec(mechanism).key, replayed):
        yield verdicts(mechanism, table)


def replay_all(mechanism: str, valid: DataFrame, replayed: Accumulator[int] | None = None) -> DataFrame:
    """One verdict row per partition; `valid` must be partitioned by the key and sorted by seq within, as
    `ingest.prepare` leaves it. `replayed` counts the records replayed, for the progress line."""
    key = spec(mechanism).key
    return valid.select(key, "seq", *LOGGED).mapInArrow(
        functools.partial(replay_batches, mechanism, replayed=replayed), REPLAY_SCHEMA)


def in_order(table: pa.Table, key: str) -> pa.Table:
    """`table` sorted by key and seq: as it is when `simulate` wrote it (checked), else sorted (a `take` that
    copies every string, the slowest part of the Python baseline on a big log)."""
    keys, seqs = np.asarray(table.column(key)), np.asarray(table.column("seq"))
    same = keys[1:] == keys[:-1]
    if bool(np.all((keys[1:] > keys[:-1]) | (same & (seqs[1:] > seqs[:-1])))):
        return table
    return table.sort_by([(key, "ascending"), ("seq", "ascending")])


def read_log_table(mechanism: str, path: Path) -> pa.Table:
    """A whole clean log (Parquet, or JSON lines without malformed ones) as one Arrow table in this process
    (strings with 64-bit offsets: a million topic-list records hold more than 2 GB of text)."""
    log = spec(mechanism)
    schema = pa.schema([(name, pa.int64() if kind == "long" else pa.large_string())
                        for name, kind, _ in [(log.key, "long", False), *log.fields]])
    if path.suffix == ".parquet":
        return pq.read_table(path, schema=schema)
    return pj.read_json(path, parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"))


def _start(mechanism: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    broker = event_log(mechanism).broker
    if broker is not None:
        broker.start()
    else:
        fast_replay(mechanism)
    for _ in batches:
        pass
    yield from ()


def start_workers(spark: SparkSession, mechanism: str) -> None:
    """Start the session's Python workers and build their compiled replay (a job of one task per core), so a
    timed replay does not pay for it, as it does not pay for the JVM's start."""
    cores = spark.sparkContext.defaultParallelism
    started = spark.range(cores, numPartitions=cores).mapInArrow(functools.partial(_start, mechanism), "id long")
    started.write.format("noop").mode("overwrite").save()


def python_replay(mechanism: str, table: pa.Table) -> dict[int, str]:
    """The same replay in this process, over a whole log as Arrow (the bench's baseline): failing partitions."""
    ordered = in_order(table, spec(mechanism).key)
    failing: dict[int, str] = {}
    for found in replay_batches(mechanism, iter(ordered.to_batches(max_chunksize=65_536))):
        for row in found.to_pylist():
            if row["step"] is not None:
                failing[int(row["key"])] = str(row["failures"])
    return failing
