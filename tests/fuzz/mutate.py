"""Seeded mutations of valid traces: the bad input a user (or an attacker) can hand to brokerspec.

Each mutation works on the text or on the decoded document of a corpus trace and returns the text
of the mutated file; `mutations(seed, count)` yields (label, text) pairs, the same for the same seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from models.core import Param
from properties import registry
from properties.cli.promote import corpus
from properties.engines.replay import record
from traces.format import dumps

Doc = Any


def _nodes(doc: Doc, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Doc]]:
    yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _nodes(v, (*path, i))


def _set(doc: Doc, path: tuple[Any, ...], value: Any) -> Doc:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


def _pick(rng: random.Random, doc: Doc, want: Callable[[Any], bool]) -> tuple[Any, ...] | None:
    found = [p for p, v in _nodes(doc) if p and want(v)]
    return rng.choice(found) if found else None


WRONG_TYPES: tuple[Any, ...] = (None, 1.5, "x", [], {}, True, -1, [1, [2]], {"#bigint": "nope"})


def truncate(rng: random.Random, text: str, doc: Doc) -> str:
    return text[: rng.randrange(len(text))]


def flip(rng: random.Random, text: str, doc: Doc) -> str:
    i = rng.randrange(len(text))
    return text[:i] + rng.choice('{}[]":,0a\\\x00é') + text[i + 1 :]


def delete_key(rng: random.Random, text: str, doc: Doc) -> str:
    path = _pick(rng, doc, lambda v: isinstance(v, dict) and bool(v))
    if path is None:
        return "{}"
    node = doc
    for step in path:
        node = node[step]
    del node[rng.choice(sorted(node))]
    return json.dumps(doc)


def wrong_type(rng: random.Random, text: str, doc: Doc) -> str:
    path = _pick(rng, doc, lambda v: True)
    return json.dumps(_set(doc, path or (), rng.choice(WRONG_TYPES)))


def huge_int(rng: random.Random, text: str, doc: Doc) -> str:
    path = _pick(rng, doc, lambda v: isinstance(v, int) and not isinstance(v, bool))
    marker = "__HUGE__"
    out = json.dumps(_set(doc, path or (), marker))
    return out.replace(json.dumps(marker), rng.choice(["1" + "0" * 5000, "-" + "9" * 40, "1e400", str(2**64)]), 1)


def deep_nesting(rng: random.Random, text: str, doc: Doc) -> str:
    path = _pick(rng, doc, lambda v: True)
    marker = "__DEEP__"
    depth = rng.choice([100, 5_000, 200_000])
    out = json.dumps(_set(doc, path or (), marker))
    return out.replace(json.dumps(marker), "[" * depth + "]" * depth, 1)


def top_level(rng: random.Random, text: str, doc: Doc) -> str:
    return rng.choice(["[]", json.dumps([doc]), "7", '"trace"', "null", ""])


def unknown_names(rng: random.Random, text: str, doc: Doc) -> str:
    meta = doc["#meta"]["brokerspec"]
    choice = rng.randrange(5)
    if choice == 0:
        meta["mechanism"] = rng.choice(["nope", "../../../../tmp/x", "a\nb", "keyshared\"; import os"])
    elif choice == 1:
        meta["variant"] = rng.choice(["nope", "'''; import os; '''", "x\ny"])
    elif choice == 2:
        meta["config"]["no_such_key"] = 1
    elif choice == 3 and len(doc["states"]) > 1:
        doc["states"][-1]["mbt::actionTaken"] = rng.choice(["nope", "init", ""])
    else:
        meta["engine"] = '"""\nimport os\nos.system("touch /tmp/pwned")\n"""'
    return json.dumps(doc)


def out_of_order(rng: random.Random, text: str, doc: Doc) -> str:
    rng.shuffle(doc["states"])
    return json.dumps(doc)


def big_config(rng: random.Random, text: str, doc: Doc) -> str:
    config = doc["#meta"]["brokerspec"]["config"]
    ints = [k for k, v in config.items() if isinstance(v, int) and not isinstance(v, bool)]
    if not ints:
        config["points"] = 10**9
    else:
        config[rng.choice(ints)] = rng.choice([10**9, 10**18, -5, 0])
    return json.dumps(doc)


MUTATIONS: tuple[Callable[[random.Random, str, Doc], str], ...] = (
    truncate, flip, delete_key, wrong_type, huge_int, deep_nesting, top_level, unknown_names, out_of_order, big_config,
)


def mutations(seed: int, count: int, sources: list[Path] | None = None) -> Iterator[tuple[str, str]]:
    """`count` (label, text) pairs of mutated corpus traces, the same for the same seed."""
    rng = random.Random(seed)
    files = sources or corpus()
    for number in range(count):
        source = rng.choice(files)
        text = source.read_text(encoding="utf-8")
        mutate = MUTATIONS[number % len(MUTATIONS)]
        yield f"{number}-{mutate.__name__}-{source.parent.name}-{source.stem}", mutate(rng, text, json.loads(text))


def _with_first_int(value: Param, bad: int) -> Param:
    """`value` with its first integer (at any depth) replaced by `bad`; an empty list becomes `[bad]`."""
    if isinstance(value, tuple):
        if not value:
            return (bad,)
        return (_with_first_int(value[0], bad), *value[1:])
    return bad


def _out_of_range(low: int, high: int) -> dict[str, int]:
    """Just below and just above the bound, and the issue's 10**18 where that is above it too."""
    return {"below": low - 1, "above": high + 1, **({"1e18": 10**18} if high < 10**18 else {})}


def out_of_bounds() -> Iterator[tuple[str, str, str]]:
    """(label, text, field) for every bounded field of every mechanism (`Mechanism.limits`), each value out of
    its range in a trace of a configuration that has the field: generated from the declared bounds, so a new
    bound is covered without a new case. `field` is the configuration key the refusal must name."""
    for mechanism in registry.mechanisms().values():
        models = [mechanism.make_model(c, mechanism.current)
                  for configs in (mechanism.explore_configs, mechanism.nightly_configs, mechanism.hypothesis_configs)
                  for c in configs.values()]
        for bound, (low, high) in mechanism.limits.items():
            key = bound.removeprefix("len(").removesuffix(")")
            model = next((m for m in models if key in m.config), models[0])  # a key read with its default: any
            trace = record(model, [], engine="explorer")
            bad: dict[str, Param]
            if key != bound:  # as many items as the bound excludes, each within its own bound
                first = mechanism.limits.get(key, (0, 0))[0]
                bad = {which: tuple(range(first, first + n)) for which, n in _out_of_range(low, high).items()
                       if 0 <= n <= high + 1}
            else:
                value = model.config.get(key, 0)
                bad = {which: _with_first_int(value, n) for which, n in _out_of_range(low, high).items()}
            for which, value in bad.items():
                text = dumps(replace(trace, config={**trace.config, key: value}))
                yield f"{mechanism.name}-{bound}-{which}", text, key
