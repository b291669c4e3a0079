"""The Hypothesis profiles, registered in one place for pytest and the command line alike.

`dev` is for the edit-test loop, `ci` is the gate (derandomized so a red build reproduces, no
example database so clean clones behave the same, blobs printed so a failure can be pasted
back), `nightly` runs long and deep.
"""

from __future__ import annotations

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
