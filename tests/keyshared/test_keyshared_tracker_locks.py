"""DrainingHashesTracker at lock granularity (models/keyshared_locks.py): every interleaving of two threads.

The explorer checks upstream's current order completely, catches the pre-#23854 twin (callbacks under
the tracker lock) by name, shows what the PendingAcksMap lock protects (without it the order breaks LK-1, LK-2,
LK-3 and LK-5), and pins the one violation the current order admits: a lost wake-up (LK-6), written
up in docs/findings/keyshared-tracker-lost-unblock.md, which the proposed fix (`locked-block`) removes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from models.core import Param
from models.keyshared_locks import DEFAULT_CONFIG, KeySharedLocksModel, LocksState
from properties.engines.explorer import Exploration, explore

SCRIPTS: dict[str, tuple[str, ...]] = {
    "away-and-back": ("move 2", "block", "move 1", "block"),
    "block-first": ("block", "move 2", "block", "block"),
    "twice-blocked": ("move 2", "block", "block", "move 1", "block"),
}
"""Dispatcher scripts: the hash moves away and back with dispatches around; the ack thread acks both messages."""


def _explore(order: str, script: tuple[str, ...]) -> Exploration[LocksState]:
    model = KeySharedLocksModel({"order": order, "dispatcher": script})
    result = explore(model, terminal_ok=model.terminal_ok, check_liveness=False)
    assert result.complete
    return result


def _names(result: Exploration[LocksState]) -> set[str]:
    return {f.name for f in result.findings if f.kind == "invariant"}


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_current_order_keeps_lk1_to_lk5_and_loses_only_a_wake_up(script: tuple[str, ...]) -> None:
    result = _explore("current", script)
    assert _names(result) == {"LK-6"}
    assert not [f for f in result.findings if f.kind == "deadlock"]


def test_the_state_counts_of_the_current_order_are_what_the_finding_reports() -> None:
    assert [len(_explore("current", script).states) for script in SCRIPTS.values()] == [178, 151, 233]


def test_the_shortest_lost_wake_up_is_a_block_that_reads_the_entry_before_the_last_ack_removes_it() -> None:
    (finding,) = [f for f in _explore("current", SCRIPTS["away-and-back"]).findings if f.name == "LK-6"]
    steps = [(a.name, a["step"]) for a in finding.path]
    assert len(steps) == 20
    assert steps[-7:] == [
        ("dispatcher", "block: get entry"),
        ("acker", "lock map"),
        ("acker", "ack: remove pending ack"),
        ("acker", "reduce: get entry"),
        ("acker", "reduce: decrement"),
        ("acker", "reduce: lock, remove(h), isBlocking"),
        ("dispatcher", "block: owner check / blocked++"),
    ]


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_pre_23854_twin_runs_a_callback_under_the_tracker_lock(script: tuple[str, ...]) -> None:
    result = _explore("pre23854", script)
    assert "LK-4" in _names(result)
    (finding,) = [f for f in result.findings if f.name == "LK-4"]
    assert finding.path[-1]["step"] == "add: stats" and len(finding.path) <= 6


def test_without_the_map_lock_the_current_order_breaks_the_ref_count_removal_and_null_checks() -> None:
    """What serializes addEntry and reduceRefCount for one consumer is its PendingAcksMap lock, not the tracker."""
    names = set().union(*(_names(_explore("unserialized", script)) for script in SCRIPTS.values()))
    assert names == {"LK-1", "LK-2", "LK-5", "LK-6"}  # LK-3 needs a re-created entry: see the next test
    result = _explore("unserialized", SCRIPTS["away-and-back"])
    (null,) = [f for f in result.findings if f.name == "LK-5"]
    assert [a["step"] for a in null.path][-1] == "reduce: lock, remove(h), isBlocking"


def test_without_the_map_lock_remove_by_key_can_drop_an_entry_created_after_the_decrement() -> None:
    """LK-3: reduceRefCount's remove(h) instead of remove(h, entry) removes a newer entry of the hash."""
    result = _explore("unserialized", ("move 2", "move 1", "move 2", "block"))
    assert "LK-3" in _names(result)


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_proposed_fix_blocking_under_the_lock_keeps_every_invariant(script: tuple[str, ...]) -> None:
    """The finding's fix: increment the blocked count under the write lock, only if the entry is still mapped."""
    result = _explore("locked-block", script)
    assert result.ok and not result.findings


@pytest.mark.parametrize("config", [{"order": "later"}, {"acks": 3}, {"dispatcher": ("move 3",)}])
def test_configuration_errors_are_reported(config: Mapping[str, Param]) -> None:
    with pytest.raises(ValueError, match="keyshared lock config"):
        KeySharedLocksModel(config)


def test_the_default_configuration_is_the_first_script() -> None:
    assert DEFAULT_CONFIG["dispatcher"] == SCRIPTS["away-and-back"]
