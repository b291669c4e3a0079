"""Port corners (issue 46, item 5), each on the scripted port (`script_port.py`) stepping the model, so that it is a
correct port but for the one thing a test makes it do: a reset that hangs, a skipped reply, a slow start; the
configurations `verify` sends, and `shrink` of a port's trace without `--port`."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from properties import registry
from properties.cli import INFRA, PASS, USAGE, main
from properties.engines.replay import record
from traces.format import load, save

SCRIPT = str(Path(__file__).with_name("script_port.py"))
PIDQUOTA = registry.get("pidquota")
CORRECT = ("reset", "pipeline", "model")
"""A correct port: it announces both capabilities and answers as the model does."""


def _port(mode: str, step: int, pidfile: Path, *flags: str) -> list[str]:
    return [sys.executable, SCRIPT, mode, str(step), str(pidfile), *flags]


def _trace(tmp_path: Path, steps: int = 3, engine: str = "hypothesis") -> Path:
    """A pidquota run of the default configuration's first enabled action, `steps` times, as a trace."""
    model = PIDQUOTA.make_model(PIDQUOTA.hypothesis_configs["default"], "current")
    actions, state = [], model.initial()
    for _ in range(steps):
        action = model.enabled(state)[0]
        state, _ = model.step(state, action)
        actions.append(action)
    return save(replace(record(model, actions, engine=engine), engine=engine), tmp_path / "trace.json")


def _verify(tmp_path: Path, port: list[str], *options: str) -> tuple[int, Path | None]:
    """`verify` of pidquota on `port`: the exit code and the trace it saved (if any)."""
    out = tmp_path / "out"
    code = main(["verify", "--mechanism", "pidquota", *options, "--out", str(out), "--port", *port])
    saved = sorted(out.glob("pidquota/*.json"))
    return code, saved[0] if saved else None


def test_replay_on_a_resetting_port_ends_with_a_reset_whose_hang_is_blamed_on_the_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/ports.md: `replay --port` ends with a reset when the port announces one (as every walk of `verify` does,
    so that a failure a reset showed reproduces): a reset that hangs is the reset's failure, not step 3's."""
    trace = str(_trace(tmp_path))
    hanging = _port("reset-hang", 0, tmp_path / "pids", "reset", "model")
    assert main(["replay", trace, "--step-timeout", "0.5", "--port", *hanging]) == INFRA
    out = capsys.readouterr().out
    assert f"{trace}: the reset after step 3: port-hang on pidquota/current against the port." in out, out
    no_reset = _port("reset-hang", 0, tmp_path / "pids", "model")  # announces no reset: is sent none
    assert main(["replay", trace, "--step-timeout", "0.5", "--port", *no_reset]) == PASS


def test_verify_blames_a_hanging_reset_on_the_reset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _port("reset-hang", 0, tmp_path / "pids", "reset", "model")
    code, trace = _verify(tmp_path, port, "--tour-only", "--budget", "6", "--step-timeout", "0.5")
    out = capsys.readouterr().out
    assert code == INFRA and "port-hang at the reset after step " in out, out
    assert trace is not None and str(load(trace).failure["detail"]).startswith("the reset after step ")
    assert main(["replay", str(trace), "--step-timeout", "0.5", "--port", *port]) == INFRA
    assert ": the reset after step " in capsys.readouterr().out


@pytest.mark.parametrize("flags", [CORRECT, ("pipeline", "model")], ids=["resets", "no-reset"])
def test_a_skipped_reply_is_the_same_failure_in_verify_and_in_replay(
    flags: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pipelining port that does not answer step 2: the tour sees the next answer instead (step 3's reply, or the
    reset's `ready`), and so do the shrinker and `replay --port`, which send a pipelining port its steps ahead as
    the tour does (before, each was sent alone there, and the same port was a `port-hang`)."""
    port = _port("skip", 2, tmp_path / "pids", *flags)
    code, trace = _verify(tmp_path, port, "--tour-only", "--budget", "6", "--step-timeout", "1")
    out = capsys.readouterr().out
    assert code == INFRA and "port-wrong-step at step " in out, out
    assert "does not reproduce on a fresh port" not in out, out  # the shrinker met the same failure
    assert trace is not None
    assert main(["replay", str(trace), "--step-timeout", "1", "--port", *port]) == INFRA
    replayed = capsys.readouterr().out
    assert ": port-wrong-step on pidquota/current against the port" in replayed, replayed


@pytest.mark.parametrize(("mechanism", "config"), [("pidquota", None), ("pidquota", "murmur"), ("pidquota", "small"),
                                                   ("keyshared", "tracker"), ("metadata", "memory")])
def test_protocol_lists_every_configuration_verify_sends(
    mechanism: str, config: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every hello `verify --config C` sends (to a port that refuses them all, so each is sent and nothing more
    runs) has its configuration among those `protocol --config C` prints, and the other way round (without
    `--config`, `protocol` prints every configuration: verify's default ones among them)."""
    pidfile = tmp_path / "pids"
    chosen = [] if config is None else ["--config", config]
    main(["verify", "--mechanism", mechanism, *chosen, "--budget", "120", "--out", str(tmp_path / "out"), "--port",
          *_port("refuse", 0, pidfile)])  # a bound, not the time taken: the random walk's refused hello ends it
    sent = set(Path(f"{pidfile}.hellos").read_text(encoding="utf-8").splitlines())
    capsys.readouterr()
    assert main(["protocol", "--mechanism", mechanism, *chosen, "--json"]) == PASS
    doc = json.loads(capsys.readouterr().out)
    listed = {json.dumps(c["config"], sort_keys=True) for scope in doc["scopes"] for c in scope["configs"]}
    assert sent == listed if config is not None else sent < listed


def test_shrink_of_a_port_trace_without_port_says_to_add_it(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(_trace(tmp_path, engine="port"))
    assert main(["shrink", trace]) == USAGE
    err = capsys.readouterr().err
    assert err == f"error: {trace}: the trace was recorded on a port: shrink it against the port with --port ARGV " \
                  "(the port's command line, last on the line)\n"


def test_the_budget_holds_and_blames_no_slow_correct_port(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A correct port that takes 2 s to start (a JVM on a loaded machine): the search ends at 4.5 s of 6, the random
    walk after it starts one more port, whose start the budget's end cuts. The budget ends that wait and `verify`
    with it, on time, and the port, which answered the tour's steps before, is not called a hang (before, it was
    `port-hang at step 0`)."""
    budget = 6.0
    started = time.monotonic()
    code, trace = _verify(tmp_path, _port("slow-start", 2000, tmp_path / "pids", *CORRECT), "--budget", str(budget))
    elapsed = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == PASS and trace is None, out
    assert "the budget ran out while " in out and "waited for the port: raise --budget" in out, out
    assert elapsed < budget + 1.0, elapsed
