"""Turn a counterexample into a pytest regression test, and find the saved corpus.

A promoted test copies its trace under `traces/corpus/<mechanism>/` and asserts, through
`reproduction_problems`, that it still reproduces as recorded; so a model change that hides the
bug, or a regression that brings it back on the current variant, fails the gate.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from traces.format import load

CORPUS = Path(__file__).parent / "corpus"

_TEMPLATE = '''"""Regression: {mechanism} `{variant}` {names} (found by {engine}{seed}), via `brokerspec promote`."""

from pathlib import Path

from traces.replay import reproduction_problems

TRACE = Path(__file__).resolve().parents[{depth}] / "traces" / "corpus" / "{mechanism}" / "{file}"


def test_{ident}() -> None:
    assert reproduction_problems(TRACE) == []
'''


def corpus(mechanism: str | None = None, root: Path = CORPUS) -> list[Path]:
    """Every saved trace, optionally of one mechanism, in a stable order."""
    pattern = f"{mechanism}/*.json" if mechanism else "*/*.json"
    return sorted(root.glob(pattern))


def promote(trace_path: Path, tests_dir: Path, name: str | None = None, corpus_root: Path = CORPUS) -> Path:
    """Copy the trace into the corpus and write a test replaying it; returns the test's path."""
    trace = load(trace_path)
    stem = name or trace_path.stem
    ident = re.sub(r"\W+", "_", stem).strip("_").lower() or "trace"
    target = corpus_root / trace.mechanism / f"{ident}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    if trace_path.resolve() != target.resolve():
        shutil.copyfile(trace_path, target)
    tests_dir.mkdir(parents=True, exist_ok=True)
    test_path = tests_dir / f"test_{trace.mechanism}_{ident}.py"
    names = "/".join(str(n) for n in trace.failure.get("names", [])) or "run"  # type: ignore[union-attr]
    depth = len(test_path.resolve().relative_to(corpus_root.resolve().parents[1]).parts) - 1
    test_path.write_text(
        _TEMPLATE.format(
            mechanism=trace.mechanism,
            variant=trace.variant,
            names=names,
            engine=trace.engine,
            seed=f", seed {trace.seed}" if trace.seed is not None else "",
            depth=depth,
            file=target.name,
            ident=ident,
        ),
        encoding="utf-8",
    )
    return test_path
