"""Turn a model (and optionally a reference implementation) into a Hypothesis state machine.

Each action name of the model becomes one rule, so Hypothesis' swarm testing switches whole kinds
of actions off for some runs, and each rule draws its parameters from the actions the model
enables in the current state. After every step the lockstep checks run (`properties.engines.lockstep`);
the first failure raises with the invariant's name, and `on_failure` receives the run so far,
which after Hypothesis has shrunk is the minimal failing run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers as hypothesis_providers
from hypothesis.internal.constants_ast import Constants
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from models.core import Action, Model
from properties.engines.lockstep import Implementation, Lockstep


@dataclass(frozen=True)
class FailedRun:
    """A failing run as the state machine saw it: the actions and the first failure."""

    actions: tuple[Action, ...]
    failures: tuple[str, ...]
    detail: str


class InvariantViolation(AssertionError):
    """Raised inside the state machine so Hypothesis shrinks toward the same failure."""


_PICK = st.integers(min_value=0, max_value=2**16 - 1)
"""Which of the enabled actions of a kind to take; shrinks toward the first one the model lists.

One integer per step instead of `st.data()` + `sampled_from` keeps Hypothesis' per-step overhead
low (the choice list changes every step, and building a strategy per step is what costs)."""


def build_state_machine(
    make_model: Callable[[], Model[Any]],
    action_names: Sequence[str],
    make_implementation: Callable[[], Implementation] | None = None,
    on_failure: Callable[[FailedRun], None] | None = None,
    on_step: Callable[[Action], None] | None = None,
) -> type[RuleBasedStateMachine]:
    """A `RuleBasedStateMachine` class that runs the model (and implementation) in lockstep."""

    class LockstepMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.lockstep = Lockstep(make_model(), make_implementation() if make_implementation else None)
            self.actions: list[Action] = []
            self._enabled: dict[str, list[Action]] | None = None
            self._check(self.lockstep.initial_outcome().failures, "")

        def enabled_now(self) -> dict[str, list[Action]]:
            """The enabled actions of the current state, grouped by name once per state."""
            if self._enabled is None:
                self._enabled = {}
                for action in self.lockstep.model.enabled(self.lockstep.state):
                    self._enabled.setdefault(action.name, []).append(action)
            return self._enabled

        def take(self, action: Action) -> None:
            self.actions.append(action)
            self._enabled = None
            outcome = self.lockstep.apply(action)
            if on_step is not None:
                on_step(action)
            self._check(outcome.failures, outcome.detail)

        def _check(self, failures: Sequence[str], detail: str) -> None:
            if failures:
                run = FailedRun(tuple(self.actions), tuple(failures), detail)
                if on_failure is not None:
                    on_failure(run)
                where = f"after {len(self.actions)} step(s)"
                raise InvariantViolation(f"{', '.join(failures)} violated {where}. {detail}".strip())

    def make_rule(name: str) -> Callable[..., None]:
        @precondition(lambda self: name in self.enabled_now())
        @rule(pick=_PICK)
        def do(self: Any, pick: int) -> None:
            choices = self.enabled_now()[name]
            self.take(choices[pick % len(choices)])

        do.__name__ = f"do_{name}"
        return do

    @precondition(lambda self: not self.enabled_now())
    @rule()
    def finished(self: Any) -> None:
        """A terminal state (every script done): nothing to take, and Hypothesis needs a rule it may run."""

    for action_name in action_names:
        setattr(LockstepMachine, f"do_{action_name}", make_rule(action_name))
    LockstepMachine.finished = finished
    return LockstepMachine


@contextmanager
def local_constants_pinned() -> Iterator[None]:
    """Hypothesis draws without the literals it mines from the imported local modules.

    Since 6.131 Hypothesis mixes into its draws the constants of every non-test module the process
    has imported, so a seeded run changed with what else was imported before it (a test passed alone
    and failed after others on the same pytest-xdist worker) and with any literal edited anywhere in
    the project. Pinned empty, a seed gives the same run in every process (a private hook of
    Hypothesis: `test_a_seeded_search_does_not_depend_on_what_the_process_imported` fails if it moves).
    """
    mined, cache = hypothesis_providers._get_local_constants, hypothesis_providers.CONSTANTS_CACHE
    hypothesis_providers._get_local_constants = Constants
    cache.cache.clear()
    try:
        yield
    finally:
        hypothesis_providers._get_local_constants = mined
        cache.cache.clear()


def find_failure(machine: type[RuleBasedStateMachine], settings: Settings) -> BaseException | None:
    """Run the machine under `settings`; the (shrunk) failure it raised, or None if it passed.

    Any exception counts: an implementation that crashes fails as surely as one that breaks an
    invariant, and Hypothesis has shrunk it either way.
    """
    try:
        with local_constants_pinned():
            run_state_machine_as_test(machine, settings=settings)
    except Exception as exc:
        return exc
    return None
