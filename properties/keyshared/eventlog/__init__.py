"""Key_Shared's broker event log for the Spark pipeline: the records (`records`: what each event means as a model
action, and the client-record fast path), the reference dispatcher under a random workload (`simulate`), the
dispatcher compiled for the conformance replay (`replay`), and the quarantine rule, SQL checks, `mapInArrow` replay
and traces (`check`). `EVENT_LOG` is what the binding declares to the pipeline."""

from __future__ import annotations

import pyarrow as pa

from properties.engines.eventlog import BrokerLog, EventLog
from properties.keyshared.eventlog import check, simulate
from properties.keyshared.eventlog.records import LOG


def _sql_keys(table: pa.Table) -> set[int]:
    return {key for key, _, _ in check.python_sql_checks(table)}


def _replay_keys(table: pa.Table, conformance: bool) -> set[int]:
    return set(check.python_replay(table, conformance))


EVENT_LOG = EventLog(LOG, window_checks=check.sql_checks, broker=BrokerLog(
    faults=simulate.FAULTS, write=simulate.write, quarantine=check.event_reason, replay=check.replay_all,
    start=check.compiled_replay, traces=check.save_traces, read_table=check.read_table, python_sql=_sql_keys,
    python_replay=_replay_keys))
