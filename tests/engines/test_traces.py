"""Trace format, replay, shrink and promote on the tiny counter."""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import itf_py
import pytest

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param
from properties import registry
from properties.cli.promote import promote
from properties.engines import replay as engine
from properties.engines.lockstep import Lockstep
from properties.engines.replay import record
from properties.engines.shrink import failure_oracle, shrink
from properties.registry import replay, reproduction_problems
from tests.engines import tiny
from tests.engines.tiny import CounterImpl, CounterModel
from traces import format as tf

LONG_RUN = [Action.of("inc"), Action.of("reset"), Action.of("lock"), Action.of("inc"), Action.of("add", n=1),
            Action.of("reset"), Action.of("add", n=1), Action.of("add", n=1), Action.of("add", n=2)]


def overflow_trace() -> tf.Trace:
    return record(CounterModel({"limit": 3}, "overflow"), LONG_RUN, engine="test", seed=7)


def test_record_marks_the_first_failure_and_round_trips(tmp_path: Path) -> None:
    trace = overflow_trace()
    assert trace.failure["names"] == ["C-I1"]
    assert trace.failure["step"] == len(trace.steps) - 1
    path = tf.save(trace, tmp_path / "t.json")
    again = tf.load(path)
    assert again.actions == trace.actions
    assert again.steps[-1].violations == ("C-I1",)
    assert tf.dumps(again) == tf.dumps(trace)


def test_itf_py_reads_what_we_write(tmp_path: Path) -> None:
    doc = tf.to_json(overflow_trace())
    parsed = itf_py.trace_from_json(doc)
    assert len(parsed.states) == len(doc["states"])
    assert parsed.states[-1].values["x"] == 4
    assert parsed.states[1].values[tf.ACTION] == "inc"


def test_same_seed_gives_byte_identical_traces() -> None:
    assert tf.dumps(overflow_trace()) == tf.dumps(overflow_trace())


@pytest.mark.usefixtures("tiny_registered")
def test_replay_reproduces_against_model_and_reference(tmp_path: Path) -> None:
    trace = overflow_trace()
    for side in ("model", "reference"):
        result = replay(trace, "t.json", against=side)
        assert result.step == trace.failure["step"] and result.failures == ("C-I1",)
    with pytest.raises(tf.TraceError, match=r"t.json: step 9: add\(n=2\) is not enabled"):
        replay(trace, "t.json", variant="fixed", check_vars=False)  # the fix forbids the overflow
    path = tf.save(trace, tmp_path / "t.json")
    assert reproduction_problems(path) == []
    doc = json.loads(path.read_text())
    doc["#meta"]["brokerspec"]["failure"]["step"] = 3
    assert "expected ['C-I1'] at step 3" in reproduction_problems(_write(tmp_path, doc))[0]


def test_shrink_returns_a_strictly_shorter_trace_with_the_same_failure() -> None:
    def make() -> Lockstep[object]:
        return Lockstep(CounterModel({"limit": 3}, "overflow"), CounterImpl())  # type: ignore[arg-type]

    fails = failure_oracle(make, "C-I1")
    small = shrink(LONG_RUN, fails)
    assert small == (Action.of("add", n=2), Action.of("add", n=2))  # the explorer's shortest path
    assert fails(small)
    assert not any(fails(small[:i] + small[i + 1 :]) for i in range(len(small)))


def _write(tmp_path: Path, doc: object | str) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def _good_doc() -> dict:  # type: ignore[type-arg]
    return tf.to_json(overflow_trace())


def _set(path: tuple[object, ...], value: object) -> dict:  # type: ignore[type-arg]
    doc = _good_doc()
    *parents, last = path
    node = doc
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{ not json", "line 1: not valid JSON"),
        (_set(("#meta", "brokerspec", "schema"), 99), "unsupported trace schema version 99"),
        (_set(("states", 2, tf.PARAMS), None), "step 2: missing field 'mbt::nondetPicks'"),
        (_set(("states", 3, "x"), None), "step 3: missing variable 'x'"),
        (_set(("states", 1, tf.ACTION), 5), "step 1: field 'mbt::actionTaken' must be str"),
    ],
    ids=["bad-json", "wrong-version", "missing-field", "missing-variable", "wrong-type"],
)
def test_malformed_traces_get_one_line_errors(tmp_path: Path, doc: object, message: str) -> None:
    path = _write(tmp_path, doc)
    with pytest.raises(tf.TraceError) as info:
        tf.load(path)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(str(path))
    assert message in text


@pytest.mark.usefixtures("tiny_registered")
def test_a_bool_parameter_equal_to_the_offered_int_is_rejected_naming_the_step(tmp_path: Path) -> None:
    """`add(n=true)` equals the offered `add(n=1)` (1 == True), so the replay compares types (a float never
    gets this far: the trace format refuses it)."""
    doc = _good_doc()
    doc["states"][5][tf.PARAMS]["n"] = True
    with pytest.raises(tf.TraceError, match=r"bad.json: step 5: add\(n=True\): parameter 'n' is bool True where "
                                            r"the model offers int 1"):
        replay(tf.load(_write(tmp_path, doc)), "bad.json", check_vars=False)


@pytest.mark.usefixtures("tiny_registered")
def test_unknown_and_disabled_actions_are_rejected_naming_the_step(tmp_path: Path) -> None:
    doc = _good_doc()
    doc["states"][2][tf.ACTION] = "explode"
    with pytest.raises(tf.TraceError, match=r"step 2: unknown action 'explode' for tiny"):
        replay(tf.load(_write(tmp_path, doc)), "bad.json")
    doc = _good_doc()
    doc["states"][2][tf.ACTION] = "lock"  # already locked? no: state 2 is after inc, reset -> lock is enabled
    doc["states"][3][tf.ACTION] = "lock"
    with pytest.raises(tf.TraceError, match=r"bad.json: step 3: lock\(\) is not enabled"):
        replay(tf.load(_write(tmp_path, doc)), "bad.json", check_vars=False)


@pytest.mark.usefixtures("tiny_registered")
def test_promote_writes_a_test_that_replays_the_corpus_trace(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    corpus = repo / "traces" / "corpus"
    trace = record(CounterModel({"limit": 3}, "overflow"), [Action.of("add", n=2)] * 2, engine="test")
    source = tf.save(trace, tmp_path / "found.json")
    test_path, saved = promote(source, repo / "tests" / "regressions", corpus_root=corpus)
    assert saved == (corpus / "tiny" / "found.json").resolve() and saved.exists()
    text = test_path.read_text()
    assert "reproduction_problems(TRACE) == []" in text
    namespace: dict[str, object] = {"__file__": str(test_path)}
    exec(compile(text, str(test_path), "exec"), namespace)  # the generated test module itself
    namespace["test_found"]()  # type: ignore[operator]


def test_shrink_merges_adjacent_steps_of_one_kind() -> None:
    def make() -> Lockstep[object]:
        return Lockstep(CounterModel({"limit": 3}, "overflow"))  # type: ignore[arg-type]

    fails = failure_oracle(make, "C-I1")
    run = [Action.of("add", n=1), Action.of("add", n=1), Action.of("add", n=2)]
    assert shrink(run, fails) == (Action.of("add", n=2), Action.of("add", n=2))


# --- liveness and deadlock findings: replay judges the last state again ------------------------------

STUCK_RUN = [Action.of("inc"), Action.of("lock")]  # locked above 0: `stuck` can never return to 0
DEADLOCK_RUN = [Action.of("lock"), Action.of("add", n=2), Action.of("inc")]  # locked at the limit


@pytest.mark.usefixtures("tiny_registered")
@pytest.mark.parametrize(("kind", "name", "run"), [("liveness", "C-L1", STUCK_RUN), ("deadlock", "deadlock",
                                                                                      DEADLOCK_RUN)])
def test_a_stuck_trace_replays_to_its_finding_and_passes_where_the_state_is_not_stuck(
    tmp_path: Path, kind: str, name: str, run: list[Action]
) -> None:
    trace = record(CounterModel({"limit": 3}, "stuck"), run, engine="explorer", stuck=(kind, name))
    assert trace.failure["kind"] == kind and trace.failure["step"] == len(run)
    path = tf.save(trace, tmp_path / "stuck.json")
    result = replay(tf.load(path), str(path))
    assert (result.step, result.failures) == (len(run), (name,))
    assert reproduction_problems(path, current="fixed") == []
    # the twin: on `fixed` the same last state can reset, so the replay judges it not stuck
    assert replay(tf.load(path), str(path), variant="fixed", check_vars=False).ok


def test_recording_a_state_that_is_not_stuck_as_stuck_is_refused() -> None:
    with pytest.raises(ValueError, match="not a liveness"):
        record(CounterModel({"limit": 3}, "fixed"), STUCK_RUN, engine="explorer", stuck=("liveness", "C-L1"))


Clock = tuple[int, tuple[int, ...]]


class Timers:
    """Arm a timer 2 ticks ahead (`arm(at)` names the absolute time, as traces record it); two armed
    timers break T-I1. Dropping an early `tick` makes every later recorded `arm(at)` impossible."""

    terminal_ok = symmetric_key = threaded = None

    def __init__(self) -> None:
        self.mechanism, self.variant = "timers", "fixed"
        self.action_names: Sequence[str] = ("tick", "arm")
        self.config: Mapping[str, Param] = {}
        self.liveness: Sequence[Liveness[Clock]] = ()
        self.invariants: Sequence[Invariant[Clock]] = [Invariant("T-I1", lambda s: len(s[1]) < 2)]

    def initial(self) -> Clock:
        return (0, ())

    def enabled(self, state: Clock) -> Sequence[Action]:
        now, armed = state
        return [Action.of("tick"), *([Action.of("arm", at=now + 2)] if now + 2 not in armed else [])]

    def step(self, state: Clock, action: Action) -> tuple[Clock, Observation]:
        if action not in self.enabled(state):
            raise ActionNotEnabled(action, f"now={state[0]}")
        now, armed = state
        return ((now + 1, armed) if action.name == "tick" else (now, (*armed, now + 2))), None

    def key(self, state: Clock) -> Hashable:
        return state

    def vars(self, state: Clock) -> dict[str, Json]:
        return {"now": state[0], "armed": list(state[1])}


def test_shrinking_by_choices_drops_a_step_that_later_parameters_depend_on() -> None:
    fails = failure_oracle(lambda: Lockstep(Timers()), "T-I1")
    run = [Action.of("tick"), Action.of("arm", at=3), Action.of("tick"), Action.of("arm", at=4)]
    assert len(shrink(run, fails)) == 4  # by values, no step can go: each `arm(at)` needs its ticks
    assert shrink(run, fails, model=Timers()) == (Action.of("arm", at=2), Action.of("tick"), Action.of("arm", at=3))


def test_a_configuration_beyond_the_mechanisms_limits_is_refused_before_its_model_is_built() -> None:
    """`Mechanism.limits` is what refuses it: the same trace with the bound lifted builds its model."""
    path = sorted((Path(__file__).resolve().parents[2] / "traces/corpus/keyshared").glob("*.json"))[0]
    trace = tf.load(path)
    huge = replace(trace, config={**trace.config, "max_consumers": 17})
    refused = r"#meta\.brokerspec\.config\.max_consumers: 17 is out of bounds \(0 to 16\)"
    with pytest.raises(tf.TraceError, match=refused):
        registry.validate(huge, str(path))
    keyshared = registry.get("keyshared")
    unbounded = replace(keyshared, limits={k: v for k, v in keyshared.limits.items() if k != "max_consumers"})
    assert engine.model_for(unbounded, huge, str(path)).config["max_consumers"] == 17


class OffByOneOverflowReported(CounterImpl):
    """Diverges at its first `add` (one too many) and says C-I1 by name only once x passes the limit."""

    def __init__(self) -> None:
        super().__init__(off_by_one=True)

    def violations(self) -> list[str]:
        return ["C-I1"] if self.x > 3 else []


def test_a_trace_recorded_toward_a_target_reaches_it_past_a_divergence_and_replays_to_it() -> None:
    """A row that names C-I1 at step 3 saves a trace that reaches step 3 and replays to C-I1 (the twin: without
    the target the recording stops at the divergence of step 2, and so does its replay)."""
    actions = [Action.of("inc"), Action.of("add", n=1), Action.of("add", n=1)]  # x: 1, 3 (model 2), 5 (model 3)
    mechanism = replace(tiny.MECHANISM, make_reference=lambda config, variant: OffByOneOverflowReported())
    toward = record(CounterModel(), actions, engine="test", implementation=OffByOneOverflowReported(),
                    target="C-I1")
    assert toward.failure["step"] == 3 and "C-I1" in toward.failure["names"]  # type: ignore[operator]
    assert toward.steps[2].violations == ("divergence",)
    result = engine.replay(mechanism, toward, "t.json", against="reference")
    assert result.step == 3 and "C-I1" in result.failures
    first = record(CounterModel(), actions, engine="test", implementation=OffByOneOverflowReported())
    assert first.failure["step"] == 2 and first.failure["names"] == ["divergence"]
    assert engine.replay(mechanism, first, "t.json", against="reference").failures == ("divergence",)
    never = record(CounterModel(), actions[:2], engine="test", implementation=OffByOneOverflowReported(),
                   target="C-I1")
    assert never.failure["step"] == 2 and len(never.steps) == 3  # not reached: stops where the run first failed
