"""The compiled replays agree with the full model: on simulated logs (clean and with each known bug injected)
and on those logs mutated record by record, the fast path and the full-model lockstep fail the same
partitions at the same first step. No Spark: the function the `mapInArrow` tasks run is called directly."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from properties import registry
from properties.pipeline.replay import (
    Records,
    fast_replay,
    model,
    python_replay,
    read_log_table,
    replay_batches,
    run,
)
from properties.pipeline.schema import spec
from properties.pipeline.simulate import simulate

COMPILED = ("delayed", "topiclist")
ODD_VALUES: tuple[Any, ...] = ("x", None, [1], -1, 0, 10**6, {"a": 1})
"""Parameter values a mutation writes: wrong types and out-of-range ints. (Not `true` or `1.0`: the
full model caches parsed actions by equality, and `1 == True == 1.0`, so whether it takes those
depends on what it parsed before; the fast path sends such a partition to the full model, whose
verdict stands.)"""


def _partitions(mechanism: str, path: Path) -> list[list[dict[str, Any]]]:
    key = spec(mechanism).key
    by_key: dict[int, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        by_key.setdefault(int(record[key]), []).append(record)
    return [sorted(records, key=lambda r: int(r["seq"])) for _, records in sorted(by_key.items())]


def _bump(text: str, rng: random.Random) -> str:
    """`text` with one digit changed, if that leaves it JSON."""
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    if not digits:
        return text
    i = rng.choice(digits)
    changed = text[:i] + str((int(text[i]) + rng.randint(1, 9)) % 10) + text[i + 1:]
    try:
        json.loads(changed)
    except ValueError:
        return text
    return changed


def _mutate(records: list[dict[str, Any]], rng: random.Random, actions: tuple[str, ...]) -> list[dict[str, Any]]:
    """One random edit of the kind a broken broker or a broken log makes, with seqs renumbered."""
    out = [dict(r) for r in records]
    i = rng.randrange(len(out))
    record, kind = out[i], rng.randrange(8)
    if kind == 0:
        record["vars"] = _bump(record["vars"], rng)
    elif kind == 1:  # the same values written another way: must not fail
        record["vars"] = json.dumps(json.loads(record["vars"]), separators=(",", ":"))
    elif kind == 2:
        record["params"] = _bump(record["params"], rng)
    elif kind == 3 and record["observation"] is not None:
        observation = record["observation"]
        record["observation"] = _bump(observation, rng) if rng.random() < 0.5 else json.dumps(json.loads(observation),
                                                                                              indent=1)
    elif kind == 4:
        del out[i]
    elif kind == 5 and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], out[i]
    elif kind == 6:
        record["action"] = rng.choice(actions)
    elif kind == 7:
        params = json.loads(record["params"])
        if params:
            params[rng.choice(sorted(params))] = rng.choice(ODD_VALUES)
        record["params"] = json.dumps(params, sort_keys=True)
    for seq, r in enumerate(out):
        r["seq"] = seq
    return out


def _columns(records: list[dict[str, Any]]) -> Records:
    return Records([r["action"] for r in records], [r["params"] for r in records],
                   [r["observation"] for r in records], [r["vars"] for r in records])


def _first_failures(mechanism: str, records: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    """(the fast path's first failing step, the full model's)."""
    columns = _columns(records)
    fast = fast_replay(mechanism).first_failure(columns.action, columns.params, columns.observation, columns.vars,
                                                0, len(records))
    return fast, run(model(mechanism, registry.get(mechanism).current), columns).step


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str | None], Path]:
    """A clean log and one per known bug (in 3 of 60 partitions) of each compiled mechanism."""
    folder = tmp_path_factory.mktemp("fast")
    made: dict[tuple[str, str | None], Path] = {}
    for mechanism in COMPILED:
        for fault in (None, *registry.get(mechanism).twins):
            path = folder / f"{mechanism}-{fault}.jsonl"
            simulate(mechanism, 60 * 40, path, partitions=60, fault=fault, faulted=(5, 30, 59) if fault else (),
                     seed=11)
            made[mechanism, fault] = path
    return made


@pytest.mark.parametrize("mechanism", COMPILED)
def test_fast_and_full_replay_fail_the_same_partitions_at_the_same_step(
    logs: dict[tuple[str, str | None], Path], mechanism: str,
) -> None:
    for (name, fault), path in logs.items():
        if name != mechanism:
            continue
        steps = [_first_failures(mechanism, records) for records in _partitions(mechanism, path)]
        assert [fast for fast, _ in steps] == [full for _, full in steps]
        assert [k for k, (fast, _) in enumerate(steps) if fast is not None] == ([5, 30, 59] if fault else [])
        assert sorted(python_replay(mechanism, read_log_table(mechanism, path))) == ([5, 30, 59] if fault else [])


@pytest.mark.parametrize("mechanism", COMPILED)
def test_fast_and_full_replay_agree_on_mutated_partitions(
    logs: dict[tuple[str, str | None], Path], mechanism: str,
) -> None:
    rng = random.Random(f"mutants:{mechanism}")
    partitions = _partitions(mechanism, logs[mechanism, None])
    names = (*model(mechanism, registry.get(mechanism).current).action_names, "unknown")
    failing = 0
    for _ in range(400):
        records = rng.choice(partitions)
        for _ in range(rng.choice((1, 1, 2, 3))):
            records = _mutate(records, rng, tuple(names))
        fast, full = _first_failures(mechanism, records)
        assert fast == full, records
        failing += full is not None
    assert 100 < failing < 400  # most edits break the log, some do not (values written another way)


@pytest.mark.parametrize("mechanism", COMPILED)
def test_batches_that_cut_partitions_give_one_verdict_per_partition(
    logs: dict[tuple[str, str | None], Path], mechanism: str,
) -> None:
    """Spark hands a task batches that may cut a partition anywhere: the verdicts are those of whole partitions."""
    fault = next(iter(registry.get(mechanism).twins))
    table = read_log_table(mechanism, logs[mechanism, fault])
    rows = [row for size in (7, 40, 1000) for verdicts in replay_batches(mechanism, iter(table.to_batches(size)))
            for row in verdicts.to_pylist()]
    assert [row["key"] for row in rows] == list(range(60)) * 3
    assert all(row["events"] == 40 for row in rows)
    assert [row["key"] for row in rows if row["step"] is not None] == [5, 30, 59] * 3
    assert all(row["explained_by"] == fault for row in rows if row["step"] is not None)
