from collections.abc import Iterator

import pytest

from reference_impl.metadata import World


@pytest.fixture
def world() -> Iterator[World]:
    """A fresh world, disposed afterwards so that suspended tasks release their OS threads."""
    with World(seed=0) as w:
        yield w


@pytest.fixture
def metadata_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the metadata mechanism for tests that go through the registry (replay, corpus)."""
    from properties import registry

    if "properties.metadata" not in registry._MODULES:
        monkeypatch.setattr(registry, "_MODULES", (*registry._MODULES, "properties.metadata"))
