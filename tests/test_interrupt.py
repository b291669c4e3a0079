"""Ctrl-C ends a long command with exit 130, one line saying where it was, no child left and no half trace.

It must hold on a loaded machine (CI's is), so each run has CPU burners beside it, started here and
stopping by themselves, and the signal is sent once the command shows that it is busy, not after a
fixed sleep: its forked workers exist (`--workers 2`), or its search has printed a progress line.
A command that ended before the signal would pass for one that ignored it, so each one is a search
that lasts several times longer than it takes to become ready.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from properties.cli import INTERRUPTED

BURN_S = 120
"""A burner stops by itself after this many seconds, whatever becomes of the test."""

READY_S = 180
"""How long a command may take to show that it is busy, on a loaded machine."""

EXIT_S = 15
"""How long it may take to exit after Ctrl-C, loaded: it stops its workers, it does not finish its work."""


AS_A_TERMINAL_DOES = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "os.execv(sys.executable, [sys.executable, '-m', 'properties.cli', *sys.argv[1:]])")
"""Runs the command with SIGINT at its default, as a shell in a terminal starts it: a suite run as a background job
(`pytest ... &`) inherits SIGINT ignored, and so would the command, which then rightly goes on."""


@pytest.fixture
def cpu_burners() -> Iterator[None]:
    """A busy loop per core (at least two), so that the command and this test compete for the CPU."""
    loop = f"import time\nend = time.monotonic() + {BURN_S}\nwhile time.monotonic() < end:\n    pass\n"
    burners = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(max(2, os.cpu_count() or 1))]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _group(pgid: int) -> list[int]:
    """The processes of a process group, from /proc (the field after the parent's id in /proc/PID/stat)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _signal_masks(pid: int) -> str:
    """The signals a process blocks, ignores and catches (from /proc), for the message of a Ctrl-C that did nothing."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    return ", ".join(f"{name} {fields.get(name, '?').strip()}" for name in ("SigBlk", "SigIgn", "SigCgt"))


def _workers(count: int) -> Callable[[int, str], bool]:
    return lambda pgid, _err: len(_group(pgid)) >= 1 + count


def _progress_line(pgid: int, err: str) -> bool:
    return any("states generated" in line and ": done:" not in line for line in err.splitlines())


@pytest.mark.usefixtures("cpu_burners")
@pytest.mark.parametrize(("argv", "ready"), [
    (["check", "--mechanism", "keyshared", "--workers", "2"], _workers(2)),
    (["explore", "--mechanism", "topiclist", "--config", "all_flows", "--workers", "2"], _workers(1)),
    (["explore", "--mechanism", "topiclist", "--config", "all_flows"], _progress_line),
], ids=["check-workers-2", "explore-workers-2", "explore"])
def test_ctrl_c_exits_130_promptly_and_cleanly_beside_cpu_burners(
        argv: list[str], ready: Callable[[int, str], bool], tmp_path: Path) -> None:
    command = [sys.executable, "-c", AS_A_TERMINAL_DOES, *argv, "--out", str(tmp_path / "out")]
    err_path = tmp_path / "stderr"
    with err_path.open("w") as err:
        process = subprocess.Popen(command, stderr=err, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_S
        while not ready(process.pid, err_path.read_text()):
            assert process.poll() is None, f"ended before it was interrupted: {err_path.read_text()}"
            assert time.monotonic() < deadline, f"not busy after {READY_S}s: {err_path.read_text()}"
            time.sleep(0.05)
        signals = _signal_masks(process.pid)
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
        sent = time.monotonic()
        code = process.wait(timeout=60)
        waited = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    rest = err_path.read_text()
    assert code == INTERRUPTED, f"{rest}\nwhen interrupted: {signals}; the test's: {_signal_masks(os.getpid())}"
    assert rest.splitlines()[-1].startswith(f"interrupted: brokerspec {argv[0]} "), rest
    assert "Traceback" not in rest, rest  # no worker prints one: they leave Ctrl-C to the parent
    assert waited < EXIT_S, waited
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # no process of the group is left
    assert not list(tmp_path.rglob("*.partial"))
