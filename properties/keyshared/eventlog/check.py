"""The Key_Shared checks of `pipeline check`: quarantine rules, SQL window checks, the Arrow-batched replay.

SQL (no Python): `LOG-SEQ` (as for every log); `KS-I1` as interval logic per (subscription, hash):
each dispatch opens a hold that the holder's next ack or negative ack of that position, or its
disconnect, closes; a dispatch to B while holds are open on the hash and the latest dispatch of it
went to another consumer breaks it. `KS-I4` in the form a window can state: the first deliveries
of a hash's messages come in position order (a redelivery is exempt). Under the gate's reading of
KS-I4 (a message released by a negative ack is exempt) this is exact for first deliveries; the rest
of KS-I4 needs the replay.

Replay: `mapInArrow` over the subscriptions (each Spark partition holds whole subscriptions, sorted
by seq): columns become plain lists once per Arrow batch and `client_verdict_columns` replays each
subscription's client record (KS-I1 and KS-I4 exactly as the model checks them, and whether every
record is one the model could take). Only a subscription that fails goes through the full model
(`full_verdict`): on pip379 for its first divergence, and on each known-bad variant, any of which
that follows the log until its own invariant breaks explains it; that run is the saved trace.
With `conformance`, every subscription the client record passes also goes through pip379's dispatcher,
compiled (`replay`: the dispatcher kept in place for the whole subscription, about 16 times
the full model's events/s), so a log that delivers differently from pip379 fails as a `divergence` even
where KS-I1 and KS-I4 hold; the full model replays only a subscription the compiled replay finds
leaving pip379, for the verdict (or every one, if the current model is one it does not mirror).
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq
from pyspark.accumulators import Accumulator
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from models.core import ActionNotEnabled
from properties.engines.lockstep import DIVERGENCE
from properties.engines.records import ending_in_refusal, gap_free
from properties.engines.replay import record
from properties.keyshared.dispatcher import CURRENT, TWINS, KeySharedReference
from properties.keyshared.eventlog.records import (
    ADD,
    ARROW_SCHEMA,
    DISPATCH,
    EVENTS,
    LOG,
    MECHANISM,
    RELEASES,
    REMOVE,
    REQUIRED,
    ClientVerdict,
    LogError,
    LoggedKeyShared,
    Record,
    client_verdict_columns,
    full_verdict,
    model,
    partition,
)
from properties.keyshared.eventlog.replay import NULL, KeySharedReplay, compiled
from traces.format import save

KEY = LOG.key
REPLAY_SCHEMA = ("key long, events long, step long, seq long, failures string, detail string, "
                 "explained_by string, divergence_step long, divergence string")
"""A subscription's verdict: the client record's first failing action (`step`, `seq` of the record,
`failures`, `detail`), the variants that explain it, and where the log first leaves pip379."""
_BATCH = 65_536  # rows per batch of the in-process replay (Spark sizes its own)


def event_reason() -> Column:
    """Why a well-typed record cannot be checked (an unknown event, a field its event needs is missing), or null."""
    reason = F.when(~F.col("event").isin(*EVENTS), F.format_string("unknown event %s", F.col("event")))
    for event, fields in REQUIRED.items():
        for name in fields:
            reason = reason.when((F.col("event") == event) & F.col(name).isNull(),
                                 F.lit(f"missing field {name} of a {event} record"))
    return reason


def sql_checks(valid: DataFrame) -> DataFrame:
    """KS-I1, the order form of KS-I4 and LOG-ID as window queries: (subscription, seq, detail, check) per finding.

    A hold is (hash, consumer, from the dispatch's seq, to the seq of the consumer's next ack or
    negative ack of that position, or of its remove). One window per (subscription, hash) over the
    hold marks (+1 at the start, -1 at the end) in seq order gives the holds open before each dispatch
    and the consumer of the latest dispatch: a dispatch to B while holds are open and the latest one
    went to another consumer breaks KS-I1. (While KS-I1 holds, every open hold on a hash is its latest
    dispatch's consumer's, so this is exact up to each hash's first violation, and a subscription is
    flagged if and only if some consumer got a hash another one held.) The same window gives the
    highest position of the hash delivered so far, for KS-I4: a first delivery below it is out of order.
    LOG-ID: a consumer id is added once per subscription (ids name connections, as Pulsar's do); the
    holds rely on it, the replay does not.
    """
    by_position = Window.partitionBy(KEY, "position").orderBy("seq")
    holds = valid.where(F.col("event").isin(DISPATCH, *RELEASES)).select(
        KEY, "seq", "event", "consumer", "position", "hash",
        F.lead("seq").over(by_position).alias("next_seq"),
        F.lead("event").over(by_position).alias("next_event"),
        F.lead("consumer").over(by_position).alias("next_consumer"),
        F.lag("seq").over(by_position).isNull().alias("first"),
    ).where(F.col("event") == DISPATCH)
    removes = valid.where(F.col("event") == REMOVE).groupBy(KEY, "consumer").agg(F.min("seq").alias("removed"))
    released = F.when(F.col("next_event").isin(*RELEASES) & (F.col("next_consumer") == F.col("consumer")),
                      F.col("next_seq"))
    ends = F.array(
        F.struct(F.col("seq").alias("t"), F.lit(1).alias("delta")),
        F.struct(F.least(released, F.col("removed")).alias("t"), F.lit(-1).alias("delta")),
    )
    marks = (holds.join(F.broadcast(removes), [KEY, "consumer"], "left")
             .select(KEY, "hash", "consumer", "position", "first", F.inline(ends))
             .where(F.col("t").isNotNull()))
    by_hash = Window.partitionBy(KEY, "hash").orderBy("t")
    before = by_hash.rangeBetween(Window.unboundedPreceding, -1)
    dispatched = F.col("delta") == 1
    found = F.filter(F.array(
        F.when((F.col("open") > 0) & (F.col("latest_consumer") != F.col("consumer")), F.struct(
            F.lit("KS-I1").alias("check"),
            F.format_string("hash %d dispatched to consumer %d while consumer %d holds it",
                            "hash", "consumer", "latest_consumer").alias("detail"))),
        F.when(F.col("first") & (F.col("position") < F.col("highest")), F.struct(
            F.lit("KS-I4").alias("check"),
            F.format_string("first delivery of %d (hash %d, to consumer %d) after that of %d",
                            "position", "hash", "consumer", "highest").alias("detail"))),
    ), lambda finding: finding.isNotNull())
    ks = marks.select(
        "*",
        F.sum("delta").over(before).alias("open"),
        F.last(F.when(dispatched, F.col("consumer")), ignorenulls=True).over(before).alias("latest_consumer"),
        F.max(F.when(dispatched & F.col("first"), F.col("position"))).over(before).alias("highest"),
    ).where(dispatched).select(KEY, F.col("t").alias("seq"), F.inline(found))
    by_consumer = Window.partitionBy(KEY, "consumer").orderBy("seq")
    reused = valid.where(F.col("event") == ADD).select(
        KEY, "seq", F.lit("LOG-ID").alias("check"),
        F.format_string("consumer %d added again", "consumer").alias("detail"),
        F.row_number().over(by_consumer).alias("nth"),
    ).where(F.col("nth") > 1).drop("nth")
    return ks.unionByName(reused)


# --- the Arrow-batched replay ---------------------------------------------------------------------


def _column(table: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    column = table.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _numbers(column: pa.Array) -> list[int]:
    """An int64 column as a list, nulls as `NULL` (ten times faster than `to_pylist`)."""
    return np.asarray(column.fill_null(NULL)).tolist()  # type: ignore[no-any-return]


def _strings(column: pa.Array) -> list[str | None]:
    """A string column as a list of interned strings (equal ones are one object, so the replay's
    comparisons with the event names short-circuit on identity)."""
    encoded = column.dictionary_encode()
    words = [None if w is None else sys.intern(w) for w in encoded.dictionary.to_pylist()]
    return [words[i] if i >= 0 else None for i in np.asarray(encoded.indices.fill_null(-1)).tolist()]


def _runs(sub: np.ndarray[Any, Any]) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of equal keys: one subscription each, as the rows are sorted."""
    return itertools.pairwise([0, *(np.flatnonzero(sub[1:] != sub[:-1]) + 1).tolist(), len(sub)])


def _explain(records: Sequence[Record]) -> tuple[str | None, int | None, str]:
    """(variants explaining the log, comma-separated; pip379's first divergence step and detail)."""
    try:
        part = partition(records)
    except LogError as exc:
        return None, None, f"not replayable through the model: {exc}"
    current = full_verdict(part, CURRENT)
    twins = [twin for twin in TWINS
             if (v := full_verdict(part, twin)).step is not None and DIVERGENCE not in v.failures]
    detail = f"{','.join(current.failures)}: {current.detail}" if current.step is not None else ""
    return (",".join(twins) or None), current.step, detail


def _records(table: pa.Table | pa.RecordBatch, lo: int, hi: int) -> list[Record]:
    rows = table.slice(lo, hi - lo).select(list(LOG.columns)).to_pylist()
    return [cast(Record, tuple(r.values())) for r in rows]


def _leaves_current(records: Sequence[Record]) -> ClientVerdict | None:
    """Where the log first leaves the current variant's model (as a failed client verdict), or None."""
    try:
        part = partition(records)
    except LogError as exc:
        return ClientVerdict(1, (DIVERGENCE,), f"not replayable through the model: {exc}", records[0][1])
    found = full_verdict(part, CURRENT)
    if found.step is None:
        return None
    return ClientVerdict(found.step, found.failures, found.detail, part.seqs[found.step - 1])


@functools.cache
def compiled_replay() -> KeySharedReplay | None:
    """The compiled replay of the current variant (one per process), or None if it does not mirror that model."""
    return compiled(CURRENT)


def _verdicts(table: pa.Table | pa.RecordBatch, conformance: bool = False) -> pa.RecordBatch:
    """One verdict row per subscription of `table` (whole subscriptions, sorted by subscription and seq), of
    its records up to its first gap in seq (`gap_free`).

    With `conformance`, a subscription the client record passes goes through the compiled pip379
    replay, and through the full model only if that finds it leaving the model (or is not available).
    """
    sub = np.asarray(_column(table, KEY).fill_null(NULL))
    seq, consumer, position, hashes = (_numbers(_column(table, n)) for n in ("seq", "consumer", "position", "hash"))
    event, key = _strings(_column(table, "event")), _strings(_column(table, "key"))
    fast = compiled_replay() if conformance else None
    if fast is not None:
        name, permits = _strings(_column(table, "name")), _numbers(_column(table, "permits"))
    out: dict[str, list[Any]] = {name: [] for name in ("key", "events", "step", "seq", "failures", "detail",
                                                       "explained_by", "divergence_step", "divergence")}
    seqs = np.asarray(_column(table, "seq"))
    for lo, everything in _runs(sub):
        hi = gap_free(seqs, lo, everything)
        if hi == lo:  # no seq 0: nothing to replay (LOG-SEQ or the quarantine says why)
            for field in out:
                out[field].append(int(sub[lo]) if field == "key" else 0 if field == "events" else
                                  "" if field in ("failures", "detail", "divergence") else None)
            continue
        verdict = client_verdict_columns(event, consumer, position, hashes, key, seq, lo, hi)
        explained, divergence_step, divergence = None, None, ""
        if verdict.step is None and conformance and (
                fast is None or fast.first_failure(event, consumer, position, key, name, permits, lo, hi) is not None):
            verdict = _leaves_current(_records(table, lo, hi)) or verdict
        if verdict.step is not None:
            explained, divergence_step, divergence = _explain(_records(table, lo, hi))
        for field, value in (("key", int(sub[lo])), ("events", hi - lo), ("step", verdict.step),
                             ("seq", verdict.seq), ("failures", ",".join(verdict.failures)),
                             ("detail", verdict.detail),
                             ("explained_by", explained), ("divergence_step", divergence_step),
                             ("divergence", divergence)):
            out[field].append(value)
    types = {"key": pa.int64(), "events": pa.int64(), "step": pa.int64(), "seq": pa.int64(),
             "divergence_step": pa.int64()}
    return pa.RecordBatch.from_arrays([pa.array(v, type=types.get(n, pa.string())) for n, v in out.items()],
                                      names=list(out))


def replay_batches(batches: Iterator[pa.RecordBatch], conformance: bool = False,
                   replayed: Accumulator[int] | None = None) -> Iterator[pa.RecordBatch]:
    """The `mapInArrow` function: rows arrive sorted by (subscription, seq) in batches that may cut a
    subscription; the last (maybe unfinished) one waits for the next batch. `replayed` counts the rows."""
    carry: pa.Table | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if replayed is not None:
            replayed.add(batch.num_rows)
        table = pa.Table.from_batches([batch])
        if carry is not None:
            table = pa.concat_tables([carry, table])
        sub = table.column(KEY)
        last = sub[len(sub) - 1]
        cut = len(sub) - int(np.count_nonzero(np.asarray(sub) == last.as_py()))
        if cut:
            yield _verdicts(table.slice(0, cut).combine_chunks(), conformance)
        carry = table.slice(cut)
    if carry is not None and carry.num_rows:
        yield _verdicts(carry.combine_chunks(), conformance)


def replay_all(valid: DataFrame, conformance: bool = False, replayed: Accumulator[int] | None = None) -> DataFrame:
    """One verdict row per subscription; `valid` must be partitioned by subscription and sorted by seq within."""
    return valid.mapInArrow(functools.partial(replay_batches, conformance=conformance, replayed=replayed),
                            REPLAY_SCHEMA)


def read_table(path: Path) -> pa.Table:
    """A whole log as one Arrow table in this process (Parquet, or JSON lines without malformed ones)."""
    if path.suffix == ".parquet":
        return pq.read_table(path, schema=ARROW_SCHEMA)
    options = pj.ParseOptions(explicit_schema=ARROW_SCHEMA, unexpected_field_behavior="error")
    return pj.read_json(path, parse_options=options)


def python_replay(table: pa.Table, conformance: bool = False) -> dict[int, str]:
    """The same replay in this process, over a whole log (the bench's baseline): failing subscriptions."""
    ordered = table.sort_by([(KEY, "ascending"), ("seq", "ascending")])
    failing: dict[int, str] = {}
    for verdicts in replay_batches(iter(ordered.to_batches(max_chunksize=_BATCH)), conformance):
        for row in verdicts.to_pylist():
            if row["step"] is not None:
                failing[int(row["key"])] = str(row["failures"])
    return failing


def python_sql_checks(table: pa.Table) -> list[tuple[int, int, str]]:
    """The SQL checks' rules in this process (the bench's baseline): (subscription, seq, check) per finding."""
    ordered = table.sort_by([(KEY, "ascending"), ("seq", "ascending")])
    sub = np.asarray(_column(ordered, KEY).fill_null(NULL))
    seq, consumer, position, hashes = (_numbers(_column(ordered, n)) for n in ("seq", "consumer", "position", "hash"))
    event = _strings(_column(ordered, "event"))
    found: list[tuple[int, int, str]] = []
    for lo, hi in _runs(sub):
        k = int(sub[lo])
        found += [(k, seq[i], "LOG-SEQ") for i in range(lo, hi) if seq[i] != (0 if i == lo else seq[i - 1] + 1)]
        found += [(k, s, check) for s, check in _subscription_sql(event, consumer, position, hashes, seq, lo, hi)]
    return sorted(found)


def _subscription_sql(event: list[str | None], consumer: list[int], position: list[int], hashes: list[int],
                      seq: list[int], lo: int, hi: int) -> list[tuple[int, str]]:
    """`sql_checks` for one subscription, rule for rule: holds end where the window's lead and the remove
    join end them, then one sweep per hash over the hold marks in seq order."""
    last: dict[int, int] = {}
    following: dict[int, int] = {}
    first: dict[int, bool] = {}
    removed: dict[int, int] = {}
    for i in range(lo, hi):
        e = event[i]
        if e == REMOVE:
            removed.setdefault(consumer[i], seq[i])
        elif e == DISPATCH or e in RELEASES:
            j = last.get(position[i])
            if j is not None:
                following[j] = i
            if e == DISPATCH:
                first[i] = j is None
            last[position[i]] = i
    marks: dict[int, list[tuple[int, int, int]]] = {}  # hash -> (t, delta, row)
    for i in first:
        j = following.get(i)
        ends = [seq[j]] if j is not None and event[j] in RELEASES and consumer[j] == consumer[i] else []
        ends += [removed[consumer[i]]] if consumer[i] in removed else []
        marks.setdefault(hashes[i], []).append((seq[i], 1, i))
        if ends:
            marks[hashes[i]].append((min(ends), -1, i))
    found: list[tuple[int, str]] = []
    added: set[int] = set()
    for i in range(lo, hi):
        if event[i] == ADD:
            if consumer[i] in added:
                found.append((seq[i], "LOG-ID"))
            added.add(consumer[i])
    for hash_marks in marks.values():
        open_, latest, highest = 0, None, None
        for t, delta, i in sorted(hash_marks):
            if delta == 1:
                if open_ > 0 and latest != consumer[i]:
                    found.append((t, "KS-I1"))
                if first[i] and highest is not None and position[i] < highest:
                    found.append((t, "KS-I4"))
                latest = consumer[i]
                if first[i]:
                    highest = position[i] if highest is None else max(highest, position[i])
            open_ += delta
    return found


# --- traces ---------------------------------------------------------------------------------------


def save_traces(valid: DataFrame, failing: list[dict[str, Any]], out: Path) -> dict[str, str]:
    """One trace per failing subscription: the explaining variant's run, in lockstep with its reference
    (so `replay` reproduces the bug on the model and the reference); else pip379's run against the log
    up to the first divergence, the log's client record standing in as the implementation."""
    keys = [int(r["key"]) for r in failing]
    if not keys:
        return {}
    by_key: dict[int, list[Record]] = {}
    for found in valid.where(F.col(KEY).isin(keys)).orderBy(KEY, "seq").collect():
        by_key.setdefault(int(found[KEY]), []).append(cast(Record, tuple(found[c] for c in LOG.columns)))
    saved: dict[str, str] = {}
    for row in failing:
        if row["divergence_step"] is None:
            continue  # the records do not read as model actions (the divergence says why)
        part = partition(by_key[int(row["key"])])
        if row["explained_by"]:
            variant = str(row["explained_by"]).split(",")[0]
            trace = record(model(part.config, variant), part.actions, engine="pipeline", seed=int(row["key"]),
                           implementation=KeySharedReference(part.config, variant))
        else:
            current = model(part.config, CURRENT)
            step = int(row["divergence_step"])
            try:
                trace = record(current, part.actions[:step], engine="pipeline", seed=int(row["key"]),
                               implementation=LoggedKeyShared(current, part))
            except ActionNotEnabled:  # the model does not take the step: the trace ends where replay refuses it
                prefix = record(current, part.actions[: step - 1], engine="pipeline", seed=int(row["key"]),
                                implementation=LoggedKeyShared(current, part))
                trace = ending_in_refusal(prefix, part.actions[step - 1], str(row["divergence"] or ""))
        saved[str(row["key"])] = str(save(trace, out / f"{MECHANISM}-{KEY}-{row['key']}.json"))
    return saved
