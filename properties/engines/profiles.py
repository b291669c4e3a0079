"""The Hypothesis profiles, registered in one place for pytest and the command line alike, and the check
profiles built on them.

`dev` is for the edit-test loop, `ci` is the gate (derandomized so a red build reproduces, no
example database so clean clones behave the same, blobs printed so a failure can be pasted
back), `nightly` runs long and deep.

`brokerspec check --profile` names a `CheckProfile`: `quick` (a pre-commit hook: each mechanism's smallest
configurations explored and replayed on the code, their shallowest 10,000 steps; no twins, Hypothesis or Z3),
`dev`, `ci` (the default: the gate) and `nightly` (the gate plus the large configurations and Hypothesis' full
budget). Nearly every planted bug is killed by the
deterministic conformance replay; Hypothesis reaches deeper than the explored configurations, so the gate
keeps one batch of it per configuration and the nightly profile the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import InMemoryExampleDatabase

PROFILES = ("dev", "ci", "nightly")
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]

settings.register_profile(
    "dev",
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=_SLOW_OK,
    database=InMemoryExampleDatabase(),
)
settings.register_profile(
    "ci",
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(
    "nightly",
    max_examples=10_000,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=_SLOW_OK,
    phases=list(Phase),
)


def use(name: str) -> settings:
    """Load profile `name` and return it; a clear error names the known profiles otherwise."""
    if name not in PROFILES:
        raise ValueError(f"unknown Hypothesis profile {name!r} (known: {', '.join(PROFILES)})")
    settings.load_profile(name)
    return settings.get_profile(name)


@dataclass(frozen=True)
class CheckProfile:
    """What one `brokerspec check --profile NAME` runs."""

    name: str
    hypothesis: str | None
    """The Hypothesis profile of its runs; None: no Hypothesis rows (and no twins, whose verdicts need them)."""
    batches: int
    """Hypothesis batches per configuration where `check --batches` does not say."""
    nightly: bool = False
    """Also the mechanisms' `nightly_configs` (explored and replayed)."""
    quick: bool = False
    """Only each mechanism's `quick_configs`, on its current variant: their replay and their explorer rows."""
    conformance_steps: int | None = None
    """A cap on each configuration's replayed steps (shallowest transitions first), where `--conformance-steps`
    does not say; None: the mechanism's own budget."""


CHECK_PROFILES: dict[str, CheckProfile] = {
    "quick": CheckProfile("quick", None, 0, quick=True, conformance_steps=10_000),
    "dev": CheckProfile("dev", "dev", 1),
    "ci": CheckProfile("ci", "ci", 1),
    "nightly": CheckProfile("nightly", "nightly", 3, nightly=True),
}
