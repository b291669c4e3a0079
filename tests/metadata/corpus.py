"""Write the metadata corpus: the blocking-callback deadlocks, found by the engines, shrunk and recorded.

Run `python -m tests.metadata.corpus` from the repository root to (re)write `traces/corpus/metadata/`.
Each trace is found by an engine (the explorer's shortest path, or the Hypothesis machine's shrunk
run), shrunk again with `properties.engines.shrink` against model and reference in lockstep, and recorded with
the reference, so its states carry the reference's projection, including the `deadlock` cycle.
"""

from __future__ import annotations

from pathlib import Path

from models.metadata import EXPLORE_CONFIG, HYPOTHESIS_CONFIG
from properties.engines import counterexamples
from properties.metadata.binding import MECHANISM
from traces.format import Trace, save

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "metadata"
TARGET = "MD-I5"


def explorer_trace(variant: str) -> Trace:
    """The explorer's shortest deadlock on the small configuration, shrunk and recorded."""
    return counterexamples.explorer_trace(MECHANISM, EXPLORE_CONFIG, variant, TARGET, "explorer+shrink")


def main() -> None:
    for name, trace in (
        ("legacy-explorer-MD-I5", explorer_trace("legacy")),
        ("blocking_callback-explorer-MD-I5", explorer_trace("blocking_callback")),
        ("legacy-hypothesis-MD-I5",
         counterexamples.hypothesis_trace(MECHANISM, HYPOTHESIS_CONFIG, "legacy", TARGET, engine="hypothesis+shrink")),
    ):
        path = save(trace, CORPUS / f"{name}.json")
        print(f"{path}: {len(trace.actions)} steps, {trace.failure}")


if __name__ == "__main__":
    main()
