"""Find, shrink and record counterexamples: the one recipe behind every mechanism's saved corpus.

An engine finds a failing run (the explorer's shortest path, or the Hypothesis lockstep machine's
failing run), `properties.engines.shrink` shrinks it while model and reference, in lockstep, still break the
target invariant, and `properties.engines.replay.record` keeps every state with the reference's projection.
The explorer's traces are deterministic, so tests can check that they regenerate byte for byte;
Hypothesis' depend on its version, so tests only check that they still reproduce.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import settings

from models.core import Action, Param
from properties.engines.explorer import explore
from properties.engines.lockstep import Implementation, Lockstep
from properties.engines.mechanism import Mechanism
from properties.engines.replay import record
from properties.engines.shrink import failure_oracle, shrink
from properties.engines.stateful import FailedRun, build_state_machine, find_failure
from traces.format import Trace

SEARCH = settings(max_examples=200, stateful_step_count=40, derandomize=True, database=None, deadline=None)
"""The corpus search: the CI gate's bounds, derandomized so a regeneration finds the same run."""


def _reference(mechanism: Mechanism, config: Mapping[str, Param], variant: str) -> Implementation | None:
    return mechanism.make_reference(config, variant) if mechanism.make_reference is not None else None


def _close(implementation: Implementation | None) -> None:
    """Stop what a reference runs in the background (the metadata reference's pooled threads)."""
    if implementation is not None:
        implementation.close()


def shrunk(
    mechanism: Mechanism, config: Mapping[str, Param], variant: str, actions: Sequence[Action], target: str
) -> tuple[Action, ...]:
    """`actions` shrunk while model and reference, in lockstep, still break `target`."""

    def make() -> Lockstep[Any]:
        return Lockstep(mechanism.make_model(config, variant), _reference(mechanism, config, variant))

    return shrink(actions, failure_oracle(make, target), model=mechanism.make_model(config, variant))


def recorded(
    mechanism: Mechanism,
    config: Mapping[str, Param],
    variant: str,
    actions: Sequence[Action],
    engine: str,
    stuck: tuple[str, str] | None = None,
    target: str | None = None,
) -> Trace:
    """The run recorded in lockstep with the reference (see `properties.engines.replay.record` for `stuck`
    and `target`)."""
    reference = _reference(mechanism, config, variant)
    try:
        return record(mechanism.make_model(config, variant), actions, engine=engine, implementation=reference,
                      stuck=stuck, target=target)
    finally:
        _close(reference)


def explorer_path(mechanism: Mechanism, config: Mapping[str, Param], variant: str, target: str) -> tuple[Action, ...]:
    """The explorer's shortest path to `target` (breadth-first, stopping at the first violation)."""
    found = explore(mechanism.make_model(config, variant), stop_on_violation=True, check_liveness=False)
    return next(f.path for f in found.findings if f.name == target)


def explorer_trace(
    mechanism: Mechanism, config: Mapping[str, Param], variant: str, target: str, engine: str = "explorer"
) -> Trace:
    """The explorer's shortest counterexample to `target`, shrunk and recorded."""
    path = explorer_path(mechanism, config, variant, target)
    return recorded(mechanism, config, variant, shrunk(mechanism, config, variant, path, target), engine,
                    target=target)


def hypothesis_run(
    mechanism: Mechanism, config: Mapping[str, Param], variant: str, search: settings = SEARCH
) -> FailedRun:
    """The Hypothesis lockstep machine's failing run; an AssertionError when it finds none."""
    runs: list[FailedRun] = []
    make_reference = mechanism.make_reference
    machine = build_state_machine(
        lambda: mechanism.make_model(config, variant),
        mechanism.make_model(config, variant).action_names,
        (lambda: make_reference(config, variant)) if make_reference is not None else None,
        on_failure=runs.append,
    )
    if find_failure(machine, search) is None or not runs:
        raise AssertionError(f"Hypothesis did not catch {mechanism.name}/{variant}")
    return runs[-1]


def hypothesis_trace(
    mechanism: Mechanism,
    config: Mapping[str, Param],
    variant: str,
    target: str,
    search: settings = SEARCH,
    engine: str = "hypothesis",
) -> Trace:
    """The Hypothesis machine's failing run, shrunk by `properties.engines.shrink` and recorded."""
    run = hypothesis_run(mechanism, config, variant, search)
    if target not in run.failures:
        raise AssertionError(f"Hypothesis caught {list(run.failures)} on {mechanism.name}/{variant}, not {target}")
    return recorded(mechanism, config, variant, shrunk(mechanism, config, variant, run.actions, target), engine,
                    target=target)
