"""Test-suite set-up: Hypothesis profiles come from `properties.engines.profiles`; `dev` unless one is named.

Select one with `--hypothesis-profile=dev|ci|nightly` (the CI gate uses `ci`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

import properties.engines.profiles  # noqa: F401  (registers the profiles before Hypothesis reads the option)
from properties.engines import cache


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("dev")


@pytest.fixture(autouse=True, scope="session")
def _graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Checks the suite runs keep their explored graphs in one folder of this run (shared by the xdist workers,
    whose temporary folders have one parent), never in the user's cache: a run starts cold and then reuses."""
    folder = tmp_path_factory.getbasetemp().parent / "graph-cache"
    previous = os.environ.get(cache.ENV)
    os.environ[cache.ENV] = str(folder)
    yield
    if previous is None:
        del os.environ[cache.ENV]
    else:
        os.environ[cache.ENV] = previous
