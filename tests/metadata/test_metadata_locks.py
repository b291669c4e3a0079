"""AbstractBatchedMetadataStore at upstream's lock granularity: the model (models/metadata_locks.py) explored
completely, and the upstream-granularity reference (reference_impl/metadata/lock_level.py) replayed in lockstep.

The explorer pins what upstream's code admits (an op enqueued across close is never completed, MD-LK3; the closer's
drain polls while a flush consumes, MD-LK4: docs/findings/metadata-close-lost-op.md), shows MD-LK1 holds on the
merged monitor and that the proposed fix keeps every invariant; the reference shows each finding on its own ledger
when the model's shortest interleaving is replayed on it, and conforms on every transition.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from models.core import Action, Param
from models.metadata import VARIANTS as metadata_variants
from models.metadata_locks import DEFAULT_CONFIG, VARIANTS, MdLocksState, MetadataLocksModel
from properties.engines.conformance import conform
from properties.engines.explorer import Exploration, explore
from properties.metadata.binding import LOCKS_EXPLORE_CONFIGS, LOCKS_FINDINGS, MECHANISM, make_reference
from properties.metadata.locks import MetadataLocksReference

SCRIPTS: dict[str, dict[str, Param]] = {
    "two-puts-close": {"close": True},
    "get-put-close": {"close": True, "caller": ("get",), "other": ("put",), "flushes": 2},
    "batch-of-two": {"close": True, "max_operations": 2, "caller": ("put", "put"), "other": ()},
}
"""Scripts beside check's: two callers racing close, a read and a write with two periodic runs, batches of two."""


def _explore(config: Mapping[str, Param]) -> Exploration[MdLocksState]:
    model = MetadataLocksModel({**DEFAULT_CONFIG, **config})
    result = explore(model, terminal_ok=model.terminal_ok, check_liveness=False)
    assert result.complete
    return result


def _names(result: Exploration[MdLocksState]) -> set[str]:
    return {f.name for f in result.findings if f.kind == "invariant"}


def test_each_configuration_breaks_exactly_its_declared_findings_and_the_state_counts_are_pinned() -> None:
    counts = {}
    for name, config in LOCKS_EXPLORE_CONFIGS.items():
        result = _explore(config)
        assert _names(result) == set(LOCKS_FINDINGS.get(name, {})), name
        counts[name] = len(result.states)
    assert counts == {"locks": 708, "locks-close": 316, "locks-close-fix": 362}


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_proposed_fix_keeps_every_invariant_and_upstream_breaks_the_two(script: Mapping[str, Param]) -> None:
    assert _names(_explore({**script, "order": "fixed"})) == set()
    assert _names(_explore(script)) == {"MD-LK3", "MD-LK4"}


def _steps(name: str) -> list[tuple[str, str]]:
    (finding,) = [f for f in _explore(LOCKS_EXPLORE_CONFIGS["locks-close"]).findings if f.name == name]
    return [(a.name, str(a["step"])) for a in finding.path if a.name != "clock"]


def test_the_shortest_lost_op_is_an_offer_after_the_closers_drain() -> None:
    assert _steps("MD-LK3") == [
        ("caller", "enqueue: isClosed.get"),  # not closed yet
        ("closer", "close: isClosed.compareAndSet"),
        ("closer", "close: readOps.poll"),
        ("closer", "close: writeOps.poll"),  # the drain finds nothing
        ("caller", "enqueue: writeOps.offer"),  # the op lands after the drain
        ("caller", "enqueue: writeOps.size"),  # 1 is not past max_operations: no inline flush
        ("closer", "close: scheduledTask.cancel"),  # no periodic flush will ever take it
    ]


def test_the_shortest_second_consumer_is_the_drain_inside_a_flush() -> None:
    steps = _steps("MD-LK4")
    assert steps[-1] == ("closer", "close: readOps.poll") or steps[-1] == ("closer", "close: writeOps.poll")
    assert ("flusher", "flush: AbstractBatchedMetadataStore.lock") in steps


def test_a_flush_that_peeked_an_op_the_drain_took_throws_and_stops_the_periodic_task() -> None:
    model = MetadataLocksModel(LOCKS_EXPLORE_CONFIGS["locks-close"])
    reference = MetadataLocksReference(LOCKS_EXPLORE_CONFIGS["locks-close"], "pip453")
    path = [Action.of("caller", step="enqueue: isClosed.get"), Action.of("caller", step="enqueue: writeOps.offer"),
            Action.of("caller", step="enqueue: writeOps.size"), Action.of("clock"),
            Action.of("flusher", step="flush: AbstractBatchedMetadataStore.lock"),
            Action.of("flusher", step="flush: readOps.isEmpty"), Action.of("flusher", step="flush: writeOps.isEmpty"),
            Action.of("flusher", step="nextBatch: writeOps.isEmpty"),
            Action.of("flusher", step="nextBatch: writeOps.peek"),
            Action.of("closer", step="close: isClosed.compareAndSet"), Action.of("closer", step="close: readOps.poll"),
            Action.of("closer", step="close: writeOps.poll"), Action.of("flusher", step="nextBatch: writeOps.poll"),
            Action.of("flusher", step="internalBatchOperation: isClosed.get")]
    state = model.initial()
    try:
        for action in path:
            state, _ = model.step(state, action)
            reference.apply(action)
            assert reference.vars() == model.vars(state)
        assert [type(e).__name__ for _, _, e in reference.world.uncaught] == ["NullPointerError"]
        assert state.cancelled and state.ops == (("caller.0", "failed"),) and state.broken == ("MD-LK4",)
    finally:
        reference.close()


@pytest.mark.parametrize("name", [n for n in LOCKS_EXPLORE_CONFIGS if n in LOCKS_FINDINGS])
def test_the_reference_shows_each_finding_on_its_own_ledger(name: str) -> None:
    config = LOCKS_EXPLORE_CONFIGS[name]
    model = MetadataLocksModel(config)
    for finding in _explore(config).findings:
        reference = MetadataLocksReference(config, "pip453")
        state = model.initial()
        try:
            for action in finding.path:
                state, _ = model.step(state, action)
                reference.apply(action)
                assert reference.vars() == model.vars(state)
            assert finding.name in reference.violations()
        finally:
            reference.close()


@pytest.mark.parametrize("name", list(LOCKS_EXPLORE_CONFIGS))
def test_the_reference_conforms_on_every_transition(name: str) -> None:
    config = LOCKS_EXPLORE_CONFIGS[name]
    result = conform(lambda: MECHANISM.make_model(config, "pip453"), lambda: make_reference(config, "pip453"),
                     known=frozenset(LOCKS_FINDINGS.get(name, {})))
    assert result.deviation is None and result.complete and result.covered == result.edges


def test_a_label_the_thread_is_not_at_is_a_named_disagreement() -> None:
    reference = MetadataLocksReference(LOCKS_EXPLORE_CONFIGS["locks"], "pip453")
    try:
        reference.apply(Action.of("caller", step="enqueue: writeOps.offer"))
        assert reference.violations() == ["divergence"]
        assert "about to run 'enqueue: isClosed.get'" in reference.disagreement
    finally:
        reference.close()


@pytest.mark.parametrize("config", [{"order": "old"}, {"max_operations": 0}, {"caller": ("delete",)},
                                    {"close": 1}, {"scope": "metadata"}])
def test_configuration_errors_are_reported(config: Mapping[str, Param]) -> None:
    with pytest.raises(ValueError, match="metadata locks config"):
        MetadataLocksModel({**DEFAULT_CONFIG, **config})


def test_the_scope_accepts_the_mechanisms_variants() -> None:
    assert metadata_variants == VARIANTS


def test_the_scope_is_registered_with_its_judges_and_vocabulary() -> None:
    assert MECHANISM.reference_judges["metadata/locks"] == ("MD-LK1", "MD-LK3", "MD-LK4", "MD-I10")
    assert MECHANISM.scope(LOCKS_EXPLORE_CONFIGS["locks"]) == "metadata/locks"
    assert set(MECHANISM.vocabularies["metadata/locks"].actions) == {"caller", "other", "flusher", "closer", "clock"}
