"""Issue 45: the dispatcher's accounting (KS-U1 unacked counters, KS-P1 the permit total) and the
jump-during-read finding (docs/findings/keyshared-jump-during-read.md).

Scripted corners run in lockstep on the model and the reference (each step's variables compared, the
reference judged by its own oracles), so a counter moved on one side only fails here; each invariant is then
broken on a crafted state and on a corrupted reference, and the finding's configurations are explored and
replayed whole.
"""

from __future__ import annotations

from models.core import Action, Param, violated
from models.keyshared import KeySharedModel, KSState
from properties.engines.conformance import conform
from properties.engines.explorer import explore
from properties.engines.lockstep import Lockstep
from properties.keyshared.binding import MECHANISM, make_model
from properties.keyshared.dispatcher import EXPLORE_CONFIGS, TWO, KeySharedReference
from reference_impl.keyshared import LEDGER_ID

ACCOUNTING: dict[str, Param] = {
    **TWO, "max_messages": 3, "add_permits": (1, 3), "flow": (1, 2), "max_permits": 3,
    "skip": (1, 2),
    "actions": ("add", "remove", "publish", "flow", "ack", "redeliver", "redeliver_all", "read", "run", "skip",
                "clear_backlog", "expire"),
}


def _a(action: str, **params: Param) -> Action:
    return Action(action, tuple(sorted(params.items())))


def _lockstep(*actions: Action) -> Lockstep[KSState]:
    model = KeySharedModel(ACCOUNTING, "pip379")
    lockstep = Lockstep(model, KeySharedReference(model.config, "pip379"))
    for action in actions:
        outcome = lockstep.apply(action)
        assert not outcome.failures, (action, outcome.failures, outcome.detail)
    return lockstep


def _counters(state: KSState) -> dict[int, int]:
    return {c.id: c.unacked for c in state.consumers}


# consumer2 (key "5") gets three messages; consumer1 joins with one permit and gets nothing of "5".
THREE = (_a("add", consumer=1, name="consumer2", permits=3), *[_a("publish", key="5")] * 3, _a("read"))


def test_dispatch_ack_and_redeliveries_move_the_counter_by_what_left_the_pending_acks() -> None:
    lockstep = _lockstep(*THREE)
    assert _counters(lockstep.state) == {1: 3} and lockstep.state.total_permits == 0
    lockstep.apply(_a("ack", consumer=1, position=1))
    assert _counters(lockstep.state) == {1: 2}
    lockstep.apply(_a("redeliver", consumer=1, position=2))
    assert _counters(lockstep.state) == {1: 1}
    outcome = lockstep.apply(_a("redeliver_all", consumer=1))
    assert not outcome.failures and _counters(lockstep.state) == {1: 0}
    outcome = lockstep.apply(_a("flow", consumer=1, n=2))
    assert lockstep.state.total_permits == 2
    outcome = lockstep.apply(_a("read"))
    assert not outcome.failures and outcome.observation == {"delivered": [[1, 0], [1, 2]]}
    assert _counters(lockstep.state) == {1: 2} and lockstep.state.total_permits == 0


def test_a_jump_takes_the_passed_pending_acks_off_the_counter_and_an_ack_of_them_takes_nothing() -> None:
    """#25581: removeAllUpTo's removals leave the counter; acking a message the skip passed finds no pending
    ack (the client still holds it, #25627), so the counter does not move again (#25592)."""
    lockstep = _lockstep(*THREE, _a("skip", n=2))
    assert lockstep.state.mark_delete == 1 and _counters(lockstep.state) == {1: 1}
    outcome = lockstep.apply(_a("ack", consumer=1, position=0))
    assert not outcome.failures and _counters(lockstep.state) == {1: 1}
    lockstep.apply(_a("clear_backlog"))
    assert _counters(lockstep.state) == {1: 0}


def test_the_permit_total_follows_flows_joins_leaves_and_the_last_leaver() -> None:
    lockstep = _lockstep(_a("add", consumer=1, name="consumer1", permits=1),
                         _a("add", consumer=2, name="consumer2", permits=3), _a("flow", consumer=1, n=1))
    assert lockstep.state.total_permits == 5
    lockstep.apply(_a("remove", consumer=2))
    assert lockstep.state.total_permits == 2  # the leaver's three permits left the total
    lockstep.apply(_a("remove", consumer=1))
    assert lockstep.state.total_permits == 0
    lockstep.apply(_a("add", consumer=1, name="consumer1", permits=3))  # a reconnect: a fresh first flow
    assert lockstep.state.total_permits == 3


def test_a_flow_of_a_consumer_that_left_does_not_reach_the_total() -> None:
    """internalConsumerFlow ignores a consumer no longer in the dispatcher's set (its flow may be queued)."""
    reference = KeySharedReference(KeySharedModel(ACCOUNTING, "pip379").config, "pip379")
    reference.apply(_a("add", consumer=1, name="consumer1", permits=1))
    reference.apply(_a("add", consumer=2, name="consumer2", permits=1))
    leaver = reference.consumers[2]
    reference.apply(_a("remove", consumer=2))
    reference.d.flow(leaver, 2)
    assert reference.d.total_available_permits == 1 and reference.violations() == []


def test_crafted_states_break_ks_u1_and_ks_p1() -> None:
    model = KeySharedModel(ACCOUNTING, "pip379")
    state = _lockstep(*THREE).state
    assert "KS-U1" not in violated(model, state) and "KS-P1" not in violated(model, state)
    (c,) = state.consumers
    assert "KS-U1" in violated(model, state._replace(consumers=(c._replace(unacked=c.unacked + 1),)))
    assert "KS-U1" in violated(model, state._replace(consumers=(c._replace(unacked=-1, pending=()),)))
    assert "KS-P1" in violated(model, state._replace(total_permits=1))
    assert "KS-P1" in violated(model, state._replace(consumers=(c._replace(permits=-1),), total_permits=-1))


def test_the_reference_oracles_name_a_drifted_counter_and_total() -> None:
    reference = KeySharedReference(KeySharedModel(ACCOUNTING, "pip379").config, "pip379")
    for action in THREE:
        reference.apply(action)
    assert reference.violations() == []
    consumer = reference.consumers[1]
    consumer.unacked_messages += 1
    assert reference.violations() == ["KS-U1"]
    consumer.unacked_messages -= 1
    reference.d.total_available_permits -= 1
    assert reference.violations() == ["KS-P1"]
    reference.d.total_available_permits += 1
    consumer.pending_acks.remove(LEDGER_ID, 0)  # a pending ack gone without the counter
    assert "KS-U1" in reference.violations()


# The finding's shortest interleaving (docs/findings/keyshared-jump-during-read.md).
JUMP_DURING_READ = (
    _a("add", consumer=1, name="consumer1", permits=1), _a("publish", key="4"), _a("begin_read"),
    _a("publish", key="4"), _a("skip", n=1), _a("complete_read", kind="Normal"),
    _a("add", consumer=2, name="consumer1", permits=1), _a("fire"), _a("remove", consumer=1),
)


def test_the_explorer_finds_the_jump_during_read_stall_in_nine_steps_and_none_with_the_fix() -> None:
    found = explore(make_model(EXPLORE_CONFIGS["jump-read"], "pip379"), check_liveness=False, check_deadlock=False)
    assert found.complete and [(f.name, f.path) for f in found.findings] == [("KS-I5a", JUMP_DURING_READ)]
    assert MECHANISM.findings["jump-read"] == {"KS-I5a": "docs/findings/keyshared-jump-during-read.md"}
    fixed = explore(make_model(EXPLORE_CONFIGS["jump-read-fix"], "pip379"), check_liveness=False,
                    check_deadlock=False)
    assert fixed.complete and not fixed.findings and "jump-read-fix" not in MECHANISM.findings


def test_the_reference_shows_the_stall_the_model_reports() -> None:
    """On the reference: the skipped entry is dispatched by the read in flight, the drainer's departure
    releases the blocking entry without requeuing anything, and no read is scheduled for message 1."""
    model = KeySharedModel(EXPLORE_CONFIGS["jump-read"], "pip379")
    lockstep = Lockstep(model, KeySharedReference(model.config, "pip379"), frozenset({"KS-I5a"}))
    outcomes = [lockstep.apply(action) for action in JUMP_DURING_READ]
    assert outcomes[5].observation == {"delivered": [[1, 0]]}  # entry 0, skipped while the read was in flight
    assert [o.failures for o in outcomes[:-1]] == [()] * 8
    reference = lockstep.implementation
    assert isinstance(reference, KeySharedReference)
    assert "KS-I5a" in reference.violations() and not reference.d.scheduled_read
    assert [p[1] for p, _ in reference.d.replay_queue.items()] == [1]


def test_both_jump_read_configurations_are_replayed_whole_on_the_reference() -> None:
    for name in ("jump-read", "jump-read-fix"):
        config = EXPLORE_CONFIGS[name]
        model = make_model(config, "pip379")
        result = conform(lambda config=config: make_model(config, "pip379"),  # type: ignore[misc]
                         lambda model=model: MECHANISM.make_reference(model.config, "pip379"),  # type: ignore[misc]
                         known=frozenset(MECHANISM.findings.get(name, {})))
        assert result.ok and result.complete and result.covered == result.edges, (name, result.summary())


# The queued-flow finding (docs/findings/keyshared-permits-queued-flow.md): upstream's flow order, async_flow.
QUEUED_FLOW_LEAVES = (_a("add", consumer=1, name="consumer1", permits=0), _a("flow", consumer=1, n=1),
                      _a("add", consumer=2, name="consumer1", permits=0), _a("remove", consumer=1))


def _queued(config: dict[str, Param], *actions: Action) -> Lockstep[KSState]:
    model = KeySharedModel(config, "pip379")
    lockstep = Lockstep(model, KeySharedReference(model.config, "pip379"), frozenset({"KS-P1"}))
    for action in actions:
        outcome = lockstep.apply(action)
        assert not outcome.failures, (action, outcome.failures, outcome.detail)
    return lockstep


def test_a_dispatch_may_spend_a_queued_flow_before_the_total_counts_it() -> None:
    config = dict(MECHANISM.nightly_configs["permits"])
    lockstep = _queued(config, _a("add", consumer=1, name="consumer1", permits=0), _a("flow", consumer=1, n=1),
                       _a("publish", key="4"))
    assert (lockstep.state.total_permits, lockstep.state.queued_flows) == (0, ((1, 1),))
    outcome = lockstep.apply(_a("read"))  # readMoreEntries reads for the consumer's own permit
    assert outcome.observation == {"delivered": [[1, 0]]}
    assert lockstep.state.total_permits == -1 and not violated(lockstep.model, lockstep.state)
    lockstep.apply(_a("flow_update"))
    assert (lockstep.state.total_permits, lockstep.state.queued_flows) == (0, ())


def test_a_leaver_with_a_queued_flow_leaves_the_total_short_upstream_and_not_with_the_fix() -> None:
    lockstep = _queued(dict(MECHANISM.nightly_configs["permits"]), *QUEUED_FLOW_LEAVES)
    state = lockstep.state
    assert (state.total_permits, state.queued_flows) == (-1, ((0, 1),)) and "KS-P1" in violated(lockstep.model, state)
    reference = lockstep.implementation
    assert isinstance(reference, KeySharedReference) and "KS-P1" in reference.violations()
    lockstep.apply(_a("flow_update"))  # internalConsumerFlow ignores the consumer that left: the drift stays
    assert lockstep.state.total_permits == -1 and "KS-P1" in reference.violations()
    fixed = _queued(dict(EXPLORE_CONFIGS["permits-fix"]), *QUEUED_FLOW_LEAVES, _a("flow_update"))
    assert fixed.state.total_permits == 0 and not violated(fixed.model, fixed.state)


def test_the_queued_flow_finding_is_found_in_four_steps_and_the_fix_holds_everywhere() -> None:
    found = explore(make_model(MECHANISM.nightly_configs["permits"], "pip379"), check_liveness=False,
                    check_deadlock=False, max_states=2000)
    assert not found.complete  # the drift grows with every such departure: no finite graph
    assert [(f.name, f.path) for f in found.findings] == [("KS-P1", QUEUED_FLOW_LEAVES)]
    assert MECHANISM.findings["permits"] == {"KS-P1": "docs/findings/keyshared-permits-queued-flow.md"}
    fixed = explore(make_model(EXPLORE_CONFIGS["permits-fix"], "pip379"), check_liveness=False, check_deadlock=False)
    assert fixed.complete and not fixed.findings and len(fixed.states) == 238
    config = EXPLORE_CONFIGS["permits-fix"]
    result = conform(lambda: make_model(config, "pip379"),
                     lambda: MECHANISM.make_reference(make_model(config, "pip379").config, "pip379"))  # type: ignore[misc]
    assert result.ok and result.complete and result.covered == result.edges, result.summary()
