"""The per-mechanism port vocabulary, generated from the model so the documentation cannot drift.

Seeded random walks over `model.enabled` collect, per action, the parameter names with their
types and the values seen, and an example observation; the variables come from the initial state
and from the last state a walk reached. Nothing here is hand-written per mechanism.
"""

from __future__ import annotations

import json
import random
from typing import Any

from models.core import Action, Json, Model, Observation, Param

_MAX_VALUES = 8


def _type(value: Param | Json | None) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    inner = sorted({_type(v) for v in value})
    return f"array<{'|'.join(inner) or 'any'}>"


def _layout(value: Json, indent: str) -> list[str]:
    """One line per variable (nested one level for objects and arrays of objects)."""
    lines: list[str] = []
    if isinstance(value, dict):
        for name, v in value.items():
            lines.append(f"{indent}{name}: {_type(v)}")
            if isinstance(v, list) and v and isinstance(v[0], dict):
                lines.extend(_layout(v[0], indent + "    "))
    return lines


def _dump(value: Json | Observation) -> str:
    return json.dumps(value, separators=(", ", ": "))


def describe(model: Model[Any], *, walks: int = 200, length: int = 40, seed: int = 0) -> str:
    """The protocol text for `model`'s mechanism, variant and configuration."""
    rng = random.Random(seed)
    params: dict[str, dict[str, set[str]]] = {name: {} for name in model.action_names}
    values: dict[tuple[str, str], set[str]] = {}
    examples: dict[str, tuple[Action, Observation]] = {}
    sample: Any = model.initial()
    for _ in range(walks):
        state = model.initial()
        for _ in range(length):
            choices = list(model.enabled(state))
            if not choices:
                break
            action = rng.choice(choices)
            state, observation = model.step(state, action)
            for name, value in action.params:
                params.setdefault(action.name, {}).setdefault(name, set()).add(_type(value))
                values.setdefault((action.name, name), set()).add(_dump(_plain(value)))
            if action.name not in examples or (observation and not examples[action.name][1]):
                examples[action.name] = (action, observation)
        sample = state
    lines = [
        f"mechanism {model.mechanism}, variant {model.variant}",
        f"config {_dump({k: _plain(v) for k, v in model.config.items()})}",
        "",
        "actions (step.action, step.params):",
    ]
    for name in model.action_names:
        found = params.get(name, {})
        signature = ", ".join(f"{p}: {'|'.join(sorted(t))}" for p, t in sorted(found.items()))
        lines.append(f"  {name}({signature})" + ("" if name in examples else "   [not reached by the sample]"))
        for p in sorted(found):
            seen = sorted(values[(name, p)], key=lambda v: (len(v), v))
            more = ", ..." if len(seen) > _MAX_VALUES else ""
            lines.append(f"      {p} seen: {', '.join(seen[:_MAX_VALUES])}{more}")
    lines += ["", "vars (reply.vars, exactly these keys):"]
    initial, sampled = model.vars(model.initial()), model.vars(sample)
    lines += _layout({k: sampled.get(k, v) if v == [] else v for k, v in initial.items()}, "  ")
    lines += ["", "initial vars:", "  " + _dump(initial)]
    lines += ["", "vars of a sampled state:", "  " + _dump(sampled)]
    lines += ["", "observations (reply.observation), one example per action:"]
    for name in model.action_names:
        if name in examples:
            action, observation = examples[name]
            lines.append(f"  {action} -> {_dump(observation)}")
    return "\n".join(lines)


def _plain(value: Param) -> Json:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value

