"""Test-suite set-up: Hypothesis profiles come from `properties.engines.profiles`; `dev` unless one is named.

Select one with `--hypothesis-profile=dev|ci|nightly` (the CI gate uses `ci`).
"""

from __future__ import annotations

import pytest
from hypothesis import settings

import properties.engines.profiles  # noqa: F401  (registers the profiles before Hypothesis reads the option)


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("dev")
