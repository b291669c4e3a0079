"""Write the metadata corpus: the blocking-callback deadlocks, found by the engines, shrunk and recorded.

Run `python -m tests.metadata.corpus` from the repository root to (re)write `traces/corpus/metadata/`.
Each trace is found by an engine (the explorer's shortest path, or the Hypothesis machine's shrunk
run), shrunk again with `traces.shrink` against model and reference in lockstep, and recorded with
the reference, so its states carry the reference's projection, including the `deadlock` cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import settings

from models.core import Action, Param
from models.metadata import ACTION_NAMES, EXPLORE_CONFIG, HYPOTHESIS_CONFIG
from properties.explorer import explore
from properties.lockstep import Lockstep
from properties.metadata import MetadataReference, make_model
from properties.stateful import FailedRun, build_state_machine, find_failure
from traces.format import Trace, save
from traces.replay import record
from traces.shrink import failure_oracle, shrink

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "metadata"
TARGET = "MD-I5"
SEARCH = settings(max_examples=200, stateful_step_count=40, deadline=None, derandomize=True, database=None)


def shrunk(config: Mapping[str, Param], variant: str, actions: Sequence[Action]) -> tuple[Action, ...]:
    """Delta-debug `actions` to a shorter run that still deadlocks, on model and reference alike."""

    def make() -> Lockstep[Any]:
        return Lockstep(make_model(config, variant), MetadataReference(config, variant))

    return shrink(actions, failure_oracle(make, TARGET))


def recorded(config: Mapping[str, Param], variant: str, actions: Sequence[Action], engine: str) -> Trace:
    model = make_model(config, variant)
    reference = MetadataReference(config, variant)
    try:
        return record(model, actions, engine=engine, implementation=reference)
    finally:
        reference.close()


def explorer_trace(variant: str) -> Trace:
    """The explorer's shortest deadlock on the small configuration."""
    result = explore(make_model(EXPLORE_CONFIG, variant), stop_on_violation=True, check_liveness=False)
    [finding] = [f for f in result.findings if f.name == TARGET]
    actions = shrunk(EXPLORE_CONFIG, variant, finding.path)
    return recorded(EXPLORE_CONFIG, variant, actions, "explorer+shrink")


def hypothesis_trace(variant: str) -> Trace:
    """The Hypothesis machine's shrunk deadlock on the Hypothesis configuration."""
    runs: list[FailedRun] = []
    machine = build_state_machine(
        lambda: make_model(HYPOTHESIS_CONFIG, variant),
        ACTION_NAMES,
        lambda: MetadataReference(HYPOTHESIS_CONFIG, variant),
        on_failure=runs.append,
    )
    if find_failure(machine, SEARCH) is None or TARGET not in runs[-1].failures:
        raise RuntimeError(f"Hypothesis did not find {TARGET} on {variant}")
    actions = shrunk(HYPOTHESIS_CONFIG, variant, runs[-1].actions)
    return recorded(HYPOTHESIS_CONFIG, variant, actions, "hypothesis+shrink")


def main() -> None:
    for name, trace in (
        ("legacy-explorer-MD-I5", explorer_trace("legacy")),
        ("blocking_callback-explorer-MD-I5", explorer_trace("blocking_callback")),
        ("legacy-hypothesis-MD-I5", hypothesis_trace("legacy")),
    ):
        path = save(trace, CORPUS / f"{name}.json")
        print(f"{path}: {len(trace.actions)} steps, {trace.failure}")


if __name__ == "__main__":
    main()
