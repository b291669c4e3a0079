"""Write large event logs from the reference implementations, with known-bad variants injected.

Each partition of a model-action log (one limiter, one tracker) is a seeded random walk: the model
picks among the actions it enables, the reference implementation takes each one, and the record holds what the reference
returned and its state projected onto the model's variables (as a port would report them), so the
log is the reference's behaviour, not the model's. A faulted partition walks a known-bad variant
and is re-seeded until the bug actually shows within its events, so a checker must find exactly
the faulted partitions. A broker event log is written by the mechanism's own simulator
(`BrokerLog.write`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from models.core import Action, Model
from properties import registry
from properties.engines.chunks import in_chunks
from properties.engines.lockstep import Lockstep
from properties.pipeline.schema import columns, event_log, spec

_FAULT_ATTEMPTS = 500
_CHUNK = 200  # partitions per worker task and per Parquet row group
_POOL_THRESHOLD = 100_000  # events; below this, one process beats starting workers


@dataclass(frozen=True)
class Simulation:
    """What was written: valid events, partitions, which carry the fault, and malformed lines added."""

    path: Path
    events: int
    partitions: int
    faulted: tuple[int, ...]
    corrupt_lines: int


def model(mechanism: str, variant: str) -> Model[Any]:
    """The model the log of `mechanism` is written and checked with."""
    return registry.get(mechanism).make_model(registry.get(mechanism).hypothesis_configs[spec(mechanism).config_name],
                                              variant)


def _walk(mechanism: str, variant: str, length: int, rng: random.Random) -> tuple[list[dict[str, Any]], bool]:
    """One random walk of up to `length` actions on the reference; the records and whether it failed.

    A failure is an invariant broken or a divergence from the model (which a known-bad variant never
    shows: its reference and model are lockstep-tested to agree too).
    """
    model_ = model(mechanism, variant)
    make_reference = registry.get(mechanism).make_reference
    reference = make_reference(model_.config, variant) if make_reference is not None else None
    lockstep = Lockstep(model_, reference)
    records: list[dict[str, Any]] = []
    broke = False
    try:
        for seq in range(length):
            enabled: Sequence[Action] = model_.enabled(lockstep.state)
            if not enabled:
                break
            action = rng.choice(list(enabled))
            outcome = lockstep.apply(action)
            observation = outcome.observation
            records.append({
                "seq": seq,
                "action": action.name,
                "params": json.dumps(action.as_dict(), sort_keys=True),
                "observation": None if observation is None else json.dumps(observation, sort_keys=True),
                "vars": json.dumps(outcome.vars, sort_keys=True),
            })
            broke = broke or bool(outcome.failures)
    finally:
        if reference is not None:
            reference.close()
    return records, broke


def partition_records(mechanism: str, key: int, length: int, seed: int, fault: str | None) -> list[dict[str, Any]]:
    """The records of partition `key`; with `fault`, the first re-seeded walk that shows the bug."""
    log = spec(mechanism)
    if fault is None:
        records, _ = _walk(mechanism, registry.get(mechanism).current, length, random.Random(f"{seed}:{key}"))
    else:
        for attempt in range(_FAULT_ATTEMPTS):
            records, broke = _walk(mechanism, fault, length, random.Random(f"{seed}:{key}:{fault}:{attempt}"))
            if broke:
                break
        else:
            raise ValueError(f"{fault} did not show its bug in {length} events after {_FAULT_ATTEMPTS} walks")
    for record in records:
        record[log.key] = key
    return records


def _malformed(kind: int, line: str, required: str) -> str:
    """The `kind`-th of four ways a line goes bad; `required` is a field the record cannot do without."""
    if kind == 0:
        return line[: max(1, len(line) // 2)]  # truncated write
    if kind == 1:
        return line.replace('"seq": ', '"seq": "x', 1)  # wrong type, broken quoting
    if kind == 2:
        return "\x00garbage " + line[:20]  # not JSON at all
    return json.dumps({k: v for k, v in json.loads(line).items() if k != required})  # missing field


def _corrupt(lines: list[str], fraction: float, rng: random.Random, required: str) -> tuple[list[str], int]:
    """Insert malformed lines (extra, never replacing a valid one) so they are `fraction` of the file."""
    count = round(len(lines) * fraction / (1 - fraction)) if fraction > 0 else 0
    out = list(lines)
    for index in range(count):
        position = rng.randrange(len(out) + 1)
        out.insert(position, _malformed(index % 4, rng.choice(lines), required))
    return out, count


def simulate(
    mechanism: str,
    events: int,
    out: Path,
    *,
    partitions: int = 1000,
    fault: str | None = None,
    faulted: Sequence[int] = (),
    seed: int = 0,
    corrupt: float = 0.0,
    progress: Any = None,
) -> Simulation:
    """Write `events` records over `partitions` partitions; `.parquet` paths get Parquet, others JSON lines.

    `fault` (a known-bad variant) is injected into the partitions `faulted` (default: three spread
    over the range); `corrupt` is the fraction of malformed lines added (JSON lines only).
    """
    log = event_log(mechanism)
    faults = log.broker.faults if log.broker is not None else tuple(registry.get(mechanism).twins)
    if fault is not None and fault not in faults:
        raise ValueError(f"unknown fault {fault!r} for {mechanism} (known: {', '.join(faults)})")
    if partitions < 1 or events < partitions:
        raise ValueError(f"need at least one event per partition ({events} events, {partitions} partitions)")
    parquet = out.suffix == ".parquet"
    if parquet and corrupt:
        raise ValueError("corrupt lines can only be written to a JSON-lines log")
    chosen = tuple(sorted(set(faulted))) if fault is not None else ()
    if fault is not None and not chosen:
        chosen = tuple(sorted({partitions // 7, partitions // 2, partitions - 1}))
    if any(not 0 <= k < partitions for k in chosen):
        raise ValueError(f"faulted partitions must lie in 0..{partitions - 1}")

    out.parent.mkdir(parents=True, exist_ok=True)
    if log.broker is not None:
        lines = log.broker.write(out, events, partitions, seed, fault, chosen, progress)
    else:
        lines = _write_actions(mechanism, out, events, partitions, seed, fault, chosen, keep=bool(corrupt),
                               progress=progress)
    corrupt_lines = 0
    if lines:
        lines, corrupt_lines = _corrupt(lines, corrupt, random.Random(f"{seed}:corrupt"), log.spec.required)
        out.write_text("\n".join(lines) + "\n")
    return Simulation(out, events, partitions, chosen, corrupt_lines)


def _chunk(keys: Sequence[int], lengths: Sequence[int], mechanism: str, seed: int, fault: str | None,
           faulted: Sequence[int]) -> list[dict[str, Any]]:
    return [r for key, length in zip(keys, lengths, strict=True)
            for r in partition_records(mechanism, key, length, seed, fault if key in faulted else None)]


def _write_actions(mechanism: str, out: Path, events: int, partitions: int, seed: int, fault: str | None,
                   faulted: Sequence[int], *, keep: bool, progress: Any = None) -> list[str]:
    """Write a model-action log as it is made (Parquet: one row group per chunk; JSON lines), or, with `keep`
    (malformed lines are to be added among them), return its JSON lines for the caller to write."""
    names = columns(mechanism)
    parts = in_chunks(_chunk, (mechanism, seed, fault, faulted), events, partitions, chunk=_CHUNK,
                      pool_threshold=_POOL_THRESHOLD, label=f"simulate {mechanism}", unit="partitions",
                      progress=progress)
    if out.suffix == ".parquet":
        schema = pa.schema([(name, pa.int64() if name in (spec(mechanism).key, "seq") else pa.string())
                            for name in names])
        with pq.ParquetWriter(out, schema) as writer:
            for chunk in parts:
                writer.write_table(pa.table({name: [r[name] for r in chunk] for name in names}, schema=schema))
        return []
    if keep:
        return [json.dumps({name: r[name] for name in names}) for chunk in parts for r in chunk]
    with out.open("w") as file:
        for chunk in parts:
            file.write("".join(json.dumps({name: r[name] for name in names}) + "\n" for r in chunk))
    return []
