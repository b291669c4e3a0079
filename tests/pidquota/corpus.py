"""Find, shrink and record the `no_readd` counterexamples committed under `traces/corpus/pidquota/`.

Regenerate with `python -m tests.pidquota.corpus` (from the repository root). The explorer trace is
deterministic and the tests check that it regenerates byte for byte; the Hypothesis trace depends on
the Hypothesis version, so the tests only check that it still reproduces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from hypothesis import settings

from models.core import Action, Param
from models.pidquota import ACTION_NAMES, EXPLORE_CONFIG, HYPOTHESIS_CONFIG, PidQuotaModel
from properties.explorer import explore
from properties.lockstep import Lockstep
from properties.pidquota import MECHANISM, PidQuotaReference
from properties.stateful import FailedRun, build_state_machine, find_failure
from traces.format import Trace, save
from traces.replay import record
from traces.shrink import failure_oracle, shrink

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "pidquota"
TWIN = "no_readd"
TARGET = MECHANISM.twins[TWIN]
EXPLORER_TRACE = CORPUS / f"{TWIN}-explorer-{TARGET}.json"
HYPOTHESIS_TRACE = CORPUS / f"{TWIN}-hypothesis-{TARGET}.json"
SEARCH = settings(max_examples=200, stateful_step_count=40, derandomize=True, database=None, deadline=None)


def shrunk(config: Mapping[str, Param], actions: Sequence[Action]) -> tuple[Action, ...]:
    """`actions` shrunk by `traces.shrink` while model and reference still break the target invariant."""

    def make() -> Lockstep[object]:
        return Lockstep(PidQuotaModel(config, TWIN), PidQuotaReference(config, TWIN))  # type: ignore[arg-type]

    return shrink(actions, failure_oracle(make, TARGET))


def _recorded(config: Mapping[str, Param], actions: Sequence[Action], engine: str) -> Trace:
    return record(PidQuotaModel(config, TWIN), actions, engine=engine, implementation=PidQuotaReference(config, TWIN))


def explorer_trace() -> Trace:
    """The explorer's shortest counterexample on the small configuration."""
    found = explore(PidQuotaModel(EXPLORE_CONFIG, TWIN), stop_on_violation=True, check_liveness=False)
    finding = next(f for f in found.findings if f.name == TARGET)
    return _recorded(EXPLORE_CONFIG, shrunk(EXPLORE_CONFIG, finding.path), "explorer")


def hypothesis_run(search: settings = SEARCH) -> FailedRun:
    """The Hypothesis lockstep machine's (shrunk) failing run on the Hypothesis configuration."""
    runs: list[FailedRun] = []
    machine = build_state_machine(
        lambda: PidQuotaModel(HYPOTHESIS_CONFIG, TWIN),
        ACTION_NAMES,
        lambda: PidQuotaReference(HYPOTHESIS_CONFIG, TWIN),
        on_failure=runs.append,
    )
    if find_failure(machine, search) is None or not runs:
        raise AssertionError(f"Hypothesis did not catch {TWIN}")
    return runs[-1]


def hypothesis_trace() -> Trace:
    return _recorded(HYPOTHESIS_CONFIG, shrunk(HYPOTHESIS_CONFIG, hypothesis_run().actions), "hypothesis")


def main() -> None:
    for path, trace in ((EXPLORER_TRACE, explorer_trace()), (HYPOTHESIS_TRACE, hypothesis_trace())):
        save(trace, path)
        print(f"{path}: {len(trace.actions)} actions, {trace.failure}")


if __name__ == "__main__":
    main()
