"""AsyncSemaphoreImpl at upstream's lock granularity: the model (models/topiclist/semaphore_locks.py) explored
completely, and the upstream-granularity reference (reference_impl/topiclist/lock_level.py) replayed in lockstep.

The explorer checks upstream's current order completely and pins what it admits (a grant reusing a permit that a
release swapped first takes availablePermits below 0, SL-1; a caller cancelling a growing update during its grant
loses the previous permit, SL-3: docs/findings/topiclist-semaphore-lock-level.md), catches the pre-#25066 order
(#25066's race: a permit counted twice, SL-2) and the order without the swap's atomicity by name, and shows the
proposed fix keeps every invariant. The reference, run on the deterministic scheduler, shows each finding on its
own ledger when the model's shortest interleaving is replayed on it, and conforms on every transition.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

import pytest

from models.core import Action, Param
from models.topiclist.semaphore_locks import DEFAULT_CONFIG, SemaphoreLocksModel, SemLocksState
from properties.engines.conformance import conform
from properties.engines.explorer import Exploration, explore
from properties.topiclist.binding import LOCKS_EXPLORE_CONFIGS, LOCKS_FINDINGS, MECHANISM, make_model, make_reference
from properties.topiclist.locks import SemaphoreLocksReference
from reference_impl.topiclist.lock_level import AsyncSemaphoreImpl, SemaphorePermit

SCRIPTS: dict[str, dict[str, Param]] = {
    "race": {"held": (1,), "caller": ("update P0 2",), "other": ("release P0",)},
    "cancel": {"held": (1,), "caller": ("update P0 2", "cancel"), "other": ()},
    "shrink": {"held": (2,), "caller": ("update P0 1",), "other": ("acquire 2",)},
    "waiters": {"held": (2,), "caller": ("acquire 1", "cancel"), "other": ("acquire 1", "release P0")},
}
"""Scripts beside check's: a growing update racing a release or its own cancel, a shrink, and two waiters."""


def _explore(order: str, script: Mapping[str, Param]) -> Exploration[SemLocksState]:
    model = SemaphoreLocksModel({**DEFAULT_CONFIG, **script, "order": order})
    result = explore(model, terminal_ok=model.terminal_ok, check_liveness=False)
    assert result.complete
    return result


def _names(result: Exploration[SemLocksState]) -> set[str]:
    return {f.name for f in result.findings if f.kind == "invariant"}


def test_each_configuration_breaks_exactly_its_declared_findings_and_the_state_counts_are_pinned() -> None:
    counts = {}
    for name, config in LOCKS_EXPLORE_CONFIGS.items():
        result = _explore(str(config["order"]), config)
        assert _names(result) == set(LOCKS_FINDINGS.get(name, {})), name
        counts[name] = len(result.states)
    assert counts == {"semaphore-locks-grant": 21, "semaphore-locks": 408, "semaphore-locks-cancel": 52,
                      "semaphore-locks-wake": 1849, "semaphore-locks-fix": 366, "semaphore-locks-fix-cancel": 52,
                      "semaphore-locks-pre25066": 1049, "semaphore-locks-unswapped": 502}


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=list(SCRIPTS))
def test_the_proposed_fix_keeps_every_invariant(script: Mapping[str, Param]) -> None:
    assert not _names(_explore("fixed", script))


@pytest.mark.parametrize(("name", "expected"), [("race", {"SL-1"}), ("cancel", {"SL-3"}), ("shrink", set()),
                                                ("waiters", set())])
def test_the_current_order_breaks_only_the_two_findings(name: str, expected: set[str]) -> None:
    assert _names(_explore("current", SCRIPTS[name])) == expected


def test_the_shortest_negative_count_is_a_release_swapping_between_the_grants_read_and_its_swap() -> None:
    (finding,) = [f for f in _explore("current", SCRIPTS["race"]).findings if f.name == "SL-1"]
    steps = [(a.name, a["step"]) for a in finding.path]
    assert len(steps) == 17
    assert steps[-4:] == [
        ("executor", "getPermits: permit.permits (volatile read)"),  # getRequiredPermits: 2 - 1 fits available 1
        ("other", "releasePermits: permit.permits.getAndSet"),  # the release takes P0's 1 first
        ("executor", "releasePermits: permit.permits.getAndSet"),  # the grant's swap gets 0: it takes all 2
        ("executor", "internalProcessQueue: availablePermits.addAndGet"),  # 1 - 2 = -1 before the release adds 1
    ]


def test_the_shortest_loss_is_a_cancel_between_the_grants_isdone_and_its_complete() -> None:
    (finding,) = [f for f in _explore("current", SCRIPTS["cancel"]).findings if f.name == "SL-3"]
    steps = [(a.name, a["step"]) for a in finding.path]
    cancel = steps.index(("caller", "cancel: future.cancel"))
    assert steps[cancel - 1] == ("executor", "internalProcessQueue: future.isDone")
    assert ("executor", "releasePermits: permit.permits.getAndSet") in steps[cancel:]  # P0 swapped to 0 after it
    assert steps[-3] == ("executor", "internalProcessQueue: availablePermits.addAndGet")  # gives back 1 of 2


def test_before_25066_a_release_while_the_update_waits_counts_the_permit_twice() -> None:
    """apache/pulsar#25066's race: the queued update keeps the additional permits it computed; a release of the old
    permit meanwhile returns it, and the grant takes only the additional ones."""
    (finding,) = [f for f in _explore("pre25066", SCRIPTS["race"]).findings if f.name == "SL-2"]
    steps = [(a.name, a["step"]) for a in finding.path]
    assert ("other", "release: availablePermits.addAndGet") in steps
    assert steps[-1] == ("executor", "releasePermits: permit.permits.getAndSet")  # the thenApply, after the grant


def test_before_25066_cancelling_the_returned_future_loses_the_new_permit() -> None:
    """The thenApply that releases the old permit runs after the caller cancelled the future update returned: it
    swaps the old permit to 0 and finds nobody to hand the new one to."""
    (finding,) = [f for f in _explore("pre25066", SCRIPTS["cancel"]).findings if f.name == "SL-3"]
    steps = [(a.name, a["step"]) for a in finding.path]
    cancel = steps.index(("caller", "cancel: returnedFuture.cancel"))
    assert ("executor", "internalProcessQueue: future.complete") in steps[cancel:]
    assert ("executor", "releasePermits: permit.permits.getAndSet") in steps[cancel:]


@pytest.mark.parametrize("name", [n for n in LOCKS_EXPLORE_CONFIGS if n in LOCKS_FINDINGS])
def test_the_reference_shows_each_finding_on_its_own_ledger(name: str) -> None:
    config = LOCKS_EXPLORE_CONFIGS[name]
    model = SemaphoreLocksModel(config)
    for finding in _explore(str(config["order"]), config).findings:
        reference = SemaphoreLocksReference(config, "current")
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
    result = conform(lambda: make_model(config, "current"), lambda: make_reference(config, "current"),
                     known=frozenset(LOCKS_FINDINGS.get(name, {})))
    assert result.deviation is None and result.complete and result.covered == result.edges


def test_a_label_the_thread_is_not_at_is_a_named_disagreement() -> None:
    reference = SemaphoreLocksReference(LOCKS_EXPLORE_CONFIGS["semaphore-locks"], "current")
    try:
        reference.apply(Action.of("executor", step="internalProcessQueue: AsyncSemaphoreImpl.lock"))
        assert reference.violations() == ["divergence"]
        assert reference.disagreement == ("executor cannot run 'internalProcessQueue: AsyncSemaphoreImpl.lock': it is "
                                          "about to run 'done'")
    finally:
        reference.close()


@pytest.mark.parametrize("config", [{"order": "later"}, {"held": (3,)}, {"caller": ("update P1 2",)},
                                    {"caller": ("cancel",)}, {"other": ("acquire 3",)}, {"clock": 1},
                                    {"unchecked": ("SL-5",)}, {"scope": "semaphore"}, {"max_queue": 9}])
def test_configuration_errors_are_reported(config: Mapping[str, Param]) -> None:
    with pytest.raises(ValueError, match="topiclist semaphore-locks config"):
        SemaphoreLocksModel({**DEFAULT_CONFIG, **config})


def test_the_scope_is_registered_with_its_judges_and_vocabulary() -> None:
    assert MECHANISM.reference_judges["topiclist/semaphore-locks"] == ("SL-1", "SL-2", "SL-3", "SL-4")
    assert MECHANISM.scope(LOCKS_EXPLORE_CONFIGS["semaphore-locks"]) == "topiclist/semaphore-locks"
    assert set(MECHANISM.vocabularies["topiclist/semaphore-locks"].actions) == {"caller", "other", "executor", "clock"}


def _step_as_labelled(reference: SemaphoreLocksReference, thread: str) -> None:
    reference.apply(Action.of(thread, step=reference._label(thread)))


def test_a_release_that_submits_no_pass_leaves_a_waiter_asleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """SL-4's twin: release returns the permits but never calls processQueue, after the waiter's own pass found none."""
    def release_without_pass(self: AsyncSemaphoreImpl, permit: SemaphorePermit) -> None:
        released = permit.release_permits()
        if released > 0:
            self.available_permits.add_and_get(released)

    monkeypatch.setattr(AsyncSemaphoreImpl, "release", release_without_pass)
    reference = SemaphoreLocksReference(LOCKS_EXPLORE_CONFIGS["semaphore-locks-wake"], "current")
    try:
        while reference._label("caller") != "done":  # acquire 1: queued, its pass submitted
            _step_as_labelled(reference, "caller")
        while reference._label("executor") != "done":  # the pass finds no permit available
            _step_as_labelled(reference, "executor")
        assert "SL-4" not in reference.violations()
        _step_as_labelled(reference, "other")  # the swap
        _step_as_labelled(reference, "other")  # the add, and no pass
        assert reference.violations() == ["SL-4"]
    finally:
        reference.close()


def test_a_request_queued_after_an_earlier_one_was_freed_gets_its_own_name() -> None:
    """The adapter names queued requests by object identity; an earlier request's id, freed and reused by a later
    one, once lent the later request its stale name, so Hypothesis saw a divergence that depended on when the
    collector ran (seed 0, one batch, in a fresh interpreter). The same batch now passes wherever it runs."""
    program = ("from properties import registry\n"
               "from properties.engines.checks import run_stateful\n"
               "m = registry.get('topiclist')\n"
               "run, *_ = run_stateful(m, m.current, m.hypothesis_configs['semaphore-locks'], 0, None, 'ci', None, 1)\n"
               "print(run.detail if run else 'pass')\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300)
    assert done.stdout.strip() == "pass"
