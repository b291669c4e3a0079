"""Run a model and (optionally) an implementation side by side, one action at a time.

This is the one place that decides what "a step failed" means, so the Hypothesis machines, the
replayer, the shrinker and the port driver all agree: the model's invariants are checked on the
model state, the implementation's projection must equal the model's (`divergence` otherwise), its
observation must equal the model's (an empty one where the model predicts none: an implementation that
reports something the model does not predict diverges too), and the implementation may
report invariants it checks on its own internals, or a divergence it found itself (a port checked
beside the reference), explained by its `disagreement` attribute.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from models.core import Action, Json, Model, Observation, Param, violated

S = TypeVar("S")

DIVERGENCE = "divergence"


class Implementation(Protocol):
    """What lockstep needs from a reference implementation or a port.

    `close` stops what it runs in the background (a pool's threads, a port's process); `strict_json` says its
    values arrived as JSON (a port), to be compared strictly; `disagreement` explains a `divergence` it reports
    itself (a port checked beside the reference). `BaseImplementation` has the defaults of the three.
    """

    def apply(self, action: Action) -> Observation: ...

    def vars(self) -> dict[str, Json]: ...

    def violations(self) -> list[str]: ...

    def close(self) -> None: ...

    @property
    def strict_json(self) -> bool: ...

    @property
    def disagreement(self) -> str: ...


class BaseImplementation:
    """The defaults of an `Implementation`'s optional members, for one to inherit: nothing runs in the background,
    its values are Python values (compared by `same_values`), and it finds no divergence of its own."""

    strict_json = False
    disagreement = ""

    def close(self) -> None:
        """Nothing to stop."""


ImplementationFactory = Callable[[Mapping[str, Param], str], Implementation]


@dataclass(frozen=True)
class StepOutcome:
    """What one lockstep step produced; `failures` lists invariant names (and `divergence`)."""

    observation: Observation
    vars: dict[str, Json]
    failures: tuple[str, ...]
    detail: str = ""


def as_json(value: object) -> object:
    """`value` as JSON would carry it (tuples become lists), so only real differences count."""
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


def same_json(a: object, b: object) -> bool:
    """Equal as JSON values, strictly: `true` is not `1`, `1` is not `1.0`, an array is not a string.

    Python's `==` says `True == 1`; a port that answers `1` for a boolean must not pass for it.
    """
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and a == b
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(same_json, a, b))
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(same_json(value, b[key]) for key, value in a.items()))
    return type(a) is type(b) and a == b


def to_text(value: object) -> str:
    """A value as JSON text, for messages a port author reads (`true`, `[1, 2]`, not Python's reprs)."""
    try:
        return json.dumps(as_json(value), sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def first_difference(
    expected: Mapping[str, Json], actual: Mapping[str, Json], sides: tuple[str, str] = ("model", "implementation")
) -> str:
    """The first variable, by name, whose values differ (strictly, as JSON), with both values as JSON."""
    for name in sorted(set(expected) | set(actual)):
        if name not in actual or name not in expected or not same_json(expected[name], actual[name]):
            missing = "(missing)"
            left = to_text(expected[name]) if name in expected else missing
            right = to_text(actual[name]) if name in actual else missing
            return f"{name}: {sides[0]} {left} != {sides[1]} {right}"
    return ""


def same_values(a: object, b: object) -> bool:
    """Equal once tuples and lists are alike: how a reference written in Python is compared (its
    projection uses the model's own types, so `==` decides; arrays only need `as_json` where a side
    built a list and the other a tuple)."""
    return a == b or as_json(a) == as_json(b)


class Lockstep(Generic[S]):
    """A model state plus an optional implementation, advanced together by `apply`.

    An implementation whose `strict_json` is true (a port: its values arrived as JSON) is
    compared strictly (`same_json`: `1` is not `true`); a reference in Python by `same_values`,
    which costs a fraction of it on every step.
    """

    def __init__(
        self, model: Model[S], implementation: Implementation | None = None, known: frozenset[str] = frozenset()
    ) -> None:
        self.model = model
        self.implementation = implementation
        self.known = known
        """Failures that do not count (a configuration's known findings, reported elsewhere): the model's, and the
        implementation's once the model shows the same one."""
        self.state = model.initial()
        self.same = same_json if implementation is not None and implementation.strict_json else same_values

    def initial_outcome(self) -> StepOutcome:
        return self._outcome(None, self.model.vars(self.state), None)

    def apply(self, action: Action) -> StepOutcome:
        """Step both sides; raises `ActionNotEnabled` (from the model) before touching the implementation."""
        self.state, predicted = self.model.step(self.state, action)
        observed = self.implementation.apply(action) if self.implementation is not None else predicted
        return self._outcome(predicted, self.model.vars(self.state), observed)

    def _outcome(
        self, predicted: Observation, model_vars: dict[str, Json], observed: Observation
    ) -> StepOutcome:
        judged = violated(self.model, self.state)
        failures = [f for f in judged if f not in self.known]
        detail = ""
        if self.implementation is not None:
            # a known finding the implementation shows where the model does not is a difference, and counts
            failures += [f for f in self.implementation.violations()
                         if f not in failures and not (f in self.known and f in judged)]
            actual = self.implementation.vars()
            if not self.same(model_vars, actual):
                detail = "state " + first_difference(model_vars, actual)
            elif (predicted is not None or observed) and not self.same(predicted or {}, observed or {}):
                detail = f"observation: model {to_text(predicted or {})} != implementation {to_text(observed)}"
            elif DIVERGENCE in failures:
                detail = self.implementation.disagreement
            if detail and DIVERGENCE not in failures:
                failures.append(DIVERGENCE)
            model_vars = actual
        return StepOutcome(observed, model_vars, tuple(failures), detail)


def refusal(thread: str, step: str, label: str, enabled: bool) -> str:
    """Why a lock-level reference cannot take the model's `step` for `thread`, whose next point is `label` ('' when
    it can): the one wording every lock scope's `disagreement` uses."""
    if label == step and enabled:
        return ""
    why = "blocked" if label == step else f"about to run {label!r}"
    return f"{thread} cannot run {step!r}: it is {why}"


def first_failure(lockstep: Lockstep[S], rng: random.Random, steps: int) -> StepOutcome | None:
    """A seeded random walk of up to `steps` enabled actions; the first failing step's outcome, or None."""
    for _ in range(steps):
        outcome = lockstep.apply(rng.choice(lockstep.model.enabled(lockstep.state)))
        if outcome.failures:
            return outcome
    return None
