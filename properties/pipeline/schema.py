"""The event-log layout: one record per event, keyed by the mechanism's independence key.

Partitions (one limiter, one tracker, one subscription) never interact, so each can be checked on
its own: that is what lets Spark spread the check. The model-action logs (topiclist, delayed) keep
the structured fields whose shape varies by action (params, observation, vars) as JSON text, so one
explicit `StructType` serves every action; ingest parses each once and keeps, as typed columns
next to the text, the few values the SQL checks read (`Extract`), so no check parses JSON. The
Key_Shared log is a broker's event log instead: flat typed columns (no JSON inside a record), one
record per consumer add/remove, publish, permit grant, read, dispatch, ack and redelivery, which SQL
and Arrow read without parsing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

Field = tuple[str, DataType, bool]
"""(name, Spark type, nullable) of a column after the independence key."""

ACTION_FIELDS: tuple[Field, ...] = (
    ("seq", LongType(), False),
    ("action", StringType(), False),
    ("params", StringType(), False),
    ("observation", StringType(), True),
    ("vars", StringType(), False),
)
KEYSHARED_FIELDS: tuple[Field, ...] = (
    ("seq", LongType(), False),
    ("event", StringType(), False),
    ("consumer", LongType(), True),
    ("position", LongType(), True),
    ("hash", LongType(), True),
    ("key", StringType(), True),
    ("name", StringType(), True),
    ("permits", LongType(), True),
)


@dataclass(frozen=True)
class Extract:
    """A typed column ingest reads out of a JSON-text column once, for the SQL checks (null when absent)."""

    name: str
    source: str
    path: str
    kind: str
    """A Spark SQL type (`bigint`, `array<array<bigint>>`); a value of another type reads as null."""


@dataclass(frozen=True)
class LogSpec:
    """How one mechanism is logged: its independence key column, the model configuration and the columns."""

    mechanism: str
    key: str
    config_name: str
    fault: str
    fields: tuple[Field, ...] = ACTION_FIELDS
    json_text: tuple[str, ...] = ("params", "observation", "vars")
    """String columns that hold a JSON object as text (the replay parses them, so ingest checks they parse)."""
    extracted: tuple[Extract, ...] = ()


SPECS: dict[str, LogSpec] = {
    "topiclist": LogSpec("topiclist", "limiter", "flows", "no_exceptional_release"),
    "delayed": LogSpec("delayed", "tracker", "default", "pr23611", extracted=(
        Extract("add_ledger", "params", "$.ledger", "bigint"),
        Extract("add_entry", "params", "$.entry", "bigint"),
        Extract("add_deliver_at", "params", "$.deliver_at", "bigint"),
        Extract("now", "vars", "$.now", "bigint"),
        Extract("offered", "observation", "$.offered", "array<array<bigint>>"),
    )),
    "keyshared": LogSpec("keyshared", "subscription", "spec", "classic", KEYSHARED_FIELDS, ()),
}


def spec(mechanism: str) -> LogSpec:
    """The log layout of `mechanism`; a `KeyError` naming the covered mechanisms otherwise."""
    if mechanism not in SPECS:
        raise KeyError(f"no pipeline event log for {mechanism!r} (covered: {', '.join(SPECS)})")
    return SPECS[mechanism]


def columns(mechanism: str) -> tuple[str, ...]:
    """Column order of a record: the key, then the mechanism's fields (seq, action, params, ... or seq, event, ...)."""
    log = spec(mechanism)
    return (log.key, *(name for name, _, _ in log.fields))


def extracted(mechanism: str) -> tuple[str, ...]:
    """The typed columns ingest adds after `columns(mechanism)` for the SQL checks."""
    return tuple(e.name for e in spec(mechanism).extracted)


def struct_type(mechanism: str) -> StructType:
    """The explicit Spark schema (Parquet logs are read with it)."""
    log = spec(mechanism)
    fields = [StructField(log.key, LongType(), nullable=False)]
    fields += [StructField(name, kind, nullable=nullable) for name, kind, nullable in log.fields]
    return StructType(fields)
