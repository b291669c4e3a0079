"""Ctrl-C ends a long command with exit 130, a line saying where it was, no child left and no half trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from properties.cli import INTERRUPTED


@pytest.mark.parametrize("argv", [["check", "--mechanism", "keyshared", "--workers", "2"],
                                  ["explore", "--mechanism", "keyshared", "--config", "interleave"]])
def test_ctrl_c_exits_130_promptly_and_cleanly(argv: list[str], tmp_path: Path) -> None:
    command = [sys.executable, "-m", "properties.cli", *argv, "--out", str(tmp_path / "out")]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               start_new_session=True)
    assert process.stderr is not None
    for line in process.stderr:  # wait until it is busy exploring or replaying
        if "explore keyshared" in line or "conformance keyshared" in line:
            break
    time.sleep(1.0)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    sent = time.monotonic()
    code = process.wait(timeout=30)
    waited = time.monotonic() - sent
    rest = process.stderr.read()
    assert code == INTERRUPTED, rest
    assert "interrupted: brokerspec " + argv[0] in rest
    assert waited < 10, waited  # generous for a loaded CI machine; the point is: no hang
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # no process of the group is left
    assert not list(tmp_path.rglob("*.partial"))
