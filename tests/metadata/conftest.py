from collections.abc import Iterator

import pytest

from reference_impl.metadata import World


@pytest.fixture
def world() -> Iterator[World]:
    """A fresh world, disposed afterwards so that suspended tasks release their OS threads."""
    with World(seed=0) as w:
        yield w


