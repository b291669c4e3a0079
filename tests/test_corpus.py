"""Every saved counterexample under `traces/corpus/` still reproduces as recorded.

On the model and on the reference it fails at the recorded step with the recorded invariants,
and on the current variant the same actions (where possible) pass: the bug is still caught and
still fixed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from properties.cli.promote import CORPUS, corpus
from properties.registry import reproduction_problems

TRACES = corpus()


def test_the_corpus_is_not_empty() -> None:
    assert len(TRACES) >= 5


@pytest.mark.parametrize("path", TRACES, ids=[str(p.relative_to(CORPUS)) for p in TRACES])
def test_saved_trace_reproduces(path: Path) -> None:
    assert reproduction_problems(path) == []
