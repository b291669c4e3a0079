"""docs/findings/reproductions: the upstream-ready tests fail on the orders with the bug and pass on the fix.

Each reproduction is a TestNG test in upstream's package that uses upstream's public API only; CI compiles it with
the stand-ins of each order and small stand-ins of TestNG and Mockito (`tests/jvm/testng`: `@Test`, `Assert`, a
runner, and `Mockito.mock`), so no TestNG or Mockito jar is needed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from properties.jvm.build import compile_java
from tests.jvm.conftest import STANDINS

ROOT = Path(__file__).resolve().parents[2]
REPRODUCTIONS = ROOT / "docs" / "findings" / "reproductions"
TESTNG = Path(__file__).with_name("testng")
SL3 = "org.apache.pulsar.common.semaphore.AsyncSemaphoreImplCancelDuringGrantTest"
LK6 = "org.apache.pulsar.broker.service.DrainingHashesTrackerLostUnblockTest"


def _run(mechanism: str, order: str, test: str, out: Path) -> subprocess.CompletedProcess[str]:
    root = STANDINS / mechanism
    sources = [*(root / "common").rglob("*.java"), *(root / order).rglob("*.java"), *TESTNG.rglob("*.java"),
               REPRODUCTIONS / f"{test.rsplit('.', 1)[1]}.java"]
    compile_java(sorted(sources), out)
    return subprocess.run(["java", "-cp", str(out), "RunTests", test], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("order", "passes", "message"), [
    ("current", False, "once the old permit is released, the pool is whole expected [2] but found [1]"),
    ("finding-fix", False, "only 1 permit is available expected [1] but found [2]"),
    ("fixed", True, "PASS "),
])
def test_the_sl3_reproduction_fails_exactly_where_the_bug_is(
    agent_jar: Path, tmp_path: Path, order: str, passes: bool, message: str
) -> None:
    done = _run("topiclist", order, SL3, tmp_path)
    assert (done.returncode == 0) == passes and message in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(("order", "passes", "message"), [
    ("current", False, "blocked by a removed entry, and no stickyKeyHashUnblocked call followed: []"),
    ("locked-block", True, "PASS "),
])
def test_the_lk6_reproduction_fails_on_the_current_tracker_and_passes_on_the_fix(
    agent_jar: Path, tmp_path: Path, order: str, passes: bool, message: str
) -> None:
    """The dispatch paused after its getEntry while the drainer's last ack removes the entry: on the current order
    it reports the hash blocked with no unblocking call (LK-6); the fix's locked check returns false."""
    done = _run("keyshared", order, LK6, tmp_path)
    assert (done.returncode == 0) == passes and message in done.stdout, done.stdout + done.stderr
