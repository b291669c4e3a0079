"""A model-action log's records as the replays read them: actions from their JSON text, and logged JSON text
compared with a model's as the lockstep compares values."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, cast

import numpy as np
import pyarrow as pa

from models.core import Action, Json, Param
from properties.engines.lockstep import DIVERGENCE, same_values
from traces.format import Trace, TraceStep


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


def unpredicted(logged: str | None) -> bool:
    """Whether a logged observation says something where the model predicts none (null and `{}` say nothing),
    which the replay must flag as it flags a differing one."""
    return logged is not None and logged != "{}" and json.loads(logged) != {}


def ending_in_refusal(prefix: Trace, action: Action, detail: str) -> Trace:
    """A partition's run on the model up to the step it cannot take (`prefix`, recorded against the log),
    then that step: `brokerspec replay` refuses the trace there, naming the step and why the model does
    not take the action (exit 3), which is the divergence the replay found. So every partition the model
    replay fails has a trace, even where no run of the model reaches the failing step."""
    last = prefix.steps[-1]
    refused = TraceStep(action, last.vars, None, (DIVERGENCE,))
    failure: dict[str, Json] = {"step": len(prefix.steps), "names": [DIVERGENCE], "detail": detail}
    return replace(prefix, steps=(*prefix.steps, refused), failure=failure)


def gap_free(seqs: np.ndarray[Any, Any], lo: int, hi: int) -> int:
    """Where rows lo..hi (one partition, in seq order) stop running 0, 1, 2, ... (`lo` without a seq 0): the
    replay stops there, since past a gap the log lost events (LOG-SEQ or the quarantine reports the gap),
    and replaying on would report the loss as a model failure."""
    off = np.flatnonzero(seqs[lo:hi] != np.arange(hi - lo))
    return hi if off.size == 0 else lo + int(off[0])


def strings(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A string column as a list (None for null): through NumPy, which makes one Python string per distinct
    value, at a sixth of `to_pylist`'s cost."""
    return cast(list[Any], column.to_numpy(zero_copy_only=False).tolist())


def runs(keys: np.ndarray[Any, Any]) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of equal keys: one partition each, as the rows are sorted by key."""
    return itertools.pairwise([0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist(), len(keys)])
