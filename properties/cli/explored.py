"""The explorations a check draws its explorer rows and conformance tours from: one search per configuration
and variant per run, kept on disk between runs (`properties.engines.cache`) while the model is unchanged.

The explorer row and the conformance replay of a configuration read the same graph, so one search (with the
edges' actions kept, and liveness judged) serves both; a run that finds both in the cache searches nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import models
from models.core import Param
from properties.cli.common import _model, _progress
from properties.engines import cache as graph_cache
from properties.engines.conformance import Tour
from properties.engines.coverage import Coverage, Portable, from_exploration
from properties.engines.explorer import Finding, Progress, explore
from properties.engines.mechanism import Mechanism


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

    def coverage(self, mechanism: Mechanism, variant: str, action_names: tuple[str, ...]) -> Coverage:
        return Coverage.restored(mechanism, Portable(variant, action_names, dict(self.actions), self.reached))


class Graphs:
    """Explorations and tours by mechanism, variant and configuration: from this run, the disk cache, or a search."""

    def __init__(self, folder: Path | None, max_states: int | None) -> None:
        self.cache = graph_cache.GraphCache(folder)
        self.max_states = max_states
        self._explored: dict[tuple[str, str, str], Explored] = {}
        self._tours: dict[tuple[str, str, str, int | None], Tour] = {}
        self._digests: dict[str, str] = {}

    def digest(self, mechanism: Mechanism) -> str:
        """The code a mechanism's graphs depend on: the models, the engines, and the binding's package."""
        if mechanism.name not in self._digests:
            binding = Path(sys.modules[mechanism.make_model.__module__].__file__ or ".").parent
            engines = Path(graph_cache.__file__).parent
            self._digests[mechanism.name] = graph_cache.code_digest([Path(models.__file__).parent, engines, binding])
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
                _progress(f"  explore {mechanism.name}/{variant}/{config_name}: cached: {stored.states} states")
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
        model = _model(mechanism, config, variant)
        label = f"{mechanism.name}/{variant}/{config_name}"
        _progress(f"  explore {label}")

        def report(where: Progress) -> None:
            _progress(f"  explore {label}: {where.line()}")

        result = explore(model, max_states=self.max_states, progress=report,
                         terminal_ok=getattr(model, "terminal_ok", None), record_labels=True)
        done = Progress(result.transitions, len(result.states), 0, result.max_depth, result.elapsed_s)
        _progress(f"  explore {label}: {'done' if result.complete else 'bounded'}: {done.line()}")
        reached: frozenset[str] = frozenset()
        if variant == mechanism.current:
            reached = frozenset(from_exploration(mechanism, model, result).reached)
        explored = Explored(len(result.states), result.transitions, result.max_depth, result.complete,
                            result.elapsed_s, tuple(result.findings), dict(result.coverage), reached)
        self._explored[(mechanism.name, variant, config_name)] = explored
        self.cache.put("explored", self._key(mechanism, variant, config), replace(explored, cached=True))
        if want_tour:
            planned = Tour.of(result, max_steps)
            self._tours[(mechanism.name, variant, config_name, max_steps)] = planned
            self.cache.put("tour", self._key(mechanism, variant, config, max_steps), planned)
