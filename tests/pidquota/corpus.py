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
from models.pidquota import EXPLORE_CONFIG, HYPOTHESIS_CONFIG
from properties.engines import counterexamples
from properties.engines.stateful import FailedRun
from properties.pidquota.binding import MECHANISM
from traces.format import Trace, save

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "pidquota"
TWIN = "no_readd"
TARGET = MECHANISM.twins[TWIN]
EXPLORER_TRACE = CORPUS / f"{TWIN}-explorer-{TARGET}.json"
HYPOTHESIS_TRACE = CORPUS / f"{TWIN}-hypothesis-{TARGET}.json"


def shrunk(config: Mapping[str, Param], actions: Sequence[Action]) -> tuple[Action, ...]:
    return counterexamples.shrunk(MECHANISM, config, TWIN, actions, TARGET)


def explorer_trace() -> Trace:
    """The explorer's shortest counterexample on the small configuration."""
    return counterexamples.explorer_trace(MECHANISM, EXPLORE_CONFIG, TWIN, TARGET)


def hypothesis_run(search: settings = counterexamples.SEARCH) -> FailedRun:
    return counterexamples.hypothesis_run(MECHANISM, HYPOTHESIS_CONFIG, TWIN, search)


def main() -> None:
    hypothesis = counterexamples.hypothesis_trace(MECHANISM, HYPOTHESIS_CONFIG, TWIN, TARGET)
    for path, trace in ((EXPLORER_TRACE, explorer_trace()), (HYPOTHESIS_TRACE, hypothesis)):
        save(trace, path)
        print(f"{path}: {len(trace.actions)} actions, {trace.failure}")


if __name__ == "__main__":
    main()
