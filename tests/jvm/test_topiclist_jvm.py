"""`brokerspec verify --mechanism topiclist --config semaphore-locks[-cancel] --jvm CLASSPATH` on the stand-ins.

The semaphore's stand-ins (`tests/jvm/standins/topiclist`: upstream's package, interface and constructors, written by
the project) are compiled per order; the adapter (`jvm/adapters/topiclist`) hands upstream's public constructor a
managed executor, so the grants are a third scheduled thread. On the current order the exploration names SL-1 (a
release racing a growing update's grant takes the count below 0) and SL-3 (a cancel between `isDone` and
`complete` loses the old permit), each with a trace that replays on the JVM; the fixed order (the finding's fix
with its first change corrected: the failed grant puts the swapped value back into the old permit) passes both
scripts in every schedule within the bound, and the finding's first fix as it was written (the swapped value given
to the pool, the old permit left at 0) hands the cancelled caller's permit out twice (SL-2, on what the permits
are worth to their holders).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from properties.cli import PASS, VIOLATED, main


def _verify(classes: Path, config: str, out: Path) -> tuple[int, float]:
    started = time.monotonic()
    code = main(["verify", "--mechanism", "topiclist", "--config", config, "--budget", "50", "--out", str(out),
                 "--jvm", str(classes)])
    return code, time.monotonic() - started


@pytest.mark.parametrize(("config", "name", "race"), [
    ("semaphore-locks", "SL-1", "other: org.apache.pulsar.common.semaphore.AsyncSemaphoreImpl$SemaphorePermit."
                                "releasePermits"),
    ("semaphore-locks-cancel", "SL-3", "caller: org.apache.pulsar.common.semaphore.BrokerspecSemaphoreLocks.run"),
])
def test_the_current_order_breaks_it_and_the_trace_replays_on_the_jvm(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str,
    name: str, race: str
) -> None:
    classes = standin_classes["topiclist", "current"]
    code, elapsed = _verify(classes, config, tmp_path)
    out = capsys.readouterr().out
    assert code == VIOLATED and elapsed < 60 and f"jvm {config}: {name} after" in out, out
    trace = tmp_path / "topiclist" / f"current-jvm-{config}-{name}.json"
    points = json.loads(trace.read_text(encoding="utf-8"))["points"]
    # the other thread's one step inside the executor's grant: the release's swap (SL-1), the cancel (SL-3); the
    # grant's count of the available permits comes after it
    at = max(i for i, p in enumerate(points) if not p.startswith("executor:"))
    assert points[at].startswith(race), points
    assert any(p.startswith("executor: ") and "AtomicLong.addAndGet" in p for p in points[at:]), points
    assert main(["replay", str(trace), "--jvm", str(classes)]) == VIOLATED
    assert f"{name} on topiclist/current {config} on the JVM" in capsys.readouterr().out


@pytest.mark.parametrize("config", ["semaphore-locks", "semaphore-locks-cancel"])
def test_the_fixed_order_passes_every_schedule(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str
) -> None:
    code, elapsed = _verify(standin_classes["topiclist", "fixed"], config, tmp_path)
    out = capsys.readouterr().out
    assert code == PASS and elapsed < 60, out
    assert "(every schedule)" in out and "no invariant violated" in out, out


def test_the_findings_uncorrected_fix_counts_the_cancelled_callers_permit_twice(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    classes = standin_classes["topiclist", "finding-fix"]
    code, _ = _verify(classes, "semaphore-locks-cancel", tmp_path)
    out = capsys.readouterr().out
    assert code == VIOLATED and "jvm semaphore-locks-cancel: SL-2 after" in out, out
    trace = tmp_path / "topiclist" / "current-jvm-semaphore-locks-cancel-SL-2.json"
    points = json.loads(trace.read_text(encoding="utf-8"))["points"]
    assert any("CompletableFuture.cancel" in p for p in points) and "AtomicLong.addAndGet" in points[-1], points
    assert main(["replay", str(trace), "--jvm", str(standin_classes["topiclist", "fixed"])]) == PASS


def test_without_the_swap_a_release_and_the_grant_both_take_the_old_permit(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The known-bad order the finding says the current code relies on not being (`unswapped`: releasePermits a
    volatile read, then a write): the release and the grant both read the old permit's value, which is then counted
    twice (SL-2)."""
    code, _ = _verify(standin_classes["topiclist", "unswapped"], "semaphore-locks", tmp_path)
    out = capsys.readouterr().out
    assert code == VIOLATED and "jvm semaphore-locks: SL-2 after" in out, out
    points = json.loads((tmp_path / "topiclist" / "current-jvm-semaphore-locks-SL-2.json").read_text())["points"]
    reads = [p.split(":")[0] for p in points if "volatile read AsyncSemaphoreImpl.SemaphorePermit.permits" in p
             and "releasePermits" in p]
    assert {"other", "executor"} <= set(reads), points
