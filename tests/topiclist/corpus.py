"""Find, shrink and record the `no_exceptional_release` counterexamples under `traces/corpus/topiclist/`,
and the current variant's regression trace of a release and a shrinking update after `close()`.

Regenerate with `python -m tests.topiclist.corpus` from the repository root. The explorer trace
is deterministic (the tests check it regenerates byte for byte); the Hypothesis trace depends on
the Hypothesis version, so the tests only check that it still reproduces.
"""

from __future__ import annotations

from pathlib import Path

from models.core import Action
from models.topiclist import EXPLORE_CONFIG, EXPLORE_FLOWS_CONFIG, HYPOTHESIS_FLOWS_CONFIG, TopicListModel
from properties.engines import counterexamples
from properties.engines.replay import record
from properties.topiclist.binding import MECHANISM, make_reference
from traces.format import Trace, save

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "topiclist"
TWIN = "no_exceptional_release"
TARGET = MECHANISM.twins[TWIN]
EXPLORER_TRACE = CORPUS / f"{TWIN}-explorer-{TARGET}.json"
HYPOTHESIS_TRACE = CORPUS / f"{TWIN}-hypothesis-{TARGET}.json"
CLOSE_TRACE = CORPUS / "current-no-pass-after-close.json"
CLOSE_ACTIONS = (
    Action.of("acquire", permits=2),
    Action.of("acquire", permits=2),
    Action.of("step"),
    Action.of("close"),
    Action.of("release", permit=0),
    Action.of("update", permit=1, permits=1),
)
"""Issue 20 #4: upstream's processQueue() returns at once when closed, so neither the release nor
the shrinking update after `close()` submits a pass (the recorded `executor` stays [0]: the pass
submitted before the close)."""


def explorer_trace() -> Trace:
    """The explorer's shortest counterexample on the broker-flow configuration."""
    return counterexamples.explorer_trace(MECHANISM, EXPLORE_FLOWS_CONFIG, TWIN, TARGET)


def close_trace() -> Trace:
    """`CLOSE_ACTIONS` on the current variant, model and reference in lockstep (a passing trace)."""
    return record(
        TopicListModel(EXPLORE_CONFIG, "current"),
        CLOSE_ACTIONS,
        engine="explorer",
        implementation=make_reference(EXPLORE_CONFIG, "current"),
    )


def main() -> None:
    hypothesis = counterexamples.hypothesis_trace(MECHANISM, HYPOTHESIS_FLOWS_CONFIG, TWIN, TARGET)
    traces = ((EXPLORER_TRACE, explorer_trace()), (HYPOTHESIS_TRACE, hypothesis), (CLOSE_TRACE, close_trace()))
    for path, trace in traces:
        save(trace, path)
        print(f"{path}: {len(trace.actions)} actions, {trace.failure}")


if __name__ == "__main__":
    main()
