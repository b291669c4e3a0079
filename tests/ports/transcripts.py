"""Worked port transcripts generated from the real models, so docs/ports.md shows exactly what a port sees.

`python tests/ports/transcripts.py` prints every transcript and every scope's observation card as
docs/ports.md embeds them; the docs test checks that the file still holds them verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from models.core import Action, Param
from properties import registry
from properties.engines.lockstep import as_json
from properties.engines.port import PROTOCOL_VERSION
from properties.engines.protocol import complete_config

SCRIPTS: dict[tuple[str, str], Sequence[tuple[str, Mapping[str, Param]]]] = {
    ("topiclist", "semaphore"): [("acquire", {"permits": 8}), ("acquire", {"permits": 5}), ("step", {}), ("step", {}),
                                 ("release", {"permit": 0}), ("step", {})],
    ("keyshared", "hot"): [("add", {"name": "consumer1", "permits": 2}), ("publish", {}), ("publish", {}),
                           ("read", {}), ("add", {"name": "consumer2"}), ("ack", {"position": 0})],
    ("keyshared", "tracker"): [("add_pending_ack_if_allowed", {"position": 0, "batch_size": 1}),
                               ("move_hash", {"hash": 11707, "consumer": 1}),
                               ("should_block_sticky_key_hash", {"hash": 11707}),
                               ("remove", {"consumer": 2, "position": 0})],
    ("delayed", "default"): [("add", {"ledger": 1, "entry": 0}), ("advance", {}), ("get_scheduled", {"limit": 100})],
    ("metadata", "default"): [("put", {"c": 0, "p": "/a"}), ("advance", {}), ("run", {}), ("run", {}),
                             ("run", {})],
    ("pidquota", "default"): [("produce", {"principal": "A", "pids": (1,)}),
                              ("produce", {"principal": "A", "pids": (1, 2)}), ("advance", {"dt": 31}),
                              ("produce", {"principal": "A", "pids": (1,)}), ("advance", {"dt": 29})],
}
"""Per (mechanism, Hypothesis configuration), the steps: the first enabled action of that name whose
parameters include the given ones."""


def _line(message: Mapping[str, Any]) -> str:
    return json.dumps(as_json(message))


def transcript(mechanism: str, config: str) -> str:
    """The JSON lines of a correct port's session: `>` harness to port, `<` port to harness."""
    found = registry.get(mechanism)
    model = found.make_model(found.hypothesis_configs[config], found.current)
    state = model.initial()
    lines = [
        "> " + _line({"type": "hello", "protocol": PROTOCOL_VERSION, "mechanism": mechanism, "variant": model.variant,
                      "config": complete_config(found, model)}),
        "< " + _line({"type": "ready", "vars": model.vars(state)}),
    ]
    for seq, (name, wanted) in enumerate(SCRIPTS[(mechanism, config)], start=1):
        action = next(a for a in model.enabled(state) if a.name == name and _has(a, wanted))
        state, observation = model.step(state, action)
        lines.append("> " + _line({"type": "step", "seq": seq, "action": name, "params": action.as_dict()}))
        lines.append("< " + _line({"type": "reply", "seq": seq, "observation": observation,
                                   "vars": model.vars(state)}))
    return "\n".join(lines)


def _has(action: Action, wanted: Mapping[str, Param]) -> bool:
    return all(action.get(k) == v for k, v in wanted.items())




CARD_STATES = 300
"""States enumerated breadth-first per configuration for the observation cards (deterministic)."""


def _shape(observation: object) -> str:
    """An observation's fields and the JSON type of each: what a port must send, whatever the values."""
    if not isinstance(observation, dict):
        return type(observation).__name__
    kinds = {bool: "bool", int: "int", str: "string", list: "array", dict: "object", type(None): "null"}
    return ", ".join(f"{k}: {kinds[type(v)]}" for k, v in sorted(observation.items()))


def observation_card(mechanism: str, scope: str) -> str:
    """Per action of `scope`, one real observation of each shape it has (the first met breadth-first over the
    scope's configurations, so empty lists show), as docs/ports.md embeds it."""
    found = registry.get(mechanism)
    seen: dict[str, dict[str, object]] = {}
    for config in [*found.explore_configs.values(), *found.hypothesis_configs.values()]:
        model = found.make_model(config, found.current)
        if found.scope(model.config) != scope:
            continue
        start = model.initial()
        known, queue, visited = {model.key(start)}, [start], 0
        while queue and visited < CARD_STATES:
            state = queue.pop(0)
            visited += 1
            for action in model.enabled(state):
                after, observation = model.step(state, action)
                seen.setdefault(action.name, {}).setdefault(_shape(observation), as_json(observation))
                if model.key(after) not in known:
                    known.add(model.key(after))
                    queue.append(after)
    width = max(len(name) for name in seen)
    lines = []
    for name in sorted(seen):
        for i, example in enumerate(seen[name].values()):
            lines.append(f"{name if i == 0 else '':<{width}}  {json.dumps(example)}")
    return "\n".join(lines)


def scopes() -> list[tuple[str, str]]:
    """(mechanism, scope) of every scope with a vocabulary, in the registry's order."""
    return [(name, scope) for name, m in registry.mechanisms().items() for scope in m.vocabularies]


def main() -> None:
    for mechanism, config in SCRIPTS:
        print(f"### {mechanism} ({config})\n\n```\n{transcript(mechanism, config)}\n```\n")
    for mechanism, scope in scopes():
        print(f"observations of {scope}:\n\n```\n{observation_card(mechanism, scope)}\n```\n")


if __name__ == "__main__":
    main()
