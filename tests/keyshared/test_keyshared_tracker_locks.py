"""DrainingHashesTracker at lock granularity (models/keyshared_locks.py): every interleaving of two threads.

The explorer checks upstream's current order completely, catches the pre-#23854 twin (callbacks under
the tracker lock) by name, shows what the PendingAcksMap lock protects (without it the order breaks LK-1, LK-2,
LK-3 and LK-5), and pins the one violation the current order admits: a lost wake-up (LK-6), written
up in docs/findings/keyshared-tracker-lost-unblock.md, which the proposed fix (`locked-block`) removes.
`brokerspec check` runs the same (the lock configurations of properties/keyshared/binding.py): the
current order passes on LK-1..LK-5 with LK-6 on its own known-finding row, each twin order must still
break what it breaks, and the fix must break nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from models.core import Action, Param
from models.keyshared_locks import (
    DEFAULT_CONFIG,
    R_DEC,
    R_LOCK_REMOVE,
    R_UNLOCK,
    S_GET,
    S_UNLOCK,
    KeySharedLocksModel,
    LocksState,
)
from properties import registry
from properties.cli import PASS, VIOLATED, main
from properties.cli.check import run_stateful
from properties.engines.coverage import from_exploration
from properties.engines.explorer import Exploration, explore
from properties.keyshared.binding import (
    LOCKS_EXPLORE_CONFIGS,
    LOCKS_FINDING,
    MECHANISM,
    make_model,
    make_reference,
)
from properties.keyshared.coverage import LOCK_MARKS

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
    assert [len(_explore("current", script).states) for script in SCRIPTS.values()] == [176, 147, 226]


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


@pytest.mark.parametrize("config", [{"order": "later"}, {"acks": 3}, {"dispatcher": ("move 3",)},
                                    {"unchecked": ("LK-7",)}, {"scope": "tracker"}])
def test_configuration_errors_are_reported(config: Mapping[str, Param]) -> None:
    with pytest.raises(ValueError, match="keyshared lock config"):
        KeySharedLocksModel(config)


def test_the_default_configuration_is_the_first_script() -> None:
    assert DEFAULT_CONFIG["dispatcher"] == SCRIPTS["away-and-back"]


# --- the model's finer points ------------------------------------------------------------------------------------


def test_a_get_entry_waits_while_the_other_thread_holds_the_write_lock() -> None:
    """getEntry takes the read lock: the dispatch's read is not offered inside the ack thread's removal."""
    model = KeySharedLocksModel({"dispatcher": ("move 2", "block"), "pending": 1, "acks": 1})
    state = model.initial()
    for thread, steps in (("dispatcher", model.program(0, 0)), ("acker", model.program(1, 0)[:5])):
        for step in steps:
            state, _ = model.step(state, Action.of(thread, step=step))
    assert model.program(1, 0)[4] == R_LOCK_REMOVE and state.tracker_lock == 1 and state.slot == -1
    assert model.enabled(state) == [Action.of("acker", step=R_UNLOCK)]  # not the dispatcher's get
    state, _ = model.step(state, Action.of("acker", step=R_UNLOCK))
    assert Action.of("dispatcher", step=S_GET) in model.enabled(state)


def test_unchecked_leaves_an_invariant_out_and_only_that_one() -> None:
    model = KeySharedLocksModel({"dispatcher": SCRIPTS["away-and-back"], "unchecked": ("LK-6",)})
    assert [i.name for i in model.invariants] == ["LK-1", "LK-2", "LK-3", "LK-4", "LK-5"]
    assert explore(model, terminal_ok=model.terminal_ok, check_liveness=False).ok


@pytest.mark.parametrize("variant", ["classic", "pip282"])
def test_every_variant_runs_the_configured_order(variant: str) -> None:
    """The variant names the dispatcher; the tracker and its order are PIP-379's whichever it is."""
    for order in ("current", "pre23854"):
        config = {"order": order, "dispatcher": SCRIPTS["away-and-back"]}
        ours, theirs = KeySharedLocksModel(config), KeySharedLocksModel(config, variant)
        mine = explore(ours, terminal_ok=ours.terminal_ok, check_liveness=False)
        other = explore(theirs, terminal_ok=theirs.terminal_ok, check_liveness=False)
        assert theirs.variant == variant and len(other.states) == len(mine.states)
        assert _names(other) == _names(mine)


def _reached(order: str, holds: Callable[[KeySharedLocksModel, LocksState], bool]) -> int:
    model = KeySharedLocksModel({**LOCKS_EXPLORE_CONFIGS["locks"], "order": order})
    return sum(holds(model, s) for s in explore(model, terminal_ok=model.terminal_ok, check_liveness=False).states)


def _lazy_removal(model: KeySharedLocksModel, s: LocksState) -> bool:
    return model._next(s, 0) == S_UNLOCK


def _decrement_under_the_others_write_lock(model: KeySharedLocksModel, s: LocksState) -> bool:
    return any(model._next(s, i) == R_DEC and s.tracker_lock == 1 - i for i in (0, 1))


@pytest.mark.parametrize("holds", [_lazy_removal, _decrement_under_the_others_write_lock])
def test_only_callers_without_the_map_lock_reach_the_lazy_removal_or_decrement_inside_a_removal(
    holds: Callable[[KeySharedLocksModel, LocksState], bool],
) -> None:
    """Why these two are no coverage marks: upstream's order, its twin and the fix never reach them."""
    assert [_reached(order, holds) for order in ("current", "pre23854", "locked-block")] == [0, 0, 0]
    assert _reached("unserialized", holds) > 0


# --- the check ---------------------------------------------------------------------------------------------------


def test_the_binding_runs_the_lock_scope_on_the_model_alone() -> None:
    config = MECHANISM.explore_configs["locks"]
    assert isinstance(make_model(config, "pip379"), KeySharedLocksModel)
    assert MECHANISM.scope(config) == "keyshared/locks"
    assert MECHANISM.for_config(config).make_reference is None
    assert MECHANISM.for_config(MECHANISM.explore_configs["tracker"]) is MECHANISM
    with pytest.raises(ValueError, match="no reference at the lock scope"):
        make_reference(config, "pip379")
    assert set(LOCKS_EXPLORE_CONFIGS) == {"locks", "locks-fix", "locks-pre23854", "locks-unserialized"}
    assert {name: set(found) for name, found in MECHANISM.findings.items()} == {
        "locks": {"LK-6"}, "locks-pre23854": {"LK-4", "LK-6"},
        "locks-unserialized": {"LK-1", "LK-2", "LK-3", "LK-5", "LK-6"}}
    assert Path(LOCKS_FINDING).is_file()


def _locks_only(monkeypatch: pytest.MonkeyPatch, findings: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """keyshared with its lock configurations alone, so `check` runs them in seconds."""
    small = replace(MECHANISM, explore_configs=LOCKS_EXPLORE_CONFIGS,
                    hypothesis_configs={"locks": MECHANISM.hypothesis_configs["locks"]},
                    findings=MECHANISM.findings if findings is None else findings)
    monkeypatch.setattr(registry, "_ORDER", tuple(small if m is MECHANISM else m for m in registry._ORDER))


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[tuple[str, str], dict[str, Any]]]:
    argv = ["check", "--mechanism", "keyshared", "--variant", "pip379", "--batches", "1", "--profile", "ci",
            "--out", str(tmp_path), "--json"]
    code = main(argv)
    report = json.loads(capsys.readouterr().out)
    return code, {(row["engine"], row["subject"]): row for row in report["rows"]}


def test_check_passes_the_current_order_and_reports_the_lost_wake_up_as_a_known_finding(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    _locks_only(monkeypatch)
    code, rows = _check(tmp_path, capsys)
    assert code == PASS
    assert rows["explorer[locks]", "pip379"]["verdict"] == "pass"
    lost = rows["explorer[locks]", "LK-6"]
    assert (lost["verdict"], lost["failures"], lost["steps"]) == ("known finding(s) found", ["LK-6"], 20)
    assert LOCKS_FINDING in lost["detail"] and Path(lost["trace"]).is_file()
    assert rows["explorer[locks-fix]", "pip379"]["verdict"] == "pass"
    assert not [key for key in rows if key[0] == "explorer[locks-fix]" and key[1] != "pip379"]
    assert rows["hypothesis[locks]", "pip379"]["verdict"] == "pass"
    for name in LOCKS_EXPLORE_CONFIGS:
        assert rows[f"conformance[{name}]", "pip379"]["verdict"] == "not replayed"


def test_check_catches_the_twin_orders_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    _locks_only(monkeypatch)
    _, rows = _check(tmp_path, capsys)
    pre = rows["explorer[locks-pre23854]", "LK-4,LK-6"]
    assert (pre["target"], pre["steps"], pre["failures"]) == ("LK-4", 5, ["LK-4", "LK-6"])
    unserialized = rows["explorer[locks-unserialized]", "LK-1,LK-2,LK-3,LK-5,LK-6"]
    assert sorted(unserialized["failures"]) == ["LK-1", "LK-2", "LK-3", "LK-5", "LK-6"]
    assert unserialized["target"] == "LK-1"


def test_check_fails_when_a_known_finding_is_no_longer_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A known finding is held like a twin: the fix's configuration does not lose a wake-up, so declaring one fails."""
    _locks_only(monkeypatch, {**MECHANISM.findings, "locks-fix": {"LK-6": LOCKS_FINDING}})
    code, rows = _check(tmp_path, capsys)
    assert code == VIOLATED
    assert rows["explorer[locks-fix]", "LK-6"]["verdict"] == "FINDING MISSED LK-6"


def test_check_does_not_hide_the_lost_wake_up_when_it_is_not_declared(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    _locks_only(monkeypatch, {})
    code, rows = _check(tmp_path, capsys)
    assert code == VIOLATED
    assert rows["explorer[locks]", "pip379"]["verdict"] == "VIOLATED LK-6"
    assert rows["explorer[locks-pre23854]", "pip379"]["verdict"] == "VIOLATED LK-4,LK-6"


def test_the_hypothesis_configuration_fails_on_a_twin_order() -> None:
    """Hypothesis over the lock model can fail: the same run on the pre-#23854 order breaks LK-4 at once."""
    config = {**MECHANISM.hypothesis_configs["locks"], "order": "pre23854"}
    run, _, _, _ = run_stateful(MECHANISM, "pip379", config, 0, None, "ci", batches_max=1)
    assert run is not None and "LK-4" in run.failures


# --- coverage ----------------------------------------------------------------------------------------------------


def test_the_lock_configurations_reach_every_lock_mark_and_a_twin_order_counts_for_none() -> None:
    reached: set[str] = set()
    for name, config in LOCKS_EXPLORE_CONFIGS.items():
        model = KeySharedLocksModel(config)
        coverage = from_exploration(MECHANISM, model, explore(model, terminal_ok=model.terminal_ok))
        assert coverage.missing_actions == []
        if name in ("locks-pre23854", "locks-unserialized"):
            assert not {mark.name for mark in LOCK_MARKS} & coverage.reached
        reached |= coverage.reached
    assert {mark.name for mark in LOCK_MARKS} <= reached
