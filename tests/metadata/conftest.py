from collections.abc import Iterator

import pytest

from reference_impl.metadata import World


@pytest.fixture
def world() -> Iterator[World]:
    """A fresh world, disposed afterwards so that suspended tasks unwind before the next test."""
    with World(seed=0) as w:
        yield w


