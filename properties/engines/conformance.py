"""Conformance exploration: every transition the explorer found is replayed on the implementation.

The explorer proves the model's invariants on every reachable state of a small configuration, but
the code under test never runs there. This engine closes that gap deterministically: it explores
the model with the action of every edge kept, then covers **every edge** (not only every state: a
wrong observation or a missing callback on one edge hides behind another path to the same target)
with walks run in lockstep on a fresh implementation. A walk starts with the shortest path to the
shallowest state that still has an uncovered edge and then follows uncovered edges greedily (a
transition tour), so each replayed step beyond the prefix covers a new edge.

The budget is a number of steps, never seconds: the same configuration and implementation give the
same walks, the same verdict and the same counterexample on any machine under any load.

When a walk fails, the edge it failed on is tried again at the end of the shortest path to its
source: a failure that reproduces there has a witness no longer than the model's shortest path. A
bare divergence does not end the walk at once: the walk goes on for a few steps (model and
implementation still take the same actions) so that the invariant the implementation then breaks
is reported by name, with the divergence as its detail.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from models.core import Action, ActionNotEnabled, Model
from properties.engines import interrupts
from properties.engines.explorer import Exploration, explore
from properties.engines.lockstep import DIVERGENCE, Implementation, Lockstep

AFTER_DIVERGENCE = 8
"""Steps a walk goes on past a bare divergence, looking for the invariant the implementation breaks."""

MAX_WALK = 200
"""The longest walk: a counterexample deeper than this is still found, by the next walk's prefix."""

EXCEPTION = "exception"
"""The failure name of a step on which the implementation raised."""

NOT_EXECUTABLE = "walk-not-executable"
"""The failure name of a walk whose next action the model does not take where the walk is: a defect of the
harness (of its tour, or of a model whose key merges states that take other actions), never a pass."""

MAX_DETOUR = 4
"""How far a stuck walk may cross covered edges to reach one that is not."""


@dataclass(frozen=True)
class Deviation:
    """A failing walk: its actions up to the failing step, what failed there, and why."""

    actions: tuple[Action, ...]
    target: str
    failures: tuple[str, ...]
    detail: str


@dataclass(frozen=True)
class Conformance:
    """What a conformance exploration covered and found."""

    states: int
    edges: int
    covered: int
    walks: int
    steps: int
    complete: bool
    elapsed_s: float
    deviation: Deviation | None

    @property
    def ok(self) -> bool:
        return self.deviation is None

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.elapsed_s if self.elapsed_s > 0 else float("inf")

    def summary(self) -> str:
        scope = "every" if self.covered == self.edges else f"{self.covered} of"
        ended = " (bounded)" if not self.complete and self.deviation is None else ""
        if self.deviation is not None:
            ended = ", then the failing walk"
        return (f"{scope} {self.edges} transitions of {self.states} states replayed in {self.walks} walks, "
                f"{self.steps} steps{ended}")


def _target(failures: Sequence[str]) -> str | None:
    """An invariant outranks a divergence: it says what is wrong, not only that something differs."""
    named = [f for f in failures if f != DIVERGENCE]
    return named[0] if named else (DIVERGENCE if failures else None)


def run_walk(
    model: Model[Any], implementation: Implementation, actions: Sequence[Action], known: frozenset[str] = frozenset()
) -> tuple[Deviation | None, int]:
    """Run `actions` in lockstep from the initial state; the first failure (named if it can be) and steps run.

    Failures named in `known` (a configuration's known findings, which the explorer reports on their own row)
    do not count, on either side.
    """
    try:
        lockstep = Lockstep(model, implementation, known)
        first = lockstep.initial_outcome()
        if first.failures:
            return Deviation((), _target(first.failures) or DIVERGENCE, first.failures, first.detail), 0
        diverged: Deviation | None = None
        for index, action in enumerate(actions, start=1):
            try:
                outcome = lockstep.apply(action)
            except ActionNotEnabled as error:
                return Deviation(tuple(actions[:index]), NOT_EXECUTABLE, (NOT_EXECUTABLE,),
                                 f"harness defect: the walk's step {index} cannot be taken on the model "
                                 f"({error})"), index - 1
            except Exception as error:  # the implementation raised: a failure of its own, with the step
                return Deviation(tuple(actions[:index]), EXCEPTION, (EXCEPTION,),
                                 f"{type(error).__name__}: {error}"), index
            target = _target(outcome.failures)
            if target is None:
                continue
            if target != DIVERGENCE:
                detail = outcome.detail
                if diverged is not None:
                    detail = f"{detail}; after a divergence at step {len(diverged.actions)}: {diverged.detail}"
                return Deviation(tuple(actions[:index]), target, outcome.failures, detail.strip("; ")), index
            if diverged is None:
                diverged = Deviation(tuple(actions[:index]), DIVERGENCE, outcome.failures, outcome.detail)
            if index - len(diverged.actions) >= AFTER_DIVERGENCE:
                return diverged, index
        if diverged is None:
            return None, len(actions)
        return _beyond(lockstep, list(actions), diverged)
    finally:
        implementation.close()


def _beyond(lockstep: Lockstep[Any], actions: list[Action], diverged: Deviation) -> tuple[Deviation, int]:
    """Past the end of a walk that diverged: up to `AFTER_DIVERGENCE` more steps since the divergence,
    each the model's enabled action picked by the step's number (deterministic), until the
    implementation breaks an invariant by name; the bare divergence otherwise."""
    while len(actions) - len(diverged.actions) < AFTER_DIVERGENCE:
        enabled = lockstep.model.enabled(lockstep.state)
        if not enabled:
            break
        actions.append(enabled[len(actions) % len(enabled)])
        try:
            outcome = lockstep.apply(actions[-1])
        except Exception:  # the implementation raised beyond the walk: the divergence says enough
            break
        named = [f for f in outcome.failures if f != DIVERGENCE]
        if named:
            detail = f"{outcome.detail}; after a divergence at step {len(diverged.actions)}: {diverged.detail}"
            return Deviation(tuple(actions), named[0], outcome.failures, detail.strip("; ")), len(actions)
    return diverged, len(actions)


def _out_edges(exploration: Exploration[Any]) -> list[int]:
    """`starts[u]` .. `starts[u + 1]` are the edges leaving state u (the explorer lists them by source)."""
    sources = exploration.edges[0]
    starts = [0] * (len(exploration.states) + 1)
    for source in sources:
        starts[source + 1] += 1
    for u in range(len(exploration.states)):
        starts[u + 1] += starts[u]
    return starts


def tour(exploration: Exploration[Any], model: Model[Any]) -> Iterator[tuple[int, ...]]:
    """Walks (as edge indices) that together cover every edge of the explored graph, shallow sources first;
    each one a path the model steps from its initial state.

    Made one at a time, so a bounded replay pays only for the walks it runs.

    A walk takes the shortest path to a state with an uncovered edge, then uncovered edges while it
    can; where it is stuck it crosses covered edges to the nearest state that still has one (a
    breadth-first search of at most `MAX_DETOUR` edges), so few steps are spent on prefixes.

    An explored state stands for every state of its key: a model's key may rename values it treats alike
    (Key_Shared's consumer ids) or drop what no action reads, so the state a walk is in may be another
    member of the explored one's class, on which an edge's action, recorded on the explored state, may not
    be enabled or may lead elsewhere. The planner steps the model along every walk and takes an edge only
    where its action, from the state the walk is in, reaches a state of the edge's target class: the
    tree prefix ends on the explored state itself, so every edge is taken by some walk, and every walk is
    executable by construction (`tests/engines/test_tour_steps.py` holds this on every configuration).
    """
    sources, targets = exploration.edges
    labels = exploration.labels
    assert labels is not None, "explore(..., record_labels=True) keeps the actions of the edges"
    states = exploration.states
    starts = _out_edges(exploration)
    next_edge = starts[:-1]  # per state, no edge before this one is uncovered
    covered = bytearray(len(sources))
    keys: dict[int, Hashable] = {}

    def uncovered(state: int) -> int | None:
        e = next_edge[state]
        end = starts[state + 1]
        while e < end and covered[e]:
            e += 1
        next_edge[state] = e
        return e if e < end else None

    def take(concrete: Any, e: int) -> Any | None:
        """The state edge `e`'s action leads to from `concrete` (a member of its source's class), when it
        is one of the edge's target class (the explored target itself where equal); None otherwise."""
        try:
            after, _ = model.step(concrete, labels[e])
        except ActionNotEnabled:
            return None
        target = targets[e]
        explored = states[target]
        if after == explored:
            return explored
        if target not in keys:
            keys[target] = model.key(explored)
        return after if model.key(after) == keys[target] else None

    def next_uncovered(state: int, concrete: Any) -> tuple[int, Any] | None:
        """An uncovered edge of `state` that the walk can take from `concrete`, and where it leads."""
        first = uncovered(state)
        if first is None:
            return None
        exact = concrete is states[state]
        for e in range(first, starts[state + 1]):
            if not covered[e]:
                after = take(concrete, e)
                if after is not None:
                    return e, after
                if exact:  # the explored state itself takes every edge it has: a nondeterministic model
                    raise AssertionError(f"{labels[e]} from explored state {state} does not reach its target")
        return None

    def detour(state: int, concrete: Any) -> tuple[list[int], Any]:
        """The edges of a shortest path from `state` to a state with an uncovered edge the walk can take
        there, and the walk's state at its end; ([], None) when there is none within `MAX_DETOUR`."""
        came: dict[int, tuple[int, int]] = {state: (-1, -1)}
        frontier = [state]
        for _ in range(MAX_DETOUR):
            following: list[int] = []
            for v in frontier:
                for e in range(starts[v], starts[v + 1]):
                    w = targets[e]
                    if w in came:
                        continue
                    came[w] = (v, e)
                    if uncovered(w) is not None:
                        path = []
                        while w != state:
                            w, e = came[w]
                            path.append(e)
                        path.reverse()
                        at: Any = concrete
                        for e in path:
                            at = take(at, e)
                            if at is None:
                                return [], None
                        return (path, at) if next_uncovered(targets[path[-1]], at) is not None else ([], None)
                    following.append(w)
            frontier = following
        return [], None

    for u in range(len(states)):
        while uncovered(u) is not None:
            prefix: list[int] = []
            v = u
            while exploration.parents[v] >= 0:
                prefix.append(exploration.tree_edges[v])
                v = exploration.parents[v]
            walk = list(reversed(prefix))
            current, concrete = u, states[u]
            while len(walk) < MAX_WALK:
                found = next_uncovered(current, concrete)
                if found is None:
                    bridge, concrete = detour(current, concrete)
                    if not bridge:
                        break
                    walk.extend(bridge)
                    current = targets[bridge[-1]]
                    continue
                e, concrete = found
                covered[e] = 1
                walk.append(e)
                current = targets[e]
            for e in walk:
                covered[e] = 1
            yield tuple(walk)


@dataclass(frozen=True)
class Tour:
    """The walks a conformance replay runs, and what it needs of the explored graph to shorten a failing one.

    Computed from the model alone, so `properties.engines.cache` keeps it between runs of an unchanged model.
    Edges are numbered as the explorer numbered them; equal actions are one object (a compact pickle).
    """

    states: int
    edges: int
    complete: bool
    """The exploration was complete and the walks cover every edge (no step budget cut them)."""
    labels: tuple[Action, ...]
    """The action of every edge."""
    sources: tuple[int, ...]
    """The state every edge leaves."""
    parents: tuple[int, ...]
    tree_edges: tuple[int, ...]
    """Per state, the state and the edge that first reached it (-1 for the initial state)."""
    walks: tuple[tuple[int, ...], ...]
    """Edge indices, in replay order."""

    @staticmethod
    def of(exploration: Exploration[Any], model: Model[Any], max_steps: int | None = None) -> Tour:
        """The tour of `exploration` (`model`'s, explored with `record_labels`), cut at `max_steps` replayed
        steps."""
        assert exploration.labels is not None, "explore(..., record_labels=True) keeps the actions of the edges"
        complete = exploration.complete
        walks: list[tuple[int, ...]] = []
        steps = 0
        for walk in tour(exploration, model):
            if max_steps is not None and steps + len(walk) > max_steps:
                complete = False
                break
            walks.append(walk)
            steps += len(walk)
        interned: dict[Action, Action] = {}
        return Tour(len(exploration.states), exploration.transitions, complete,
                    tuple(interned.setdefault(a, a) for a in exploration.labels), tuple(exploration.edges[0]),
                    tuple(exploration.parents), tuple(exploration.tree_edges), tuple(walks))

    def path_to(self, state: int) -> tuple[Action, ...]:
        """The shortest action path from the initial state to `state`."""
        out: list[Action] = []
        while self.parents[state] >= 0:
            out.append(self.labels[self.tree_edges[state]])
            state = self.parents[state]
        return tuple(reversed(out))


def conform(
    make_model: Callable[[], Model[Any]],
    make_implementation: Callable[[], Implementation],
    *,
    max_states: int | None = None,
    max_steps: int | None = None,
    terminal_ok: Callable[[Any], bool] | None = None,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    known: frozenset[str] = frozenset(),
    planned: Tour | None = None,
) -> Conformance:
    """Explore `make_model()`'s states, then replay a tour of every edge on fresh implementations.

    Stops at the first deviation (shrunk to the shortest path to its edge where it reproduces) or
    after `max_steps` replayed steps (the result is then bounded). With `workers` > 1 the walks are
    shared among forked processes; the verdict is the same as with one (the failing walk of lowest
    index wins, and every walk before it has run), so the count of steps is too. A `planned` tour (one
    kept from an earlier run of the same model) is replayed as it is: the model is not explored again.
    """
    started = time.perf_counter()
    if planned is None:
        model = make_model()
        exploration = explore(model, max_states=max_states, check_liveness=False, check_deadlock=False,
                              terminal_ok=terminal_ok, record_labels=True)
        planned = Tour.of(exploration, model, max_steps)
    budgeted = list(planned.walks)
    actions = [[planned.labels[e] for e in walk] for walk in budgeted]
    failed = _replay(make_model, make_implementation, actions, workers, progress, known)
    deviation: Deviation | None = None
    steps = sum(len(w) for w in budgeted)
    if failed is not None:
        index, found = failed
        budgeted = budgeted[: index + 1]
        steps = sum(len(w) for w in budgeted[:index]) + len(found.actions) - (found.target == NOT_EXECUTABLE)
        deviation = _shortest(make_model, make_implementation, planned, budgeted[index], found, known)
    seen = bytearray(planned.edges)
    for walk in budgeted if deviation is None else budgeted[:-1]:
        for e in walk:
            seen[e] = 1
    return Conformance(
        states=planned.states,
        edges=planned.edges,
        covered=sum(seen),
        walks=len(budgeted),
        steps=steps,
        complete=planned.complete and deviation is None,
        elapsed_s=time.perf_counter() - started,
        deviation=deviation,
    )


def _replay(
    make_model: Callable[[], Model[Any]],
    make_implementation: Callable[[], Implementation],
    walks: list[list[Action]],
    workers: int,
    progress: Callable[[str], None] | None,
    known: frozenset[str],
) -> tuple[int, Deviation] | None:
    """The first failing walk (by index) and what failed, running the walks on `workers` processes.

    Forking is safe only while this process has one thread (a forked child gets no copy of the
    others, and a lock one of them holds would stay locked): otherwise the walks run here.
    """
    if workers <= 1 or len(walks) < 2 * workers or threading.active_count() > 1:
        for index, walk in enumerate(walks):
            found, _ = run_walk(make_model(), make_implementation(), walk, known)
            if found is not None:
                return index, found
            if progress is not None and (index + 1) % 2000 == 0:
                progress(f"{index + 1} of {len(walks)} walks")
        return None
    context = multiprocessing.get_context("fork")
    lowest = context.Value("q", len(walks))
    results: Any = context.SimpleQueue()

    def work(first: int) -> None:
        try:
            for index in range(first, len(walks), workers):
                if index > lowest.value:
                    break
                found, _ = run_walk(make_model(), make_implementation(), walks[index], known)
                if found is not None:
                    with lowest.get_lock():
                        lowest.value = min(lowest.value, index)
                    results.put((index, found))
                    break
        finally:
            results.put(None)  # the parent counts one per worker, whatever happened

    processes = [context.Process(target=interrupts.ignoring_interrupts(work), args=(first,), daemon=True)
                 for first in range(workers)]
    failures: list[tuple[int, Deviation]] = []
    try:
        for process in processes:
            interrupts.start(process)
        finished = 0
        while finished < workers:
            item = results.get()
            if item is None:
                finished += 1
            else:
                failures.append(item)
        for process in processes:
            process.join()
    finally:  # Ctrl-C (or an error) before they are done: the workers, which ignore it, are stopped
        interrupts.stop([p for p in processes if p.pid is not None])
    return min(failures, key=lambda failure: failure[0]) if failures else None


def _shortest(
    make_model: Callable[[], Model[Any]],
    make_implementation: Callable[[], Implementation],
    planned: Tour,
    walk: tuple[int, ...],
    found: Deviation,
    known: frozenset[str],
) -> Deviation:
    """The failing edge replayed at the end of the shortest path to its source, when it fails there alike."""
    edge = walk[len(found.actions) - 1] if found.actions else None
    if edge is None:
        return found
    candidate = (*planned.path_to(planned.sources[edge]), planned.labels[edge])
    if len(candidate) >= len(found.actions):
        return found
    again, _ = run_walk(make_model(), make_implementation(), candidate, known)
    return again if again is not None and again.target == found.target else found
