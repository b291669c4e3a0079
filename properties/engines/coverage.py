"""Coverage and vacuity: which actions ran and which named interesting states were reached.

An invariant checked only on states where nothing happens is vacuously true. So each mechanism
names the situations its invariants exist for ("a request timed out", "a Bloom layer rotated") in
`Mechanism.interesting` (its folder's `coverage.py`), as predicates over the model's variables (the
same projection traces and ports use, so they read alike for every engine); the explorer and the
Hypothesis runs report which ones they reached, and the tests fail when a change silently stops
reaching one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings

from models.core import Action, Json, Model, ModelWrapper, Param
from properties.engines.explorer import Exploration
from properties.engines.mechanism import Interesting, Mechanism, Vars
from properties.engines.stateful import build_state_machine, find_failure


def as_list(value: Json | None) -> list[Json]:
    """`value` as a list when it is an array (a predicate's variable may be absent or of another scope)."""
    return list(value) if isinstance(value, list | tuple) else []


def records(value: Json | None) -> list[dict[str, Json]]:
    """The objects among the values of a map or the elements of an array."""
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, dict)]
    return [v for v in as_list(value) if isinstance(v, dict)]


def as_int(value: Json | None) -> int:
    """`value` when it is an integer (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class Portable(NamedTuple):
    """A coverage as plain values, to cross a process boundary."""

    variant: str
    action_names: tuple[str, ...]
    actions: dict[str, int]
    reached: frozenset[str]


@dataclass
class Coverage:
    """Actions taken (by name, with counts) and interesting states reached, for one mechanism."""

    mechanism: str
    variant: str
    action_names: tuple[str, ...]
    watched: tuple[Interesting, ...]
    """The mechanism's interesting states (`Mechanism.interesting`)."""
    exempt: Mapping[str, str]
    """Actions the variant never offers by design, with the reason (`Mechanism.not_offered`)."""
    actions: dict[str, int] = field(default_factory=dict)
    reached: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, mechanism: Mechanism, variant: str, action_names: Sequence[str],
           actions: Mapping[str, int] | None = None) -> Coverage:
        """An empty coverage (or one with the given action counts) of `mechanism`'s `variant`."""
        return cls(mechanism.name, variant, tuple(action_names), mechanism.interesting,
                   mechanism.not_offered.get(variant, {}), dict(actions or {}))

    @property
    def interesting(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.watched)

    @property
    def missing_actions(self) -> list[str]:
        return [a for a in self.action_names if not self.actions.get(a) and a not in self.exempt]

    @property
    def missing_states(self) -> list[str]:
        return [s for s in self.interesting if s not in self.reached]

    def observe(self, config: Mapping[str, Param], states: Iterable[Vars]) -> None:
        """Mark the interesting states among `states`; stops once every one is reached."""
        todo = [i for i in self.watched if i.name not in self.reached]
        for state in states:
            if not todo:
                return
            hit = [i for i in todo if i.holds(config, state)]
            self.reached.update(i.name for i in hit)
            todo = [i for i in todo if i not in hit]

    def merge(self, other: Coverage) -> None:
        self.action_names = tuple(dict.fromkeys([*self.action_names, *other.action_names]))
        for name, count in other.actions.items():
            self.actions[name] = self.actions.get(name, 0) + count
        self.reached |= other.reached

    def portable(self) -> Portable:
        """What a forked process sends back of it (its predicates stay behind: they are the mechanism's)."""
        return Portable(self.variant, self.action_names, dict(self.actions), frozenset(self.reached))

    @classmethod
    def restored(cls, mechanism: Mechanism, portable: Portable) -> Coverage:
        """The coverage `portable` describes, of `mechanism`."""
        covered = cls.of(mechanism, portable.variant, portable.action_names, portable.actions)
        covered.reached |= portable.reached
        return covered

    def summary(self) -> str:
        """One line: `actions 7/7, interesting states 4/4` plus what is missing."""
        expected = len(self.action_names) - len([a for a in self.action_names if a in self.exempt])
        ran = expected - len(self.missing_actions)
        line = f"actions {ran}/{expected}, interesting states {len(self.reached)}/{len(self.interesting)}"
        missing = [*self.missing_actions, *(f'"{s}"' for s in self.missing_states)]
        return line + (f"; never reached: {', '.join(missing)}" if missing else "")


def from_exploration(mechanism: Mechanism, model: Model[Any], exploration: Exploration[Any]) -> Coverage:
    """Coverage of one explorer run of `model` (one of `mechanism`'s): its per-action counts and the
    interesting states among its states."""
    coverage = Coverage.of(mechanism, model.variant, model.action_names, exploration.coverage)
    coverage.observe(model.config, (model.vars(s) for s in exploration.states))
    return coverage


class _Observed(ModelWrapper[Any]):
    """A model that records every state the harness projects (the lockstep projects each one once)."""

    def __init__(self, model: Model[Any], seen: list[Vars]) -> None:
        super().__init__(model)
        self.seen = seen

    def vars(self, state: Any) -> dict[str, Json]:
        projected = self.inner.vars(state)
        self.seen.append(projected)
        return projected


class Recorder:
    """Feeds `coverage` from Hypothesis runs as they go, so a check's own runs report what they reached.

    `wrap` each model the machine builds (its projected states are kept) and pass `step` as the
    machine's `on_step`; `flush` after the last run. States are observed in chunks: a long run must
    not hold every state.
    """

    def __init__(self, coverage: Coverage, config: Mapping[str, Param]) -> None:
        self.coverage, self.config = coverage, config
        self.seen: list[Vars] = []

    def wrap(self, model: Model[Any]) -> Model[Any]:
        return _Observed(model, self.seen)

    def step(self, action: Action) -> None:
        self.coverage.actions[action.name] = self.coverage.actions.get(action.name, 0) + 1
        if len(self.seen) > 10_000:
            self.flush()

    def flush(self) -> None:
        self.coverage.observe(self.config, self.seen)
        self.seen.clear()


def from_hypothesis(
    mechanism: Mechanism,
    variant: str,
    config: Mapping[str, Param],
    settings: Settings,
    seed: int = 0,
    action_names: Sequence[str] | None = None,
) -> Coverage:
    """Coverage of one Hypothesis run of the model alone (rules = `action_names`, default all).

    The model runs without the reference: coverage is about what the model's rules reach.
    """
    model = mechanism.make_model(config, variant)
    names = tuple(model.action_names if action_names is None else action_names)
    coverage = Coverage.of(mechanism, variant, model.action_names)
    recorder = Recorder(coverage, config)
    machine = build_state_machine(lambda: recorder.wrap(mechanism.make_model(config, variant)), names, None,
                                  on_step=recorder.step)
    error = find_failure(hypothesis_seed(seed)(machine), settings)
    if error is not None:
        raise AssertionError(f"{mechanism.name}/{variant} failed while measuring coverage: {error}")
    recorder.flush()
    return coverage
