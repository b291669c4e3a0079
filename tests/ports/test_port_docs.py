"""The port documentation is complete and right: every model name has a meaning, the hello carries the
whole configuration, docs/ports.md's transcripts are real sessions, and a port written from the docs
alone (tests/ports/doc_port.py) passes `verify`."""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from models.core import Model
from models.keyshared.tracker import EVENTS as TRACKER_EVENTS
from properties import registry
from properties.cli import PASS, USAGE, main
from properties.engines.explorer import explore
from properties.engines.lockstep import as_json, same_json
from properties.engines.mechanism import Mechanism, Vocabulary
from properties.engines.port import PROTOCOL_VERSION, PortError, PortProcess
from properties.engines.protocol import Sample, complete_config, document, missing
from tests.ports.transcripts import SCRIPTS, observation_card, scopes, transcript

HERE = Path(__file__).parent
DOCS = HERE.parents[1] / "docs" / "ports.md"
DOC_PORT = HERE / "doc_port.py"
MECHANISMS = list(registry.mechanisms())
SCOPES: dict[str, tuple[Mechanism, Vocabulary]] = {
    scope: (mechanism, vocabulary) for mechanism in registry.mechanisms().values()
    for scope, vocabulary in mechanism.vocabularies.items()
}
"""Every scope's mechanism and declared meanings."""


@functools.cache
def _document(name: str) -> dict[str, Any]:
    """`protocol`'s document of the current variant, made once per mechanism for the tests that read it."""
    mechanism = registry.get(name)
    return document(mechanism, mechanism.current)


@pytest.mark.parametrize("name", MECHANISMS)
def test_every_var_field_action_parameter_and_config_key_has_a_meaning(name: str) -> None:
    doc = _document(name)
    for scope in doc["scopes"]:
        assert scope["undocumented"] == [], f"{scope['scope']}: add these to properties/{name}/protocol.py"
        assert all(v["meaning"] for v in scope["vars"]) and all(a["enabled"] for a in scope["actions"])
        assert not any("not reached" in v["type"] for v in scope["vars"] if v["path"].isidentifier())


def test_an_undocumented_var_or_action_is_reported() -> None:
    """`missing` can fail: drop one var and one action from the pidquota vocabulary."""
    mechanism = registry.get("pidquota")
    model = mechanism.make_model(mechanism.hypothesis_configs["default"], mechanism.current)
    full = mechanism.vocabularies["pidquota"]
    vocabulary = Vocabulary(full.config, {k: v for k, v in full.vars.items() if k != "now"},
                            {k: v for k, v in full.actions.items() if k != "cleanup"}, full.observation)
    sample = Sample()
    sample.add(model, vocabulary, states=20)
    assert {"var now", "action cleanup", "var path now"} <= set(missing(vocabulary, [model], sample))


def _same_behaviour(a: Model[Any], b: Model[Any], states: int = 150) -> None:
    """Breadth-first over `a`: the two models agree on the vars and the enabled actions of every state."""
    queue, sa, sb, seen = deque([(a.initial(), b.initial())]), None, None, 0
    while queue and seen < states:
        sa, sb = queue.popleft()
        seen += 1
        assert a.vars(sa) == b.vars(sb)
        actions = list(a.enabled(sa))
        assert actions == list(b.enabled(sb))
        for action in actions[:3]:
            queue.append((a.step(sa, action)[0], b.step(sb, action)[0]))


@pytest.mark.parametrize("scope", [s for s, (_, v) in SCOPES.items() if v.defaults])
def test_declared_defaults_are_the_ones_the_model_applies(scope: str) -> None:
    """A configuration that names only its scope behaves as its completed configuration."""
    mechanism, vocabulary = SCOPES[scope]
    minimal = mechanism.make_model({"scope": scope.split("/")[1]}, mechanism.current)
    completed = complete_config(mechanism, minimal)
    assert set(completed) == set(vocabulary.config)
    _same_behaviour(minimal, mechanism.make_model(completed, mechanism.current))


@pytest.mark.parametrize("name", MECHANISMS)
def test_the_hello_carries_the_complete_configuration(name: str, tmp_path: Path) -> None:
    """The port sees every key the model reads (keyshared's hot config names 8 of its 17)."""
    mechanism = registry.get(name)
    echo = "import json, sys; h = json.loads(sys.stdin.readline()); print(json.dumps({'type': 'ready', " \
           "'vars': h['config']}), flush=True); sys.stdin.read()"
    for config in [*mechanism.hypothesis_configs.values(), *mechanism.explore_configs.values()]:
        model = mechanism.make_model(config, mechanism.current)
        with PortProcess([sys.executable, "-c", echo], mechanism, mechanism.current, config) as port:
            seen = port.vars()
        assert seen == json.loads(json.dumps(complete_config(mechanism, model)))
        assert set(seen) == set(mechanism.vocabularies[mechanism.scope(model.config)].config)
        assert set(seen) >= set(config)


def test_protocol_prints_every_configuration_complete(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["protocol", "--mechanism", "keyshared", "--config", "hot"]) == PASS
    out = capsys.readouterr().out
    assert '"points": 3' in out and '"look_ahead_per_consumer": 4000' in out and '"interleave": 2' in out
    assert "read_position: int  the next entry a Normal read reads" in out
    assert "enabled when: " in out and "array<any>" not in out
    assert main(["protocol", "--mechanism", "topiclist", "--json"]) == PASS
    doc = json.loads(capsys.readouterr().out)
    named = {(c["name"], c["engine"]) for s in doc["scopes"] for c in s["configs"]}
    mechanism = registry.get("topiclist")
    assert named == {*((n, "explorer") for n in mechanism.explore_configs),
                     *((n, "hypothesis") for n in mechanism.hypothesis_configs)}
    assert main(["protocol", "--mechanism", "topiclist", "--config", "nope"]) == USAGE


def test_protocol_output_is_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for _ in range(2):
        assert main(["protocol", "--mechanism", "pidquota", "--json"]) == PASS
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(("mechanism", "config"), list(SCRIPTS))
def test_the_docs_hold_real_transcripts(mechanism: str, config: str) -> None:
    assert f"```\n{transcript(mechanism, config)}\n```" in DOCS.read_text(encoding="utf-8"), (
        "regenerate with: python tests/ports/transcripts.py")


def test_the_doc_port_imports_nothing_of_the_project() -> None:
    tree = ast.parse(DOC_PORT.read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def test_a_port_written_from_the_docs_passes_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for config in ("default", "small"):  # the Hypothesis default, and an explorer tour
        code = main(["verify", "--mechanism", "pidquota", "--config", config, "--budget", "4",
                     "--out", str(tmp_path), "--port", sys.executable, str(DOC_PORT)])
        assert code == PASS, capsys.readouterr().out


def _sessions(text: str) -> list[list[tuple[int, str, dict[str, Any]]]]:
    """Every fenced block of `>`/`<` lines in the docs, as (line number, direction, message) lists."""
    sessions: list[list[tuple[int, str, dict[str, Any]]]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            fenced = not fenced
            if fenced:
                sessions.append([])
            continue
        if fenced and line[:2] in ("> ", "< "):
            sessions[-1].append((number, line[0], json.loads(line[2:])))
    return [s for s in sessions if s]


def _replay_session(session: list[tuple[int, str, dict[str, Any]]]) -> int:
    """Play the harness's lines on the live model and check that every port line is what a correct port
    answers; the number of lines checked. Fails naming the docs' line."""
    model: Any = None
    state: Any = None
    seq = 0
    predicted: dict[str, Any] = {}
    for number, direction, message in session:
        where = f"docs/ports.md line {number}"
        kind = message["type"]
        if direction == ">":
            if kind == "hello":
                assert message["protocol"] == PROTOCOL_VERSION, where
                mechanism = registry.get(message["mechanism"])
                config = {k: tuple(v) if isinstance(v, list) else v for k, v in message["config"].items()}
                model = mechanism.make_model(config, message["variant"])
                assert message["config"] == as_json(complete_config(mechanism, model)), f"{where}: incomplete config"
                state, seq, predicted = model.initial(), 0, {"type": "ready"}
            elif kind == "reset":
                state, seq, predicted = model.initial(), 0, {"type": "ready"}
            else:
                seq += 1
                assert (kind, message["seq"]) == ("step", seq), where
                offered = [a for a in model.enabled(state) if a.name == message["action"]
                           and same_json(as_json(a.as_dict()), message["params"])]
                assert offered, f"{where}: the model does not offer this step here"
                state, observation = model.step(state, offered[0])
                predicted = {"type": "reply", "seq": seq, "observation": as_json(observation)}
            continue
        assert kind == predicted["type"], where
        assert same_json(message["vars"], as_json(model.vars(state))), f"{where}: not the model's vars"
        if kind == "ready":
            assert set(message) <= {"type", "vars", "capabilities"}, where
        else:
            assert message["seq"] == predicted["seq"], where
            assert same_json(message["observation"], predicted["observation"]), f"{where}: not the model's observation"
    return len(session)


def test_every_example_message_in_the_docs_is_what_the_live_model_says() -> None:
    sessions = _sessions(DOCS.read_text(encoding="utf-8"))
    assert len(sessions) >= len(SCRIPTS) + 1  # the transcripts and the reset session at least
    assert sum(_replay_session(s) for s in sessions) >= 60
    assert any(m["type"] == "reset" for s in sessions for _, _, m in s)


def test_a_wrong_example_message_is_caught() -> None:
    """The checker can fail: one observation changed in the reset example."""
    session = next(s for s in _sessions(DOCS.read_text(encoding="utf-8"))
                   if any(m["type"] == "reset" for _, _, m in s))
    broken = [(n, d, {**m, "observation": {"unblocked": [1]}} if m["type"] == "reply" else m) for n, d, m in session]
    with pytest.raises(AssertionError, match="not the model's observation"):
        _replay_session(broken)


def test_a_port_refuses_a_protocol_version_it_does_not_know(monkeypatch: pytest.MonkeyPatch) -> None:
    """The doc-written port checks the hello's version: a newer harness gets an error, not a guess."""
    mechanism = registry.get("pidquota")
    config = mechanism.hypothesis_configs["default"]
    monkeypatch.setattr("properties.engines.port.PROTOCOL_VERSION", PROTOCOL_VERSION + 1)
    with pytest.raises(PortError) as info:
        PortProcess([sys.executable, str(DOC_PORT)], mechanism, mechanism.current, config)
    assert (info.value.kind, info.value.step) == ("error", 0)
    assert f"protocol {PROTOCOL_VERSION} only" in info.value.message


ORDER = re.compile(r"\border\b|ascending|sorted|\bfirst\b|\bby (id|name|hash|position|request|op|permit|connection|"
                   r"consumer|principal|path|thread)|indexed|\bi\b|\ba set\b|in (call|send|run|append|join|creation|"
                   r"completion|tracking|submission|delivery) order|\[\w+, \w+|at most one")
"""The words a list's meaning uses to say its order (or a fixed layout such as `[value, version]`)."""


@pytest.mark.parametrize("name", MECHANISMS)
def test_every_list_says_its_order(name: str) -> None:
    """A port must build every array in the model's order: each array-typed var or observation field states
    it in its meaning (fixed-length layouts, `[a, b]`, are positions, not orders)."""
    unordered = [f"{scope['scope']}: {part['path']}: {part['meaning']}"
                 for scope in _document(name)["scopes"]
                 for part in [*scope["vars"], *scope["observation"]]
                 if "array" in part["type"].split("|") and not ORDER.search(part["meaning"])]
    assert unordered == [], f"say the order in properties/{name}/protocol.py"


@pytest.mark.parametrize(("mechanism", "scope"), scopes())
def test_the_docs_show_every_scopes_observations_as_the_model_makes_them(mechanism: str, scope: str) -> None:
    assert f"```\n{observation_card(mechanism, scope)}\n```" in DOCS.read_text(encoding="utf-8"), (
        "regenerate with: python tests/ports/transcripts.py")


EVENT_STATES = 1500
"""States explored per configuration when looking for the event names a scope's model emits."""


@pytest.mark.parametrize("scope", ["keyshared", "keyshared/tracker"])
def test_every_event_the_model_emits_is_documented(scope: str) -> None:
    """Each name met in `events` breadth-first over the scope's configurations is explained in docs/ports.md
    (as a list item of that scope's events); the tracker's declared ones all are."""
    mechanism = registry.get("keyshared")
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index(f"### {'keyshared, tracker scope' if '/' in scope else 'keyshared (Key_Shared'}"):]
    section = section[: section.index("\n### ")]
    documented = set(re.findall(r"^- `(\w+)`:", section, re.MULTILINE))
    seen: set[str] = set()
    for config in [*mechanism.explore_configs.values(), *mechanism.hypothesis_configs.values()]:
        model = mechanism.make_model(config, mechanism.current)
        if mechanism.scope(model.config) != scope:
            continue
        result = explore(model, max_states=EVENT_STATES, check_liveness=False, check_deadlock=False)
        seen |= {str(e) for state in result.states for e in model.vars(state)["events"]}  # type: ignore[union-attr]
    assert seen and seen <= documented, f"undocumented events: {sorted(seen - documented)}"
    if scope == "keyshared/tracker":
        assert set(TRACKER_EVENTS) <= documented
