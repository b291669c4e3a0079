"""The binding interface: everything the engines need to check one mechanism.

Engines take a `Mechanism` and never look one up by name; the names live one floor up, in
`properties.registry`, so that no engine depends on any particular mechanism.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.core import Model, Param
from properties.engines.bmc import ProofResult
from properties.engines.lockstep import ImplementationFactory


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
