"""Bad input never crashes: mutated corpus traces through replay, report, shrink and promote.

Seeded mutations (`tests/fuzz/mutate.py`) of the saved traces: truncated files, flipped bytes,
deleted keys, wrong types, huge integers, deep nesting, top-level arrays, unknown or malicious
names, states out of order, configurations far out of bounds. Every command must answer with an
exit code: 3 with exactly one line for a trace the loader rejects, and never a traceback. Inputs
that once crashed are kept in `tests/fuzz/crashers/` and run first.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from properties.cli import USAGE, main
from tests.fuzz.mutate import mutations
from traces.format import TraceError, load

CRASHERS = sorted((Path(__file__).parent / "crashers").glob("*.json"))
CASES = [(p.stem, p.read_text(encoding="utf-8")) for p in CRASHERS] + list(mutations(seed=20261125, count=150))


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


@pytest.mark.parametrize(("label", "text"), CASES, ids=[label for label, _ in CASES])
def test_a_mutated_trace_gets_an_exit_code_and_one_line(label: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(text, encoding="utf-8")
    try:
        load(path)
        valid = True
    except TraceError:
        valid = False
    commands = [["replay", str(path)], ["report", str(path), "--out", str(tmp_path / "r.html")],
                ["promote", str(path), "--tests-dir", str(tmp_path / "tests"), "--corpus", str(tmp_path / "corpus")]]
    if valid:
        commands.append(["shrink", str(path), "-o", str(tmp_path / "shrunk.json")])
    for argv in commands:
        code, err = _run(argv)
        assert code in (0, 1, 2, 3), (argv[0], code, err)
        if not valid:
            assert code == USAGE, (argv[0], err)
        if code == USAGE:
            assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, (argv[0], err)
