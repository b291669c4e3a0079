"""Bad input never crashes, and every trace command refuses the same traces with the same line.

Seeded mutations (`tests/fuzz/mutate.py`) of the saved traces: truncated files, flipped bytes,
deleted keys, wrong types, huge integers, deep nesting, top-level arrays, unknown or malicious
names, states out of order, configurations far out of bounds. Each case goes through `replay`,
`shrink`, `report` and `promote`, which share one input check (`properties.engines.replay.validate`):
where `replay` refuses a trace (exit 3), the other three refuse it with the identical one line
naming the file; where it accepts it, `report` draws it, and `shrink` and `promote` refuse only for
their own reasons (nothing to shrink toward, a trace that does not reproduce as recorded). Never a
traceback. Inputs that once crashed are kept in `tests/fuzz/crashers/` and run first.

Every bounded field of every mechanism (`Mechanism.limits`) is also set out of its range, in a trace of a
configuration that has it (`out_of_bounds`, generated from the declared bounds): each of the four commands
refuses it in one line naming the field, within a second and a few MB, as the bound is checked before
anything is built from the configuration.

The cases are the crashers and 150 mutations, 15 of each of the ten kinds: a representative subset
that runs in seconds. The same check over 349 mutations of two seeds (1,404 runs each) found no
traceback and no mismatch when this test was written.
"""

from __future__ import annotations

import contextlib
import io
import time
import tracemalloc
from pathlib import Path

import pytest

from properties.cli import USAGE, main
from tests.fuzz.mutate import mutations, out_of_bounds

CRASHERS = sorted((Path(__file__).parent / "crashers").glob("*.json"))
CASES = [(p.stem, p.read_text(encoding="utf-8")) for p in CRASHERS] + list(mutations(seed=20261125, count=150))
OWN_REASONS = {
    "shrink": ("the trace records no failure to shrink toward", "the trace no longer fails with"),
    "promote": ("promote keeps only a trace that reproduces as recorded",),
}
"""Why `shrink` and `promote` may refuse a trace that `replay` accepts: their job needs more of it."""


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


@pytest.mark.parametrize(("label", "text"), CASES, ids=[label for label, _ in CASES])
def test_a_mutated_trace_is_refused_alike_by_every_command_or_accepted(label: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(text, encoding="utf-8")
    commands = {
        "replay": ["replay", str(path)],
        "shrink": ["shrink", str(path), "-o", str(tmp_path / "shrunk.json")],
        "report": ["report", str(path), "--out", str(tmp_path / "r.html")],
        "promote": ["promote", str(path), "--tests-dir", str(tmp_path / "tests"), "--corpus", str(tmp_path / "corpus")],
    }
    answers = {name: _run(argv) for name, argv in commands.items()}  # an exception here is a traceback: a failure
    for name, (code, err) in answers.items():
        assert code in (0, 1, 2, 3), (name, code, err)
        if code == USAGE:
            assert err.startswith(f"error: {path}: ") and len(err.strip().splitlines()) == 1, (name, err)
    replay_code, replay_err = answers["replay"]
    if replay_code == USAGE:
        assert {name: answers[name] for name in commands} == {name: (USAGE, replay_err) for name in commands}
        return
    assert answers["report"][0] == 0, answers["report"]
    for name, reasons in OWN_REASONS.items():
        code, err = answers[name]
        assert code == 0 or any(reason in err for reason in reasons), (name, code, err)


BOUNDED = list(out_of_bounds())
REFUSAL_S = 1.0
REFUSAL_BYTES = 8 * 2**20
"""What refusing an out-of-range bound may cost, per command: a second and a few MB (issue 46; `pending: 10**9`
in a lock configuration once took 18 s and 7.9 GB)."""


@pytest.mark.parametrize(("label", "text", "key"), BOUNDED, ids=[label for label, _, _ in BOUNDED])
def test_an_out_of_range_bound_is_refused_by_every_command_in_one_line_at_once(
    label: str, text: str, key: str, tmp_path: Path
) -> None:
    path = tmp_path / "trace.json"
    path.write_text(text, encoding="utf-8")
    commands = {
        "replay": ["replay", str(path)],
        "shrink": ["shrink", str(path), "-o", str(tmp_path / "shrunk.json")],
        "report": ["report", str(path), "--out", str(tmp_path / "r.html")],
        "promote": ["promote", str(path), "--tests-dir", str(tmp_path / "tests"), "--corpus", str(tmp_path / "corpus")],
    }
    for name, argv in commands.items():
        tracemalloc.start()
        started = time.perf_counter()
        try:
            code, err = _run(argv)
            seconds = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert code == USAGE, (name, code, err)
        assert err.startswith(f"error: {path}: #meta.brokerspec.config.{key}"), (name, err)
        assert "out of bounds" in err or "does not fit in 64 bits" in err, (name, err)
        assert len(err.strip().splitlines()) == 1, (name, err)
        assert seconds < REFUSAL_S and peak < REFUSAL_BYTES, (name, seconds, peak)
