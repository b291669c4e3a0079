"""The Hypothesis lockstep machine: passes the fixed counter, shrinks the planted bugs."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from models.core import Action
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


def test_a_seeded_search_does_not_depend_on_what_the_process_imported(tmp_path: Path) -> None:
    """Hypothesis mines literals from imported local modules; the harness's searches do not see them.

    The twin: the same search run without the pin draws differently once a module full of integer
    literals is imported (pidquota's no_readd run was caught alone and missed after other tests).
    """
    def steps(pinned: bool) -> list[Action]:
        taken: list[Action] = []
        machine = build_state_machine(
            lambda: CounterModel({"limit": 200}, "fixed"), NAMES, CounterImpl, on_step=taken.append
        )
        search = settings(FAST, max_examples=100, phases=[Phase.generate])
        if pinned:
            assert find_failure(machine, search) is None
        else:
            run_state_machine_as_test(machine, settings=search)
        return taken

    before_pinned, before_unpinned = steps(True), steps(False)
    literals = tmp_path / "literal_pool.py"
    literals.write_text("".join(f"VALUE_{n} = {n * 7 + 3}\n" for n in range(300)), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("literal_pool")
        assert steps(True) == before_pinned
        assert steps(False) != before_unpinned
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("literal_pool", None)
