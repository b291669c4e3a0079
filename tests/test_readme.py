"""The README's quick start is what CI runs: the test command in `.ci/run` is the README's."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_quick_start_has_exactly_two_commands_one_per_job() -> None:
    commands = _quick_start_commands()
    assert len(commands) == 2
    assert commands[0].endswith("brokerspec check")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _quick_start_commands()[1] in ci.splitlines()


def test_quick_start_says_how_to_run_a_bare_brokerspec_how_long_and_how_to_run_the_screenshot_tests() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/brokerspec" in section and ". .venv/bin/activate" in section
    assert re.search(r"takes about \d+ minutes on\s+2 cores", section)
    assert "apt-get install chromium" in section
