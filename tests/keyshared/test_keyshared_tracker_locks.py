"""DrainingHashesTracker at upstream's lock granularity: the model (models/keyshared/locks.py) explored completely,
and the upstream-granularity reference (reference_impl/keyshared/lock_level.py) replayed in lockstep with it.

The explorer checks upstream's current order completely, catches the pre-#23854 twin (its synchronized methods
call the stats and the handler inside the monitor) by name, shows what the PendingAcksMap lock protects
(without it the order breaks LK-1, LK-2, LK-3, LK-5 and LK-6), and pins the one violation the current order
admits: a lost wake-up (LK-6), written up in docs/findings/keyshared-tracker-lost-unblock.md, which the proposed
fix (`locked-block`) removes. The reference, run on the deterministic scheduler, shows every one of these on
its own ledger when the model's shortest interleaving is replayed on it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from models.core import Action, Param
from models.keyshared.lock_state import DEFAULT_CONFIG, THREADS, LocksState
from models.keyshared.locks import KeySharedLocksModel
from properties.engines.conformance import conform, run_walk
from properties.engines.explorer import Exploration, explore
from properties.keyshared.binding import (
    LOCKS_EXPLORE_CONFIGS,
    LOCKS_FINDINGS,
    LOCKS_NIGHTLY_CONFIGS,
    MECHANISM,
    make_model,
    make_reference,
)
from properties.keyshared.locks import KeySharedLocksReference

SCRIPTS: dict[str, dict[str, Param]] = {
    "away-and-back": {"dispatcher": ("join 2", "block", "leave 2", "block"), "acker": ("ack 0", "ack 1")},
    "block-first": {"dispatcher": ("block", "join 2", "block", "block"), "acker": ("ack 1", "ack 0")},
    "cumulative": {"dispatcher": ("join 2", "block", "block"), "acker": ("ack 0", "ack-up-to 1")},
    "drainer-leaves": {"dispatcher": ("join 2", "block", "leave 1", "block"), "acker": ("ack-up-to 1",)},
}
"""Scripts beside check's: the hash moves away (and back) with dispatches around while the acker acks."""


def _explore(order: str, script: Mapping[str, Param]) -> Exploration[LocksState]:
    model = KeySharedLocksModel({"order": order, **script})
    result = explore(model, terminal_ok=model.terminal_ok, check_liveness=False)
    assert result.complete
    return result


def _names(result: Exploration[LocksState]) -> set[str]:
    return {f.name for f in result.findings if f.kind == "invariant"}


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_current_order_keeps_lk1_to_lk5_and_loses_only_a_wake_up(script: Mapping[str, Param]) -> None:
    result = _explore("current", script)
    dispatcher = script["dispatcher"]
    assert isinstance(dispatcher, tuple)
    assert _names(result) == ({"LK-6"} if "block" in dispatcher[1:] else set())
    assert not [f for f in result.findings if f.kind == "deadlock"]


def test_the_state_counts_are_what_the_finding_reports() -> None:
    counts = {name: len(_explore(str(c["order"]), c).states) for name, c in LOCKS_EXPLORE_CONFIGS.items()}
    assert counts == {"locks": 331, "locks-batch": 133, "locks-fix": 349, "locks-fix-batch": 134,
                      "locks-membership": 2971, "locks-fix-membership": 3043, "locks-pre23854": 125,
                      "locks-unserialized": 3121}


def test_the_shortest_lost_wake_up_reads_the_entry_before_the_last_ack_removes_it() -> None:
    (finding,) = [f for f in _explore("current", SCRIPTS["away-and-back"]).findings if f.name == "LK-6"]
    steps = [(a.name, a["step"]) for a in finding.path]
    assert len(steps) == 17
    assert steps[-9:] == [
        ("dispatcher", "shouldBlockStickyKeyHash: tracker.readLock.lock"),  # getEntry: the entry, blocked 0
        ("acker", "remove: map[1].writeLock.lock"),  # the drainer's last ack
        ("acker", "remove: map[1].size.get"),  # size-- (#26019), before the handler
        ("acker", "remove: map[1].size.set"),
        ("acker", "reduceRefCount: tracker.readLock.lock"),
        ("acker", "reduceRefCount: entry.refCount.decrementAndGet"),  # to 0
        ("acker", "reduceRefCount: tracker.writeLock.lock"),  # remove(h); isBlocking() is next
        ("acker", "reduceRefCount: entry.blockedCount.get"),  # 0: no unblocking call
        ("dispatcher", "shouldBlockStickyKeyHash: entry.blockedCount.incrementAndGet"),  # blocked by a gone entry
    ]


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_pre_23854_twin_updates_stats_inside_its_monitor(script: Mapping[str, Param]) -> None:
    result = _explore("pre23854", script)
    assert _names(result) == {"LK-4"}  # synchronized methods: no lost wake-up, but the #23848 deadlock's shape
    (finding,) = [f for f in result.findings if f.name == "LK-4"]
    assert finding.path[-1]["step"] in ("addEntry: stats[1].writeLock.lock",) and len(finding.path) <= 4


def test_without_the_map_lock_the_current_order_breaks_the_ref_count_removal_and_null_checks() -> None:
    """What serializes addEntry and reduceRefCount for one consumer is its PendingAcksMap lock, not the tracker."""
    result = _explore("unserialized", LOCKS_EXPLORE_CONFIGS["locks-unserialized"])
    assert _names(result) == {"LK-1", "LK-2", "LK-3", "LK-5", "LK-6"}
    (null,) = [f for f in result.findings if f.name == "LK-5"]
    assert null.path[-1] == Action.of("acker", step="reduceRefCount: tracker.writeLock.lock")


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_proposed_fix_blocking_under_the_lock_keeps_every_invariant(script: Mapping[str, Param]) -> None:
    """The finding's fix: count the block under the write lock, only while the map still holds the entry."""
    result = _explore("locked-block", script)
    assert result.ok and not result.findings


@pytest.mark.parametrize("config", [{"order": "later"}, {"pending": 5}, {"dispatcher": ("move 3",)},
                                    {"membership": ("join 2",), "dispatcher": ("join 2",)},
                                    {"membership": ("block",)},
                                    {"dispatcher": ("leave 2",)}, {"dispatcher": ("join 2", "join 2")},
                                    {"acker": ("ack 2",)}, {"unchecked": ("LK-7",)}, {"scope": "tracker"}])
def test_configuration_errors_are_reported(config: Mapping[str, Param]) -> None:
    with pytest.raises(ValueError, match="keyshared lock config"):
        KeySharedLocksModel(config)


def test_the_default_configuration_is_the_first_script() -> None:
    assert {k: DEFAULT_CONFIG[k] for k in ("dispatcher", "acker")} == SCRIPTS["away-and-back"]


# --- the model's finer points ------------------------------------------------------------------------------------


def _run(model: KeySharedLocksModel, steps: list[tuple[str, str]]) -> LocksState:
    state = model.initial()
    for thread, step in steps:
        state, _ = model.step(state, Action.of(thread, step=step))
    return state


def test_a_get_entry_waits_while_the_other_thread_holds_the_write_lock() -> None:
    """getEntry takes the read lock: the dispatch's read is not offered inside the acker's removal."""
    model = KeySharedLocksModel({"dispatcher": ("join 2", "block"), "acker": ("ack 0",), "pending": 1})
    state = _run(model, [("dispatcher", "forEach: map[1].readLock.lock"),
                         ("dispatcher", "addEntry: tracker.writeLock.lock"),
                         ("dispatcher", "addEntry: entry.refCount.incrementAndGet"),
                         ("dispatcher", "addEntry: stats[1].writeLock.lock"),
                         ("acker", "remove: map[1].writeLock.lock"),
                         ("acker", "remove: map[1].size.get"),
                         ("acker", "remove: map[1].size.set"),
                         ("acker", "reduceRefCount: tracker.readLock.lock"),
                         ("acker", "reduceRefCount: entry.refCount.decrementAndGet"),
                         ("acker", "reduceRefCount: tracker.writeLock.lock")])
    assert state.tracker_lock == 1 and state.slots == (-1,)
    assert model.enabled(state) == [Action.of("acker", step="reduceRefCount: entry.blockedCount.get")]
    state, _ = model.step(state, model.enabled(state)[0])
    assert Action.of("dispatcher", step="shouldBlockStickyKeyHash: tracker.readLock.lock") in model.enabled(state)


def test_a_closing_removal_reads_no_blocked_count() -> None:
    """`!closing && removed.isBlocking()`: a leaving drainer's release never reads the entry, nor unblocks."""
    model = KeySharedLocksModel({"dispatcher": ("join 2", "leave 1"), "acker": (), "pending": 1})
    labels = [a["step"] for a in _walk_all(model)]
    assert "reduceRefCount: entry.blockedCount.get" not in labels
    assert "reduceRefCount: tracker.writeLock.lock" in labels


def _walk_all(model: KeySharedLocksModel) -> list[Action]:
    """The dispatcher's whole script alone (the first enabled action each time)."""
    state, taken = model.initial(), []
    while enabled := model.enabled(state):
        taken.append(enabled[0])
        state, _ = model.step(state, enabled[0])
    return taken


def test_unchecked_leaves_an_invariant_out_and_only_that_one() -> None:
    model = KeySharedLocksModel({**SCRIPTS["away-and-back"], "unchecked": ("LK-6",)})
    assert [i.name for i in model.invariants] == ["LK-1", "LK-2", "LK-3", "LK-4", "LK-5"]
    assert explore(model, terminal_ok=model.terminal_ok, check_liveness=False).ok


@pytest.mark.parametrize("variant", ["classic", "pip282"])
def test_every_variant_runs_the_configured_order(variant: str) -> None:
    """The variant names the dispatcher; the tracker and its order are PIP-379's whichever it is."""
    for order in ("current", "pre23854"):
        config = {"order": order, **SCRIPTS["away-and-back"]}
        ours, theirs = KeySharedLocksModel(config), KeySharedLocksModel(config, variant)
        mine = explore(ours, terminal_ok=ours.terminal_ok, check_liveness=False)
        other = explore(theirs, terminal_ok=theirs.terminal_ok, check_liveness=False)
        assert theirs.variant == variant and len(other.states) == len(mine.states)
        assert _names(other) == _names(mine)


def _reached(order: str, label: str) -> int:
    model = KeySharedLocksModel({**LOCKS_EXPLORE_CONFIGS["locks"], "order": order})
    states = explore(model, terminal_ok=model.terminal_ok, check_liveness=False).states
    return sum(any(model.next_label(s, i) == label for i in (0, 1)) for s in states)


def test_only_callers_without_the_map_lock_reach_the_lazy_removal() -> None:
    """shouldBlockStickyKeyHash's remove(h, entry) needs a hash back with its drainer whose entry the ADD part did
    not release: upstream's order, its twin and the fix never get there (so it is no coverage mark)."""
    lazy = "shouldBlockStickyKeyHash: tracker.writeLock.lock"
    assert [_reached(order, lazy) for order in ("current", "pre23854")] == [0, 0]
    assert _reached("unserialized", lazy) > 0


# --- the reference, replayed ------------------------------------------------------------------------------------


REPLAYED_HERE = [name for name in LOCKS_EXPLORE_CONFIGS if name not in ("locks-unserialized", "locks-fix-membership")]
"""The lock configurations this file replays on the code; the two largest twins of these only `check` replays."""


@pytest.mark.parametrize("name", REPLAYED_HERE)
def test_every_lock_transition_is_replayed_on_the_upstream_granularity_reference(name: str) -> None:
    config = LOCKS_EXPLORE_CONFIGS[name]
    result = conform(lambda: KeySharedLocksModel(config), lambda: KeySharedLocksReference(config, "pip379"),
                     terminal_ok=KeySharedLocksModel(config).terminal_ok, known=frozenset(LOCKS_FINDINGS.get(name, {})))
    assert result.ok and result.complete and result.covered == result.edges, result.deviation


@pytest.mark.parametrize("name", [n for n in LOCKS_EXPLORE_CONFIGS if n in LOCKS_FINDINGS])
def test_the_reference_shows_each_known_finding_on_its_own_ledger(name: str) -> None:
    """The model's shortest path to each finding, replayed on the code: the reference reports it, unprompted."""
    config = LOCKS_EXPLORE_CONFIGS[name]
    model = KeySharedLocksModel(config)
    findings = explore(model, terminal_ok=model.terminal_ok, check_liveness=False).findings
    assert {f.name for f in findings} == set(LOCKS_FINDINGS[name])
    for finding in findings:
        reference = KeySharedLocksReference(config, "pip379")
        for action in finding.path[:-1]:
            reference.apply(action)
        assert finding.name not in reference.violations()
        reference.apply(finding.path[-1])
        assert finding.name in reference.violations() and "divergence" not in reference.violations()
        reference.close()


def test_a_walk_on_the_reference_stops_at_the_first_invariant_it_breaks() -> None:
    """The lost wake-up, judged by the reference alone: the model leaves LK-6 unchecked and says nothing."""
    config = {**LOCKS_EXPLORE_CONFIGS["locks"], "unchecked": ("LK-6",)}
    (finding,) = explore(KeySharedLocksModel(LOCKS_EXPLORE_CONFIGS["locks"]), check_liveness=False,
                         terminal_ok=KeySharedLocksModel(config).terminal_ok).findings
    reference = KeySharedLocksReference(LOCKS_EXPLORE_CONFIGS["locks"], "pip379")  # it judges all six
    found, steps = run_walk(KeySharedLocksModel(config), reference, finding.path)
    assert found is not None and found.target == "LK-6" and steps == len(finding.path) == 17
    quiet = KeySharedLocksReference(config, "pip379")  # a configuration's unchecked invariants: on neither side
    assert run_walk(KeySharedLocksModel(config), quiet, finding.path)[0] is None


def test_a_label_the_reference_is_not_at_is_a_named_disagreement() -> None:
    reference = KeySharedLocksReference(None, "pip379")
    reference.apply(Action.of("acker", step="reduceRefCount: tracker.readLock.lock"))
    assert reference.violations() == ["divergence"]
    assert "about to run 'remove: map[1].writeLock.lock'" in reference.disagreement


def test_the_binding_replays_the_lock_scope_on_the_reference() -> None:
    config = MECHANISM.explore_configs["locks"]
    assert isinstance(make_model(config, "pip379"), KeySharedLocksModel)
    assert MECHANISM.scope(config) == "keyshared/locks" and not MECHANISM.model_only
    assert MECHANISM.for_config(config).make_reference is not None
    assert isinstance(make_reference(config, "pip379"), KeySharedLocksReference)
    assert set(LOCKS_EXPLORE_CONFIGS) == {"locks", "locks-batch", "locks-fix", "locks-fix-batch", "locks-membership",
                                          "locks-fix-membership", "locks-pre23854", "locks-unserialized"}
    threads = KeySharedLocksReference(config, "pip379").vars()["threads"]
    assert isinstance(threads, list) and [t[0] for t in threads if isinstance(t, list)] == list(THREADS)


def test_with_a_membership_thread_every_dispatcher_side_operation_takes_the_dispatchers_monitor() -> None:
    """Three threads: a dispatch waits while a join holds the monitor, and the lost wake-up is still there."""
    model = KeySharedLocksModel(LOCKS_EXPLORE_CONFIGS["locks-membership"])
    assert tuple(model.threads) == ("dispatcher", "acker", "membership")
    state = _run(model, [("membership", "addConsumer: dispatcher.lock")])
    assert Action.of("dispatcher", step="trySendMessagesToConsumers: dispatcher.lock") not in model.enabled(state)
    assert model.vars(state)["locks"] == {"tracker": [], "map[1]": [], "map[2]": [], "dispatcher": ["membership"]}
    assert _names(_explore("current", LOCKS_EXPLORE_CONFIGS["locks-membership"])) == {"LK-6"}


# --- the widened scope: two hashes, two drainers, two ackers ---------------------------------------------------


def test_a_widened_configuration_replays_every_transition_on_the_code() -> None:
    """Consumer 3 takes both hashes from consumers 1 and 2 and gives them back while each acks on its own thread:
    every transition of the smallest widened script conforms (the larger ones: `explore --conformance`)."""
    config = LOCKS_NIGHTLY_CONFIGS["locks-wide-small"]
    model = KeySharedLocksModel(config)
    assert tuple(model.threads) == ("dispatcher", "acker", "acker2")
    result = conform(lambda: KeySharedLocksModel(config), lambda: KeySharedLocksReference(config, "pip379"),
                     terminal_ok=model.terminal_ok, known=frozenset(LOCKS_FINDINGS["locks-wide-small"]))
    assert result.ok and result.complete and result.covered == result.edges > 4000, result.deviation


def test_a_join_takes_both_hashes_and_both_consumers_drain_at_once() -> None:
    """`join 3` with both hashes preferring consumer 3: one REMOVE part (one forEach) per loser, two entries."""
    model = KeySharedLocksModel(LOCKS_NIGHTLY_CONFIGS["locks-wide-small"])
    assert model.layout.owners() == (1, 2)  # before the threads start; the selector moves both before forEach's lock
    assert model.vars(model.initial())["owners"] == [[1, 3], [2, 3]]
    state = model.initial()
    while model.next_label(state, 0) != "shouldBlockStickyKeyHash: tracker.readLock.lock":
        state, _ = model.step(state, Action.of("dispatcher", step=model.next_label(state, 0)))
    seen = model.vars(state)
    assert seen["owners"] == [[1, 3], [2, 3]] and seen["draining"] == [[1, 1, 1, 0], [2, 2, 1, 0]]
    assert seen["stats"] == [[1, [1]], [2, [2]]]
    reference = KeySharedLocksReference(LOCKS_NIGHTLY_CONFIGS["locks-wide-small"], "pip379")
    for action in _path(model, state):
        reference.apply(action)
    assert reference.vars() == seen and not reference.violations()
    reference.close()


def _path(model: KeySharedLocksModel, target: LocksState) -> list[Action]:
    """The dispatcher's actions from the initial state to `target` (which it alone reached)."""
    state, out = model.initial(), []
    while state != target:
        action = Action.of("dispatcher", step=model.next_label(state, 0))
        out.append(action)
        state, _ = model.step(state, action)
    return out


@pytest.mark.parametrize("config", [
    {"hashes": ((3, 1), (3, 2)), "present": (1,)},  # hash 2's consumers are all gone
    {"hashes": ((3, 1), (3, 2)), "present": (1, 2), "pending": (2,)},  # consumer 1 holds acks of a hash it does not own
    {"hashes": ((3, 1), (3, 2)), "present": (1, 2), "pending2": (2,), "acker2": ("ack 0",)},  # not consumer 2's ack
    {"hashes": ((3, 1), (3, 2)), "present": (1, 2), "dispatcher": ("block 3",)},  # no hash 3
    {"hashes": ((4, 1),)}, {"pending2": (1,)},  # no consumer 4; consumer 2 not present
    {"hashes": ((2, 1),), "present": (1, 2), "dispatcher": ("leave 1", "leave 2")},  # the last consumer cannot leave
])
def test_widened_configuration_errors_are_reported(config: Mapping[str, Param]) -> None:
    with pytest.raises(ValueError, match="keyshared lock config"):
        KeySharedLocksModel(config)


def test_the_widened_current_order_loses_a_wake_up_and_the_fix_keeps_every_invariant() -> None:
    small = LOCKS_NIGHTLY_CONFIGS["locks-wide-small"]
    found = {f.name: len(f.path) for f in _explore("current", {**small, "order": "current"}).findings}
    assert found == {"LK-6": 17}
    assert _explore("locked-block", {**small, "order": "locked-block"}).ok


@pytest.mark.parametrize("name", ["locks-wide", "locks-wide-fix", "locks-wide-pre23854"])
def test_the_widened_three_thread_scripts_break_what_their_findings_say(name: str) -> None:
    """Two drainers acking on their own threads, a third consumer taking and giving back both hashes: upstream's
    order still loses only the wake-up (in 30 steps), the fix nothing, the pre-#23854 twin LK-4 (the others, four
    threads or a million states, are `explore --config` runs)."""
    config = LOCKS_NIGHTLY_CONFIGS[name]
    result = _explore(str(config["order"]), config)
    assert {f.name: len(f.path) for f in result.findings} == {
        "locks-wide": {"LK-6": 41}, "locks-wide-fix": {}, "locks-wide-pre23854": {"LK-4": 3}}[name]
    assert set(LOCKS_FINDINGS.get(name, {})) == {f.name for f in result.findings}
