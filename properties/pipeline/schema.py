"""The event-log layout of a mechanism, as its binding declares it (`Mechanism.log`), read by name.

Partitions (one limiter, one tracker, one subscription) never interact, so each can be checked on
its own: that is what lets Spark spread the check. A model-action log keeps the structured fields whose
shape varies by action (params, observation, vars) as JSON text, so one explicit `StructType` serves
every action; ingest parses each once and keeps, as typed columns next to the text, the few values the
SQL checks read (`Extract`), so no check parses JSON. A broker's event log has flat typed columns instead
(no JSON inside a record), which SQL and Arrow read without parsing.
"""

from __future__ import annotations

from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

from properties import registry
from properties.engines.eventlog import EventLog, LogSpec

SPARK_TYPES: dict[str, DataType] = {"long": LongType(), "string": StringType()}


def logged() -> tuple[str, ...]:
    """The mechanisms whose event logs the pipeline checks, in the registry's order."""
    return tuple(name for name, mechanism in registry.mechanisms().items() if mechanism.log is not None)


def event_log(mechanism: str) -> EventLog:
    """The event log of `mechanism`; a `KeyError` naming the covered mechanisms otherwise."""
    declared = registry.mechanisms().get(mechanism)
    if declared is None or declared.log is None:
        raise KeyError(f"no pipeline event log for {mechanism!r} (covered: {', '.join(logged())})")
    return declared.log()


def spec(mechanism: str) -> LogSpec:
    """The log layout of `mechanism`; a `KeyError` naming the covered mechanisms otherwise."""
    return event_log(mechanism).spec


def columns(mechanism: str) -> tuple[str, ...]:
    """Column order of a record: the key, then the mechanism's fields (seq, action, params, ... or seq, event, ...)."""
    return spec(mechanism).columns


def extracted(mechanism: str) -> tuple[str, ...]:
    """The typed columns ingest adds after `columns(mechanism)` for the SQL checks."""
    return tuple(e.name for e in spec(mechanism).extracted)


def struct_type(mechanism: str) -> StructType:
    """The explicit Spark schema (Parquet logs are read with it)."""
    log = spec(mechanism)
    fields = [StructField(log.key, LongType(), nullable=False)]
    fields += [StructField(name, SPARK_TYPES[kind], nullable=nullable) for name, kind, nullable in log.fields]
    return StructType(fields)
