"""Random walks with many seeds spread over Spark tasks; failing seeds are shrunk on the driver.

Each seed is a swarm-style walk: it draws its own subset of action names and only takes enabled
actions from that subset (falling back to all enabled actions when none is), so some walks stay
away from common actions long enough to reach rare states. Tasks return only the failing seeds'
actions, which are few; shrinking needs the reference implementation and stays on the driver.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from models.core import Action, violated
from properties import registry
from properties.engines.lockstep import Lockstep
from properties.engines.records import action_of
from properties.engines.replay import record
from properties.engines.shrink import failure_oracle, shrink
from properties.pipeline.replay import model
from traces.format import save


@dataclass(frozen=True)
class Finding:
    """A failing seed: the invariant it broke first, its walk length, and the saved shrunk trace."""

    seed: int
    invariant: str
    steps: int
    shrunk_steps: int
    trace: Path


def walk(mechanism: str, variant: str, seed: int, steps: int) -> tuple[list[Action], tuple[str, ...]]:
    """One swarm walk: the actions taken up to the first broken invariant (or `steps`) and its names."""
    model_ = model(mechanism, variant)
    rng = random.Random(f"explore:{seed}")
    names = [n for n in model_.action_names if rng.random() < 0.7]
    state = model_.initial()
    actions: list[Action] = []
    for _ in range(steps):
        enabled = list(model_.enabled(state))
        if not enabled:
            break
        preferred = [a for a in enabled if a.name in names] or enabled
        action = rng.choice(preferred)
        state, _ = model_.step(state, action)
        actions.append(action)
        failures = violated(model_, state)
        if failures:
            return actions, tuple(failures)
    return actions, ()


def _failing(mechanism: str, variant: str, steps: int, seeds: Iterable[int]) -> Iterator[tuple[int, str, str]]:
    for seed in seeds:
        actions, failures = walk(mechanism, variant, seed, steps)
        if failures:
            encoded = json.dumps([[a.name, json.dumps(a.as_dict())] for a in actions])
            yield seed, failures[0], encoded


def explore(
    spark: SparkSession, mechanism: str, seeds: int, out: Path, *, variant: str | None = None, steps: int = 60,
    first_seed: int = 0, max_findings: int = 3,
) -> tuple[list[Finding], int]:
    """Walk `seeds` seeds in Spark tasks; shrink and save up to `max_findings` failing seeds.

    Returns the saved findings and the number of failing seeds.
    """
    mechanism_ = registry.get(mechanism)
    chosen = variant or mechanism_.current
    tasks = max(1, spark.sparkContext.defaultParallelism * 4)
    rdd = spark.sparkContext.parallelize(range(first_seed, first_seed + seeds), tasks)
    failing: list[tuple[int, str, str]] = sorted(
        rdd.mapPartitions(lambda part: _failing(mechanism, chosen, steps, part)).collect()
    )
    findings: list[Finding] = []
    make_reference = mechanism_.make_reference
    model_ = model(mechanism, chosen)

    def fresh() -> Lockstep[Any]:
        reference = make_reference(model_.config, chosen) if make_reference is not None else None
        return Lockstep(model_, reference)

    for seed, invariant, encoded in failing[:max_findings]:
        actions = [action_of(name, params) for name, params in json.loads(encoded)]
        shrunk = shrink(actions, failure_oracle(fresh, invariant))
        reference = make_reference(model_.config, chosen) if make_reference is not None else None
        trace = record(model_, shrunk, engine="pipeline-explore", seed=seed, implementation=reference)
        path = save(trace, out / mechanism / f"{chosen}-pipeline-explore-{seed}-{invariant}.json")
        findings.append(Finding(seed, invariant, len(actions), len(shrunk), path))
    return findings, len(failing)
