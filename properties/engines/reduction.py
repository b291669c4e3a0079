"""Reductions of an interleaving model, as model transformers the explorer runs unchanged (Stateright keeps its
checkers apart from what they check; so do these): partial-order reduction and a preemption bound.

Both apply to a model whose actions are threads' steps, which it declares in `threaded` (a `models.core.Threaded`):
the action's name is its thread, and the declaration lists the threads in `threads`.

- `PartialOrder` (persistent sets, as in Godefroid's partial-order methods, grown by Valmari's stubborn-set
  closure): in each state only the enabled steps of a set of threads are explored, a set closed so that no
  step the other threads can take before one of its threads moves depends on the set's next steps. The model
  declares `footprint(state, thread)` (what the thread's next step reads and writes) and
  `future(state, thread, held)` (what its remaining steps may read and write before they acquire a lock of
  `held`); optionally `held(state, thread)` (the locks it holds that keep others out: the set's threads do not
  move, so the others' futures stop at those locks), `waits_for(state, thread)` (a waiting thread brings in
  only the threads it waits for) and `position(state, thread)` (what its footprint and futures depend on: the
  set is memoized on the threads' positions and locks). The invariants are flags a step raises from what it
  reads, which stay raised, so every verdict is kept (a persistent set keeps every end state), but a flag may
  be reached by a longer path: `shortest_path` gives a finding back its shortest one. The cycle proviso is
  met because the reduced models are acyclic. `independence_error` audits all of it on a full graph, as
  `symmetry_error` audits a symmetry.
- `PreemptionBounded` (CHESS's context bounding): at most `bound` preemptions, a switch away from a thread
  that could have gone on. Most concurrency bugs need very few; a bounded search is complete only up to it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

import networkx as nx

from models.core import Action, Footprint, Invariant, Json, Liveness, Model, Observation, Param, Threaded

S = TypeVar("S")


def threaded(model: Model[S]) -> Threaded[S]:
    """The model's declaration of its threads (`Model.threaded`); a `ValueError` where it is no model of threads."""
    declared = model.threaded
    if declared is None:
        raise ValueError(f"{model.mechanism}: a reduction needs a model of threads (it declares no `threads`)")
    return declared


def conflict(a: Footprint, b: Footprint) -> bool:
    """Two accesses conflict when one writes what the other reads or writes (reads commute)."""
    (ra, wa), (rb, wb) = a, b
    return bool(wa & (rb | wb) or ra & wb)


class _Wrapped(Generic[S]):
    """What both reductions pass through unchanged."""

    symmetric_key = None
    """A reduced search keeps no orbits: a reduction and a symmetry are never combined."""

    def __init__(self, inner: Model[Any]) -> None:
        self.inner = inner
        self.mechanism, self.variant = inner.mechanism, inner.variant
        self.config: Mapping[str, Param] = inner.config
        self.action_names: Sequence[str] = inner.action_names
        self.threads: Sequence[str] = threaded(inner).threads


class PartialOrder(_Wrapped[S]):
    """The model with an ample set of enabled actions in every state (see the module docstring)."""

    def __init__(self, inner: Model[S]) -> None:
        super().__init__(inner)
        self.model = inner
        self.declared: Threaded[S] = threaded(inner)
        self.threaded: Threaded[S] | None = self.declared
        """The reduced model has the model's states and threads, so the model's declaration holds for it."""
        self.invariants: Sequence[Invariant[S]] = inner.invariants
        self.liveness: Sequence[Liveness[S]] = ()  # a reduced graph keeps safety, not AG EF
        self.terminal_ok: Callable[[S], bool] | None = inner.terminal_ok
        self.position: Callable[[S, str], Hashable] | None = self.declared.position
        """Where a thread is, where the model declares it: what its footprint and futures depend on, so the
        threads' positions, the locks they hold and which are enabled decide the persistent set (memoized)."""
        self.chosen: dict[Hashable, frozenset[str]] = {}

    def initial(self) -> S:
        return self.model.initial()

    def enabled(self, state: S) -> Sequence[Action]:
        enabled = self.model.enabled(state)
        by_thread = {a.name: a for a in enabled}
        if len(by_thread) < 2 or len(by_thread) != len(enabled):
            return enabled
        held = {t: self.locks(state, t) for t in self.threads}
        key: Hashable = None
        if self.position is not None:
            key = (tuple(self.position(state, t) for t in self.threads), tuple(held.values()), tuple(by_thread))
            known = self.chosen.get(key)
            if known is not None:
                return [a for a in enabled if a.name in known]
        steps = {t: self.declared.footprint(state, t) for t in self.threads}
        best: Sequence[Action] = enabled
        for seed in by_thread:
            chosen = self._persistent(state, seed, steps, held)
            ample = [a for a in enabled if a.name in chosen]
            if len(ample) < len(best):
                best = ample
                if len(best) == 1:
                    break
        if key is not None:
            self.chosen[key] = frozenset(a.name for a in best)
        return best

    def locks(self, state: S, thread: str) -> frozenset[str]:
        """The locks the thread holds that keep others out, where the model declares them (`held`)."""
        held = self.declared.held
        return held(state, thread) if held is not None else frozenset()

    def _persistent(self, state: S, seed: str, steps: Mapping[str, Footprint],
                    held: Mapping[str, frozenset[str]]) -> set[str]:
        """The threads a persistent set grown from `seed` must hold (a stubborn-set closure): with each thread,
        every other thread whose remaining steps, up to an acquisition of a lock the set's threads hold, conflict
        with its next step, enabled or not (a disabled step waits on something only a thread writing what it reads
        can change, so that thread comes in too). The set's threads do not move along a path of the others', so
        the locks they hold stay held; the others' steps there, whatever they are, are independent of the set's
        next steps."""
        chosen, todo = {seed}, [seed]
        while todo:
            thread = todo.pop()
            waits = self.waits(state, thread)
            if waits is not None:  # only the threads it waits for can let it go on
                todo += [t for t in waits if t not in chosen]
                chosen |= waits
                continue
            step = steps[thread]
            locked = frozenset().union(*(held[t] for t in chosen))
            for other in self.threads:
                if other not in chosen and conflict(step, self.declared.future(state, other, locked)):
                    chosen.add(other)
                    todo.append(other)
        return chosen

    def waits(self, state: S, thread: str) -> frozenset[str] | None:
        """The threads the thread's next step waits for, where the model declares them (`waits_for`) and it waits;
        None where it may run, is done, or the model does not say."""
        waits_for = self.declared.waits_for
        waits = waits_for(state, thread) if waits_for is not None else frozenset()
        return waits or None

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

    threaded = None
    """Its states are `Bounded`, which the model's declaration does not describe: no reduction applies on top."""

    def __init__(self, inner: Model[Any], bound: int) -> None:
        super().__init__(inner)
        if bound < 0:
            raise ValueError("a preemption bound is 0 or more")
        self.bound = bound
        self.invariants: Sequence[Invariant[Bounded]] = tuple(
            Invariant(i.name, _on_inner(i.holds), i.description) for i in inner.invariants)
        self.liveness: Sequence[Liveness[Bounded]] = ()
        inner_ok = inner.terminal_ok
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


def _within(inner: Footprint, outer: Footprint) -> bool:
    """Whether every access of `inner` is among `outer`'s (a read may be declared as a write)."""
    return inner[0] <= outer[0] | outer[1] and inner[1] <= outer[1]


def _future_error(declared: Threaded[S], state: S, thread: str, successor: S, held: frozenset[str]) -> str | None:
    """Why `future(state, thread, held)` does not cover the thread's step from `state` (to `successor`) and its
    future after it, or None."""
    future = declared.future(state, thread, held)
    if not _within(declared.footprint(state, thread), future):
        return f"{thread}'s step is outside its declared future (other threads holding {sorted(held)})"
    if not _within(declared.future(successor, thread, held), future):
        return f"{thread}'s future grows after its step (other threads holding {sorted(held)})"
    return None


def _waits_error(model: Model[S], threads: Sequence[str], waits_for: Callable[[S, str], frozenset[str]], state: S,
                 enabled: Mapping[str, Action]) -> str | None:
    """Why `waits_for` is wrong in `state`, or None: a thread said to wait is not enabled, and no step of a thread it
    does not wait for lets it go on."""
    for thread in threads:
        waits = waits_for(state, thread)
        if not waits:
            continue
        if thread in enabled:
            return f"{thread} is said to wait for {sorted(waits)}, but it may run"
        for other, action in enabled.items():
            if other not in waits and thread in {a.name for a in model.enabled(model.step(state, action)[0])}:
                return f"{other}'s step lets {thread} go on, but {thread} is said to wait only for {sorted(waits)}"
    return None


def independence_error(model: Model[S], states: Sequence[S]) -> str | None:
    """Why the declared footprints are no independence relation on `states` (the full model's reachable
    states), or None: two steps of different threads whose footprints do not conflict must each stay enabled
    after the other and commute (the same state either way); each thread's declared future must cover its step
    and its future after it, also up to the locks another thread holds (`held`, where declared: a thread cannot
    step past an acquisition of one of them); and the full graph must be acyclic."""
    declared = threaded(model)
    threads, held, waits_for = declared.threads, declared.held, declared.waits_for
    graph = nx.DiGraph()
    for state in states:
        enabled = {a.name: a for a in model.enabled(state)}
        if waits_for is not None:
            error = _waits_error(model, threads, waits_for, state, enabled)
            if error is not None:
                return error
        for a in enabled.values():
            successor = model.step(state, a)[0]
            graph.add_edge(model.key(state), model.key(successor))
            locks: list[frozenset[str]] = [frozenset()]
            if held is not None:
                locks += [held(state, t) for t in threads if t != a.name]
            for locked in locks:
                error = _future_error(declared, state, a.name, successor, locked)
                if error is not None:
                    return error
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


class Shortest(NamedTuple):
    """A finding's shortest path, and what confirming it cost."""

    path: tuple[Action, ...]
    reduced: int  # the length the reduced search found
    confirmed_states: int  # the states of the full breadth-first search to one step less


def shortest_path(model: Model[S], path: Sequence[Action], name: str) -> Shortest:
    """The shortest path to a state breaking invariant `name`, from `path`, one a reduced search found (a reduced
    graph keeps every verdict, not every shortest path): the path cut to the causal past of its last step (the
    steps independent of it, and of what it depends on, commute behind it: the cut path still breaks `name` with
    its last step, which reads what it read), then a breadth-first search of the full model to one step less,
    which either finds a shorter path (then the shortest) or shows there is none."""
    declared = threaded(model)
    states = [model.initial()]
    for action in path:
        states.append(model.step(states[-1], action)[0])
    kept = [len(path) - 1]
    for j in range(len(path) - 2, -1, -1):
        mine = declared.footprint(states[j], path[j].name)
        if any(path[k].name == path[j].name or conflict(mine, declared.footprint(states[k], path[k].name))
               for k in kept):
            kept.append(j)
    cut = tuple(path[j] for j in sorted(kept))
    best = cut if _breaks_last(model, cut, name) else tuple(path)
    shorter, visited = _search(model, name, len(best) - 1)
    return Shortest(shorter if shorter is not None else best, len(path), visited)


def _breaks_last(model: Model[S], path: Sequence[Action], name: str) -> bool:
    """Whether `path` runs on the model and breaks `name` with its last step only."""
    holds = next(i.holds for i in model.invariants if i.name == name)
    state = model.initial()
    for action in path:
        if not holds(state) or action not in model.enabled(state):
            return False
        state = model.step(state, action)[0]
    return not holds(state)


def _search(model: Model[S], name: str, depth: int) -> tuple[tuple[Action, ...] | None, int]:
    """A shortest path of at most `depth` steps to a state breaking `name` (breadth-first), or None; and the
    states visited."""
    holds = next(i.holds for i in model.invariants if i.name == name)
    start = model.initial()
    parents: dict[Hashable, tuple[Hashable, Action] | None] = {model.key(start): None}
    if not holds(start):
        return (), 1
    level = [start]
    for _ in range(depth):
        following = []
        for state in level:
            for action in model.enabled(state):
                successor = model.step(state, action)[0]
                key = model.key(successor)
                if key in parents:
                    continue
                parents[key] = (model.key(state), action)
                if not holds(successor):
                    return _back(parents, key), len(parents)
                following.append(successor)
        level = following
    return None, len(parents)


def _back(parents: Mapping[Hashable, tuple[Hashable, Action] | None], key: Hashable) -> tuple[Action, ...]:
    out: list[Action] = []
    while (edge := parents[key]) is not None:
        key, action = edge
        out.append(action)
    return tuple(reversed(out))
