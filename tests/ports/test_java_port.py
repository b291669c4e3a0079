"""The Java port of the topic-list AsyncSemaphore: `brokerspec verify` passes it and catches its bug.

The port is compiled once per session with `javac` into a temporary directory; each verify run
must finish within the 60 s the issue allows.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from properties.cli import DIVERGED, PASS, main
from traces.format import load

SOURCES = Path(__file__).with_name("java")


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK (javac and java)")
    out = tmp_path_factory.mktemp("java-port")
    subprocess.run(["javac", "-d", str(out), *map(str, sorted(SOURCES.glob("*.java")))], check=True, timeout=120)
    return out


def _verify(classes: Path, out: Path, *jvm: str) -> tuple[int, float]:
    started = time.monotonic()
    code = main(["verify", "--mechanism", "topiclist", "--config", "semaphore", "--budget", "8", "--out", str(out),
                 "--port", "java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", *jvm, "-cp", str(classes), "Main"])
    return code, time.monotonic() - started


def test_the_correct_java_port_passes(java_classes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, elapsed = _verify(java_classes, tmp_path)
    out = capsys.readouterr().out
    assert code == PASS, out
    assert "port agrees with the model" in out
    assert elapsed < 60


def test_the_barging_bug_is_caught_with_a_shrunk_trace_that_replays(
    java_classes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, elapsed = _verify(java_classes, tmp_path, "-Dbug=barging")
    out = capsys.readouterr().out
    assert code == DIVERGED, out
    assert elapsed < 60
    path = next((tmp_path / "topiclist").glob("current-port-divergence.json"))
    trace = load(path)
    assert trace.engine == "port" and trace.failure["names"] == ["divergence"]
    assert len(trace.actions) <= 10  # shrunk (random walks are 40 steps)
    buggy = ["java", "-Dbug=barging", "-cp", str(java_classes), "Main"]
    assert main(["replay", str(path), "--port", *buggy]) == DIVERGED
    assert main(["replay", str(path), "--port", "java", "-cp", str(java_classes), "Main"]) == PASS

