"""The metadata adapter's lock ledger (MD-LK1, MD-LK2): each rule holds on the current store and is reported by name
on the step that breaks it, when the flush skips its lock or an invalidation skips the path's key lock.

The planted bugs under tests/mutants/ die by these names in the default check; here each is replayed on its
shortest interleaving (the one the conformance tour finds), so the ledger's judgement is tested in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from models.core import Action
from properties.metadata.binding import MECHANISM, MetadataReference
from reference_impl.concurrent.executors import yield_point
from reference_impl.metadata.cache import MetadataCache
from reference_impl.metadata.store import MetadataStore

FLUSH = [Action.of("put", c=0, p="/a"), Action.of("advance"), Action.of("run", thread="N-batch-flusher"),
         Action.of("run", thread="N-batch-flusher")]
"""A put waits in the batch queue; the periodic flush takes its batch, then dispatches it."""
REFRESH_RACE = [Action.of("delete", c=0, p="/a"), Action.of("cache_get", c=0, p="/a"),
                Action.of("refresh", c=0, p="/a"), Action.of("run", thread="N-event")]
"""The Deleted notification of /a waits on the event thread while a refresh of /a holds its key lock."""


def _replay(config: str, actions: Sequence[Action]) -> list[list[str]]:
    reference = MetadataReference(MECHANISM.explore_configs[config], "pip453")
    try:
        seen = []
        for action in actions:
            reference.apply(action)
            seen.append([v for v in reference.violations() if v.startswith("MD-LK")])
        return seen
    finally:
        reference.close()


def test_the_current_store_keeps_both_lock_rules_on_these_interleavings() -> None:
    assert _replay("small", FLUSH) == [[], [], [], []]
    assert _replay("memory", REFRESH_RACE) == [[], [], [], []]


def test_a_flush_without_its_lock_is_reported_when_its_batch_reaches_the_backend(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def unlocked_flush(self: MetadataStore, periodic: bool = False) -> None:
        for q in (self.read_q, self.write_q):
            while batch := self.next_batch(q):
                yield_point("flush:next_batch")
                self._dispatch(batch)
                yield_point("flush:dispatched")

    monkeypatch.setattr(MetadataStore, "flush", unlocked_flush)
    assert _replay("small", FLUSH) == [[], [], [], ["MD-LK1"]]


def test_an_invalidation_without_the_key_lock_is_reported_while_a_refresh_holds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def unlocked_invalidate(self: MetadataCache[object], path: str) -> None:
        self.entries.pop(path, None)

    monkeypatch.setattr(MetadataCache, "invalidate", unlocked_invalidate)
    assert _replay("memory", REFRESH_RACE) == [[], [], [], ["MD-LK2"]]
