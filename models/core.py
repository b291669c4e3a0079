"""The shape every model shares: actions, named properties, the `Model` protocol, and the typed readers of
a configuration (`ConfigReader`) and of an action's parameters (`int_param`).

A model is the executable spec of one mechanism: a pure transition system over immutable states.
The engines in `properties/` (Hypothesis lockstep, explorer, Z3) and the trace tools in `traces/`
only ever talk to a model through this protocol, so a new mechanism plugs in by writing one
module under `models/` and nothing else here. This module depends on nothing of ours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeAlias, TypeVar

Param: TypeAlias = "int | str | bool | tuple[Param, ...]"
"""An action parameter: a small immutable JSON-like value (tuples stand for arrays)."""

Json: TypeAlias = "int | str | bool | list[Json] | tuple[Json, ...] | dict[str, Json]"
"""What a projection or an observation may contain; traces encode it as ITF, which has no null."""

Observation: TypeAlias = "dict[str, Json] | None"
"""What an implementation returned for a step; None where the model does not predict it."""

S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)
T = TypeVar("T")


class ActionNotEnabled(Exception):
    """Raised by `Model.step` when the action's precondition does not hold in the state."""

    def __init__(self, action: Action, reason: str) -> None:
        super().__init__(f"{action} is not enabled: {reason}")
        self.action = action
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Action:
    """A named action with parameters; hashable so the explorer can label graph edges with it."""

    name: str
    params: tuple[tuple[str, Param], ...] = ()

    @staticmethod
    def of(name: str, **params: Param) -> Action:
        """Build an action with its parameters in a canonical (sorted) order."""
        return Action(name, tuple(sorted(params.items())))

    def __getitem__(self, key: str) -> Param:
        for name, value in self.params:
            if name == key:
                return value
        raise KeyError(f"action {self.name} has no parameter {key!r}")

    def get(self, key: str, default: Param | None = None) -> Param | None:
        """The parameter `key`, or `default` when the action does not carry it."""
        for name, value in self.params:
            if name == key:
                return value
        return default

    def as_dict(self) -> dict[str, Param]:
        return dict(self.params)

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{self.name}({inner})"


@dataclass(frozen=True)
class Invariant(Generic[T]):
    """A named safety property (e.g. `TL-I1`) that must hold in every reachable state.

    `explain`, when given, says what is wrong in a violating state (e.g. the wait-for cycle of a
    deadlock), so a report can show it next to the shortest path.
    """

    name: str
    holds: Callable[[T], bool]
    description: str = ""
    explain: Callable[[T], str] | None = None


@dataclass(frozen=True)
class Liveness(Generic[T]):
    """A named `AG EF good` property: from every reachable state a `good` state stays reachable."""

    name: str
    good: Callable[[T], bool]
    description: str = ""


class Model(Protocol[S]):
    """A pure transition system with named properties, for one mechanism and one variant.

    `enabled` enumerates the finitely many actions the configured bounds allow; `step` raises
    `ActionNotEnabled` for any other action, so replayed and shrunk traces are re-checked.
    `key` is the canonical state key used for deduplication (it may quotient symmetries);
    `vars` projects a state onto the model's variables, the same projection ports report.
    `action_names` lists every action name the model knows, whatever the state.

    Three members are optional, and a model without them sets them to None. `terminal_ok(state)` says which
    states without enabled actions are legitimate ends (every thread done) rather than deadlocks. A model
    whose configuration has values it treats alike (two principals, say) may define
    `symmetric_key(state) -> Hashable`: the key of a canonical member of the state's orbit under the
    permutations of those values, so that `explore(..., symmetry=True)` keeps one state per orbit (as
    TLC's SYMMETRY). Only where nothing depends on which value is which: no ordering, comparison or
    hashing by them, fresh ones allocated by a counter, every action offered alike for each, every
    invariant and liveness goal alike on an orbit (`properties.engines.explorer.symmetry_error` checks
    this on the reachable states).

    A model whose actions are threads' steps declares them in `threaded` (a `Threaded`: the model itself, typed
    as one), which the reductions of `properties.engines.reduction` read; it is what tells a model of threads
    apart.
    """

    mechanism: str
    variant: str
    config: Mapping[str, Param]
    action_names: Sequence[str]
    invariants: Sequence[Invariant[S]]
    liveness: Sequence[Liveness[S]]

    def initial(self) -> S: ...

    def enabled(self, state: S) -> Sequence[Action]: ...

    def step(self, state: S, action: Action) -> tuple[S, Observation]: ...

    def key(self, state: S) -> Hashable: ...

    def vars(self, state: S) -> dict[str, Json]: ...

    @property
    def terminal_ok(self) -> Callable[[S], bool] | None: ...

    @property
    def symmetric_key(self) -> Callable[[S], Hashable] | None: ...

    @property
    def threaded(self) -> Threaded[S] | None: ...


Footprint = tuple[frozenset[str], frozenset[str]]
"""What a step (or the rest of a thread's program) reads and writes: two sets of shared-object names."""


class Threaded(Protocol[S_contra]):
    """A model of threads' steps, as the reductions read it (`Model.threaded`): each action's name is its thread.

    Required: `threads` (every thread's name), `footprint(state, thread)` (what the thread's next step reads and
    writes) and `future(state, thread, held)` (what its remaining steps may read and write before they acquire a
    lock of `held`). Optional, None where the model does not say: `position(state, thread)` (what the thread's
    footprint and futures depend on, so a reduction may memoize on it), `held(state, thread)` (the locks it holds
    that keep other threads out) and `waits_for(state, thread)` (the threads holding what its next step waits for;
    empty where it may run or is done).
    """

    @property
    def threads(self) -> Sequence[str]: ...

    def footprint(self, state: S_contra, thread: str) -> Footprint: ...

    def future(self, state: S_contra, thread: str, held: frozenset[str] = ...) -> Footprint: ...

    @property
    def position(self) -> Callable[[S_contra, str], Hashable] | None: ...

    @property
    def held(self) -> Callable[[S_contra, str], frozenset[str]] | None: ...

    @property
    def waits_for(self) -> Callable[[S_contra, str], frozenset[str]] | None: ...


class ModelWrapper(Generic[S]):
    """A model that passes everything to `inner`: subclasses change one method to watch or restrict it
    (record the states the harness projects; drop an action to show that coverage notices)."""

    def __init__(self, inner: Model[S]) -> None:
        self.inner = inner
        self.mechanism, self.variant, self.config = inner.mechanism, inner.variant, inner.config
        self.action_names: Sequence[str] = inner.action_names
        self.invariants: Sequence[Invariant[S]] = inner.invariants
        self.liveness: Sequence[Liveness[S]] = inner.liveness
        self.terminal_ok: Callable[[S], bool] | None = inner.terminal_ok
        self.symmetric_key: Callable[[S], Hashable] | None = inner.symmetric_key
        self.threaded: Threaded[S] | None = inner.threaded

    def initial(self) -> S:
        return self.inner.initial()

    def enabled(self, state: S) -> Sequence[Action]:
        return self.inner.enabled(state)

    def step(self, state: S, action: Action) -> tuple[S, Observation]:
        return self.inner.step(state, action)

    def key(self, state: S) -> Hashable:
        return self.inner.key(state)

    def vars(self, state: S) -> dict[str, Json]:
        return self.inner.vars(state)


def violated(model: Model[S], state: S) -> list[str]:
    """Names of the model's invariants that `state` breaks, in declaration order."""
    return [inv.name for inv in model.invariants if not inv.holds(state)]


def check_arguments(
    mechanism: str, variant: str, variants: Sequence[str], config: Mapping[str, Param] | None, known: Iterable[str]
) -> None:
    """A ValueError naming an unknown variant or configuration key.

    Every model checks its arguments the same way, so a typo in a trace's or a port's configuration
    reads alike whichever mechanism it names, and is never silently ignored.
    """
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r} of {mechanism} (known: {', '.join(variants)})")
    keys = set(known)
    unknown = sorted(set(config or {}) - keys)
    if unknown:
        known_keys = ", ".join(sorted(keys))
        raise ValueError(f"unknown config key(s) of {mechanism}: {', '.join(unknown)} (known: {known_keys})")


def configured(
    mechanism: str,
    variant: str,
    variants: Sequence[str],
    config: Mapping[str, Param] | None,
    defaults: Mapping[str, Param],
) -> dict[str, Param]:
    """`config` completed with `defaults`, once `check_arguments` accepts it."""
    check_arguments(mechanism, variant, variants, config, defaults)
    return {**defaults, **(config or {})}


class ConfigError(ValueError):
    """A configuration value a model cannot take: of the wrong type, or below its least. The message names the
    mechanism and the key."""


class ConfigReader:
    """Typed reads of one model's configuration, each refusing a value of the wrong type or below its least with a
    `ConfigError` that reads alike for every mechanism ("delayed config 'tick' must be an int >= 1, got 0").

    A bool is never read as an int, though Python counts it one. `default` is taken where the key is absent (a
    model whose configuration is completed by `configured` gives none; a missing key is then a KeyError).
    """

    def __init__(self, owner: str, config: Mapping[str, Param]) -> None:
        self.owner = owner
        self.config = config

    def integer(self, key: str, *, least: int | None = None, default: int | None = None) -> int:
        value = self._value(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least):
            raise self._refused(key, f"an int{_at_least(least)}", value)
        return value

    def flag(self, key: str, *, default: bool | None = None) -> bool:
        value = self._value(key, default)
        if not isinstance(value, bool):
            raise self._refused(key, "a bool", value)
        return value

    def string(self, key: str, *, default: str | None = None) -> str:
        value = self._value(key, default)
        if not isinstance(value, str):
            raise self._refused(key, "a string", value)
        return value

    def integers(
        self, key: str, *, least: int | None = None, default: tuple[int, ...] | None = None, nonempty: bool = False,
        distinct: bool = False,
    ) -> tuple[int, ...]:
        """A tuple of ints, each at least `least`; `nonempty` and `distinct` refuse an empty tuple and a repeat."""
        value = self._value(key, default)
        items = value if isinstance(value, tuple) else ()
        low = least if least is not None else -math.inf
        ints = tuple([v for v in items if not isinstance(v, bool) and isinstance(v, int) and v >= low])
        if not isinstance(value, tuple) or len(ints) != len(items) or _shape_refused(ints, nonempty, distinct):
            raise self._refused(key, f"{_tuple_of('ints', nonempty, distinct)}{_at_least(least)}", value)
        return ints

    def strings(
        self, key: str, *, default: tuple[str, ...] | None = None, nonempty: bool = False, distinct: bool = False,
    ) -> tuple[str, ...]:
        """A tuple of strings; `nonempty` and `distinct` as for `integers`."""
        value = self._value(key, default)
        items = value if isinstance(value, tuple) else ()
        strs = tuple([v for v in items if isinstance(v, str)])
        if not isinstance(value, tuple) or len(strs) != len(items) or _shape_refused(strs, nonempty, distinct):
            raise self._refused(key, _tuple_of("strings", nonempty, distinct), value)
        return strs

    def _value(self, key: str, default: Param | None) -> Param:
        return default if default is not None and key not in self.config else self.config[key]

    def _refused(self, key: str, expected: str, value: Param) -> ConfigError:
        return ConfigError(f"{self.owner} config {key!r} must be {expected}, got {value!r}")


def int_param(action: Action, name: str) -> int:
    """The action's parameter `name`, an int; `ActionNotEnabled` where it is missing or not an int. A bool is refused:
    `True == 1`, so an action equal to one the model offers may still carry a bool where an int belongs."""
    value = action.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionNotEnabled(action, f"parameter {name!r} must be an int")
    return value


def _shape_refused(items: tuple[Param, ...], nonempty: bool, distinct: bool) -> bool:
    return (nonempty and not items) or (distinct and len(set(items)) != len(items))


def _tuple_of(kind: str, nonempty: bool, distinct: bool) -> str:
    return f"a {'non-empty ' if nonempty else ''}tuple of {'distinct ' if distinct else ''}{kind}"


def _at_least(least: int | None) -> str:
    return "" if least is None else f" >= {least}"
