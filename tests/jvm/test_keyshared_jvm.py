"""`brokerspec verify --mechanism keyshared --config locks --jvm CLASSPATH` on the project's stand-ins.

The stand-ins (`tests/jvm/standins`: upstream's packages, constructors and methods, written by the project) are
compiled per tracker order; the adapter (`jvm/adapters/keyshared`) runs the lock configuration's dispatcher and
acker threads through them under the JVM controller. On the current order the exploration names LK-6 (the lost
wake-up of docs/findings/keyshared-tracker-lost-unblock.md) with a trace that replays on the JVM; on the fixed
order (`locked-block`, beside the model's `locks-fix`) it explores every schedule within the bound and finds
nothing. Every step runs in lockstep with the lock model (the adapter reports each thread's point as the model
labels it), so the fixed code beside the current model, or the current order's trace replayed on the fixed code,
is a granularity divergence. Each run must stay under the issue's 60 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from properties import registry
from properties.cli import DIVERGED, PASS, USAGE, VIOLATED, main
from properties.engines.port import jsonable
from properties.engines.protocol import hello_config
from properties.jvm.verify import verify_on_jvm


def _verify(classes: Path, out: Path, config: str = "locks") -> tuple[int, float]:
    started = time.monotonic()
    code = main(["verify", "--mechanism", "keyshared", "--config", config, "--budget", "50", "--out", str(out),
                 "--jvm", str(classes)])
    return code, time.monotonic() - started


@dataclass(frozen=True)
class Run:
    code: int
    elapsed_s: float
    out: str
    folder: Path


@pytest.fixture(scope="module")
def current_run(standin_classes: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory) -> Run:
    """verify --jvm on the current order, once for the module (its output captured by hand: a module fixture has
    no capsys)."""
    folder = tmp_path_factory.mktemp("jvm-current")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code, elapsed = _verify(standin_classes["keyshared", "current"], folder)
    return Run(code, elapsed, buffer.getvalue(), folder)


def test_the_current_order_loses_a_wake_up_and_the_trace_replays_on_the_jvm(
    standin_classes: dict[tuple[str, str], Path], current_run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    out = current_run.out
    assert current_run.code == VIOLATED and current_run.elapsed_s < 60, out
    assert re.search(r"jvm locks: LK-6 after \d+ steps", out), out
    trace = current_run.folder / "keyshared" / "pip379-jvm-locks-LK-6.json"
    document = json.loads(trace.read_text(encoding="utf-8"))
    assert document["failure"]["names"] == ["LK-6"]
    # the race: the dispatcher counts its block on an entry the acker removed meanwhile, reading no block
    assert document["points"][-1].startswith("dispatcher: ") and "incrementBlockedCount" in document["points"][-1]
    assert any(p.startswith("acker: ") and "isBlocking" in p for p in document["points"])
    assert main(["replay", str(trace), "--jvm", str(standin_classes["keyshared", "current"])]) == VIOLATED
    assert "LK-6 on keyshared/pip379 locks on the JVM" in capsys.readouterr().out


def test_the_fixed_order_passes_every_schedule_and_the_old_trace_diverges_on_it(
    standin_classes: dict[tuple[str, str], Path], current_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, elapsed = _verify(standin_classes["keyshared", "locked-block"], tmp_path, "locks-fix")
    out = capsys.readouterr().out
    assert code == PASS and elapsed < 60, out
    schedules = int(re.search(r"jvm locks-fix: (\d+) schedules", out).group(1))  # type: ignore[union-attr]
    assert "(every schedule)" in out and "no invariant violated" in out and schedules > 50, out
    trace = current_run.folder / "keyshared" / "pip379-jvm-locks-LK-6.json"
    assert main(["replay", str(trace), "--jvm", str(standin_classes["keyshared", "locked-block"])]) == DIVERGED
    assert ("granularity on keyshared/pip379 locks on the JVM after 8 of the trace's 51 steps: dispatcher: the JVM "
            "is at 'shouldBlockStickyKeyHash: tracker.writeLock.lock'") in capsys.readouterr().out


def test_shrink_keeps_the_lost_wake_up_on_the_smallest_scripts_and_refuses_classes_it_does_not_fail_on(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`shrink --jvm` drops script operations while the JVM still finds LK-6: from a script with two blocks
    too many it ends on the model's own shortest scripts (one join, one block against both acks), and its trace
    replays to LK-6. On the fixed classes the trace does not fail, so there is nothing to shrink toward (exit 2),
    never a 'shrunk' trace of something else."""
    mechanism = registry.get("keyshared")
    config = {**mechanism.explore_configs["locks"], "dispatcher": ("join 2", "block", "block", "block")}
    hello = {key: jsonable(value) for key, value in hello_config(mechanism, "pip379", config).items()}
    current = standin_classes["keyshared", "current"]
    found = verify_on_jvm("keyshared", "pip379", "locks", hello, [current],
                          lambda: mechanism.make_model(config, "pip379")).trace
    assert found is not None and found.names == ("LK-6",)
    trace, shrunk = found.save(tmp_path / "lk6.json"), tmp_path / "shrunk.json"
    assert main(["shrink", str(trace), "--jvm", str(current), "-o", str(shrunk)]) == PASS
    after = json.loads(shrunk.read_text())
    assert after["failure"]["names"] == ["LK-6"] and len(after["schedule"]) <= len(found.schedule)
    assert (after["hello"]["dispatcher"], after["hello"]["acker"]) == (["join 2", "block"], ["ack 0", "ack 1"])
    assert "6 -> 4 script operations" in capsys.readouterr().out
    assert main(["replay", str(shrunk), "--jvm", str(current)]) == VIOLATED
    fixed = str(standin_classes["keyshared", "locked-block"])
    assert main(["shrink", str(trace), "--jvm", fixed, "-o", str(tmp_path / "none.json")]) == DIVERGED
    assert "nothing to shrink toward" in capsys.readouterr().out and not (tmp_path / "none.json").exists()


def test_a_missing_classpath_entry_or_a_configuration_without_adapter_is_a_usage_error(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"{standin_classes['keyshared', 'current']}{os.pathsep}{tmp_path / 'nowhere.jar'}"
    assert _verify(Path(missing), tmp_path)[0] == USAGE
    assert main(["verify", "--mechanism", "keyshared", "--config", "tracker", "--jvm",
                 str(standin_classes["keyshared", "current"])]) == USAGE
    err = capsys.readouterr().err
    assert "nowhere.jar: no such file or folder" in err and "has no adapter for keyshared --config tracker" in err


def test_the_fixed_code_beside_the_current_model_is_a_granularity_divergence(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lockstep's twin: the fixed tracker takes the write lock where the current model counts the block, a point
    the code has and the model lacks; and the current tracker ran in lockstep with the current model up to LK-6."""
    code, _ = _verify(standin_classes["keyshared", "locked-block"], tmp_path)
    out = capsys.readouterr().out
    assert code == DIVERGED, out
    assert ("granularity after 8 steps: dispatcher: the JVM is at 'shouldBlockStickyKeyHash: tracker.writeLock.lock', "
            "the model at 'shouldBlockStickyKeyHash: entry.blockedCount.incrementAndGet'") in out, out


def test_the_order_before_23854_updates_stats_under_the_tracker_monitor(
    standin_classes: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The known-bad order of apache/pulsar#23854 beside its model (`locks-pre23854`): the first addEntry updates
    the stats inside the tracker's monitor (LK-4, the deadlock #23854 fixed); beside the current model its first
    point is already another one (the monitor where the current tracker takes its write lock)."""
    classes = standin_classes["keyshared", "pre23854"]
    code, _ = _verify(classes, tmp_path, "locks-pre23854")
    out = capsys.readouterr().out
    assert code == VIOLATED and "jvm locks-pre23854: LK-4 after 2 steps" in out, out
    assert "DrainingHashesTracker.addEntry:" in out.splitlines()[3] and "synchronized tracker" in out, out
    assert _verify(classes, tmp_path)[0] == DIVERGED
    assert ("granularity after 1 steps: dispatcher: the JVM is at 'addEntry: tracker.lock', the model at "
            "'addEntry: tracker.writeLock.lock'") in capsys.readouterr().out
