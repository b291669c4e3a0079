"""A model-action log's records as the replays read them: actions from their JSON text, and logged JSON text
compared with a model's as the lockstep compares values."""

from __future__ import annotations

import json
from typing import Any, cast

from models.core import Action, Param
from properties.engines.lockstep import same_values


def _param(value: Any) -> Param:
    return tuple(_param(v) for v in value) if isinstance(value, list) else cast(Param, value)


def action_of(name: str, params: str) -> Action:
    """The logged action, with arrays back as tuples so it equals what the model enumerates."""
    return Action(name, tuple(sorted((k, _param(v)) for k, v in json.loads(params).items())))


def same_json(canonical: str, logged: str | None) -> bool:
    """Whether a logged text other than the model's canonical one holds the same values, as the lockstep
    compares them (`same_values` on the parsed JSON: a record written with other spacing or key order
    passes, a different value does not)."""
    return logged is not None and same_values(json.loads(canonical), json.loads(logged))
