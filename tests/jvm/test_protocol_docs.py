"""docs/ports.md's lock-level session ("Lock-level ports") is what the JVM controller answers, line for line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from properties.jvm.build import java_command

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ports.md"
SECTION = "## Lock-level ports"


def _lines(text: str) -> list[tuple[int, str, dict[str, Any]]]:
    """The `>>` / `<<` lines of the section, as (line number, direction, message)."""
    start = text.index(SECTION)
    numbered = enumerate(text.splitlines(), start=1)
    first = text[:start].count("\n") + 1
    return [(n, line[:2], json.loads(line[3:])) for n, line in numbered if n >= first and line[:3] in (">> ", "<< ")]


def _play(lines: list[tuple[int, str, dict[str, Any]]], classes: Path) -> int:
    """Sends each `>>` line to the toy's port and checks the answer against the next `<<` line; lines checked."""
    argv = java_command([classes], ["toy"], "brokerspec.jvm.Driver", "toy.TwoThreads")
    port = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert port.stdin is not None and port.stdout is not None
    try:
        for (number, direction, message), (answer_at, answered, expected) in zip(lines[::2], lines[1::2], strict=True):
            assert (direction, answered) == (">>", "<<"), f"docs/ports.md line {number}: a request, then its answer"
            port.stdin.write(json.dumps(message) + "\n")
            port.stdin.flush()
            assert json.loads(port.stdout.readline()) == expected, f"docs/ports.md line {answer_at}"
    finally:
        port.kill()
        port.wait()
        port.stdin.close()
        port.stdout.close()
    return len(lines)


def test_the_documented_session_is_what_the_port_answers(toy_classes: Path) -> None:
    lines = _lines(DOCS.read_text(encoding="utf-8"))
    assert {m["type"] for _, _, m in lines} >= {"hello", "ready", "run", "ran", "error", "reset"}
    assert _play(lines, toy_classes) >= 8


def test_a_wrong_documented_answer_is_caught(toy_classes: Path) -> None:
    """The twin: the same session with thread b's state in the first `ran` changed fails on that line."""
    lines = _lines(DOCS.read_text(encoding="utf-8"))
    ran = next(i for i, (_, _, m) in enumerate(lines) if m["type"] == "ran")
    number, direction, message = lines[ran]
    threads = [{**t, "state": "enabled"} if t["name"] == "b" else t for t in message["threads"]]
    broken = [*lines[:ran], (number, direction, {**message, "threads": threads}), *lines[ran + 1:]]
    try:
        _play(broken, toy_classes)
    except AssertionError as failure:
        assert f"line {number}" in str(failure)
    else:
        raise AssertionError("the changed answer was accepted")
