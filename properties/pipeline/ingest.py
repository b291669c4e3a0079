"""Ingest: every line of a log becomes a typed record or a quarantined one, with its file and line number.

A JSON-lines log is read as text (so each record keeps its place; a line that is not UTF-8 is
quarantined as such) and parsed on the JVM with the explicit schema. Spark's parser is lenient where
the replay is not (it reads `"action": 7` as the string "7" and an object where a string is expected
as its JSON text), so every column is also checked against the raw line; the JSON-text columns
(params, observation, vars) must hold a JSON object (each is parsed once, and the values the SQL
checks read are kept as typed columns); the first problem found is the record's `reason`. Parquet
carries its types, so only the column types (once, from the footer), required values and JSON text
are checked. A record repeating an earlier (key, seq) is quarantined as a duplicate (the first in
file order is checked). Line numbers come from Spark's file metadata: rows of one file block are
read in order by one task, so a row's line is its offset in its block plus the lines of the file's
earlier blocks.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField
from pyspark.sql.window import Window

from properties.pipeline.schema import columns, event_log, extracted, spec, struct_type

PLACE = ("file", "block", "row")
"""Where a record was read: file path, start of its file block, and its row id (in order within a block)."""
NOT_UTF8 = "not UTF-8 text (undecodable bytes)"
"""A line with bytes that are no UTF-8: Spark would read them as U+FFFD and the record as another one. The
quarantine keeps its text with each such byte as U+FFFD."""
CORRUPT = "_corrupt_record"
"""The parser's column for a line that is not JSON or has a field of a non-string type it cannot read."""


class UnusableInput(Exception):
    """The input is not a log of the mechanism at all (unreadable, or Parquet with other column types)."""


def _is_parquet(path: Path) -> bool:
    return path.suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet")))


def _field_reason(name: str, kind: str, nullable: bool) -> Column:
    """Why field `name` of a parsed line is not usable (wrong type, or missing though required), or null.

    Spark reads any JSON value into a string column (7 as "7", an object as its text) and leaves a long
    column null when the value is not an integer (the line then lands in `CORRUPT`); the raw line says
    which: a string's value starts with a quote, a null's with `n`.
    """
    value, given = F.col(name), F.col("text").rlike(f'"{name}"\\s*:\\s*[^\\sn]')
    if kind == "long":
        reason = F.when(value.isNull() & F.col(CORRUPT).isNotNull() & given, F.lit(f"field {name} is not an integer"))
    else:
        reason = F.when(value.isNotNull() & ~F.col("text").rlike(f'"{name}"\\s*:\\s*"'),
                        F.lit(f"field {name} is not a string"))
    return reason if nullable else reason.when(value.isNull(), F.lit(f"missing required field {name}"))


def _parsed(name: str) -> str:
    """The column holding the JSON-text column `name` parsed (a variant), while a record is typed."""
    return f"_parsed_{name}"


def _json_text(name: str) -> Column:
    """Why the string column `name` is not a JSON object's text (null when it is, or is null)."""
    text = F.col(name)
    return F.when(text.isNotNull() & (F.col(_parsed(name)).isNull() | ~F.ltrim(text).startswith("{")),
                  F.lit(f"field {name} is not the text of a JSON object"))


def _reason(mechanism: str, first: Column | None = None) -> Column:
    """The first reason a typed record cannot be checked: `first`, then JSON text, then the event rules."""
    log = spec(mechanism)
    reasons = [first] if first is not None else []
    reasons += [_json_text(name) for name in log.json_text]
    broker = event_log(mechanism).broker
    if broker is not None:
        reasons.append(broker.quarantine())
    return F.coalesce(*reasons) if len(reasons) > 1 else reasons[0]


def _typed(mechanism: str, frame: DataFrame, first: Column | None, rest: list[Column]) -> DataFrame:
    """`frame`'s typed columns, the `extracted` ones, `reason` and `rest`: each JSON-text column is parsed
    once (a column of its own, so Spark does not repeat the parse) for both its check and the extracts."""
    log = spec(mechanism)
    parsed = frame.select("*", *(F.try_parse_json(name).alias(_parsed(name)) for name in log.json_text))
    extracts = [F.try_variant_get(F.col(_parsed(e.source)), e.path, e.kind).alias(e.name) for e in log.extracted]
    return parsed.select(*columns(mechanism), *extracts, _reason(mechanism, first).alias("reason"), *rest)


def _read_json(spark: SparkSession, mechanism: str, path: Path) -> DataFrame:
    log = spec(mechanism)
    schema = struct_type(mechanism).add(StructField(CORRUPT, StringType(), nullable=True))
    parsed = F.from_json("text", schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    lines = spark.read.text(str(path)).select(
        F.col("value").alias("text"), F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"), F.monotonically_increasing_id().alias("row"),
    ).select("*", parsed.alias("parsed")).select("text", *PLACE, "parsed.*")
    broken = F.col(CORRUPT).isNotNull()
    problem = F.coalesce(
        F.when(~F.is_valid_utf8("text"), F.lit(NOT_UTF8))
        .when(F.trim("text") == "", F.lit("empty line"))
        .when(broken & F.try_parse_json("text").isNull(), F.lit("not JSON (malformed or truncated line)"))
        .when(broken & ~F.ltrim("text").startswith("{"), F.lit("not a JSON object")),
        *(_field_reason(name, kind, nullable) for name, kind, nullable in [(log.key, "long", False), *log.fields]),
        F.when(broken, F.lit("a value the parser could not read")),
    )
    records = lines.select(*columns(mechanism), *PLACE, "text", problem.alias("problem"))
    return _typed(mechanism, records, F.col("problem"),
                  [*map(F.col, PLACE), F.when(F.col("problem").isNotNull(), F.make_valid_utf8("text")).alias("text")])


def _read_parquet(spark: SparkSession, mechanism: str, path: Path) -> DataFrame:
    wanted = struct_type(mechanism)
    try:
        found = {f.name: f.dataType for f in spark.read.parquet(str(path)).schema.fields}
    except Exception as exc:  # Spark raises several unrelated types for a file that is not Parquet
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UnusableInput(f"{path}: not a readable Parquet log: {first}") from exc
    wrong = [f"{f.name} is {found[f.name].simpleString()}, not {f.dataType.simpleString()}"
             for f in wanted.fields if f.name in found and found[f.name] != f.dataType]
    if wrong:
        raise UnusableInput(f"{path}: not a {mechanism} log: column {'; '.join(wrong)}")
    log = spec(mechanism)
    required = [F.when(F.col(n).isNull(), F.lit(f"missing required field {n}"))
                for n, _, nullable in [(log.key, "long", False), *log.fields] if not nullable]
    frame = spark.read.schema(wanted).parquet(str(path)).select(
        "*", F.col("_metadata.file_path").alias("file"), F.col("_metadata.row_index").alias("row"))
    return _typed(mechanism, frame, F.coalesce(*required),
                  [F.col("file"), F.lit(0).cast("long").alias("block"), F.col("row"),
                   F.lit(None).cast(StringType()).alias("text")])


def read_log(spark: SparkSession, mechanism: str, path: Path) -> DataFrame:
    """Every record of the log: its typed columns, the `extracted` ones, `reason` (null when checkable),
    where it was read, and `text` (the line, for a JSON line that is quarantined). `UnusableInput` if it
    is no log of `mechanism`."""
    return (_read_parquet if _is_parquet(path) else _read_json)(spark, mechanism, path)


def prepare(mechanism: str, raw: DataFrame, partitions: int | None = None) -> DataFrame:
    """The checkable records, marked `duplicate` when an earlier one (in file order) has the same key and
    seq, one partition's records together (hash-partitioned by the key into `partitions` Spark partitions,
    default the session's shuffle partitions) and sorted by seq, then file order, within each Spark
    partition: what the window checks and the replay read (through `checkable`)."""
    key = spec(mechanism).key
    first = Window.partitionBy(key, "seq").orderBy(*PLACE)
    valid = raw.where(F.col("reason").isNull()).select(*columns(mechanism), *extracted(mechanism), *PLACE)
    return ((valid.repartition(partitions, key) if partitions else valid.repartition(key))
            .withColumn("duplicate", F.row_number().over(first) > 1).sortWithinPartitions(key, "seq", *PLACE))


def checkable(mechanism: str, prepared: DataFrame) -> DataFrame:
    """The records the checks read: `prepare`'s without duplicates (their columns and the `extracted`
    ones), in its partitioning and order."""
    return prepared.where(~F.col("duplicate")).select(*columns(mechanism), *extracted(mechanism))


def duplicate_reason(mechanism: str) -> str:
    """One reason for every duplicate (the summary counts records per reason); the line says which."""
    return f"duplicate of an earlier record with the same {spec(mechanism).key} and seq"


def tally(spark: SparkSession, raw: DataFrame) -> tuple[dict[str | None, int], DataFrame]:
    """Records per reason (None: checkable), and per file block the first row id and the file's lines
    before it (what `numbered` turns row ids into line numbers with), in one pass over the log."""
    reasons: dict[str | None, int] = {}
    blocks: dict[tuple[str, int], list[int]] = {}
    for r in raw.groupBy("file", "block", "reason").agg(F.count(F.lit(1)).alias("n"),
                                                         F.min("row").alias("first")).collect():
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + int(r["n"])
        lines, first = blocks.setdefault((str(r["file"]), int(r["block"])), [0, int(r["first"])])
        blocks[str(r["file"]), int(r["block"])] = [lines + int(r["n"]), min(first, int(r["first"]))]
    offsets: list[tuple[str, int, int, int]] = []
    before: dict[str, int] = {}
    for (file, block), (lines, first) in sorted(blocks.items()):
        offsets.append((file, block, first, before.get(file, 0)))
        before[file] = before.get(file, 0) + lines
    return reasons, spark.createDataFrame(offsets, "file string, block long, first long, offset long")


def numbered(frame: DataFrame, blocks: DataFrame) -> DataFrame:
    """`frame` (with `PLACE` columns) with its 1-based `line` in its file instead, and the file as a path."""
    joined = frame.join(F.broadcast(blocks), ["file", "block"])
    line = (F.col("row") - F.col("first") + F.col("offset") + 1).alias("line")
    return joined.select(F.regexp_replace("file", "^file:(//)?", "").alias("file"), line,
                         *(c for c in frame.columns if c not in PLACE))


def quarantine(mechanism: str, raw: DataFrame, prepared: DataFrame, blocks: DataFrame) -> DataFrame:
    """Every quarantined record (malformed, wrongly typed, or a duplicate) with its file, line and reason."""
    rejected = raw.where(F.col("reason").isNotNull()).select("reason", "text", *columns(mechanism), *PLACE)
    repeated = prepared.where(F.col("duplicate")).select(
        F.lit(duplicate_reason(mechanism)).alias("reason"), F.lit(None).cast(StringType()).alias("text"),
        *columns(mechanism), *PLACE)
    return numbered(rejected.unionByName(repeated), blocks).orderBy("file", "line")
