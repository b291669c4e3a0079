"""The Java ports: `brokerspec verify` passes each and catches each one's deliberate bug.

Two pieces in one program (`tests/ports/java/Main.java` picks by the hello): the topic-list
AsyncSemaphore (`-Dbug=barging`) and Key_Shared's PendingAcksMap + DrainingHashesTracker at the
keyshared "tracker" scope (`-Dbug=post-decrement`). The port is compiled once per session with
`javac` into a temporary directory; each verify run must finish within the 60 s the issue allows.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from models.core import Action, Json, Model, Observation
from properties import registry
from properties.cli import DIVERGED, PASS, main
from properties.engines.lockstep import DIVERGENCE, BaseImplementation, Implementation
from properties.engines.verify import PortSpec, run_actions
from properties.registry import replay
from tests.ports.tools import need
from traces.format import load

SOURCES = Path(__file__).with_name("java")


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need("javac", "java", package="openjdk-17-jdk-headless")
    out = tmp_path_factory.mktemp("java-port")
    subprocess.run(["javac", "-d", str(out), *map(str, sorted(SOURCES.glob("*.java")))], check=True, timeout=120)
    return out


def _verify(classes: Path, out: Path, *jvm: str, mechanism: str = "topiclist", config: str = "semaphore",
            tour_only: bool = False) -> tuple[int, float]:
    """A passing port spends the whole budget (unless only the tour runs: it ends with the tour); a buggy one
    stops once its run is shrunk, so its budget is ample: on a loaded machine a tight one cuts shrinking
    short (a 12-step trace where 10 are enough)."""
    budget = "60" if tour_only else "20" if jvm else "8"
    started = time.monotonic()
    code = main(["verify", "--mechanism", mechanism, "--config", config, "--budget", budget, "--out", str(out),
                 *(["--tour-only"] if tour_only else []),
                 "--port", "java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", *jvm, "-cp", str(classes), "Main"])
    return code, time.monotonic() - started


def test_the_correct_java_port_passes_the_whole_tour_on_one_process(
    java_classes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, elapsed = _verify(java_classes, tmp_path, tour_only=True)
    out = capsys.readouterr().out
    assert code == PASS, out
    covered, total = re.search(r"tour semaphore: (\d+) / (\d+) transitions covered", out).groups()  # type: ignore[union-attr]
    assert covered == total and int(total) > 1000, out
    assert "1 port processes" in out  # the port announces reset: every walk of the tour on one JVM
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



def test_the_correct_java_tracker_port_passes(java_classes: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, elapsed = _verify(java_classes, tmp_path, mechanism="keyshared", config="tracker")
    out = capsys.readouterr().out
    assert code == PASS, out
    assert "port agrees with the model and the reference" in out
    processes = int(re.search(r"(\d+) port processes", out).group(1))  # type: ignore[union-attr]
    assert processes <= 3, out  # a tour (or two) and the random runs, each on one JVM through reset
    assert elapsed < 60


def test_the_post_decrement_bug_is_caught_with_a_shrunk_trace_that_replays(
    java_classes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`refCount-- > 0` leaves the last entry of a drained hash behind with 0 refs: the hash stays blocked."""
    code, elapsed = _verify(java_classes, tmp_path, "-Dbug=post-decrement", mechanism="keyshared", config="tracker")
    out = capsys.readouterr().out
    assert code == DIVERGED, out
    assert elapsed < 60
    path = tmp_path / "keyshared" / "pip379-port-divergence.json"
    trace = load(path)
    assert trace.engine == "port" and trace.failure["names"] == ["divergence"]
    assert trace.config["scope"] == "tracker"
    assert len(trace.actions) <= 10  # shrunk (random walks are 40 steps); the bug needs add, move, ack
    assert [a.name for a in trace.actions[:2]] == ["add_pending_ack_if_allowed", "move_hash"]
    assert [d[2] for d in trace.steps[-1].vars["draining"]] == [0]  # type: ignore[index, union-attr]
    assert replay(trace, str(path), check_vars=False).ok  # the same actions break nothing on the model
    buggy = ["java", "-Dbug=post-decrement", "-cp", str(java_classes), "Main"]
    assert main(["replay", str(path), "--port", *buggy]) == DIVERGED
    assert main(["replay", str(path), "--port", "java", "-cp", str(java_classes), "Main"]) == PASS


class _Skewed(BaseImplementation):
    """The reference with one variable misreported after its first step: a reference the port cannot match."""

    def __init__(self, inner: Implementation) -> None:
        self.inner, self.stepped = inner, False

    def apply(self, action: Action) -> Observation:
        self.stepped = True
        return self.inner.apply(action)

    def vars(self) -> dict[str, Json]:
        out = dict(self.inner.vars())
        if self.stepped:
            out[min(out)] = "skewed"
        return out

    def violations(self) -> list[str]:
        return self.inner.violations()

    def close(self) -> None:
        self.inner.close()


def test_verify_runs_the_reference_beside_the_port_and_names_it_when_they_disagree(java_classes: Path) -> None:
    mechanism = registry.get("topiclist")
    config = mechanism.hypothesis_configs["semaphore"]
    model = mechanism.make_model(config, mechanism.current)
    actions = [model.enabled(model.initial())[0]]
    argv = ("java", "-cp", str(java_classes), "Main")
    reference = mechanism.make_reference
    assert reference is not None

    def make_model() -> Model[Any]:
        return mechanism.make_model(config, mechanism.current)

    beside = PortSpec(argv, mechanism, mechanism.current, config, reference=reference)
    assert run_actions(make_model, beside, actions) is None
    skewed = PortSpec(argv, mechanism, mechanism.current, config,
                      reference=lambda c, v: _Skewed(reference(c, v)))
    found = run_actions(make_model, skewed, actions)
    assert found is not None and (found.target, found.actions) == (DIVERGENCE, tuple(actions))
    assert found.detail.startswith("state ") and "reference" in found.detail and '"skewed"' in found.detail
