"""The mechanisms brokerspec knows, each bound to its model, reference and known-bad variants.

A mechanism module under `properties/` exposes one `MECHANISM`; the command line, the replayer and
the corpus tests find every mechanism here, so adding one means adding its module name below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.core import Model, Param
from properties.engines.bmc import ProofResult
from properties.engines.lockstep import ImplementationFactory

_MODULES: tuple[str, ...] = tuple(
    f"properties.{name}.binding" for name in ("topiclist", "delayed", "metadata", "pidquota", "keyshared")
)


@dataclass(frozen=True)
class Mechanism:
    """Everything the engines need to check one mechanism.

    `twins` maps each known-bad variant to the invariant the harness must report on it: a check
    that passes on `current` is only trusted because it fails on these. Every configuration must
    pass on `current`; a twin must be caught by at least one configuration of each engine (its bug
    may be out of reach of some, e.g. a flow bug in a semaphore-only configuration). `proofs(depth)` returns
    Z3 verdicts, each with whether it must hold (False for a mutant twin that must fail).
    `bench` adds the mechanism's own measurements (e.g. a memory experiment) to `brokerspec bench`; it
    gets the bench's output folder, for the plots it draws.
    """

    name: str
    spec: str
    make_model: Callable[[Mapping[str, Param] | None, str], Model[Any]]
    make_reference: ImplementationFactory | None
    current: str
    twins: Mapping[str, str]
    explore_configs: Mapping[str, Mapping[str, Param]]
    hypothesis_configs: Mapping[str, Mapping[str, Param]]
    proofs: Callable[[int], list[tuple[ProofResult, bool]]] | None = None
    bench: Callable[[Path], dict[str, object]] | None = None
    conformance_steps: Mapping[str, int] = field(default_factory=dict)
    """Replayed steps the conformance engine spends on an explore configuration, where it is not the
    default: a large configuration whose every transition would take minutes gets its shallowest ones."""

    @property
    def variants(self) -> tuple[str, ...]:
        return (self.current, *self.twins)


def mechanisms() -> dict[str, Mechanism]:
    """Every registered mechanism by name, in a stable order."""
    found: dict[str, Mechanism] = {}
    for module_name in _MODULES:
        mechanism: Mechanism = importlib.import_module(module_name).MECHANISM
        found[mechanism.name] = mechanism
    return found


def get(name: str) -> Mechanism:
    """The mechanism `name`; a `KeyError` whose message lists the known names otherwise."""
    known = mechanisms()
    if name not in known:
        raise KeyError(f"unknown mechanism {name!r} (known: {', '.join(known)})")
    return known[name]
