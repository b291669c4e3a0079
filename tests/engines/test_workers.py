"""A search shared among forked workers is the search of one process: same states in the same order,
same edges, paths, findings and counts, whatever stops it; and it falls back to one process where
forking is unsafe."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from models.core import Action
from properties.engines import explorer
from properties.engines.explorer import Exploration, SymmetryError, explore
from tests.engines.tokens import Holders, TokensModel


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Levels of a few dozen states are shared too, in chunks of a few states (many chunks, many levels)."""
    monkeypatch.setattr(explorer, "CHUNK", 5)
    monkeypatch.setattr(explorer, "LAST_CHUNK", 2)
    monkeypatch.setattr(explorer, "PARALLEL_MIN", 4)


def _same(one: Exploration[Any], many: Exploration[Any]) -> None:
    assert many.workers > 1 and one.workers == 1
    assert many.states == one.states
    assert many.edges == one.edges
    assert many.parents == one.parents and many.tree_edges == one.tree_edges
    assert many.findings == one.findings
    assert many.coverage == one.coverage
    assert (many.complete, many.max_depth, many.labels) == (one.complete, one.max_depth, one.labels)


def _big(variant: str = "fixed") -> TokensModel:
    """Five holders of up to 3 tokens, 9 in all: levels of up to ~150 states."""
    return TokensModel(holders=5, capacity=3, limit=9, variant=variant)


@pytest.mark.parametrize("variant", ["fixed", "leaky", "sticky"])
@pytest.mark.parametrize("workers", [2, 3])
def test_workers_find_what_one_process_finds(variant: str, workers: int) -> None:
    model = _big(variant)
    _same(explore(model, record_labels=True), explore(model, record_labels=True, workers=workers))


@pytest.mark.parametrize("options", [{"stop_on_violation": True}, {"max_states": 300}, {"symmetry": True},
                                     {"check_deadlock": False}])
def test_workers_stop_where_one_process_stops(options: dict[str, Any]) -> None:
    model = _big("leaky")
    _same(explore(model, **options), explore(model, workers=2, **options))


def test_a_worker_error_is_raised_here() -> None:
    class Failing(TokensModel):
        def enabled(self, state: Holders) -> Sequence[Action]:
            if state == (3, 3, 0, 0, 0):
                raise ZeroDivisionError("planted")
            return super().enabled(state)

    with pytest.raises(ZeroDivisionError, match="planted"):
        explore(Failing(holders=5, capacity=3, limit=9), workers=2)

    class Forgetful(TokensModel):
        def symmetric_key(self, state: Holders) -> tuple[int, ...]:
            return tuple(sorted(state))[1:]

    with pytest.raises(SymmetryError):
        explore(Forgetful(holders=5, capacity=3, limit=9, variant="leaky"), symmetry=True, workers=2)


def test_one_process_while_other_threads_run() -> None:
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert explore(_big(), workers=2).workers == 1
    finally:
        release.set()
        other.join()
