"""Verify a port against the model: random walks and Hypothesis runs in lockstep, shrinking, traces.

The model is the oracle: every step the port's projected state must equal the model's variables
and its observation the model's prediction (else `divergence`); the reference implementation runs
beside the port on the same actions, and the port must agree with it too (a `divergence` whose
detail names the reference); invariants the port reports on its own state count as violations; a
misbehaving port (crash, hang, garbage, wrong step, flood, error reply) is a failure of its own
kind, `port-<kind>`. Every run starts a fresh port, so a failure reproduces from the actions alone,
which is what lets the shrinker use the port as its oracle.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import HealthCheck, Phase
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings

from models.core import Action, ActionNotEnabled, Json, Model, Observation, Param
from properties.engines.conformance import tour
from properties.engines.explorer import explore
from properties.engines.lockstep import (
    DIVERGENCE,
    Implementation,
    ImplementationFactory,
    Lockstep,
    StepOutcome,
    first_difference,
    same_json,
    to_text,
)
from properties.engines.mechanism import Mechanism
from properties.engines.port import DEFAULT_STEP_TIMEOUT_S, PortError, PortProcess
from properties.engines.replay import record
from properties.engines.shrink import shrink
from properties.engines.stateful import build_state_machine, find_failure
from traces.format import Trace

PORT_PREFIX = "port-"
SEARCH_SHARE = 0.75
"""The share of `verify`'s budget the search may use; shrinking gets the rest, and the budget is a hard limit."""


@dataclass(frozen=True)
class PortSpec:
    """How to start the port for one mechanism, variant and configuration."""

    argv: tuple[str, ...]
    mechanism: Mechanism
    variant: str
    config: Mapping[str, Param]
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    reference: ImplementationFactory | None = None
    """The mechanism's reference implementation, run beside the port when given."""

    def start(self) -> PortProcess:
        return PortProcess(self.argv, self.mechanism, self.variant, self.config, step_timeout_s=self.step_timeout_s)

    def beside_reference(self, port: PortProcess) -> PortProcess | BesideReference:
        """What lockstep drives: the port, with the reference beside it when there is one."""
        if self.reference is None:
            return port
        return BesideReference(port, self.reference(self.config, self.variant))

    @contextmanager
    def running(self) -> Iterator[PortProcess | BesideReference]:
        """A fresh port (beside a fresh reference, if any), stopped with its reference on exit."""
        implementation = self.beside_reference(self.start())
        try:
            yield implementation
        finally:
            implementation.close()


class BesideReference:
    """The port with the reference implementation stepped beside it on the same actions.

    Lockstep compares the port with the model; this adds the comparison with the reference, so a
    port is checked against both halves of the harness's oracle. The first difference is reported
    as a `divergence` the implementation found itself, explained by `disagreement`.
    """

    strict_json = True

    def __init__(self, port: PortProcess, reference: Implementation) -> None:
        self.port = port
        self.reference = reference
        self.disagreement = ""

    def apply(self, action: Action) -> Observation:
        observed = self.port.apply(action)
        expected = self.reference.apply(action)
        both = observed is not None and expected is not None  # None: no observation to compare (as lockstep)
        if not self.disagreement and both and not same_json(expected, observed):
            self.disagreement = f"observation: reference {to_text(expected)} != port {to_text(observed)}"
        return observed

    def vars(self) -> dict[str, Json]:
        return self.port.vars()

    def violations(self) -> list[str]:
        if not self.disagreement:
            difference = first_difference(self.reference.vars(), self.port.vars(), ("reference", "port"))
            self.disagreement = f"state {difference}" if difference else ""
        return [*self.port.violations(), *([DIVERGENCE] if self.disagreement else [])]

    def close(self) -> None:
        """Stop the port, and whatever the reference runs in the background."""
        self.port.close()
        close = getattr(self.reference, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class Failure:
    """A failing run: the actions up to and including the failing one, and what failed."""

    actions: tuple[Action, ...]
    target: str
    detail: str
    engine: str


@dataclass(frozen=True)
class Verdict:
    """What `verify` found: the (shrunk) failure, if any, the port set-up it failed on, and how much it ran."""

    failure: Failure | None
    spec: PortSpec
    runs: int
    steps: int
    elapsed_s: float


def _target(outcome: StepOutcome) -> str | None:
    """An invariant outranks a divergence: it says what is wrong, not just that something differs."""
    names = [f for f in outcome.failures if f != DIVERGENCE]
    if names:
        return names[0]
    return DIVERGENCE if outcome.failures else None


def _port_failure(error: PortError, actions: Sequence[Action], engine: str) -> Failure:
    return Failure(tuple(actions[: error.step]), PORT_PREFIX + error.kind, error.message, engine)


def run_actions(
    make_model: Callable[[], Model[Any]], spec: PortSpec, actions: Sequence[Action], engine: str = "replay"
) -> Failure | None:
    """Run `actions` on a fresh port next to the model; the first failure, None if all pass or an
    action is not enabled (a shrink candidate that does not fit the model)."""
    try:
        with spec.running() as implementation:
            lockstep = Lockstep(make_model(), implementation)
            target = _target(lockstep.initial_outcome())
            if target is not None:
                return Failure((), target, lockstep.initial_outcome().detail, engine)
            for index, action in enumerate(actions, start=1):
                outcome = lockstep.apply(action)
                target = _target(outcome)
                if target is not None:
                    return Failure(tuple(actions[:index]), target, outcome.detail, engine)
    except PortError as error:
        return _port_failure(error, actions, engine)
    except ActionNotEnabled:
        return None
    return None


def explorer_paths(model: Model[Any], max_states: int) -> Iterator[tuple[Action, ...]]:
    """Walks that together take every transition of the explored graph (`properties.engines.conformance.tour`).

    Every edge, not only every state: a wrong observation on one edge hides behind another path to
    the same target state.
    """
    result = explore(model, max_states=max_states, check_liveness=False, check_deadlock=False, record_labels=True)
    labels = result.labels
    assert labels is not None
    for walk in tour(result):
        yield tuple(labels[e] for e in walk)


def random_walk(
    make_model: Callable[[], Model[Any]], spec: PortSpec, rng: random.Random, length: int
) -> tuple[Failure | None, int]:
    """One seeded walk over the model's enabled actions on a fresh port; (failure, steps run)."""
    actions: list[Action] = []
    try:
        with spec.running() as implementation:
            lockstep = Lockstep(make_model(), implementation)
            target = _target(lockstep.initial_outcome())
            if target is not None:
                return Failure((), target, lockstep.initial_outcome().detail, "walk"), 0
            for _ in range(length):
                choices = lockstep.model.enabled(lockstep.state)
                if not choices:
                    break
                actions.append(rng.choice(list(choices)))
                outcome = lockstep.apply(actions[-1])
                target = _target(outcome)
                if target is not None:
                    return Failure(tuple(actions), target, outcome.detail, "walk"), len(actions)
    except PortError as error:
        return _port_failure(error, actions, "walk"), len(actions)
    return None, len(actions)


def hypothesis_batch(
    make_model: Callable[[], Model[Any]], spec: PortSpec, seed: int, examples: int, step_count: int
) -> tuple[Failure | None, int, int]:
    """`examples` Hypothesis lockstep runs (no Hypothesis shrinking: the port-oracle shrinker does
    that with fewer restarts); (failure, runs, steps run)."""
    steps = [0]
    runs = [0]
    last: list[tuple[Action, ...]] = [()]
    found: list[Failure] = []

    base = build_state_machine(
        make_model,
        make_model().action_names,
        lambda: spec.beside_reference(spec.start()),
        on_failure=lambda run: found.append(Failure(run.actions, _target_of(run.failures), run.detail, "hypothesis")),
        on_step=lambda _: steps.__setitem__(0, steps[0] + 1),
    )

    class PortMachine(base):  # type: ignore[valid-type,misc]
        def teardown(self) -> None:
            last[0] = tuple(self.actions)
            runs[0] += 1
            implementation = self.lockstep.implementation
            if isinstance(implementation, PortProcess | BesideReference):
                implementation.close()

    settings = Settings(
        max_examples=examples,
        stateful_step_count=step_count,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    error = find_failure(hypothesis_seed(seed)(PortMachine), settings)
    if error is None:
        return None, runs[0], steps[0]
    if isinstance(error, PortError):
        return _port_failure(error, last[0], "hypothesis"), runs[0], steps[0]
    if found:
        return found[-1], runs[0], steps[0]
    return Failure(last[0], "exception", f"{type(error).__name__}: {error}", "hypothesis"), runs[0], steps[0]


def _target_of(failures: Sequence[str]) -> str:
    names = [f for f in failures if f != DIVERGENCE]
    return names[0] if names else DIVERGENCE


def shrink_failure(
    make_model: Callable[[], Model[Any]], spec: PortSpec, failure: Failure, deadline: float | None = None
) -> Failure:
    """Delta-debug the actions with the port as the oracle (a fresh port per attempt), until `deadline`
    (a `time.perf_counter()` value): past it, every further candidate counts as not failing, so the
    smallest run found so far is kept and `verify`'s budget holds, shrinking included."""

    def fails(actions: Sequence[Action]) -> bool:
        if deadline is not None and time.perf_counter() > deadline:
            return False
        found = run_actions(make_model, spec, actions)
        return found is not None and found.target == failure.target

    try:
        actions = shrink(failure.actions, fails, model=make_model())
    except ValueError:
        return failure  # not reproducible from a fresh start (a flaky port), or no time left: keep it as found
    again = run_actions(make_model, spec, actions)
    detail = again.detail if again is not None else failure.detail
    return Failure(actions, failure.target, detail, failure.engine)


def verify(
    make_model: Callable[[], Model[Any]],
    spec: PortSpec,
    *,
    budget_s: float,
    seed: int = 0,
    walk_length: int = 40,
    explorer: tuple[Callable[[], Model[Any]], PortSpec] | None = None,
    max_states: int = 2000,
    progress: Callable[[str], None] | None = None,
) -> Verdict:
    """Until a failure: the explorer's tour of every transition (on `explorer`'s configuration, if given)
    for a third of the budget, random walks until half of it, Hypothesis batches until `SEARCH_SHARE` of
    it; then shrink within what is left. A run that has started finishes, so the budget can be passed
    by at most one run (a step timeout per step)."""
    started = time.perf_counter()
    rng = random.Random(seed)
    runs = steps = 0
    failure: Failure | None = None
    used = (make_model, spec)

    def left(fraction: float) -> bool:
        return failure is None and time.perf_counter() - started < budget_s * fraction

    if explorer is not None:
        for path in explorer_paths(explorer[0](), max_states):
            failure = run_actions(*explorer, path, engine="explorer")
            runs, steps = runs + 1, steps + len(path)
            used = explorer
            if not left(1 / 3):
                break
    if failure is None:
        used = (make_model, spec)
        walks = 0
        while walks == 0 or left(1 / 2):  # at least one walk: a verdict must rest on a run
            failure, n = random_walk(make_model, spec, rng, walk_length)
            runs, steps, walks = runs + 1, steps + n, walks + 1
    batch = 0
    while left(SEARCH_SHARE):
        failure, r, n = hypothesis_batch(make_model, spec, seed + batch, examples=5, step_count=walk_length)
        runs, steps, batch = runs + r, steps + n, batch + 1
    if failure is not None:
        if progress is not None:
            progress(f"  {failure.target} after {len(failure.actions)} steps ({failure.engine}); shrinking on the port")
        failure = shrink_failure(*used, failure, deadline=started + budget_s)
    return Verdict(failure, used[1], runs, steps, time.perf_counter() - started)


def record_on_port(model: Model[Any], spec: PortSpec, failure: Failure) -> Trace:
    """The failing run as a trace with the port's states.

    A misbehaving port (exit 4) has no state at its failing step, so that trace is the model's run
    of every action up to and including the failing one, with the port's failure at that step:
    `replay --port` sends the same actions and meets the same failure there.
    """
    try:
        with spec.running() as implementation:
            return record(model, failure.actions, engine="port", implementation=implementation)
    except PortError as error:
        trace = record(model, failure.actions, engine="port")
        return replace(trace, failure={"step": error.step, "names": [PORT_PREFIX + error.kind],
                                       "detail": error.message})
