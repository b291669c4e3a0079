"""The Hypothesis lockstep machine: passes the fixed counter, shrinks the planted bugs."""

from __future__ import annotations

from hypothesis import settings

from properties.engines.stateful import FailedRun, build_state_machine, find_failure
from tests.engines.tiny import NAMES, CounterImpl, CounterModel

FAST = settings(max_examples=300, stateful_step_count=20, deadline=None, derandomize=True, database=None)


def test_fixed_counter_passes_in_lockstep() -> None:
    machine = build_state_machine(lambda: CounterModel({"limit": 4}, "fixed"), NAMES, CounterImpl)
    assert find_failure(machine, FAST) is None


def test_overflow_is_found_and_shrunk_to_at_most_three_steps() -> None:
    """Hypothesis' shrinking is not guaranteed minimal (2 steps is); 3 is what it reliably reaches."""
    runs: list[FailedRun] = []
    machine = build_state_machine(
        lambda: CounterModel({"limit": 3}, "overflow"), NAMES, CounterImpl, on_failure=runs.append
    )
    error = find_failure(machine, FAST)
    assert error is not None and "C-I1" in str(error)
    assert runs[-1].failures == ("C-I1",)
    assert len(runs[-1].actions) <= 3


def test_divergent_implementation_is_reported() -> None:
    runs: list[FailedRun] = []
    machine = build_state_machine(
        lambda: CounterModel({"limit": 6}, "fixed"), NAMES, lambda: CounterImpl(off_by_one=True), on_failure=runs.append
    )
    assert find_failure(machine, FAST) is not None
    assert "divergence" in runs[-1].failures
    assert [a.name for a in runs[-1].actions] == ["add"]


def test_same_seed_gives_byte_identical_traces() -> None:
    """Two searches from the same seed shrink to the same run and write the same bytes."""
    from hypothesis import seed

    from properties.engines.replay import record
    from traces.format import dumps

    def search() -> str:
        runs: list[FailedRun] = []
        machine = build_state_machine(
            lambda: CounterModel({"limit": 5}, "overflow"), NAMES, CounterImpl, on_failure=runs.append
        )
        loose = settings(max_examples=300, stateful_step_count=20, deadline=None, database=None)
        assert find_failure(seed(1234)(machine), loose) is not None
        trace = record(CounterModel({"limit": 5}, "overflow"), runs[-1].actions, engine="hypothesis", seed=1234)
        return dumps(trace)

    first, second = search(), search()
    assert first == second
    assert '"seed": 1234' in first
