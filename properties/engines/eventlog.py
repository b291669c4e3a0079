"""What a mechanism declares so that the Spark pipeline can check its event logs, naming no mechanism.

The pipeline (`properties/pipeline/`) is one more engine: it reads, quarantines, window-checks and replays any
log laid out by a `LogSpec`, and takes what is the mechanism's own from its `EventLog`: extra window checks, a
compiled replay, or (for a log of broker events rather than model actions) its own simulator, quarantine rule,
replay and traces. Spark and Arrow types appear only in annotations, so declaring a log costs no import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from models.core import Model

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.accumulators import Accumulator
    from pyspark.sql import Column, DataFrame

Field = tuple[str, str, bool]
"""(name, type, nullable) of a column after the independence key; the type is `long` or `string`."""

ACTION_FIELDS: tuple[Field, ...] = (("seq", "long", False), ("action", "string", False), ("params", "string", False),
                                    ("observation", "string", True), ("vars", "string", False))
"""A model-action log's columns after the key: the action, its parameters, and what it returned and left, as JSON."""

Progress = Callable[[str], None]


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
    """How one mechanism is logged: its independence key column, the model configuration and the columns.

    `fields` default to a model-action log's (seq, action, params, observation, vars); the field after `seq` is
    the one a record cannot do without (the simulator's corrupt lines drop it).
    """

    key: str
    config_name: str
    """The Hypothesis configuration of the mechanism the log is written and replayed with."""
    fields: tuple[Field, ...] = ACTION_FIELDS
    json_text: tuple[str, ...] = ("params", "observation", "vars")
    """String columns that hold a JSON object as text (the replay parses them, so ingest checks they parse)."""
    extracted: tuple[Extract, ...] = ()
    events_per_partition: int = 100
    """How long a partition the bench simulates."""

    @property
    def required(self) -> str:
        """The column a record cannot do without (`action` or `event`)."""
        return self.columns[2]

    @property
    def columns(self) -> tuple[str, ...]:
        """Column order of a record: the key, then the fields (seq, action, params, ... or seq, event, ...)."""
        return (self.key, *(name for name, _, _ in self.fields))


class FastReplay(Protocol):
    """A model's transition compiled for the replay: where rows lo..hi (one partition) first leave it."""

    def first_failure(self, action: Sequence[str], params: Sequence[str], observation: Sequence[str | None],
                      vars_: Sequence[str], lo: int, hi: int) -> int | None: ...


@dataclass(frozen=True)
class BrokerLog:
    """A log of broker events rather than model actions: the mechanism simulates, replays and explains it itself.

    `write(out, events, partitions, seed, fault, faulted, progress)` writes the log (or returns its JSON lines
    when corrupt lines are to be added among them); `replay(valid, conformance, replayed)` is its `mapInArrow`
    verdict per partition, `start()` builds a worker's compiled replay before the clock runs, `traces(valid,
    failing, out)` saves one trace per failing partition; the bench's plain-Python baseline reads the log with
    `read_table` and checks it with `python_sql` (every SQL rule, LOG-SEQ included) and
    `python_replay(table, conformance)`.
    """

    faults: tuple[str, ...]
    write: Callable[[Path, int, int, int, str | None, Sequence[int], Progress | None], list[str]]
    quarantine: Callable[[], Column]
    replay: Callable[[DataFrame, bool, Accumulator[int] | None], DataFrame]
    start: Callable[[], object]
    traces: Callable[[DataFrame, list[dict[str, Any]], Path], dict[str, str]]
    read_table: Callable[[Path], pa.Table]
    python_sql: Callable[[pa.Table], set[int]]
    python_replay: Callable[[pa.Table, bool], set[int]]


@dataclass(frozen=True)
class EventLog:
    """Everything the pipeline needs of one mechanism beyond its `Mechanism`.

    `window_checks(valid)` adds the mechanism's SQL window checks to LOG-SEQ: (key, seq, check, detail) rows, one
    per violating record; `python_window_checks(table)` is the same rules in one process over a model-action log
    sorted by key and seq (the bench's baseline), the violating keys. `compiled(model)` is the current model's
    transition compiled for a model-action log (None, or None returned: the full model replays every partition).
    `broker` is set for a log of broker events (see `BrokerLog`).
    """

    spec: LogSpec
    window_checks: Callable[[DataFrame], DataFrame] | None = None
    python_window_checks: Callable[[pa.Table], set[int]] | None = None
    compiled: Callable[[Model[Any]], FastReplay | None] | None = None
    broker: BrokerLog | None = None
