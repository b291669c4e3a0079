"""The event-log layout: one record per model action, keyed by the mechanism's independence key.

Partitions (one limiter, one tracker) never interact, so each can be checked on its own: that is
what lets Spark spread the check. Structured fields whose shape varies by action (params,
observation, vars) are JSON text, so one explicit `StructType` serves every action; SQL reaches
into them with `get_json_object` / `from_json`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import LongType, StringType, StructField, StructType

CORRUPT = "_corrupt_record"


@dataclass(frozen=True)
class LogSpec:
    """How one mechanism is logged: its independence key column and the model configuration used."""

    mechanism: str
    key: str
    config_name: str
    fault: str


SPECS: dict[str, LogSpec] = {
    "topiclist": LogSpec("topiclist", "limiter", "flows", "no_exceptional_release"),
    "delayed": LogSpec("delayed", "tracker", "default", "pr23611"),
}


def spec(mechanism: str) -> LogSpec:
    """The log layout of `mechanism`; a `KeyError` naming the covered mechanisms otherwise."""
    if mechanism not in SPECS:
        raise KeyError(f"no pipeline event log for {mechanism!r} (covered: {', '.join(SPECS)})")
    return SPECS[mechanism]


def columns(mechanism: str) -> tuple[str, ...]:
    """Column order of a record: key, seq, action, params, observation, vars."""
    return (spec(mechanism).key, "seq", "action", "params", "observation", "vars")


def struct_type(mechanism: str, with_corrupt: bool = False) -> StructType:
    """The explicit Spark schema; `with_corrupt` adds the PERMISSIVE-mode column for malformed lines."""
    key = spec(mechanism).key
    fields = [
        StructField(key, LongType(), nullable=False),
        StructField("seq", LongType(), nullable=False),
        StructField("action", StringType(), nullable=False),
        StructField("params", StringType(), nullable=False),
        StructField("observation", StringType(), nullable=True),
        StructField("vars", StringType(), nullable=False),
    ]
    if with_corrupt:
        fields.append(StructField(CORRUPT, StringType(), nullable=True))
    return StructType(fields)
