"""The brokerspec trace: ITF-compatible JSON with provenance, actions, observations and violations.

A trace is data, never code: it is read with `json` and validated field by field, and every
problem is reported as one line naming the file and the step. The layout follows the ITF format
of Apalache/Quint (`#meta`, `vars`, `states`), so `itf-py` and Quint tooling can read it; each
state carries the action taken to reach it (`mbt::actionTaken`, `mbt::nondetPicks`, as Quint's
model-based-testing traces do), the observation the implementation returned, and the names of
the invariants that failed in it.
"""

from __future__ import annotations

import json
import keyword
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.core import Action, Json, Observation, Param
from traces.limits import config_problem

SCHEMA_VERSION = 1
ACTION = "mbt::actionTaken"
PARAMS = "mbt::nondetPicks"
OBSERVATION = "brokerspec::observation"
VIOLATIONS = "brokerspec::violations"
RESERVED = (ACTION, PARAMS, OBSERVATION, VIOLATIONS)
INIT = "init"
_SAFE_INT = 2**53 - 1

MAX_BYTES = 16 * 2**20
"""The largest trace file read: a counterexample is tens of steps, a few hundred KiB at most."""
MAX_DEPTH = 48
"""The deepest nesting of arrays and records accepted in a trace (the models' values nest a few levels)."""
MAX_DIGITS = 40
"""The most digits an integer may have, raw or as `#bigint` (models use 64-bit values)."""


class TraceError(Exception):
    """A trace that cannot be used, with a one-line message naming the file and the step."""


@dataclass(frozen=True)
class TraceStep:
    """One state of a trace and the action that led to it (`init` for the first state)."""

    action: Action
    vars: dict[str, Json]
    observation: Observation
    violations: tuple[str, ...]


@dataclass(frozen=True)
class Trace:
    """A run of one mechanism: provenance plus the sequence of states."""

    mechanism: str
    variant: str
    engine: str
    config: dict[str, Param]
    steps: tuple[TraceStep, ...]
    seed: int | None = None
    failure: dict[str, Json] = field(default_factory=dict)
    version: str = "0.1.0"

    @property
    def actions(self) -> tuple[Action, ...]:
        """The actions after the initial state, i.e. what a replay executes."""
        return tuple(s.action for s in self.steps[1:])


def _encode(value: Any) -> Any:
    """Python value -> ITF JSON: big ints as `#bigint`, tuples/lists as arrays, dicts as records when
    every key is an identifier and as `#map` otherwise."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT <= value <= _SAFE_INT else {"#bigint": str(value)}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if all(_is_field(k) for k in value):
            return {k: _encode(v) for k, v in value.items()}
        return {"#map": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise TypeError(f"cannot encode {type(value).__name__} in a trace: {value!r}")


def _is_field(key: object) -> bool:
    """Can `key` name a field of an ITF record? Other keys (paths such as '/a', numbers) make a `#map`,
    as ITF readers (itf-py builds records as named tuples) accept only identifiers as field names."""
    return isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key) and not key.startswith("_")


def _decode(value: Any) -> Any:
    """ITF JSON -> Python value; arrays come back as lists, `#bigint` as int, `#map` as a dict.

    Only for values `_checked` accepted (or that this module wrote)."""
    if isinstance(value, dict):
        if set(value) == {"#bigint"}:
            return int(value["#bigint"])
        if set(value) == {"#tup"} or set(value) == {"#set"}:
            return [_decode(v) for v in next(iter(value.values()))]
        if set(value) == {"#map"}:
            return {_decode(k): _decode(v) for k, v in value["#map"]}
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _checked(value: Any, where: str, depth: int = 0) -> Any:
    """`value` if it is an ITF value brokerspec can read; a `TraceError` naming the field otherwise.

    Integers, strings, booleans, arrays and records; `#bigint` (a decimal string), `#tup`, `#set`
    and `#map` (an array of [key, value] pairs with string or integer keys). No null, no floats,
    no nesting deeper than `MAX_DEPTH`, no integer longer than `MAX_DIGITS` digits.
    """
    if depth > MAX_DEPTH:
        raise TraceError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        for i, item in enumerate(value):
            _checked(item, f"{where}[{i}]", depth + 1)
        return value
    if isinstance(value, dict):
        keys = set(value)
        if keys == {"#bigint"}:
            digits = value["#bigint"]
            if not (isinstance(digits, str) and digits.lstrip("-").isdigit() and len(digits) <= MAX_DIGITS + 1):
                raise TraceError(f"{where}: '#bigint' must be a decimal string of at most {MAX_DIGITS} digits")
            return value
        if keys in ({"#tup"}, {"#set"}, {"#map"}):
            tag = next(iter(keys))
            items = value[tag]
            if not isinstance(items, list):
                raise TraceError(f"{where}: {tag!r} must be an array")
            if tag == "#map":
                for i, pair in enumerate(items):
                    if not (isinstance(pair, list) and len(pair) == 2):
                        raise TraceError(f"{where}.#map[{i}]: must be a [key, value] pair")
                    key = _checked(pair[0], f"{where}.#map[{i}][0]", depth + 1)
                    if not isinstance(_decode(key), str | int) or isinstance(_decode(key), bool):
                        raise TraceError(f"{where}.#map[{i}][0]: a map key must be a string or an integer")
                    _checked(pair[1], f"{where}.#map[{i}][1]", depth + 1)
                return value
            return {tag: _checked(items, f"{where}.{tag}", depth)}
        for key, item in value.items():
            _checked(item, f"{where}.{key}", depth + 1)
        return value
    kind = "null" if value is None else type(value).__name__
    raise TraceError(f"{where}: expected an integer, string, boolean, array or record, got {kind}")


def _decoded(value: Any, where: str) -> Any:
    return _decode(_checked(value, where))


def _parameter(value: Any, where: str) -> Param:
    """A decoded value that may be an action parameter or a configuration value (no records)."""
    if isinstance(value, list):
        return tuple(_parameter(v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(value, dict):
        raise TraceError(f"{where}: expected an integer, string, boolean or array, got a record")
    return value  # type: ignore[no-any-return]


def to_json(trace: Trace) -> dict[str, Any]:
    """The ITF document for `trace`; deterministic (no clock, no host data) so seeds reproduce bytes."""
    var_names = sorted(trace.steps[0].vars) if trace.steps else []
    states = []
    for index, step in enumerate(trace.steps):
        state: dict[str, Any] = {"#meta": {"index": index}}
        state.update({name: _encode(step.vars[name]) for name in var_names})
        state[ACTION] = step.action.name
        state[PARAMS] = _encode(step.action.as_dict())
        state[OBSERVATION] = _encode(step.observation if step.observation is not None else {})
        state[VIOLATIONS] = list(step.violations)
        states.append(state)
    return {
        "#meta": {
            "format": "ITF",
            "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
            "source": "brokerspec",
            "brokerspec": {
                "schema": SCHEMA_VERSION,
                "version": trace.version,
                "mechanism": trace.mechanism,
                "variant": trace.variant,
                "engine": trace.engine,
                "seed": trace.seed,
                "config": _encode(trace.config),
                "failure": _encode(trace.failure),
            },
        },
        "vars": [*var_names, *RESERVED],
        "states": states,
    }


def dumps(trace: Trace) -> str:
    return json.dumps(to_json(trace), indent=1, ensure_ascii=False) + "\n"


def save(trace: Trace, path: Path) -> Path:
    """Write the trace atomically (a temporary file renamed over `path`): an interrupted run never
    leaves half a trace behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(dumps(trace), encoding="utf-8")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def _require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise TraceError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise TraceError(f"{where}: field {key!r} must be {names}, got {type(value).__name__}")
    return value


def from_json(doc: Any, source: str) -> Trace:
    """Validate an ITF document and build the trace; every error names `source` and the step."""
    if not isinstance(doc, dict):
        raise TraceError(f"{source}: a trace is a JSON object, got {type(doc).__name__}")
    meta = _require(doc, "#meta", dict, source)
    info = _require(meta, "brokerspec", dict, f"{source}: #meta")
    schema = _require(info, "schema", int, f"{source}: #meta.brokerspec")
    if schema != SCHEMA_VERSION:
        raise TraceError(
            f"{source}: unsupported trace schema version {schema} (this brokerspec reads {SCHEMA_VERSION})"
        )
    where = f"{source}: #meta.brokerspec"
    mechanism = _require(info, "mechanism", str, where)
    variant = _require(info, "variant", str, where)
    engine = _require(info, "engine", str, where)
    for field_name, text in (("mechanism", mechanism), ("variant", variant), ("engine", engine)):
        if not _NAME.fullmatch(text):
            raise TraceError(f"{where}: field {field_name!r} must be a name of letters, digits, '_', '-', '+', "
                             f"'[' and ']', got {text!r}")
    config = _decoded(_require(info, "config", dict, where), f"{where}.config")
    seed = info.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise TraceError(f"{where}: field 'seed' must be an integer or null")
    failure = _decoded(info.get("failure", {}), f"{where}.failure")
    if not isinstance(failure, dict):
        raise TraceError(f"{where}: field 'failure' must be a record")
    _check_failure(failure, f"{where}.failure")
    version = info.get("version", "")
    if not isinstance(version, str):
        raise TraceError(f"{where}: field 'version' must be a string")
    raw_states = _require(doc, "states", list, source)
    if not raw_states:
        raise TraceError(f"{source}: the trace has no states")
    declared = _require(doc, "vars", list, source)
    if not all(isinstance(v, str) for v in declared):
        raise TraceError(f"{source}: field 'vars' must list variable names")
    steps = []
    for index, raw in enumerate(raw_states):
        at = f"{source}: step {index}"
        if not isinstance(raw, dict):
            raise TraceError(f"{at}: a state is a JSON object, got {type(raw).__name__}")
        state_meta = raw.get("#meta", {"index": index})
        if not isinstance(state_meta, dict) or state_meta.get("index", index) != index:
            raise TraceError(f"{at}: '#meta.index' must be {index} (states out of order?)")
        name = _require(raw, ACTION, str, at)
        params = _require(raw, PARAMS, dict, at)
        observation = _require(raw, OBSERVATION, dict, at)
        violations = _require(raw, VIOLATIONS, list, at)
        if not all(isinstance(v, str) for v in violations):
            raise TraceError(f"{at}: field {VIOLATIONS!r} must list invariant names")
        missing = [v for v in declared if v not in raw]
        if missing:
            raise TraceError(f"{at}: missing variable {missing[0]!r}")
        if index == 0 and name != INIT:
            raise TraceError(f"{at}: the first state must have action {INIT!r}, got {name!r}")
        if index > 0 and name == INIT:
            raise TraceError(f"{at}: action {INIT!r} may only label the first state")
        decoded = {k: _parameter(_decoded(v, f"{at}: {PARAMS}.{k}"), f"{at}: {PARAMS}.{k}") for k, v in params.items()}
        action = Action(name, tuple(sorted(decoded.items())))
        state_vars = {k: _decoded(raw[k], f"{at}: {k}") for k in declared if k not in RESERVED}
        steps.append(TraceStep(action, state_vars, _decoded(observation, f"{at}: {OBSERVATION}"), tuple(violations)))
    parameters = {k: _parameter(v, f"{where}.config.{k}") for k, v in config.items()}
    problem = config_problem(parameters)
    if problem is not None:
        raise TraceError(f"{where}.{problem}")
    return Trace(
        mechanism=mechanism,
        variant=variant,
        engine=engine,
        config=parameters,
        steps=tuple(steps),
        seed=seed,
        failure=failure,
        version=version,
    )


_NAME = re.compile(r"[A-Za-z0-9_\-+\[\]]{1,80}")
"""What a mechanism, variant or engine name may contain: they name files and appear in generated tests."""


def _check_failure(failure: dict[str, Any], where: str) -> None:
    step, names = failure.get("step"), failure.get("names", [])
    if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
        raise TraceError(f"{where}: field 'step' must be a step index")
    if not isinstance(names, list) or not all(isinstance(n, str) and _NAME.fullmatch(n) for n in names):
        raise TraceError(f"{where}: field 'names' must list invariant names")
    for key in ("kind", "detail"):
        if not isinstance(failure.get(key, ""), str):
            raise TraceError(f"{where}: field {key!r} must be a string")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits (at most {MAX_DIGITS}; larger ones as '#bigint')")
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str, source: str) -> Trace:
    """Parse and validate a trace; every problem is a one-line `TraceError` naming `source`."""
    try:
        doc = json.loads(text, parse_int=_integer, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{source}: line {exc.lineno}: not valid JSON: {exc.msg}") from None
    except ValueError as exc:
        raise TraceError(f"{source}: {exc}") from None
    except RecursionError:
        raise TraceError(f"{source}: nested too deeply to be a trace") from None
    return from_json(doc, source)


def load(path: Path) -> Trace:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise TraceError(f"{path}: {size:,} bytes is too large for a trace (at most {MAX_BYTES:,})")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not UTF-8 text") from None
    return loads(text, str(path))


def normalise(value: Json) -> Json:
    """A value as it reads back from a trace (tuples become lists), for comparing with recorded vars."""
    return _decode(json.loads(json.dumps(_encode(value))))  # type: ignore[no-any-return]

