"""The explorations a check draws its explorer rows and conformance tours from: one search per configuration
and variant per run, kept on disk between runs (`properties.engines.cache`) while the model is unchanged.

The explorer row and the conformance replay of a configuration read the same graph, so one search (with the
edges' actions kept, and liveness judged) serves both; a run that finds both in the cache searches nothing.
`search` is the one search of a mechanism's configuration with its progress lines: the check's (through
`Graphs`) and `brokerspec explore`'s.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import models.core
from models.core import Model, Param
from properties.engines import cache as graph_cache
from properties.engines.conformance import Tour
from properties.engines.coverage import Portable, from_exploration
from properties.engines.explorer import Exploration, Finding, Progress, explore
from properties.engines.mechanism import Mechanism
from properties.engines.reduction import PartialOrder, PreemptionBounded, shortest_path

Say = Callable[[str], None]
"""Where an engine's progress lines go (the command line prints them on stderr)."""


def reduced(model: Model[Any], por: bool, preemption_bound: int | None) -> Model[Any]:
    """`model` with partial-order reduction and a preemption bound, as asked (a `ValueError` where it declares
    too little for them)."""
    if por:
        model = PartialOrder(model)
    if preemption_bound is not None:
        model = PreemptionBounded(model, preemption_bound)
    return model


def search(
    model: Model[Any], label: str, say: Say, *, max_states: int | None, record_labels: bool = False,
    symmetry: bool = False, workers: int = 1, unreduced: Model[Any] | None = None,
) -> Exploration[Any]:
    """The search of `model`, with TLC's progress lines; where `model` is partial-order reduced, `unreduced`
    brings its findings back to their shortest paths."""
    say(f"  explore {label}")

    def report(where: Progress) -> None:
        say(f"  explore {label}: {where.line()}")

    result = explore(model, max_states=max_states, progress=report, terminal_ok=model.terminal_ok,
                     record_labels=record_labels, symmetry=symmetry, workers=workers)
    if unreduced is not None:
        _shortest(result, unreduced, lambda line: say(f"  explore {label}: {line}"))
    done = Progress(result.transitions, len(result.states), 0, result.max_depth, result.elapsed_s)
    say(f"  explore {label}: {'done' if result.complete else 'bounded'}: {done.line()}")
    return result


def _shortest(result: Exploration[Any], model: Model[Any], say: Say) -> None:
    """A reduced search's findings on their shortest paths (`reduction.shortest_path`), in place; the time goes
    into the search's."""
    started = time.perf_counter()
    for n, finding in enumerate(result.findings):
        if finding.kind != "invariant":
            continue
        found = shortest_path(model, finding.path, finding.name)
        result.findings[n] = replace(finding, path=found.path)
        say(f"{finding.name}: {found.reduced} steps on the reduced graph, shortest {len(found.path)} (a full search "
            f"to depth {len(found.path) - 1}: {found.confirmed_states} states)")
    result.elapsed_s += time.perf_counter() - started


@dataclass(frozen=True)
class Explored:
    """What a check keeps of one exploration: the explorer row's facts and its coverage (current variant)."""

    states: int
    transitions: int
    max_depth: int
    complete: bool
    elapsed_s: float
    """Seconds the search took when it ran (in an earlier run, when `cached`)."""
    findings: tuple[Finding, ...]
    actions: Mapping[str, int]
    reached: frozenset[str]
    cached: bool = False

    def portable(self, variant: str, action_names: tuple[str, ...]) -> Portable:
        """Its coverage as plain values (its `reached` is empty but for the current variant's)."""
        return Portable(variant, action_names, dict(self.actions), self.reached)


class Graphs:
    """Explorations and tours by mechanism, variant and configuration: from this run, the disk cache, or a search."""

    def __init__(self, folder: Path | None, max_states: int | None, say: Say = lambda _: None) -> None:
        self.cache = graph_cache.GraphCache(folder)
        self.max_states = max_states
        self.say = say
        self._explored: dict[tuple[str, str, str], Explored] = {}
        self._tours: dict[tuple[str, str, str, int | None], Tour] = {}
        self._digests: dict[str, str] = {}

    def digest(self, mechanism: Mechanism) -> str:
        """The code a mechanism's graphs depend on: the models, the engines, and the binding's package."""
        if mechanism.name not in self._digests:
            binding = Path(sys.modules[mechanism.make_model.__module__].__file__ or ".").parent
            engines = Path(graph_cache.__file__).parent
            folder = Path(models.core.__file__).parent
            self._digests[mechanism.name] = graph_cache.code_digest([folder, engines, binding])
        return self._digests[mechanism.name]

    def _key(self, mechanism: Mechanism, variant: str, config: Mapping[str, Param], *more: object) -> str:
        return graph_cache.key(self.digest(mechanism), mechanism.name, variant, sorted(config.items()),
                               self.max_states, *more)

    def explored(self, mechanism: Mechanism, variant: str, config_name: str) -> Explored:
        """The configuration's exploration as its explorer row reports it."""
        memo = (mechanism.name, variant, config_name)
        if memo not in self._explored:
            config = mechanism.every_explore_config[config_name]
            stored = self.cache.get("explored", self._key(mechanism, variant, config))
            if isinstance(stored, Explored):
                self.say(f"  explore {mechanism.name}/{variant}/{config_name}: cached: {stored.states} states")
                self._explored[memo] = stored
            else:
                self._search(mechanism, variant, config_name, want_tour=False, max_steps=None)
        return self._explored[memo]

    def tour(self, mechanism: Mechanism, variant: str, config_name: str, max_steps: int | None) -> Tour:
        """The configuration's conformance tour, cut at `max_steps` replayed steps."""
        memo = (mechanism.name, variant, config_name, max_steps)
        if memo not in self._tours:
            config = mechanism.every_explore_config[config_name]
            stored = self.cache.get("tour", self._key(mechanism, variant, config, max_steps))
            if isinstance(stored, Tour):
                self._tours[memo] = stored
            else:
                self._search(mechanism, variant, config_name, want_tour=True, max_steps=max_steps)
        return self._tours[memo]

    def _search(self, mechanism: Mechanism, variant: str, config_name: str, *, want_tour: bool,
                max_steps: int | None) -> None:
        """One search of the configuration, filling its exploration and, when wanted, its tour."""
        config = mechanism.every_explore_config[config_name]
        model = mechanism.make_model(config, variant)
        result = search(model, f"{mechanism.name}/{variant}/{config_name}", self.say, max_states=self.max_states,
                        record_labels=True)
        reached: frozenset[str] = frozenset()
        if variant == mechanism.current:
            reached = frozenset(from_exploration(mechanism, model, result).reached)
        explored = Explored(len(result.states), result.transitions, result.max_depth, result.complete,
                            result.elapsed_s, tuple(result.findings), dict(result.coverage), reached)
        self._explored[(mechanism.name, variant, config_name)] = explored
        self.cache.put("explored", self._key(mechanism, variant, config), replace(explored, cached=True))
        if want_tour:
            planned = Tour.of(result, model, max_steps)
            self._tours[(mechanism.name, variant, config_name, max_steps)] = planned
            self.cache.put("tour", self._key(mechanism, variant, config, max_steps), planned)
