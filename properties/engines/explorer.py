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

**Workers** (`workers=N`): N - 1 processes are forked at the first large breadth-first level, each
with a copy of the states found so far. Each large level is cut into chunks that this process and
the workers claim in turn; a chunk's new states and edge codes come back through a pipe and are
numbered here, chunk after chunk, in the order one process expands them, so states, numbers, edges,
findings and paths are those of one process. Before the next level each worker receives the states
numbered since, except those it found itself (it kept them): every state crosses a pipe about once.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import pickle
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, NamedTuple, TypeVar, cast

import networkx as nx

from models.core import Action, Model
from properties.engines import interrupts

S = TypeVar("S")

_SINK = -1

CHUNK = 256
"""The most states in a chunk of a level shared among workers (a chunk's results cross a pipe in one message)."""

LAST_CHUNK = 32
"""The fewest: chunks shrink towards the end of a level, so that no process finishes long after the others."""

PARALLEL_MIN = 4 * LAST_CHUNK
"""A smaller level is expanded by this process alone: bringing the workers up to date would cost more."""

_PIPE_BYTES = 1 << 20
"""A worker's pipe buffer (Linux): a worker must not wait on a full pipe while this process expands a chunk."""


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
    workers: int = 1
    """The processes that expanded the states: 1 where forking is unavailable or unsafe, or no level was large."""
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
    workers: int = 1,
) -> Exploration[S]:
    """Enumerate the states reachable in `model` and check its properties on every one.

    `max_states` bounds the search (the result is then marked incomplete and liveness is not
    judged, since unexplored successors could reach a good state). `terminal_ok` tells which
    states without enabled actions are legitimate ends rather than deadlocks. `record_labels`
    keeps the action of every edge, so that every transition can be replayed on an implementation.
    `symmetry` keeps one state per orbit of the model's `symmetric_key` (the plain key where the
    model declares none); it excludes `record_labels`, since a quotient's edges are not all real.
    `workers` > 1 shares each large level among forked processes, with the same result (one process
    where fork is unavailable or other threads run: a forked child gets no copy of them).
    """
    if symmetry and record_labels:
        raise ValueError("a search up to symmetry records the quotient graph, whose edges cannot all be replayed")
    collecting = gc.isenabled()
    gc.disable()  # the search only allocates: collector passes over millions of live tuples cost ~1/3
    try:
        search = _Search(model, max_states, stop_on_violation, check_deadlock, terminal_ok, progress, record_labels,
                         symmetry)
        if workers > 1 and can_fork():
            search.by_levels(workers)
        else:
            search.serial(None)
        return search.result(check_liveness)
    finally:
        if collecting:
            gc.enable()


def can_fork() -> bool:
    """Forking is safe only while this process has one thread (a lock another thread holds would stay locked)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


class _Chunk(NamedTuple):
    """What expanding states `lo`..`hi - 1` found, before its new states are numbered.

    Per edge its source, action and target: a known state's number, or `~n` for the chunk's n-th new
    state (`fresh[n]`, with dedup key `keys[n]`, first reached by edge `first[n]` of the chunk).
    `broken` lists the first state breaking each invariant in the chunk, `deadlock` its first stuck state.
    """

    lo: int
    hi: int
    sources: list[int]
    actions: list[Action]
    targets: list[int]
    fresh: list[Any]
    keys: list[Hashable]
    first: list[int]
    coverage: dict[str, int]
    broken: list[tuple[int, str]]
    deadlock: int


class _Search(Generic[S]):
    """One breadth-first search: the states found so far, numbered in the order one process finds them."""

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
        canonical: Callable[[S], Hashable] | None = model.symmetric_key if symmetry else None
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
        self.stopped = False
        self.done = 0
        """The states expanded so far (the head of the queue)."""
        self.workers = 1
        """The processes that shared a level (1 until a level is large enough to share)."""

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

    def serial(self, stop: int | None) -> None:
        """Expand the queue from its head up to state `stop` (exclusive), or until it is empty (None)."""
        states, index, parent, via, depth, tree_edges = (self.states, self.index, self.parent, self.via, self.depth,
                                                         self.tree_edges)
        labels, sources, targets, coverage, reported = (self.labels, self.sources, self.targets, self.coverage,
                                                        self.reported)
        invariants, key, step, enabled = self.invariants, self.key, self.model.step, self.model.enabled
        same_verdicts, max_states, terminal_ok = self.same_verdicts, self.max_states, self.terminal_ok
        check_deadlock, stop_on_violation = self.check_deadlock, self.stop_on_violation
        end = _SINK if stop is None else stop
        i = self.done
        while i < len(states) and i != end:
            state = states[i]
            for inv in invariants:
                if inv.name not in reported and not inv.holds(state):
                    self._broken(i, inv.name)
            if stop_on_violation and self.findings:
                self.complete, self.stopped = False, True
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
        self.done = i

    def expand(self, lo: int, hi: int) -> _Chunk:
        """Expand states `lo`..`hi - 1` against the states numbered so far, without numbering anything."""
        states, index, reported = self.states, self.index, set(self.reported)
        invariants, key, step, enabled = self.invariants, self.key, self.model.step, self.model.enabled
        same_verdicts, terminal_ok, check_deadlock = self.same_verdicts, self.terminal_ok, self.check_deadlock
        sources: list[int] = []
        actions: list[Action] = []
        targets: list[int] = []
        fresh: list[S] = []
        keys: list[Hashable] = []
        first: list[int] = []
        coverage: dict[str, int] = {}
        local: dict[Hashable, int] = {}
        broken: list[tuple[int, str]] = []
        deadlock = _SINK
        for i in range(lo, hi):
            state = states[i]
            for inv in invariants:
                if inv.name not in reported and not inv.holds(state):
                    reported.add(inv.name)
                    broken.append((i, inv.name))
            enabled_here = enabled(state)
            if (
                not enabled_here
                and check_deadlock
                and deadlock == _SINK
                and (terminal_ok is None or not terminal_ok(state))
            ):
                deadlock = i
            for action in enabled_here:
                successor, _ = step(state, action)
                k = key(successor)
                j = index.get(k)
                if j is None:
                    n = local.get(k)
                    if n is None:
                        n = local[k] = len(fresh)
                        fresh.append(successor)
                        keys.append(k)
                        first.append(len(targets))
                    elif same_verdicts is not None:
                        same_verdicts(successor, fresh[n])
                    j = ~n
                elif same_verdicts is not None:
                    same_verdicts(successor, states[j])
                targets.append(j)
                coverage[action.name] = coverage.get(action.name, 0) + 1
            sources.extend([i] * len(enabled_here))
            actions.extend(enabled_here)
        return _Chunk(lo, hi, sources, actions, targets, fresh, keys, first, coverage, broken, deadlock)

    def merge(self, chunk: _Chunk) -> list[int]:
        """Number `chunk`'s new states and record its edges and findings as `serial` would have; the
        chunk's new states that were numbered (by their place in `chunk.fresh`), in order."""
        found = [name for _, name in chunk.broken] + (["deadlock"] if chunk.deadlock != _SINK else [])
        stops = self.stop_on_violation and not self.reported.issuperset(found)
        if stops or (self.max_states is not None and len(self.states) + len(chunk.fresh) > self.max_states):
            return self._merge_edges(chunk)
        self._findings(chunk)
        states, index, parent, via, depth, tree_edges = (self.states, self.index, self.parent, self.via, self.depth,
                                                         self.tree_edges)
        sources, actions, same_verdicts = chunk.sources, chunk.actions, self.same_verdicts
        base = len(self.sources)
        numbered: list[int] = []
        new: list[int] = []
        for n, k in enumerate(chunk.keys):
            j = index.get(k)
            if j is None:
                j = index[k] = len(states)
                states.append(chunk.fresh[n])
                edge = chunk.first[n]
                parent.append(sources[edge])
                via.append(actions[edge])
                depth.append(depth[sources[edge]] + 1)
                tree_edges.append(base + edge)
                new.append(n)
            elif same_verdicts is not None:
                same_verdicts(chunk.fresh[n], states[j])
            numbered.append(j)
        self.sources.extend(sources)
        self.targets.extend([j if j >= 0 else numbered[~j] for j in chunk.targets])
        if self.labels is not None:
            self.labels.extend(actions)
        coverage = self.coverage
        for name, count in chunk.coverage.items():
            coverage[name] = coverage.get(name, 0) + count
        self.done = chunk.hi
        self._report(chunk.hi)
        return new

    def _findings(self, chunk: _Chunk) -> None:
        """The chunk's findings, in the order `serial` reports them (a state's invariants, then its deadlock)."""
        stuck = chunk.deadlock
        for i, name in chunk.broken:
            if _SINK != stuck < i:
                self._deadlock(stuck)
                stuck = _SINK
            self._broken(i, name)
        if stuck != _SINK:
            self._deadlock(stuck)

    def _merge_edges(self, chunk: _Chunk) -> list[int]:
        """`merge` an edge at a time, where the search stops within the chunk or its bound is reached."""
        states, index, parent, via, depth, tree_edges = (self.states, self.index, self.parent, self.via, self.depth,
                                                         self.tree_edges)
        labels, sources, targets, coverage = self.labels, self.sources, self.targets, self.coverage
        max_states, same_verdicts = self.max_states, self.same_verdicts
        numbered: list[int | None] = [None] * len(chunk.fresh)
        new: list[int] = []
        broken = chunk.broken
        b = e = 0
        for i in range(chunk.lo, chunk.hi):
            while b < len(broken) and broken[b][0] == i:
                self._broken(i, broken[b][1])
                b += 1
            if self.stop_on_violation and self.findings:
                self.complete, self.stopped = False, True
                return new
            if chunk.deadlock == i:
                self._deadlock(i)
            while e < len(chunk.sources) and chunk.sources[e] == i:
                action, j = chunk.actions[e], chunk.targets[e]
                e += 1
                if j < 0:
                    n = ~j
                    found = numbered[n]
                    if found is None:
                        found = index.get(chunk.keys[n])
                        if found is None:
                            if max_states is not None and len(states) >= max_states:
                                self.complete = False
                                numbered[n] = _SINK
                                continue
                            found = index[chunk.keys[n]] = len(states)
                            states.append(chunk.fresh[n])
                            parent.append(i)
                            via.append(action)
                            depth.append(depth[i] + 1)
                            tree_edges.append(len(sources))
                            new.append(n)
                        elif same_verdicts is not None:
                            same_verdicts(chunk.fresh[n], states[found])
                        numbered[n] = found
                    elif found == _SINK:
                        self.complete = False
                        continue
                    j = found
                if labels is not None:
                    labels.append(action)
                sources.append(i)
                targets.append(j)
                coverage[action.name] = coverage.get(action.name, 0) + 1
        self.done = chunk.hi
        self._report(chunk.hi)
        return new

    def by_levels(self, workers: int) -> None:
        """Expand the queue a level at a time, sharing each large level among `workers` processes (forked
        at the first large level, each holding a copy of the states from then on)."""
        pool: _Pool[S] | None = None
        finished = False
        try:
            while self.done < len(self.states) and not self.stopped:
                end = len(self.states)
                if pool is None and end - self.done < PARALLEL_MIN:
                    self.serial(end)
                    continue
                if pool is None:
                    pool, self.workers = _Pool(self, workers), workers
                pool.level(end)
            finished = not self.stopped
        finally:
            if pool is not None:
                pool.close(finished)

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
            workers=self.workers,
        )
        if check_liveness and self.complete and self.model.liveness:
            self.findings.extend(_liveness_findings(self.model, self.states, result.graph, self.path_to, self.depth))
        result.elapsed_s = time.perf_counter() - self.started
        return result


_NEW, _OWN = 0, 1
"""How an update brings a worker's copy up to date: with the states themselves, or with which of the new
states of a chunk it expanded itself were numbered (it kept them)."""

_DONE, _FAILED = -1, -2
"""A worker's message tags besides a chunk's number: the level is done; it raised (the error follows)."""


class _Pool(Generic[S]):
    """`workers - 1` processes forked from a search, each with a copy of its states and index.

    A level is cut into chunks, claimed in turn by this process and the workers; this process numbers
    them in order as they come (so it claims fewer itself). Before a level, each worker receives the
    states numbered since the last one it shared, in order: the states themselves, or, for a chunk it
    expanded, which of its new states were numbered. A worker's error is raised here: a chunk missing
    would pass for a smaller graph.
    """

    def __init__(self, search: _Search[S], workers: int) -> None:
        self.search = search
        context = multiprocessing.get_context("fork")
        self.claimed = context.RawValue("l", 0)
        self.lock = context.Lock()
        self.log: list[tuple[int, int, _Chunk, list[int]]] = []
        """The chunks numbered since the workers were last brought up to date: who expanded each (0: this
        process), its number in its level, the chunk and which of its new states were numbered."""
        self.commands: list[Connection] = []
        self.results: list[Connection] = []
        self.processes = []
        for worker in range(1, workers):
            command_reader, command_writer = context.Pipe(duplex=False)
            result_reader, result_writer = context.Pipe(duplex=False)
            _widen(command_writer)
            _widen(result_writer)
            process = context.Process(target=interrupts.ignoring_interrupts(self._serve),
                                      args=(worker, command_reader, result_writer), daemon=True)
            interrupts.start(process)
            command_reader.close()
            result_writer.close()
            self.commands.append(command_writer)
            self.results.append(result_reader)
            self.processes.append(process)

    def _claim(self, chunks: int) -> int | None:
        with self.lock:
            c = int(self.claimed.value)
            if c >= chunks:
                return None
            self.claimed.value = c + 1
            return c

    def _serve(self, worker: int, commands: Connection, results: Connection) -> None:
        """A worker: bring the copy up to date, expand the chunks it claims, until told to stop."""
        search = self.search
        states, index = search.states, search.index
        mine: dict[int, _Chunk] = {}
        try:
            while (command := pickle.loads(commands.recv_bytes())) is not None:
                updates, bounds, search.reported = command
                for how, fresh, keys in updates:
                    if how == _OWN:  # `fresh` is a chunk's number, `keys` which of its new states were numbered
                        chunk = mine[fresh]
                        fresh, keys = [chunk.fresh[n] for n in keys], [chunk.keys[n] for n in keys]
                    for state, k in zip(fresh, keys, strict=True):
                        index[k] = len(states)
                        states.append(state)
                mine.clear()
                while (c := self._claim(len(bounds))) is not None:
                    mine[c] = search.expand(*bounds[c])
                    results.send_bytes(pickle.dumps((c, mine[c]), pickle.HIGHEST_PROTOCOL))
                results.send_bytes(pickle.dumps((_DONE, None)))
        except BaseException as error:  # raised again in the parent, with its type when it pickles
            try:
                message = pickle.dumps((_FAILED, error))
            except Exception:
                message = pickle.dumps((_FAILED, RuntimeError(f"explorer worker: {type(error).__name__}: {error}")))
            results.send_bytes(message)

    def _updates(self, worker: int) -> list[tuple[int, Any, list[Any]]]:
        """What `worker` needs to know of the states numbered since its last level, in their order."""
        out: list[tuple[int, Any, list[Any]]] = []
        for owner, c, chunk, numbered in self.log:
            if owner == worker:
                out.append((_OWN, c, numbered))
            elif numbered:
                out.append((_NEW, [chunk.fresh[n] for n in numbered], [chunk.keys[n] for n in numbered]))
        return out

    def level(self, end: int) -> None:
        """Expand states `done`..`end - 1`: shared with the workers when the level is large, else here alone."""
        search = self.search
        bounds = _chunks(search.done, end, len(self.processes) + 1)
        live: list[Connection] = []
        if end - search.done >= PARALLEL_MIN:
            self.claimed.value = 0
            for worker, commands in enumerate(self.commands, start=1):
                message = (self._updates(worker), bounds, search.reported)
                commands.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))
            self.log.clear()
            live = list(self.results)
            claim = self._claim
        else:
            mine = iter(range(len(bounds)))

            def claim(chunks: int) -> int | None:
                return next(mine, None)

        chunks: dict[int, tuple[int, _Chunk]] = {}
        merged = 0
        while merged < len(bounds) and not search.stopped:
            c = claim(len(bounds))
            if c is not None:
                chunks[c] = (0, search.expand(*bounds[c]))
            waiting = c is None and merged not in chunks
            if waiting and not live:
                raise RuntimeError("an explorer worker ended without its chunks")
            for ready in wait(live, timeout=None if waiting else 0):
                reader = cast(Connection, ready)
                got, chunk = _receive(reader)
                if got == _DONE:
                    live.remove(reader)
                else:
                    chunks[got] = (self.results.index(reader) + 1, chunk)
            while merged in chunks and not search.stopped:
                owner, chunk = chunks.pop(merged)
                self.log.append((owner, merged, chunk, search.merge(chunk)))
                merged += 1
        for reader in () if search.stopped else live:  # every chunk is in: a worker's last word is that it is done
            _receive(reader)

    def close(self, finished: bool) -> None:
        """Stop the workers: told to when the search finished (they wait for a level), else killed."""
        for commands, process in zip(self.commands, self.processes, strict=True):
            if finished:
                commands.send_bytes(pickle.dumps(None))
            else:
                process.kill()
            process.join()
            commands.close()
        for results in self.results:
            results.close()


def _receive(reader: Connection) -> tuple[int, Any]:
    """A worker's next message, (chunk number, chunk) or (`_DONE`, None); its error raised here."""
    try:
        got, what = pickle.loads(reader.recv_bytes())
    except EOFError:
        raise RuntimeError("an explorer worker died") from None
    if got == _FAILED:
        raise what
    return got, what


def _chunks(lo: int, end: int, workers: int) -> list[tuple[int, int]]:
    """States `lo`..`end - 1` in chunks of `CHUNK`, shrinking to `LAST_CHUNK` as the level runs out (guided)."""
    out: list[tuple[int, int]] = []
    while lo < end:
        size = max(LAST_CHUNK, min(CHUNK, (end - lo) // (2 * workers)))
        out.append((lo, min(lo + size, end)))
        lo += size
    return out


def _widen(writer: Connection) -> None:
    """Grow a pipe's buffer where Linux allows it (a worker then rarely waits for this process to read)."""
    import fcntl

    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is not None:
        with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size: the default buffer costs waits
            fcntl.fcntl(writer.fileno(), setsize, _PIPE_BYTES)


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
    canonical: Callable[[S], Hashable] | None = model.symmetric_key
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
