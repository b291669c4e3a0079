"""docs/findings/reproductions: the upstream-ready tests fail on the orders with the bug and pass on the fix.

Each reproduction is a TestNG test in upstream's package that uses upstream's public API only; CI compiles it with
the stand-ins of each order and a two-file stand-in of TestNG (`tests/jvm/testng`: `@Test`, `Assert`, and a
runner), so no TestNG jar is needed.
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


def _run(order: str, out: Path) -> subprocess.CompletedProcess[str]:
    root = STANDINS / "topiclist"
    sources = [*(root / "common").rglob("*.java"), *(root / order).rglob("*.java"), *TESTNG.rglob("*.java"),
               REPRODUCTIONS / "AsyncSemaphoreImplCancelDuringGrantTest.java"]
    compile_java(sorted(sources), out)
    return subprocess.run(["java", "-cp", str(out), "RunTests", SL3], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("order", "passes", "message"), [
    ("current", False, "once the old permit is released, the pool is whole expected [2] but found [1]"),
    ("finding-fix", False, "only 1 permit is available expected [1] but found [2]"),
    ("fixed", True, "PASS "),
])
def test_the_sl3_reproduction_fails_exactly_where_the_bug_is(
    agent_jar: Path, tmp_path: Path, order: str, passes: bool, message: str
) -> None:
    done = _run(order, tmp_path)
    assert (done.returncode == 0) == passes and message in done.stdout, done.stdout + done.stderr
