"""The Node port of Key_Shared's tracker scope (tests/ports/node/tracker_port.js): `verify` runs the whole
tour on one process through `reset`, and catches each planted bug within `--budget 20` with a shrunk
trace that replays on the buggy port and passes on the correct one; `shrink --port` shrinks against it.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from models.core import Action
from properties import registry
from properties.cli import DIVERGED, PASS, USAGE, main
from properties.engines.replay import record
from tests.ports.tools import need
from traces.format import load, save

PORT = str(Path(__file__).with_name("node") / "tracker_port.js")
MECHANISM = registry.get("keyshared")


@pytest.fixture(scope="module")
def node() -> str:
    need("node", package="nodejs")
    return "node"


def test_the_node_port_passes_the_whole_tour_on_one_process_per_configuration(
    node: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["verify", "--mechanism", "keyshared", "--config", "tracker", "--tour-only", "--budget", "300",
                 "--out", str(tmp_path), "--port", node, PORT])
    out = capsys.readouterr().out
    assert code == PASS, out
    tours = re.findall(r"tour ([\w-]+): (\d+) / (\d+) transitions covered, (\d+) walks", out)
    assert [name for name, *_ in tours] == ["tracker", "tracker-wide"]  # every explorer configuration of the scope
    assert all(covered == total and int(walks) > 1000 for _, covered, total, walks in tours), out
    assert "2 port processes" in out  # one per configuration: every walk but the first began with a reset


@pytest.mark.parametrize(("bug", "steps"), [("closing-unblock", 4), ("batch-any-level", 5), ("reset-leak", 3)])
def test_each_planted_bug_is_caught_within_the_budget_with_a_trace_that_replays(
    node: str, bug: str, steps: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """closing-unblock and batch-any-level break the tracker's handler rules; reset-leak keeps the replay
    queue across a reset, which only a walk that ends with its reset can see (and a replay, which ends so)."""
    started = time.monotonic()
    code = main(["verify", "--mechanism", "keyshared", "--config", "tracker", "--budget", "20",
                 "--out", str(tmp_path), "--port", node, PORT, f"--bug={bug}"])
    elapsed = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == DIVERGED, out
    assert elapsed < 20 + 2  # the budget is a hard limit, shrinking included
    path = tmp_path / "keyshared" / "pip379-port-divergence.json"
    trace = load(path)
    assert trace.engine == "port" and trace.failure["names"] == ["divergence"]
    # the tour's walk cut at the shortest path to the failing transition, then shrunk on fresh ports as far as
    # the budget allows: `steps` on an idle machine, a few more when shrinking runs out of time
    assert steps <= len(trace.actions) <= 8
    assert main(["replay", str(path), "--port", node, PORT, f"--bug={bug}"]) == DIVERGED
    assert main(["replay", str(path), "--port", node, PORT]) == PASS
    # without --port: the model against the recorded states, which are the port's (the reset's failure
    # comes after the last state, so that trace holds the model's), and a word that the port was not run
    assert main(["replay", str(path)]) == (PASS if bug == "reset-leak" else DIVERGED)
    assert "checked on the model only" in capsys.readouterr().out


def test_shrink_port_shrinks_against_the_port(node: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The closing-unblock witness padded with an unrelated add and remove: the model passes it (so the
    model-only shrink has nothing to shrink toward), the buggy port fails it, and shrinks it back to 4 steps."""
    config = MECHANISM.hypothesis_configs["tracker"]
    model = MECHANISM.make_model(config, "pip379")
    actions = [Action.of("add_pending_ack_if_allowed", batch_size=1, consumer=2, hash=11707, position=0),
               Action.of("add_pending_ack_if_allowed", batch_size=1, consumer=1, hash=4850, position=2),
               Action.of("move_hash", consumer=1, hash=11707),
               Action.of("remove", consumer=1, position=2),
               Action.of("should_block_sticky_key_hash", consumer=1, hash=11707),
               Action.of("for_each_and_close", consumer=2)]
    trace = record(model, actions, engine="port")
    path = save(replace(trace, failure={"step": 6, "names": ["divergence"], "detail": ""}), tmp_path / "padded.json")
    out = tmp_path / "shrunk.json"
    assert main(["shrink", str(path), "-o", str(out), "--budget", "20", "--port", node, PORT,
                 "--bug=closing-unblock"]) == PASS
    shrunk = load(out)
    assert [a.name for a in shrunk.actions] == ["add_pending_ack_if_allowed", "move_hash",
                                                "should_block_sticky_key_hash", "for_each_and_close"]
    assert shrunk.failure["names"] == ["divergence"] and shrunk.engine == "port+shrink"
    assert main(["shrink", str(path), "--budget", "20", "--port", node, PORT]) == USAGE  # the correct port passes
    assert "no longer fails with divergence on the port" in capsys.readouterr().err
