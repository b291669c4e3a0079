"""Register the tiny counter as a mechanism for the engine tests that go through the registry."""

from __future__ import annotations

import pytest

from properties import registry


@pytest.fixture
def tiny_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.engines import tiny

    monkeypatch.setattr(registry, "_ORDER", (*registry._ORDER, tiny.MECHANISM))
