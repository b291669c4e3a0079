"""Find, shrink and record the `no_exceptional_release` counterexamples under `traces/corpus/topiclist/`.

Regenerate with `python -m tests.topiclist.corpus` from the repository root. The explorer trace
is deterministic (the tests check it regenerates byte for byte); the Hypothesis trace depends on
the Hypothesis version, so the tests only check that it still reproduces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import settings

from models.core import Action, Param
from models.topiclist import EXPLORE_FLOWS_CONFIG, HYPOTHESIS_FLOWS_CONFIG, TopicListModel
from properties.explorer import explore
from properties.lockstep import Lockstep
from properties.stateful import FailedRun, build_state_machine, find_failure
from properties.topiclist import MECHANISM, make_reference
from traces.format import Trace, save
from traces.replay import record
from traces.shrink import failure_oracle, shrink

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "topiclist"
TWIN = "no_exceptional_release"
TARGET = MECHANISM.twins[TWIN]
EXPLORER_TRACE = CORPUS / f"{TWIN}-explorer-{TARGET}.json"
HYPOTHESIS_TRACE = CORPUS / f"{TWIN}-hypothesis-{TARGET}.json"
SEARCH = settings(max_examples=200, stateful_step_count=40, derandomize=True, database=None, deadline=None)


def shrunk(config: Mapping[str, Param], actions: Sequence[Action]) -> tuple[Action, ...]:
    """`actions` shrunk while model and reference, in lockstep, still leak (TL-I7)."""

    def make() -> Lockstep[Any]:
        return Lockstep(TopicListModel(config, TWIN), make_reference(config, TWIN))

    return shrink(actions, failure_oracle(make, TARGET))


def _recorded(config: Mapping[str, Param], actions: Sequence[Action], engine: str) -> Trace:
    return record(TopicListModel(config, TWIN), actions, engine=engine, implementation=make_reference(config, TWIN))


def explorer_trace() -> Trace:
    """The explorer's shortest counterexample on the broker-flow configuration."""
    found = explore(TopicListModel(EXPLORE_FLOWS_CONFIG, TWIN), stop_on_violation=True, check_liveness=False)
    finding = next(f for f in found.findings if f.name == TARGET)
    return _recorded(EXPLORE_FLOWS_CONFIG, shrunk(EXPLORE_FLOWS_CONFIG, finding.path), "explorer")


def hypothesis_run(search: settings = SEARCH) -> FailedRun:
    """The Hypothesis lockstep machine's (shrunk) failing run on the flows configuration."""
    runs: list[FailedRun] = []
    model = TopicListModel(HYPOTHESIS_FLOWS_CONFIG, TWIN)
    machine = build_state_machine(
        lambda: TopicListModel(HYPOTHESIS_FLOWS_CONFIG, TWIN),
        model.action_names,
        lambda: make_reference(HYPOTHESIS_FLOWS_CONFIG, TWIN),
        on_failure=runs.append,
    )
    if find_failure(machine, search) is None or not runs:
        raise AssertionError(f"Hypothesis did not catch {TWIN}")
    return runs[-1]


def hypothesis_trace() -> Trace:
    actions = shrunk(HYPOTHESIS_FLOWS_CONFIG, hypothesis_run().actions)
    return _recorded(HYPOTHESIS_FLOWS_CONFIG, actions, "hypothesis")


def main() -> None:
    for path, trace in ((EXPLORER_TRACE, explorer_trace()), (HYPOTHESIS_TRACE, hypothesis_trace())):
        save(trace, path)
        print(f"{path}: {len(trace.actions)} actions, {trace.failure}")


if __name__ == "__main__":
    main()
