"""Breadth-first explicit-state exploration of a model, with safety, deadlock and liveness checks.

Every reachable state of a small configuration is enumerated once (deduplicated by the model's
canonical key). Because the search is breadth-first, the first path recorded to any state is a
shortest one, so every counterexample returned here is of minimal length. Liveness properties are
`AG EF good`: they are checked on the `networkx` state graph after the search, by computing the
states from which no good state can be reached.

**Symmetry** (`symmetry=True`, as TLC's SYMMETRY): a model whose configuration has values it treats
alike (say, two principals) declares `symmetric_key`, the key of a state's orbit under permutations
of those values. The search then keeps one state per orbit, the first one reached, so every recorded
path is a real path; symmetric states lie at the same depth, so it is still a shortest one. An edge
to another member of a known orbit is recorded to its representative: the graph is the quotient,
which keeps the verdicts of invariants, deadlocks and liveness but whose edges cannot all be replayed
(conformance explores without symmetry). Each such merge is checked to keep every invariant's
verdict; `symmetry_error` checks a declaration in full.

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

class SymmetryError(ValueError):
    """`symmetric_key` merged states that the model tells apart: the declared permutations are no symmetry."""


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
    symmetry: bool = False
    """Whether states were deduplicated up to the model's symmetry (one state per orbit, edges to orbits)."""
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
    symmetry: bool = False,
) -> Exploration[S]:
    """Enumerate the states reachable in `model` and check its properties on every one.

    `max_states` bounds the search (the result is then marked incomplete and liveness is not
    judged, since unexplored successors could reach a good state). `terminal_ok` tells which
    states without enabled actions are legitimate ends rather than deadlocks. `record_labels`
    keeps the action of every edge, so that every transition can be replayed on an implementation.
    `symmetry` keeps one state per orbit of the model's `symmetric_key` (the plain key where the
    model declares none); it excludes `record_labels`, since a quotient's edges are not all real.
    """
    if symmetry and record_labels:
        raise ValueError("a search up to symmetry records the quotient graph, whose edges cannot all be replayed")
    collecting = gc.isenabled()
    gc.disable()  # the search only allocates: collector passes over millions of live tuples cost ~1/3
    try:
        search = _Search(model, max_states, stop_on_violation, check_deadlock, terminal_ok, progress, record_labels,
                         symmetry)
        search.run()
        return search.result(check_liveness)
    finally:
        if collecting:
            gc.enable()


class _Search(Generic[S]):
    """One breadth-first search: the states found so far, in the order they were found."""

    def __init__(
        self,
        model: Model[S],
        max_states: int | None,
        stop_on_violation: bool,
        check_deadlock: bool,
        terminal_ok: Callable[[S], bool] | None,
        progress: Callable[[Progress], None] | None,
        record_labels: bool,
        symmetry: bool,
    ) -> None:
        self.started = time.perf_counter()
        self.next_report = self.started + PROGRESS_EVERY_S
        self.model = model
        canonical: Callable[[S], Hashable] | None = getattr(model, "symmetric_key", None) if symmetry else None
        self.symmetry = canonical is not None
        self.key: Callable[[S], Hashable] = canonical if canonical is not None else model.key
        self.same_verdicts = _verdict_check(model) if canonical is not None else None
        self.max_states = max_states
        self.stop_on_violation = stop_on_violation
        self.check_deadlock = check_deadlock
        self.terminal_ok = terminal_ok
        self.progress = progress
        initial = model.initial()
        self.index: dict[Hashable, int] = {self.key(initial): 0}
        self.states: list[S] = [initial]
        self.parent: list[int] = [_SINK]
        self.via: list[Action | None] = [None]
        self.depth: list[int] = [0]
        self.tree_edges: list[int] = [_SINK]
        self.labels: list[Action] | None = [] if record_labels else None
        self.sources: list[int] = []
        self.targets: list[int] = []
        self.coverage: dict[str, int] = {}
        self.findings: list[Finding] = []
        self.reported: set[str] = set()
        self.invariants = list(model.invariants)
        self.complete = True

    def path_to(self, i: int) -> tuple[Action, ...]:
        parent, via = self.parent, self.via
        out: list[Action] = []
        while parent[i] != _SINK:
            action = via[i]
            assert action is not None
            out.append(action)
            i = parent[i]
        return tuple(reversed(out))

    def _broken(self, i: int, name: str) -> None:
        if name in self.reported:
            return
        self.reported.add(name)
        inv = next(inv for inv in self.invariants if inv.name == name)
        detail = inv.explain(self.states[i]) if inv.explain is not None else inv.description
        self.findings.append(Finding("invariant", name, self.path_to(i), detail))

    def _deadlock(self, i: int) -> None:
        if "deadlock" not in self.reported:
            self.reported.add("deadlock")
            self.findings.append(Finding("deadlock", "deadlock", self.path_to(i), "no action is enabled"))

    def _report(self, i: int) -> None:
        if self.progress is not None and time.perf_counter() >= self.next_report:
            self.next_report = time.perf_counter() + PROGRESS_EVERY_S
            self.progress(Progress(len(self.sources), len(self.states), len(self.states) - i, self.depth[i - 1],
                                   time.perf_counter() - self.started))

    def run(self) -> None:
        """Expand the queue until it is empty (or the first finding, with `stop_on_violation`)."""
        states, index, parent, via, depth, tree_edges = (self.states, self.index, self.parent, self.via, self.depth,
                                                         self.tree_edges)
        labels, sources, targets, coverage, reported = (self.labels, self.sources, self.targets, self.coverage,
                                                        self.reported)
        invariants, key, step, enabled = self.invariants, self.key, self.model.step, self.model.enabled
        same_verdicts, max_states, terminal_ok = self.same_verdicts, self.max_states, self.terminal_ok
        check_deadlock, stop_on_violation = self.check_deadlock, self.stop_on_violation
        i = 0
        while i < len(states):
            state = states[i]
            for inv in invariants:
                if inv.name not in reported and not inv.holds(state):
                    self._broken(i, inv.name)
            if stop_on_violation and self.findings:
                self.complete = False
                break
            actions = enabled(state)
            if (
                not actions
                and check_deadlock
                and "deadlock" not in reported
                and (terminal_ok is None or not terminal_ok(state))
            ):
                self._deadlock(i)
            for action in actions:
                successor, _ = step(state, action)
                k = key(successor)
                j = index.get(k)
                if j is None:
                    if max_states is not None and len(states) >= max_states:
                        self.complete = False
                        continue
                    j = len(states)
                    index[k] = j
                    states.append(successor)
                    parent.append(i)
                    via.append(action)
                    depth.append(depth[i] + 1)
                    tree_edges.append(len(sources))
                elif same_verdicts is not None:
                    same_verdicts(successor, states[j])
                if labels is not None:
                    labels.append(action)
                sources.append(i)
                targets.append(j)
                coverage[action.name] = coverage.get(action.name, 0) + 1
            i += 1
            if i % 1024 == 0:
                self._report(i)

    def result(self, check_liveness: bool) -> Exploration[S]:
        result = Exploration(
            states=self.states,
            edges=(self.sources, self.targets),
            max_depth=max(self.depth),
            complete=self.complete,
            elapsed_s=0.0,
            findings=self.findings,
            coverage=self.coverage,
            parents=self.parent,
            tree_edges=self.tree_edges,
            labels=self.labels,
            symmetry=self.symmetry,
        )
        if check_liveness and self.complete and self.model.liveness:
            self.findings.extend(_liveness_findings(self.model, self.states, result.graph, self.path_to, self.depth))
        result.elapsed_s = time.perf_counter() - self.started
        return result


def _verdict_check(model: Model[S]) -> Callable[[S, S], None]:
    """A check that a state merged into another's orbit breaks the same invariants (else `SymmetryError`)."""
    key, invariants = model.key, list(model.invariants)

    def check(state: S, representative: S) -> None:
        if key(state) == key(representative):
            return
        for inv in invariants:
            if inv.holds(state) != inv.holds(representative):
                raise SymmetryError(
                    f"{model.mechanism}/{model.variant}: symmetric_key merges a state that "
                    f"{'holds' if inv.holds(state) else 'breaks'} {inv.name} into an orbit whose "
                    f"representative does not: not a symmetry of the model"
                )

    return check


def symmetry_error(model: Model[S]) -> str | None:
    """Why `model.symmetric_key` is not a symmetry of its reachable states, or None when it is.

    It is one when states of one orbit agree on every invariant, every liveness goal, being stuck
    and the orbits of their successors: the orbits then form a bisimulation, so a search up to
    symmetry finds the same verdicts at the same shortest depths. Checked on the full search.
    """
    canonical: Callable[[S], Hashable] | None = getattr(model, "symmetric_key", None)
    if canonical is None:
        raise ValueError(f"{model.mechanism} declares no symmetry in this configuration")
    result = explore(model, check_liveness=False, check_deadlock=False)
    orbit = [canonical(s) for s in result.states]
    successors: list[set[Hashable]] = [set() for _ in result.states]
    for source, target in zip(*result.edges, strict=True):
        successors[source].add(orbit[target])
    first: dict[Hashable, int] = {}
    for i, state in enumerate(result.states):
        j = first.setdefault(orbit[i], i)
        if j == i:
            continue
        other = result.states[j]
        for inv in model.invariants:
            if inv.holds(state) != inv.holds(other):
                return f"states {j} and {i} share an orbit but not the verdict of {inv.name}"
        for prop in model.liveness:
            if prop.good(state) != prop.good(other):
                return f"states {j} and {i} share an orbit but not the liveness goal {prop.name}"
        if successors[i] != successors[j]:
            return f"states {j} and {i} share an orbit but their successors do not"
    return None


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
