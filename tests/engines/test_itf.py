"""Every trace the project writes is real ITF: `itf-py` reads it, and reads the same values as brokerspec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import itf_py
import pytest

from properties.cli import main
from properties.cli.promote import corpus
from traces import format as tf

TRACES = corpus()


def _plain(value: Any) -> Any:
    """An itf-py value as brokerspec's reader gives it: records and maps as dicts, tuples and sets as lists."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _same_as_ours(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    theirs = itf_py.trace_from_json(doc)
    ours = tf.load(path)
    assert len(theirs.states) == len(ours.steps)
    for state, step in zip(theirs.states, ours.steps, strict=True):
        for name, value in step.vars.items():
            assert _plain(state.values[name]) == tf.normalise(value), (path, name)


@pytest.mark.parametrize("path", TRACES, ids=[f"{p.parent.name}/{p.stem}" for p in TRACES])
def test_itf_py_reads_every_corpus_trace_as_brokerspec_does(path: Path) -> None:
    _same_as_ours(path)


def test_itf_py_reads_the_traces_check_writes(tmp_path: Path) -> None:
    main(["check", "--mechanism", "metadata", "--variant", "legacy", "--batches", "1", "--out", str(tmp_path)])
    written = sorted(tmp_path.rglob("*.json"))
    assert written
    for path in written:
        _same_as_ours(path)


def test_a_map_with_keys_that_are_not_identifiers_is_written_as_an_itf_map() -> None:
    encoded = tf._encode({"/a": 1, "b": {"ok": True}, "class": 2})
    assert encoded == {"#map": [["/a", 1], ["b", {"ok": True}], ["class", 2]]}
    assert tf._decode(encoded) == {"/a": 1, "b": {"ok": True}, "class": 2}
