"""The port vocabulary of a mechanism: meanings declared by the mechanism, shapes and examples generated from the model.

A port author needs three things the model's code holds implicitly: the complete configuration the
hello carries, what every variable, field, action and parameter means, and when an action is
offered. Each mechanism declares the meanings per scope (the mechanism, or one scope of it), keyed
by the model's own names, in `Mechanism.vocabularies` (its folder's `protocol.py`); the types, sample
values and example observations come from a breadth-first enumeration of each configuration's first
`ENUMERATED_STATES` states, so they are deterministic (no seed) and cannot drift. `missing` names
whatever a model has and the declarations do not explain, which the tests turn into a failure.

Paths name the parts of a value: `var`, `var[]` (an element of an array), `var.field` (a field of an
object, or a position of a tuple), `var.*` (every value of a map keyed by names). A meaning that
starts with a `[a, b, c]` layout declares a tuple: a fixed-length array whose positions are the fields
`a`, `b`, `c`.
"""

from __future__ import annotations

import json
import random
import re
from collections import deque
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from models.core import Action, Json, Model, Observation, Param
from properties.engines.lockstep import as_json
from properties.engines.mechanism import Mechanism, Vocabulary

ENUMERATED_STATES = 200
"""States enumerated per configuration to infer types and collect examples (breadth-first, deterministic)."""
WALKS, WALK_LENGTH = 10, 40
"""Walks (with a fixed generator: no seed to pass) that reach the shapes breadth-first is too shallow for."""
_MAX_VALUES = 8
_LAYOUT = re.compile(r"^\[([a-z_0-9, ]+)\]")


def complete_config(mechanism: Mechanism, model: Model[Any]) -> dict[str, Param]:
    """The configuration of `model` (one of `mechanism`'s) with every default it applies, as the hello carries it."""
    return _completed(model.config, mechanism.vocabularies.get(mechanism.scope(model.config)))


def _completed(config: Mapping[str, Param], vocabulary: Vocabulary | None) -> dict[str, Param]:
    defaults = vocabulary.defaults if vocabulary is not None else {}
    return {**config, **{k: v for k, v in defaults.items() if k not in config}}


def hello_config(mechanism: Mechanism, variant: str, config: Mapping[str, Param]) -> dict[str, Param]:
    """The hello's `config`: complete when the mechanism accepts the variant and configuration, else as given
    (a port may be tested on what the model refuses)."""
    try:
        model = mechanism.make_model(config, variant)
    except (KeyError, ValueError, TypeError, ArithmeticError):
        return dict(config)
    return complete_config(mechanism, model)


# -- enumeration -------------------------------------------------------------------------------------


def _layout(meaning: str | None) -> list[str]:
    found = _LAYOUT.match(meaning or "")
    return [name.strip() for name in found.group(1).split(",")] if found else []


def _walk(value: Json | Param | None, path: str, table: Mapping[str, str], out: dict[str, set[str]]) -> None:
    """Record the type of `value` at `path` and of every part of it, following the declared structure."""
    kinds = out.setdefault(path, set())
    if value is None:
        kinds.add("null")
    elif isinstance(value, bool):
        kinds.add("bool")
    elif isinstance(value, int):
        kinds.add("int")
    elif isinstance(value, str):
        kinds.add("string")
    elif isinstance(value, dict):
        if f"{path}.*" in table:
            kinds.add("map")
            for item in value.values():
                _walk(item, f"{path}.*", table, out)
        else:
            kinds.add("object")
            for name, item in value.items():
                _walk(item, f"{path}.{name}", table, out)
    elif layout := _layout(table.get(path)):
        kinds.add(f"[{', '.join(layout)}]")
        for i, item in enumerate(value):
            _walk(item, f"{path}.{layout[i] if i < len(layout) else i}", table, out)
    else:
        kinds.add("array")
        for item in value:
            _walk(item, f"{path}[]", table, out)


def _dump(value: Any) -> str:
    return json.dumps(as_json(value), separators=(", ", ": "))


@dataclass
class Sample:
    """What the first states of some configurations showed: types by path, parameter values, examples."""

    vars: dict[str, set[str]] = field(default_factory=dict)
    params: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    values: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    observation: dict[str, set[str]] = field(default_factory=dict)
    examples: dict[str, tuple[Action, Observation]] = field(default_factory=dict)

    def add(self, model: Model[Any], vocabulary: Vocabulary, states: int = ENUMERATED_STATES) -> None:
        """Enumerate `model` breadth-first (deduplicated by its state key) for `states` states, then take
        `WALKS` walks of `WALK_LENGTH` steps with a fixed generator, so deep shapes show up too."""
        initial = model.initial()
        seen: set[Hashable] = {model.key(initial)}
        queue: deque[Any] = deque([initial])
        visited = 0
        while queue and visited < states:
            visited += 1
            for after in self._visit(model, vocabulary, queue.popleft()):
                key = model.key(after)
                if key not in seen:
                    seen.add(key)
                    queue.append(after)
        rng = random.Random(0)
        for _ in range(WALKS):
            state = initial
            for _ in range(WALK_LENGTH):
                successors = self._visit(model, vocabulary, state)
                if not successors:
                    break
                state = rng.choice(successors)

    def _visit(self, model: Model[Any], vocabulary: Vocabulary, state: Any) -> list[Any]:
        """Record the shapes of `state` and of every enabled action from it; its successors."""
        for name, value in model.vars(state).items():
            _walk(value, name, vocabulary.vars, self.vars)
        successors = []
        for action in model.enabled(state):
            documented = vocabulary.actions.get(action.name)
            table = documented.params if documented is not None else {}
            found = self.params.setdefault(action.name, {})
            for name, value in action.params:
                _walk(value, name, table, found)
                self.values.setdefault((action.name, name), set()).add(_dump(value))
            after, observation = model.step(state, action)
            if observation is not None:
                for name, value in observation.items():
                    _walk(value, name, vocabulary.observation, self.observation)
            known = self.examples.get(action.name)
            if known is None or (_dump(observation).count("[]") < _dump(known[1]).count("[]")):
                self.examples[action.name] = (action, observation)
            successors.append(after)
        return successors


def missing(vocabulary: Vocabulary, models: Iterable[Model[Any]], sample: Sample) -> list[str]:
    """Everything the models (of `vocabulary`'s scope) show that it does not explain (empty when fully documented)."""
    out: list[str] = []
    for model in models:
        out += [f"var {v}" for v in model.vars(model.initial()) if v not in vocabulary.vars]
        out += [f"action {a}" for a in model.action_names if a not in vocabulary.actions]
        out += [f"config key {k}" for k in _completed(model.config, vocabulary) if k not in vocabulary.config]
    out += [f"var path {p}" for p in sample.vars if p not in vocabulary.vars]
    out += [f"observation path {p}" for p in sample.observation if p not in vocabulary.observation]
    for action, params in sample.params.items():
        documented = vocabulary.actions.get(action)
        out += [f"parameter {action}.{p}" for p in params if documented is None or p not in documented.params]
    return sorted(set(out))


# -- the document ------------------------------------------------------------------------------------


def _type(kinds: set[str] | None) -> str:
    return "|".join(sorted(kinds)) if kinds else "(not reached in the enumerated states)"


def _configs(mechanism: Mechanism, names: Sequence[str] | None) -> list[tuple[str, str, Mapping[str, Param]]]:
    """(name, engine, configuration) of every explorer and Hypothesis configuration, or of `names`."""
    out = [(n, "explorer", c) for n, c in mechanism.explore_configs.items()]
    out += [(n, "hypothesis", c) for n, c in mechanism.hypothesis_configs.items()]
    if names is not None:
        unknown = sorted(set(names) - {n for n, _, _ in out})
        if unknown:
            known = ", ".join(dict.fromkeys(n for n, _, _ in out))
            raise ValueError(f"unknown config {unknown[0]!r} for {mechanism.name} (known: {known})")
        out = [entry for entry in out if entry[0] in names]
    return out


def document(mechanism: Mechanism, variant: str, names: Sequence[str] | None = None, *,
             chosen: Collection[tuple[str, str]] | None = None) -> dict[str, Any]:
    """The vocabulary of `mechanism` for its configurations (or `names`, or the (name, engine) pairs `chosen`),
    as plain JSON data."""
    default = next(iter(mechanism.hypothesis_configs))
    if chosen is None:
        chosen = {(n, e) for n, e, _ in _configs(mechanism, names)}
    scopes: dict[str, dict[str, Any]] = {}
    models: dict[str, list[Model[Any]]] = {}
    for name, engine, config in _configs(mechanism, None):
        model = mechanism.make_model(config, variant)
        scope = mechanism.scope(model.config)
        models.setdefault(scope, []).append(model)  # types come from every configuration of the scope
        if (name, engine) in chosen:
            entry = scopes.setdefault(scope, {"scope": scope, "configs": []})
            entry["configs"].append({"name": name, "engine": engine, "verify_default": engine == "hypothesis"
                                     and name == default, "config": as_json(complete_config(mechanism, model)),
                                     "actions": list(model.action_names), "initial_vars":
                                     as_json(model.vars(model.initial()))})
    for config in mechanism.nightly_configs.values():  # a port meets their shapes too (`explore --conformance`)
        model = mechanism.make_model(config, variant)
        models.setdefault(mechanism.scope(model.config), []).append(model)
    out: list[dict[str, Any]] = []
    for scope, entry in scopes.items():
        vocabulary = mechanism.vocabularies[scope]
        sample = Sample()
        for model in models[scope]:
            sample.add(model, vocabulary)
        offered = {a: [c["name"] for c in entry["configs"] if a in c["actions"]]
                   for c in entry["configs"] for a in c["actions"]}
        config_keys = dict.fromkeys(k for c in entry["configs"] for k in c["config"])
        entry["config_keys"] = [{"key": k, "meaning": vocabulary.config.get(k, "")} for k in config_keys]
        entry["actions"] = [_action(name, vocabulary, sample, offered[name], len(entry["configs"]))
                            for name in vocabulary.actions if name in offered]
        entry["vars"] = [{"path": p, "type": _type(sample.vars.get(p)), "meaning": m}
                         for p, m in vocabulary.vars.items()]
        entry["observation"] = [{"path": p, "type": _type(sample.observation.get(p)), "meaning": m}
                                for p, m in vocabulary.observation.items()]
        entry["undocumented"] = missing(vocabulary, models[scope], sample)
        out.append(entry)
    return {"mechanism": mechanism.name, "variant": variant, "protocol": 1, "scopes": out}


def _action(name: str, vocabulary: Vocabulary, sample: Sample, offered: list[str], configs: int) -> dict[str, Any]:
    documented = vocabulary.actions[name]
    params = sample.params.get(name, {})
    top = [p for p in documented.params if "." not in p and "[" not in p]
    example = sample.examples.get(name)
    return {
        "name": name,
        "meaning": documented.meaning,
        "enabled": documented.enabled,
        "params": [{"name": p, "type": _type(params.get(p)), "meaning": documented.params[p],
                    "values": sorted(sample.values.get((name, p), ()), key=lambda v: (len(v), v))[:_MAX_VALUES]}
                   for p in top],
        "parts": [{"path": p, "type": _type(params.get(p)), "meaning": m}
                  for p, m in documented.params.items() if p not in top],
        "offered_by": offered if len(offered) < configs else "all",
        "example": None if example is None else {"params": as_json(example[0].as_dict()),
                                                  "observation": as_json(example[1])},
    }


def render(doc: Mapping[str, Any]) -> str:
    """The document as text for a port author; `--json` prints `doc` itself."""
    declared = f"properties/{doc['mechanism']}/protocol.py"
    lines = [f"# {doc['mechanism']} port vocabulary, variant {doc['variant']} (meanings declared in {declared}, "
             "types from the model; envelope and worked transcripts: docs/ports.md)"]
    for scope in doc["scopes"]:
        lines += ["", f"## scope {scope['scope']}", "", "configurations (the hello's config, complete with defaults; "
                  "verify --config NAME sends every explorer configuration of NAME's scope, NAME's first, then the "
                  "Hypothesis one called NAME):"]
        for c in scope["configs"]:
            tag = ", verify's default" if c["verify_default"] else ""
            lines += [f"  {c['name']} ({c['engine']}{tag}):", f"    {_dump(c['config'])}"]
        lines += ["", "config keys:"]
        lines += [f"  {k['key']}: {k['meaning']}" for k in scope["config_keys"]]
        lines += ["", "actions (step.action, step.params):"]
        for a in scope["actions"]:
            signature = ", ".join(f"{p['name']}: {p['type']}" for p in a["params"])
            lines.append(f"  {a['name']}({signature})  {a['meaning']}")
            lines.append(f"      enabled when: {a['enabled']}")
            if a["offered_by"] != "all":
                lines.append(f"      offered by: {', '.join(a['offered_by'])}")
            for p in a["params"]:
                more = ", ..." if len(p["values"]) == _MAX_VALUES else ""
                lines.append(f"      {p['name']}: {p['meaning']} (seen: {', '.join(p['values'])}{more})")
            lines += [f"      {p['path']}: {p['type']}  {p['meaning']}" for p in a["parts"]]
            if a["example"] is not None:
                lines.append(f"      e.g. {_dump(a['example']['params'])} -> {_dump(a['example']['observation'])}")
        lines += ["", "vars (reply.vars, exactly these keys):"]
        lines += [_part(v) for v in scope["vars"]]
        lines += ["", "observation fields (reply.observation; each action returns some of them):"]
        lines += [_part(o) for o in scope["observation"]]
        lines += ["", "initial vars (the ready message's):"]
        lines += [f"  {c['name']} ({c['engine']}): {_dump(c['initial_vars'])}" for c in scope["configs"]]
        if scope["undocumented"]:
            lines += ["", f"undocumented (a bug in {declared}): {', '.join(scope['undocumented'])}"]
    return "\n".join(lines)


def _part(part: Mapping[str, str]) -> str:
    """One indented line per path; a tuple's layout is its type, so the meaning does not repeat it."""
    path, kind, meaning = part["path"], part["type"], part["meaning"]
    indent = "  " * (path.count(".") + path.count("[]"))
    return f"  {indent}{path}: {kind}  {meaning.removeprefix(kind).strip()}"


def describe(mechanism: Mechanism, variant: str, names: Sequence[str] | None = None, *, as_json: bool = False,
             chosen: Collection[tuple[str, str]] | None = None) -> str:
    """`brokerspec protocol`'s output: the text for a port author, or the JSON document for tools."""
    doc = document(mechanism, variant, names, chosen=chosen)
    return json.dumps(doc, indent=1) if as_json else render(doc)
