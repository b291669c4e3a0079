"""Reductions of an interleaving model, as model transformers the explorer runs unchanged (Stateright keeps its
checkers apart from what they check; so do these): partial-order reduction and a preemption bound.

Both apply to a model whose actions are threads' steps: the action's name is its thread, and the model lists
its threads in `threads`.

- `PartialOrder` (ample sets, as in Peled's and Godefroid's partial-order methods; loom and CHESS reduce the
  same way): in a state where some thread's next step touches nothing any *other* thread can still touch (by
  the footprints the model declares), that step alone is explored: every other order of it is equivalent. The
  model declares `footprint(state, thread)` (what the thread's next step reads and writes) and
  `future(state, thread)` (what any of its remaining steps may read and write). A step commutes with
  everything another thread may still do, so it stays enabled, and the invariants (flags a step raises from
  what it touches) keep their verdicts; the cycle proviso is met because the reduced models are acyclic,
  which `independence_error` checks with the declaration itself, as `symmetry_error` checks a symmetry.
- `PreemptionBounded` (CHESS's context bounding): at most `bound` preemptions, a switch away from a thread
  that could have gone on. Most concurrency bugs need very few; a bounded search is complete only up to it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import networkx as nx

from models.core import Action, Invariant, Json, Liveness, Model, Observation, Param

S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)

Footprint = tuple[frozenset[str], frozenset[str]]
"""What a step (or the rest of a thread's program) reads and writes: two sets of shared-object names."""


class Threaded(Protocol[S_contra]):
    """A model of threads' steps that declares what each step touches (see the module docstring)."""

    @property
    def threads(self) -> Sequence[str]: ...

    def footprint(self, state: S_contra, thread: str) -> Footprint: ...

    def future(self, state: S_contra, thread: str) -> Footprint: ...


def conflict(a: Footprint, b: Footprint) -> bool:
    """Two accesses conflict when one writes what the other reads or writes (reads commute)."""
    (ra, wa), (rb, wb) = a, b
    return bool(wa & (rb | wb) or ra & wb)


class _Wrapped(Generic[S]):
    """What both reductions pass through unchanged."""

    def __init__(self, inner: Model[Any]) -> None:
        self.inner = inner
        self.mechanism, self.variant = inner.mechanism, inner.variant
        self.config: Mapping[str, Param] = inner.config
        self.action_names: Sequence[str] = inner.action_names
        threads = getattr(inner, "threads", None)
        if threads is None:
            raise ValueError(f"{inner.mechanism}: a reduction needs a model of threads (it declares no `threads`)")
        self.threads: Sequence[str] = threads


class PartialOrder(_Wrapped[S]):
    """The model with an ample set of enabled actions in every state (see the module docstring)."""

    def __init__(self, inner: Model[S]) -> None:
        super().__init__(inner)
        self.model = inner
        if not hasattr(inner, "footprint") or not hasattr(inner, "future"):
            raise ValueError(f"{inner.mechanism}: partial-order reduction needs declared footprints")
        self.declared: Threaded[S] = inner  # type: ignore[assignment]
        self.invariants: Sequence[Invariant[S]] = inner.invariants
        self.liveness: Sequence[Liveness[S]] = ()  # a reduced graph keeps safety, not AG EF
        self.terminal_ok: Callable[[S], bool] | None = getattr(inner, "terminal_ok", None)

    def initial(self) -> S:
        return self.model.initial()

    def enabled(self, state: S) -> Sequence[Action]:
        enabled = self.model.enabled(state)
        by_thread = {a.name: a for a in enabled}
        if len(by_thread) < 2 or len(by_thread) != len(enabled):
            return enabled
        for thread, action in by_thread.items():
            step = self.declared.footprint(state, thread)
            if not any(conflict(step, self.declared.future(state, other)) for other in self.threads if other != thread):
                return [action]
        return enabled

    def step(self, state: S, action: Action) -> tuple[S, Observation]:
        return self.model.step(state, action)

    def key(self, state: S) -> Hashable:
        return self.model.key(state)

    def vars(self, state: S) -> dict[str, Json]:
        return self.model.vars(state)


class Bounded(NamedTuple):
    """A state of a preemption-bounded search: the model's, the thread that ran last, the preemptions used."""

    inner: Any
    last: str
    preemptions: int


class PreemptionBounded(_Wrapped[Bounded]):
    """The model where a run switches away from a still-enabled thread at most `bound` times."""

    def __init__(self, inner: Model[Any], bound: int) -> None:
        super().__init__(inner)
        if bound < 0:
            raise ValueError("a preemption bound is 0 or more")
        self.bound = bound
        self.invariants: Sequence[Invariant[Bounded]] = tuple(
            Invariant(i.name, _on_inner(i.holds), i.description) for i in inner.invariants)
        self.liveness: Sequence[Liveness[Bounded]] = ()
        inner_ok: Callable[[Any], bool] | None = getattr(inner, "terminal_ok", None)
        self.terminal_ok: Callable[[Bounded], bool] | None = None if inner_ok is None else _on_inner(inner_ok)

    def initial(self) -> Bounded:
        return Bounded(self.inner.initial(), "", 0)

    def _preempts(self, state: Bounded, action: Action, enabled: Sequence[Action]) -> bool:
        return bool(state.last) and action.name != state.last and any(a.name == state.last for a in enabled)

    def enabled(self, state: Bounded) -> Sequence[Action]:
        enabled = self.inner.enabled(state.inner)
        if state.preemptions < self.bound:
            return enabled
        return [a for a in enabled if not self._preempts(state, a, enabled)]

    def step(self, state: Bounded, action: Action) -> tuple[Bounded, Observation]:
        preempts = self._preempts(state, action, self.inner.enabled(state.inner))
        successor, observation = self.inner.step(state.inner, action)
        return Bounded(successor, action.name, state.preemptions + preempts), observation

    def key(self, state: Bounded) -> Hashable:
        return self.inner.key(state.inner), state.last, state.preemptions

    def vars(self, state: Bounded) -> dict[str, Json]:
        return self.inner.vars(state.inner)


def _on_inner(holds: Callable[[Any], bool]) -> Callable[[Bounded], bool]:
    return lambda state: holds(state.inner)


def independence_error(model: Model[S], states: Sequence[S]) -> str | None:
    """Why the declared footprints are no independence relation on `states` (the full model's reachable
    states), or None: two steps of different threads whose footprints do not conflict must each stay enabled
    after the other and commute (the same state either way), and the full graph must be acyclic."""
    declared: Threaded[S] = model  # type: ignore[assignment]
    graph = nx.DiGraph()
    for state in states:
        enabled = {a.name: a for a in model.enabled(state)}
        for a in enabled.values():
            graph.add_edge(model.key(state), model.key(model.step(state, a)[0]))
        for t, a in enabled.items():
            for u, b in enabled.items():
                if t >= u or conflict(declared.footprint(state, t), declared.footprint(state, u)):
                    continue
                after_a, after_b = model.step(state, a)[0], model.step(state, b)[0]
                if b not in model.enabled(after_a) or a not in model.enabled(after_b):
                    return f"{a} and {b} are declared independent, but one disables the other"
                if model.key(model.step(after_a, b)[0]) != model.key(model.step(after_b, a)[0]):
                    return f"{a} and {b} are declared independent, but their two orders reach different states"
    if not nx.is_directed_acyclic_graph(graph):
        return "the state graph has a cycle: an ample set could postpone a thread for ever"
    return None
