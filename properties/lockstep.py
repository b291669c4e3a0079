"""Run a model and (optionally) an implementation side by side, one action at a time.

This is the one place that decides what "a step failed" means, so the Hypothesis machines, the
replayer, the shrinker and the port driver all agree: the model's invariants are checked on the
model state, the implementation's projection must equal the model's (`divergence` otherwise), its
observation must equal the model's where the model predicts one, and the implementation may
report invariants it checks on its own internals, or a divergence it found itself (a port checked
beside the reference), explained by its `disagreement` attribute.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from models.core import Action, Json, Model, Observation, Param, violated

S = TypeVar("S")

DIVERGENCE = "divergence"


class Implementation(Protocol):
    """What lockstep needs from a reference implementation or a port."""

    def apply(self, action: Action) -> Observation: ...

    def vars(self) -> dict[str, Json]: ...

    def violations(self) -> list[str]: ...


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


def first_difference(
    expected: Mapping[str, Json], actual: Mapping[str, Json], sides: tuple[str, str] = ("model", "implementation")
) -> str:
    """The first variable, by name, whose values differ, with both values."""
    for name in sorted(set(expected) | set(actual)):
        if as_json(expected.get(name)) != as_json(actual.get(name)):
            return f"{name}: {sides[0]} {expected.get(name)!r} != {sides[1]} {actual.get(name)!r}"
    return ""


class Lockstep(Generic[S]):
    """A model state plus an optional implementation, advanced together by `apply`."""

    def __init__(self, model: Model[S], implementation: Implementation | None = None) -> None:
        self.model = model
        self.implementation = implementation
        self.state = model.initial()

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
        failures = violated(self.model, self.state)
        detail = ""
        if self.implementation is not None:
            failures += [f for f in self.implementation.violations() if f not in failures]
            actual = self.implementation.vars()
            if actual != model_vars and as_json(actual) != as_json(model_vars):  # a port sends arrays, not tuples
                detail = "state " + first_difference(model_vars, actual)
            elif predicted is not None and observed != predicted:
                detail = f"observation: model {predicted!r} != implementation {observed!r}"
            elif DIVERGENCE in failures:
                detail = str(getattr(self.implementation, "disagreement", ""))
            if detail and DIVERGENCE not in failures:
                failures.append(DIVERGENCE)
            model_vars = actual
        return StepOutcome(observed, model_vars, tuple(failures), detail)


def first_failure(lockstep: Lockstep[S], rng: random.Random, steps: int) -> StepOutcome | None:
    """A seeded random walk of up to `steps` enabled actions; the first failing step's outcome, or None."""
    for _ in range(steps):
        outcome = lockstep.apply(rng.choice(lockstep.model.enabled(lockstep.state)))
        if outcome.failures:
            return outcome
    return None
