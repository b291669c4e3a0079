"""Find, shrink and record the `no_exceptional_release` counterexamples under `traces/corpus/topiclist/`.

Regenerate with `python -m tests.topiclist.corpus` from the repository root. The explorer trace
is deterministic (the tests check it regenerates byte for byte); the Hypothesis trace depends on
the Hypothesis version, so the tests only check that it still reproduces.
"""

from __future__ import annotations

from pathlib import Path

from models.topiclist import EXPLORE_FLOWS_CONFIG, HYPOTHESIS_FLOWS_CONFIG
from properties.topiclist import MECHANISM
from traces import counterexamples
from traces.format import Trace, save

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "topiclist"
TWIN = "no_exceptional_release"
TARGET = MECHANISM.twins[TWIN]
EXPLORER_TRACE = CORPUS / f"{TWIN}-explorer-{TARGET}.json"
HYPOTHESIS_TRACE = CORPUS / f"{TWIN}-hypothesis-{TARGET}.json"


def explorer_trace() -> Trace:
    """The explorer's shortest counterexample on the broker-flow configuration."""
    return counterexamples.explorer_trace(MECHANISM, EXPLORE_FLOWS_CONFIG, TWIN, TARGET)


def main() -> None:
    hypothesis = counterexamples.hypothesis_trace(MECHANISM, HYPOTHESIS_FLOWS_CONFIG, TWIN, TARGET)
    for path, trace in ((EXPLORER_TRACE, explorer_trace()), (HYPOTHESIS_TRACE, hypothesis)):
        save(trace, path)
        print(f"{path}: {len(trace.actions)} actions, {trace.failure}")


if __name__ == "__main__":
    main()
