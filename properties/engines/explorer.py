"""Breadth-first explicit-state exploration of a model, with safety, deadlock and liveness checks.

Every reachable state of a small configuration is enumerated once (deduplicated by the model's
canonical key). Because the search is breadth-first, the first path recorded to any state is a
shortest one, so every counterexample returned here is of minimal length. Liveness properties are
`AG EF good`: they are checked on the `networkx` state graph after the search, by computing the
states from which no good state can be reached.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import networkx as nx

from models.core import Action, Model

S = TypeVar("S")

_SINK = -1


@dataclass(frozen=True)
class Finding:
    """A property failure with the shortest action path from the initial state that exhibits it."""

    kind: str  # "invariant" | "deadlock" | "liveness"
    name: str
    path: tuple[Action, ...]
    detail: str = ""


@dataclass(frozen=True)
class Progress:
    """Where a long search is, as TLC reports it: states generated, distinct, still queued, depth, rate."""

    generated: int
    distinct: int
    queued: int
    depth: int
    elapsed_s: float

    def line(self) -> str:
        rate = self.distinct / self.elapsed_s if self.elapsed_s > 0 else 0.0
        return (f"{self.generated:,} states generated, {self.distinct:,} distinct, {self.queued:,} left on queue, "
                f"depth {self.depth}, {rate:,.0f} distinct states/s, {self.elapsed_s:.0f}s")


PROGRESS_EVERY_S = 5.0
"""Seconds between two progress reports of a long search (the report never changes what is found)."""


@dataclass
class Exploration(Generic[S]):
    """What a search saw: counts, the edge list of the state graph, and shortest counterexamples.

    The `networkx` graph is built from the edge list on first use (liveness needs it; a plain
    safety search does not pay for it).
    """

    states: list[S]
    edges: tuple[list[int], list[int]]
    max_depth: int
    complete: bool
    elapsed_s: float
    findings: list[Finding] = field(default_factory=list)
    coverage: dict[str, int] = field(default_factory=dict)
    parents: list[int] = field(default_factory=list)
    """The state each state was first reached from (the breadth-first tree; -1 for the initial state)."""
    tree_edges: list[int] = field(default_factory=list)
    """The index of the edge that first reached each state (-1 for the initial state)."""
    labels: list[Action] | None = None
    """The action of every edge, when the search was asked to keep them (conformance replays them)."""
    _graph: nx.DiGraph | None = None

    @property
    def transitions(self) -> int:
        return len(self.edges[0])

    @property
    def graph(self) -> nx.DiGraph:
        if self._graph is None:
            self._graph = _graph(len(self.states), *self.edges)
        return self._graph

    @property
    def ok(self) -> bool:
        return not self.findings

    def path_to(self, state: int) -> tuple[Action, ...]:
        """The shortest action path from the initial state to `state` (needs the edge labels)."""
        assert self.labels is not None, "explore(..., record_labels=True) keeps the actions of the edges"
        out: list[Action] = []
        while self.parents[state] != _SINK:
            out.append(self.labels[self.tree_edges[state]])
            state = self.parents[state]
        return tuple(reversed(out))

    @property
    def states_per_second(self) -> float:
        return len(self.states) / self.elapsed_s if self.elapsed_s > 0 else float("inf")


def explore(
    model: Model[S],
    *,
    max_states: int | None = None,
    stop_on_violation: bool = False,
    check_liveness: bool = True,
    check_deadlock: bool = True,
    terminal_ok: Callable[[S], bool] | None = None,
    progress: Callable[[Progress], None] | None = None,
    record_labels: bool = False,
) -> Exploration[S]:
    """Enumerate the states reachable in `model` and check its properties on every one.

    `max_states` bounds the search (the result is then marked incomplete and liveness is not
    judged, since unexplored successors could reach a good state). `terminal_ok` tells which
    states without enabled actions are legitimate ends rather than deadlocks. `record_labels`
    keeps the action of every edge, so that every transition can be replayed on an implementation.
    """
    collecting = gc.isenabled()
    gc.disable()  # the search only allocates: collector passes over millions of live tuples cost ~1/3
    try:
        return _explore(model, max_states, stop_on_violation, check_liveness, check_deadlock, terminal_ok, progress,
                        record_labels)
    finally:
        if collecting:
            gc.enable()


def _explore(
    model: Model[S],
    max_states: int | None,
    stop_on_violation: bool,
    check_liveness: bool,
    check_deadlock: bool,
    terminal_ok: Callable[[S], bool] | None,
    progress: Callable[[Progress], None] | None,
    record_labels: bool,
) -> Exploration[S]:
    started = time.perf_counter()
    initial = model.initial()
    index: dict[Hashable, int] = {model.key(initial): 0}
    states: list[S] = [initial]
    parent: list[int] = [_SINK]
    via: list[Action | None] = [None]
    depth: list[int] = [0]
    tree_edges: list[int] = [_SINK]
    labels: list[Action] | None = [] if record_labels else None
    sources: list[int] = []
    targets: list[int] = []
    coverage: dict[str, int] = {}
    findings: list[Finding] = []
    reported: set[str] = set()
    invariants = list(model.invariants)
    key, step, enabled = model.key, model.step, model.enabled
    complete = True
    next_report = started + PROGRESS_EVERY_S

    def path_to(i: int) -> tuple[Action, ...]:
        out: list[Action] = []
        while parent[i] != _SINK:
            action = via[i]
            assert action is not None
            out.append(action)
            i = parent[i]
        return tuple(reversed(out))

    i = 0
    while i < len(states):
        state = states[i]
        for inv in invariants:
            if inv.name not in reported and not inv.holds(state):
                reported.add(inv.name)
                detail = inv.explain(state) if inv.explain is not None else inv.description
                findings.append(Finding("invariant", inv.name, path_to(i), detail))
        if stop_on_violation and findings:
            complete = False
            break
        actions = enabled(state)
        if (
            not actions
            and check_deadlock
            and "deadlock" not in reported
            and (terminal_ok is None or not terminal_ok(state))
        ):
            reported.add("deadlock")
            findings.append(Finding("deadlock", "deadlock", path_to(i), "no action is enabled"))
        for action in actions:
            successor, _ = step(state, action)
            k = key(successor)
            j = index.get(k)
            if j is None:
                if max_states is not None and len(states) >= max_states:
                    complete = False
                    continue
                j = len(states)
                index[k] = j
                states.append(successor)
                parent.append(i)
                via.append(action)
                depth.append(depth[i] + 1)
                tree_edges.append(len(sources))
            if labels is not None:
                labels.append(action)
            sources.append(i)
            targets.append(j)
            coverage[action.name] = coverage.get(action.name, 0) + 1
        i += 1
        if progress is not None and i % 1024 == 0 and time.perf_counter() >= next_report:
            next_report = time.perf_counter() + PROGRESS_EVERY_S
            progress(Progress(len(sources), len(states), len(states) - i, depth[i - 1], time.perf_counter() - started))

    result = Exploration(
        states=states,
        edges=(sources, targets),
        max_depth=max(depth),
        complete=complete,
        elapsed_s=0.0,
        findings=findings,
        coverage=coverage,
        parents=parent,
        tree_edges=tree_edges,
        labels=labels,
    )
    if check_liveness and complete and model.liveness:
        findings.extend(_liveness_findings(model, states, result.graph, path_to, depth))
    result.elapsed_s = time.perf_counter() - started
    return result


def _graph(nodes: int, sources: list[int], targets: list[int]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(range(nodes))
    graph.add_edges_from(zip(sources, targets, strict=True))
    return graph


def _liveness_findings(
    model: Model[Any],
    states: list[Any],
    graph: nx.DiGraph,
    path_to: Callable[[int], tuple[Action, ...]],
    depth: list[int],
) -> list[Finding]:
    """For each `AG EF good` property, the shallowest state from which no good state is reachable."""
    out: list[Finding] = []
    for prop in model.liveness:
        good = [n for n, s in enumerate(states) if prop.good(s)]
        can_reach_good: set[int] = set(good)
        frontier = list(good)
        while frontier:
            nxt: list[int] = []
            for n in frontier:
                for m in graph.predecessors(n):
                    if m not in can_reach_good:
                        can_reach_good.add(m)
                        nxt.append(m)
            frontier = nxt
        stuck = [n for n in range(len(states)) if n not in can_reach_good]
        if stuck:
            worst = min(stuck, key=lambda n: depth[n])
            out.append(
                Finding(
                    "liveness",
                    prop.name,
                    path_to(worst),
                    f"{len(stuck)} reachable state(s) can never reach a good state; {prop.description}",
                )
            )
    return out
