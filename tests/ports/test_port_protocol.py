"""The port driver against scripted misbehaving ports: each failure mode is named, placed at its
step, reported by the CLI with exit code 4, and leaves no process behind."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from models.core import Action
from properties import registry
from properties.cli import DIVERGED, INFRA, PASS, USAGE, VIOLATED, main
from properties.engines.port import KINDS, PortError, PortProcess
from traces.format import load

SCRIPT = str(Path(__file__).with_name("script_port.py"))
MECHANISM = registry.get("topiclist")
CONFIG = MECHANISM.hypothesis_configs["semaphore"]
INITIAL = MECHANISM.make_model(CONFIG, "current").vars(MECHANISM.make_model(CONFIG, "current").initial())
MODES = {"crash": "crash", "hang": "hang", "garbage": "garbage", "wrong-step": "wrong-step", "flood": "flood",
         "error": "error", "orphan": "hang", "wrong-type": "garbage"}


def test_every_failure_kind_has_a_scripted_port() -> None:
    assert set(MODES.values()) == set(KINDS)


def _argv(mode: str, step: int, pidfile: Path) -> list[str]:
    return [sys.executable, SCRIPT, mode, str(step), str(pidfile)]


def _alive(pid: int) -> bool:
    """Running (a zombie counts as gone only if it is not our child: init reaps those)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _assert_none_alive(pidfile: Path) -> None:
    pids = [int(p) for p in pidfile.read_text().split()]
    assert pids
    deadline = time.monotonic() + 3.0
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_port_error_names_the_kind_and_the_step(mode: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    port = PortProcess(_argv(mode, 3, pidfile), MECHANISM, "current", CONFIG, step_timeout_s=0.5)
    try:
        assert port.vars() == INITIAL
        port.apply(Action.of("advance", dt=1))
        port.apply(Action.of("advance", dt=1))
        with pytest.raises(PortError) as info:
            port.apply(Action.of("advance", dt=1))
    finally:
        port.close()
    assert (info.value.kind, info.value.step) == (MODES[mode], 3)
    if mode == "crash":
        assert "exit code 3" in info.value.message and "boom: simulated crash" in info.value.message
    with pytest.raises(ProcessLookupError):  # reaped, not a zombie
        os.kill(port.pid, 0)
    _assert_none_alive(pidfile)


def test_a_port_that_cannot_start_is_a_crash_with_exit_4_and_a_0_step_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["verify", "--mechanism", "topiclist", "--budget", "5", "--out", str(tmp_path / "out"),
                 "--port", str(tmp_path / "no-such-port")])
    out = capsys.readouterr().out
    assert code == INFRA, out
    assert "port-crash at step 0" in out and "cannot start" in out and "No such file" in out
    trace = load(tmp_path / "out" / "topiclist" / "current-port-port-crash.json")
    assert trace.actions == () and trace.failure["step"] == 0 and trace.failure["names"] == ["port-crash"]


def test_verify_without_a_port_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--mechanism", "topiclist", "--port"])
    err = capsys.readouterr().err.strip()
    assert code == USAGE and "--port needs the port's command line" in err and "\n" not in err


def test_verify_keeps_its_budget_shrinking_included(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pidfile = tmp_path / "pids"
    started = time.monotonic()
    code = main(["verify", "--mechanism", "topiclist", "--budget", "3", "--step-timeout", "0.5",
                 "--out", str(tmp_path / "out"), "--port", *_argv("hang", 1, pidfile)])
    assert code == INFRA
    # the budget, one run in flight, and slack for a loaded machine; ignoring the budget takes minutes here
    assert time.monotonic() - started < 3 + 2 * 0.5 + 10


def test_a_port_that_cannot_start_is_a_crash_at_step_0(tmp_path: Path) -> None:
    with pytest.raises(PortError) as info:
        PortProcess([str(tmp_path / "no-such-port")], MECHANISM, "current", CONFIG)
    assert (info.value.kind, info.value.step) == ("crash", 0)


def test_a_bad_hello_reply_is_garbage_at_step_0_and_the_port_is_reaped(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    # the port stays alive after its bad line: an exiting port would race garbage against crash
    script = (
        f"import os, time; open({str(pidfile)!r}, 'a').write(str(os.getpid())); print('hi', flush=True); time.sleep(30)"
    )
    argv = [sys.executable, "-c", script]
    with pytest.raises(PortError) as info:
        PortProcess(argv, MECHANISM, "current", CONFIG)
    assert (info.value.kind, info.value.step) == ("garbage", 0)
    _assert_none_alive(pidfile)


@pytest.mark.parametrize("mode", ["crash", "hang", "garbage", "wrong-step", "flood", "orphan"])
def test_verify_reports_a_misbehaving_port_with_exit_code_4(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pidfile = tmp_path / "pids"
    started = time.monotonic()
    code = main(["verify", "--mechanism", "topiclist", "--budget", "6", "--step-timeout", "0.5",
                 "--out", str(tmp_path / "out"), "--port", *_argv(mode, 1, pidfile)])
    out = capsys.readouterr().out
    assert code == INFRA, out
    kind = MODES[mode]
    assert f"port-{kind} at step 1" in out
    path = next((tmp_path / "out" / "topiclist").glob(f"current-port-port-{kind}.json"))
    trace = load(path)
    assert trace.failure["names"] == [f"port-{kind}"] and trace.failure["step"] == 1
    assert len(trace.actions) == 1  # the failing step is in the trace: replaying it reproduces the failure
    assert time.monotonic() - started < 30
    assert main(["replay", str(path), "--step-timeout", "0.5", "--port", *_argv(mode, 1, pidfile)]) == INFRA
    assert f"step 1: port-{kind}" in capsys.readouterr().out
    _assert_none_alive(pidfile)


def test_protocol_lists_every_action_and_variable_of_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    model = MECHANISM.make_model(CONFIG, "current")
    assert main(["protocol", "--mechanism", "topiclist", "--config", "semaphore"]) == PASS
    out = capsys.readouterr().out
    for name in model.action_names:
        assert f"  {name}(" in out
    for var in model.vars(model.initial()):
        assert f"  {var}: " in out
    assert "acquire(permits: int)" in out and "update(permit: int, permits: int)" in out


def test_verify_reports_an_invariant_the_port_checks_itself_with_exit_code_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pidfile = tmp_path / "pids"
    code = main(["verify", "--mechanism", "topiclist", "--budget", "20", "--out", str(tmp_path / "out"),
                 "--port", *_argv("violation", 1, pidfile)])  # a bound: the trace is recorded on the port before it
    out = capsys.readouterr().out
    assert code == VIOLATED, out
    assert "TL-I2 at step 1" in out
    trace = load(next((tmp_path / "out" / "topiclist").glob("current-port-TL-I2.json")))
    assert trace.failure["step"] == 1 and "TL-I2" in trace.steps[1].violations
    _assert_none_alive(pidfile)


def test_an_extra_reply_is_blamed_on_the_step_it_answered(tmp_path: Path) -> None:
    """Step 2 answered twice: the extra line is read when step 3 is sent, but step 2 is where the port went
    wrong; a port with reset meets it on the reset after its last step."""
    for tail, last in (([], 3), (["reset"], 2)):
        port = PortProcess([*_argv("extra", 2, tmp_path / "pids"), *tail], MECHANISM, "current", CONFIG)
        try:
            with pytest.raises(PortError) as info:
                for _ in range(last):
                    port.apply(Action.of("advance", dt=1))
                port.reset()
        finally:
            port.close()
        assert (info.value.kind, info.value.step) == ("wrong-step", 2), tail
        assert "an extra reply to step 2" in info.value.message


def test_a_ready_sent_as_a_reply_is_garbage_naming_its_type(tmp_path: Path) -> None:
    port = PortProcess(_argv("ready-reply", 1, tmp_path / "pids"), MECHANISM, "current", CONFIG)
    try:
        with pytest.raises(PortError) as info:
            port.apply(Action.of("advance", dt=1))
    finally:
        port.close()
    assert (info.value.kind, info.value.step) == ("garbage", 1)
    assert "'type' must be 'reply' here, got 'ready'" in info.value.message


def test_the_budget_holds_when_shrinking_a_hanging_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A hanging port costs a whole step timeout per shrink candidate and per recorded trace: the budget
    still holds, because every wait ends at its deadline (the trace is then the run as found)."""
    started = time.monotonic()
    code = main(["verify", "--mechanism", "topiclist", "--budget", "6", "--step-timeout", "4",
                 "--out", str(tmp_path / "out"), "--port", *_argv("hang", 1, tmp_path / "pids")])
    elapsed = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == INFRA and "port-hang at step 1" in out, out
    assert elapsed < 6 + 1.5  # without a deadline on each wait: 4 s to find, 4 s more per candidate
    _assert_none_alive(tmp_path / "pids")


def test_a_resetting_port_serves_many_walks_in_one_process(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    pidfile = tmp_path / "pids"
    code = main(["verify", "--mechanism", "topiclist", "--budget", "8", "--out", str(tmp_path / "out"),
                 "--port", *_argv("violation", 10_000, pidfile), "reset"])
    out = capsys.readouterr().out
    assert code == DIVERGED, out  # the script's state never changes: the tour's first step that moves diverges
    assert len(pidfile.read_text().split()) >= 2  # the walk, then the shrinker's fresh ports
    tour = next(line for line in out.splitlines() if " tour semaphore: " in line)
    assert re.search(r"\d+ / \d+ transitions covered( \(.*\))?, \d+ walks, \d+ steps, [\d.]+s, [\d,]+ steps/s",
                     tour), tour
