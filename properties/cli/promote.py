"""Turn a counterexample into a pytest regression test, and find the saved corpus.

A promoted test copies its trace under `traces/corpus/<mechanism>/` and asserts, through
`reproduction_problems`, that it still reproduces as recorded; so a model change that hides the
bug, or a regression that brings it back on the current variant, fails the gate.

A trace is data from anywhere: nothing in it reaches the generated test's source except names
checked against the registry (mechanism, variant) and the file name made of `[a-z0-9_]`, and every
path derived from it is resolved inside the folder it belongs to.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from properties import registry
from properties.engines.replay import reproduction_problems
from traces.format import TraceError, load

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus"

_TEMPLATE = '''"""Regression: {mechanism} `{variant}`, saved by `brokerspec promote` as {file}."""

from pathlib import Path

from properties.registry import reproduction_problems

TRACE = {where}


def test_{ident}() -> None:
    assert reproduction_problems(TRACE) == []
'''


def corpus(mechanism: str | None = None, root: Path = CORPUS) -> list[Path]:
    """Every saved trace, optionally of one mechanism, in a stable order."""
    pattern = f"{mechanism}/*.json" if mechanism else "*/*.json"
    return sorted(root.glob(pattern))


def _inside(folder: Path, name: str) -> Path:
    """`folder / name`, refused unless it stays inside `folder`."""
    path = (folder / name).resolve()
    if path.parent != folder.resolve():
        raise TraceError(f"{name!r} would be written outside {folder}")
    return path


def _trace_expression(test_path: Path, target: Path) -> str:
    """Python for the trace's path seen from the test: relative to the test's own folder where they
    share a root, else the absolute path (as a literal)."""
    try:
        relative = Path(os.path.relpath(target, test_path.parent))
    except ValueError:  # another drive
        return f"Path({str(target)!r})"
    ups = next((i for i, part in enumerate(relative.parts) if part != ".."), len(relative.parts))
    rest = relative.parts[ups:]
    base = "Path(__file__).resolve().parent" + "".join(".parent" for _ in range(ups))
    return base + "".join(f" / {part!r}" for part in rest)


def promote(
    trace_path: Path, tests_dir: Path, name: str | None = None, corpus_root: Path = CORPUS, force: bool = False
) -> tuple[Path, Path]:
    """Copy the trace into the corpus and write a test replaying it; returns (test, corpus trace).

    `TraceError` (one line) for a trace that `replay` refuses (the same line), one that does not
    reproduce as recorded, or when the test or the corpus trace exists already with other contents and
    `force` is not given.
    """
    trace = load(trace_path)
    registry.validate(trace, str(trace_path))  # what `replay` refuses, `promote` refuses with the same line
    problems = reproduction_problems(registry.mechanism_for(trace, str(trace_path)), trace, trace_path)
    if problems:  # the test written below would fail from the start
        raise TraceError(f"{problems[0]} (promote keeps only a trace that reproduces as recorded)")
    stem = name or trace_path.stem
    ident = re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_") or "trace"
    folder = corpus_root / trace.mechanism
    target = _inside(folder, f"{ident}.json")
    tests_dir = tests_dir.resolve()
    test_path = _inside(tests_dir, f"test_{trace.mechanism}_{ident}.py")
    same_trace = target.exists() and target.read_bytes() == trace_path.read_bytes()
    if not force and (target.exists() and not same_trace):
        raise TraceError(f"{target} exists with other contents (choose another --name, or --force)")
    if not force and test_path.exists():
        raise TraceError(f"{test_path} exists (choose another --name, or --force)")
    folder.mkdir(parents=True, exist_ok=True)
    if not same_trace:
        shutil.copyfile(trace_path, target)
    tests_dir.mkdir(parents=True, exist_ok=True)
    test_path.write_text(
        _TEMPLATE.format(mechanism=trace.mechanism, variant=trace.variant, file=target.name, ident=ident,
                         where=_trace_expression(test_path, target)),
        encoding="utf-8",
    )
    return test_path, target
