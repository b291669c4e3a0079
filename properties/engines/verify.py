"""Verify a port against the model: the conformance tour, random walks and Hypothesis runs in lockstep,
shrinking, traces.

The model is the oracle: every step the port's projected state must equal the model's variables
and its observation the model's prediction (else `divergence`); the reference implementation runs
beside the port on the random and Hypothesis runs, and the port must agree with it too (a
`divergence` whose detail names the reference); invariants the port reports on its own state count
as violations; a misbehaving port (crash, hang, garbage, wrong step, flood, error reply) is a
failure of its own kind, `port-<kind>`.

First comes the tour: every transition of each explorer configuration of the port's scope
(`properties.engines.conformance.tour`), replayed from the explored graph, so the model's side of a
step is a table lookup and the port sets the pace. A port that announces `reset` serves every walk of
one verify in one process; the others get a fresh process per walk. Replaying and shrinking always
start a fresh port, so a failure reproduces from the actions alone (and a failure that does not is
named as one a reset left behind). The budget is a hard limit on all of it: every wait for the port
ends at the deadline.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, Phase
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings

from models.core import Action, ActionNotEnabled, Json, Model, Observation, Param, violated
from properties.engines.conformance import NOT_EXECUTABLE, tour
from properties.engines.explorer import Exploration, explore
from properties.engines.lockstep import (
    DIVERGENCE,
    BaseImplementation,
    Implementation,
    ImplementationFactory,
    Lockstep,
    StepOutcome,
    as_json,
    first_difference,
    same_json,
    to_text,
)
from properties.engines.mechanism import Mechanism
from properties.engines.port import (
    DEFAULT_STEP_TIMEOUT_S,
    PIPELINE_WINDOW,
    RESET,
    OutOfTime,
    PortError,
    PortProcess,
    jsonable,
)
from properties.engines.replay import record
from properties.engines.result import CheckResult, Target
from properties.engines.shrink import shrink
from properties.engines.stateful import build_state_machine, find_failure
from traces.format import Trace

PORT_PREFIX = "port-"
SEARCH_SHARE = 0.75
"""The share of `verify`'s budget the search may use; shrinking and the trace get the rest, and the budget is
a hard limit."""
TOUR_MAX_STEPS = 150_000
"""Replayed steps per explorer configuration, as `check`'s conformance spends (the shallowest transitions
first where a tour is longer)."""


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
    deadline: float | None = None
    """A `time.monotonic()` value no wait for the port outlasts (`OutOfTime`)."""

    def start(self) -> PortProcess:
        """A fresh port; none once the deadline has passed (`OutOfTime`): the budget holds however many runs ask."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise OutOfTime("the budget ran out before a port could be started")
        return PortProcess(self.argv, self.mechanism, self.variant, self.config, step_timeout_s=self.step_timeout_s,
                           deadline=self.deadline)

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


class BesideReference(BaseImplementation):
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
        self.close_reference()

    def close_reference(self) -> None:
        self.reference.close()


def _port_of(implementation: PortProcess | BesideReference) -> PortProcess:
    return implementation.port if isinstance(implementation, BesideReference) else implementation


@dataclass(frozen=True)
class Failure:
    """A failing run: the actions up to and including the failing one, and what failed."""

    actions: tuple[Action, ...]
    target: str
    detail: str
    engine: str
    at_reset: bool = False
    """The failure is the reset's after the last action (it hung, crashed, or left state behind), not a step's."""
    out_of_time: bool = False
    """A wait the budget cut short (`OutOfTime`), not the port's own step timeout: no verdict on the port once
    it has answered anything (`verify`)."""

    @property
    def where(self) -> str:
        """Where it failed, as the command lines print it: `step N`, or `the reset after step N`."""
        return f"the reset after step {len(self.actions)}" if self.at_reset else f"step {len(self.actions)}"


@dataclass(frozen=True)
class TourPart:
    """How much of one explorer configuration's tour the port ran."""

    config: str
    covered: int
    transitions: int
    walks: int
    steps: int
    elapsed_s: float
    refused: str = ""
    """The port's hello refusal of this configuration (a scope option it does not implement): not toured."""
    bounds: str = ""
    """Where the graph or the tour was cut (`max_states`, `max_steps`); empty when the tour is every transition."""

    def line(self) -> str:
        if self.refused:
            return f"{self.config}: refused by the port ({self.refused})"
        rate = self.steps / self.elapsed_s if self.elapsed_s > 0 else 0.0
        bounds = f" ({self.bounds})" if self.bounds else ""
        return (f"{self.config}: {self.covered} / {self.transitions} transitions covered{bounds}, {self.walks} walks, "
                f"{self.steps} steps, {self.elapsed_s:.1f}s, {rate:,.0f} steps/s")


@dataclass(frozen=True)
class Verdict:
    """What `verify` found: the (shrunk) failure, if any, the port set-up it failed on, and how much it ran."""

    failure: Failure | None
    spec: PortSpec
    runs: int
    steps: int
    elapsed_s: float
    tour: tuple[TourPart, ...] = ()
    processes: int = 0
    """Port processes started: one per walk without `reset`, one (plus one per failure) with it."""
    trace: Trace | None = None
    """The failure as a trace with the port's states, recorded within the budget."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    cut: str = ""
    """Where the budget ended a wait for a port that had answered before: no failure, an unfinished verify."""

    def result(self, config: str, trace: str | None = None) -> CheckResult:
        """The verdict as every checker reports it: on the configuration named `config`, with the path `trace`
        was saved to; its detail is the line `brokerspec verify` prints."""
        covered = sum(p.covered for p in self.tour)
        transitions = sum(p.transitions for p in self.tour if not p.refused)
        work = {"runs": self.runs, "steps": self.steps, "processes": self.processes, "covered": covered,
                "transitions": transitions}
        found = self.failure
        if found is None:
            unfinished = "" if covered == transitions else (
                f" (the tour covered {covered} of {transitions} transitions: raise --budget)")
            unfinished += f"; {self.cut}: raise --budget" if self.cut else ""
            detail = (f"port agrees with the model and the reference: {self.runs} runs, {self.steps} steps, "
                      f"{self.elapsed_s:.1f}s, {self.processes} port processes{unfinished}")
        else:
            detail = (f"{found.target} at {found.where} (found by {found.engine}, shrunk on the port, "
                      f"{self.elapsed_s:.1f}s): {found.detail}")
        return CheckResult(self.spec.mechanism.name, "verify", config, self.spec.variant,
                           failures=(found.target,) if found is not None else (),
                           target=Target(found.target, len(found.actions), trace) if found is not None else None,
                           work=work, complete=covered == transitions and not self.cut, seconds=self.elapsed_s,
                           detail=detail)


def _target(outcome: StepOutcome) -> str | None:
    """An invariant outranks a divergence: it says what is wrong, not just that something differs."""
    names = [f for f in outcome.failures if f != DIVERGENCE]
    if names:
        return names[0]
    return DIVERGENCE if outcome.failures else None


def _port_failure(error: PortError, actions: Sequence[Action], engine: str) -> Failure:
    return Failure(tuple(actions[: error.steps]), PORT_PREFIX + error.kind, error.message, engine, error.at_reset)


def _out_of_time(error: OutOfTime, actions: Sequence[Action], engine: str) -> Failure:
    """A reply still awaited when the budget ended: a hang only if the port has answered nothing at all in this
    verify (`verify` drops it otherwise: a slow port on a loaded machine is no failing one)."""
    return Failure(tuple(actions), PORT_PREFIX + "hang", f"no reply before the budget ran out ({error})", engine,
                   error.at_reset, out_of_time=True)


def closing_reset(port: PortProcess, initial: Mapping[str, Json]) -> str:
    """Reset a port that announced `reset` after a passing walk; what is wrong with the state it comes back
    in ("" when it is the initial one). Part of the walk: a reset that leaves state behind is its failure."""
    back = port.reset()
    if same_json(initial, back):
        return ""
    return "reset: state " + first_difference(initial, back, ("initial", "port"))


class PortPool:
    """At most one idle port, reset and checked: what lets one process serve many walks. Every port it
    started and did not get back is stopped by `close`, whatever the run that took it did with it."""

    def __init__(self, spec: PortSpec) -> None:
        self.spec = spec
        self.idle: PortProcess | None = None
        self.lent: list[PortProcess] = []
        self.started = 0

    def take(self) -> PortProcess:
        if self.idle is not None:
            port, self.idle = self.idle, None
        else:
            self.started += 1  # a port that fails its hello was started
            try:
                port = self.spec.start()
            except OutOfTime:
                self.started -= 1  # past the deadline: none was
                raise
        self.lent = [p for p in self.lent if not p.closed]  # those a failed run stopped itself
        self.lent.append(port)
        return port

    def keep(self, port: PortProcess) -> None:
        """Keep a port whose walk passed and whose reset was checked; others are stopped."""
        self.lent = [p for p in self.lent if p is not port]
        if port.healthy and port.resets and self.idle is None:
            self.idle = port
        else:
            port.close()

    def close(self) -> None:
        for port in [*self.lent, *([self.idle] if self.idle is not None else [])]:
            port.close()
        self.lent, self.idle = [], None


def run_actions(
    make_model: Callable[[], Model[Any]], spec: PortSpec, actions: Sequence[Action], engine: str = "replay"
) -> Failure | None:
    """Run `actions` on a fresh port next to the model, then its reset if it announces one (as every walk of
    `verify` ends: a failure the reset shows reproduces too); the first failure, None if all pass or an action
    is not enabled (a shrink candidate that does not fit the model). A pipelining port is sent the actions
    ahead as the tour sends a walk's (`PortProcess.plan`), so its failures read as they do there."""
    try:
        with spec.running() as implementation:
            _port_of(implementation).plan(actions)
            lockstep = Lockstep(make_model(), implementation)
            target = _target(lockstep.initial_outcome())
            if target is not None:
                return Failure((), target, lockstep.initial_outcome().detail, engine)
            for index, action in enumerate(actions, start=1):
                outcome = lockstep.apply(action)
                target = _target(outcome)
                if target is not None:
                    return Failure(tuple(actions[:index]), target, outcome.detail, engine)
            port = _port_of(implementation)
            if port.resets:
                model = lockstep.model
                wrong = closing_reset(port, model.vars(model.initial()))
                if wrong:
                    return Failure(tuple(actions), DIVERGENCE, wrong, engine, at_reset=True)
    except PortError as error:
        return _port_failure(error, actions, engine)
    except ActionNotEnabled:
        return None
    return None


# -- the tour ----------------------------------------------------------------------------------------


def _canonical(value: object) -> str:
    """JSON text that two values share exactly when they are equal strictly as JSON (`1` is not `true`,
    `1` is not `1.0`), whatever their objects' key order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass
class _Tour:
    """One explorer configuration's tour, with the model's side of each step worked out once per (state,
    transition): the walks' prefixes repeat, and their steps are then lookups.

    The model is stepped for real along each walk: an explored state stands for every state of its key
    (a model may abstract a clock away), so its vars are not the walk's."""

    model: Model[Any]
    exploration: Exploration[Any]
    labels: list[Action]
    walks: list[tuple[int, ...]]
    bounds: str
    steps: dict[tuple[Any, int], tuple[Any, Observation, str | None]] = field(default_factory=dict)
    seen: dict[Any, tuple[str, list[str]]] = field(default_factory=dict)
    texts: dict[int, bytes] = field(default_factory=dict)
    cached: bool = True
    """False once a state turns out unhashable: every step is then the model's."""

    @classmethod
    def of(cls, model: Model[Any], max_states: int, max_steps: int) -> _Tour:
        """The tour's walks, shallowest transitions first, up to `max_steps` steps."""
        result = explore(model, max_states=max_states, check_liveness=False, check_deadlock=False, record_labels=True)
        assert result.labels is not None
        walks, steps, cut = [], 0, False
        for walk in tour(result, model):
            if steps + len(walk) > max_steps:
                cut = True
                break
            walks.append(walk)
            steps += len(walk)
        bounds = [] if result.complete else [f"the graph's first {max_states:,} states"]
        bounds += [f"the tour's first {steps:,} steps"] if cut else []
        return cls(model, result, result.labels, walks, " and ".join(bounds))

    def step(self, state: Any, edge: int) -> tuple[Any, Observation, str | None]:
        """The state after `edge`'s action from `state`, its observation and the observation's canonical text."""
        if self.cached:
            try:
                return self.steps[(state, edge)]
            except KeyError:
                pass
            except TypeError:
                self.cached = False
        after, observation = self.model.step(state, self.labels[edge])
        found = (after, observation, None if observation is None else _canonical(as_json(observation)))
        if self.cached:
            self.steps[(state, edge)] = found
        return found

    def line(self, seq: int, edge: int) -> bytes:
        """The step message of `edge` at `seq`: its action's text is made once."""
        text = self.texts.get(edge)
        if text is None:
            action = self.labels[edge]
            params = json.dumps({k: jsonable(v) for k, v in action.params})
            text = self.texts[edge] = f', "action": {json.dumps(action.name)}, "params": {params}}}\n'.encode()
        return b'{"type": "step", "seq": ' + str(seq).encode() + text

    def judge(self, state: Any) -> tuple[str, list[str]]:
        """`state`'s vars as canonical text, and the invariants the model breaks there."""
        if self.cached:
            try:
                return self.seen[state]
            except KeyError:
                pass
            except TypeError:
                self.cached = False
        found = (_canonical(as_json(self.model.vars(state))), violated(self.model, state))
        if self.cached:
            self.seen[state] = found
        return found


def _tour_walk(tour_: _Tour, walk: tuple[int, ...], port: PortProcess) -> Failure | None:
    """Run one walk of the tour on `port` (at its initial state), then its reset: the first failure.

    A pipelining port gets the steps (and the reset, when they all fit) in as few writes as the window
    allows: every write wakes the port, and on a loaded machine a wake-up costs more than a step."""
    model, labels = tour_.model, tour_.labels
    state = model.initial()
    if _canonical(port.vars()) != tour_.judge(state)[0]:
        return Failure((), DIVERGENCE, "state " + first_difference(model.vars(state), port.vars()), "tour")
    ahead = PIPELINE_WINDOW if port.pipelines else 1
    sent = 0
    reset_sent = False
    for index in range(1, len(walk) + 1):
        if sent < index or (ahead > 1 and sent - index < ahead // 2 and sent < len(walk)):
            end = min(len(walk), index - 1 + ahead)
            lines = b"".join(tour_.line(seq, walk[seq - 1]) for seq in range(sent + 1, end + 1))
            reset_sent = ahead > 1 and end == len(walk) and port.resets
            port.send(lines + RESET if reset_sent else lines)
            sent = end
        observed = port.take_reply(index, labels[walk[index - 1]])
        try:
            state, expected, expected_text = tour_.step(state, walk[index - 1])
        except ActionNotEnabled as error:  # the tour is executable by construction: a defect of the harness
            return Failure(tuple(labels[e] for e in walk[:index]), NOT_EXECUTABLE,
                           f"harness defect: the tour's step {index} cannot be taken on the model ({error})", "tour")
        text, names = tour_.judge(state)
        names = [*names, *port.violations()]
        detail = ""
        if text != _canonical(port.vars()):
            detail = "state " + first_difference(model.vars(state), port.vars())
        elif expected_text is not None and (observed is None or _canonical(observed) != expected_text):
            detail = f"observation: model {to_text(expected)} != implementation {to_text(observed)}"
        if detail or names:
            named = [n for n in names if n != DIVERGENCE]
            return Failure(tuple(labels[e] for e in walk[:index]), named[0] if named else DIVERGENCE, detail, "tour")
    if port.resets:
        back = port.reset(sent=reset_sent)
        initial = model.vars(model.initial())
        if not same_json(initial, back):
            return Failure(tuple(labels[e] for e in walk), DIVERGENCE,
                           "reset: state " + first_difference(initial, back, ("initial", "port")), "tour")
    return None


def tour_on_port(
    name: str, make_model: Callable[[], Model[Any]], spec: PortSpec, pool: PortPool, *, stop_at: float,
    max_states: int = 2000, max_steps: int = TOUR_MAX_STEPS,
) -> tuple[TourPart, Failure | None]:
    """Every transition of the explored graph of `make_model()` on the port (`spec`'s configuration is the
    model's), until a failure or the monotonic time `stop_at`; the coverage and the failure."""
    started = time.perf_counter()
    tour_ = _Tour.of(make_model(), max_states, max_steps)
    covered = bytearray(len(tour_.labels))
    walks = steps = 0
    failure: Failure | None = None
    for walk in tour_.walks:
        if time.monotonic() >= stop_at:
            break
        port: PortProcess | None = None
        try:
            port = pool.take()
            failure = _tour_walk(tour_, walk, port)
        except PortError as error:
            if error.step == 0 and error.kind == "error" and walks == 0 and port is None:
                return TourPart(name, 0, len(tour_.labels), 0, 0, time.perf_counter() - started,
                                refused=error.message, bounds=tour_.bounds), None
            failure = _port_failure(error, [tour_.labels[e] for e in walk], "tour")
        except OutOfTime as error:
            sent = port.seq if port is not None else 0
            failure = _out_of_time(error, [tour_.labels[e] for e in walk[:sent]], "tour")
        walks += 1
        steps += len(failure.actions) if failure is not None else len(walk)
        if failure is not None:
            if port is not None:
                port.close()
            if not failure.target.startswith(PORT_PREFIX) and 0 < len(failure.actions) <= len(walk):
                failure = _shortest(tour_, make_model, spec, walk[len(failure.actions) - 1], failure)
            break
        assert port is not None
        pool.keep(port)
        for e in walk:
            covered[e] = 1
    part = TourPart(name, sum(covered), len(tour_.labels), walks, steps, time.perf_counter() - started,
                    bounds=tour_.bounds)
    return part, failure


def _shortest(tour_: _Tour, make_model: Callable[[], Model[Any]], spec: PortSpec, edge: int,
              failure: Failure) -> Failure:
    """The failing transition at the end of the shortest path to its source, when it fails there alike (as
    the conformance engine does): a shorter run for the shrinker to start from, on a fresh port."""
    exploration = tour_.exploration
    candidate = (*exploration.path_to(exploration.edges[0][edge]), tour_.labels[edge])
    if len(candidate) >= len(failure.actions):
        return failure
    try:
        again = run_actions(make_model, spec, candidate, "tour")
    except OutOfTime:
        return failure
    return again if again is not None and again.target == failure.target else failure


# -- random walks and Hypothesis ---------------------------------------------------------------------


def random_walk(
    make_model: Callable[[], Model[Any]], spec: PortSpec, rng: random.Random, length: int, pool: PortPool,
) -> tuple[Failure | None, int]:
    """One seeded walk over the model's enabled actions on a port from `pool`; (failure, steps run)."""
    actions: list[Action] = []
    port: PortProcess | None = None
    try:
        port = pool.take()
        implementation = spec.beside_reference(port)
        lockstep = Lockstep(make_model(), implementation)
        target = _target(lockstep.initial_outcome())
        if target is not None:
            port.close()
            return Failure((), target, lockstep.initial_outcome().detail, "walk"), 0
        for _ in range(length):
            choices = lockstep.model.enabled(lockstep.state)
            if not choices:
                break
            actions.append(rng.choice(list(choices)))
            outcome = lockstep.apply(actions[-1])
            target = _target(outcome)
            if target is not None:
                port.close()
                return Failure(tuple(actions), target, outcome.detail, "walk"), len(actions)
        if isinstance(implementation, BesideReference):
            implementation.close_reference()
        if port.resets:
            model = lockstep.model
            wrong = closing_reset(port, model.vars(model.initial()))
            if wrong:
                port.close()
                return Failure(tuple(actions), DIVERGENCE, wrong, "walk", at_reset=True), len(actions)
        pool.keep(port)
    except PortError as error:
        if port is not None:
            port.close()
        return _port_failure(error, actions, "walk"), len(actions)
    except OutOfTime as error:
        if port is not None:
            port.close()
        return _out_of_time(error, actions, "walk"), len(actions)
    return None, len(actions)


def hypothesis_batch(
    make_model: Callable[[], Model[Any]], spec: PortSpec, seed: int, examples: int, step_count: int, pool: PortPool,
) -> tuple[Failure | None, int, int]:
    """`examples` Hypothesis lockstep runs on ports from `pool` (no Hypothesis shrinking: the port-oracle
    shrinker does that with fewer restarts); (failure, runs, steps run)."""
    steps = [0]
    runs = [0]
    last: list[tuple[Action, ...]] = [()]
    found: list[Failure] = []

    base = build_state_machine(
        make_model,
        make_model().action_names,
        lambda: spec.beside_reference(pool.take()),
        on_failure=lambda run: found.append(Failure(run.actions, _target_of(run.failures), run.detail, "hypothesis")),
        on_step=lambda _: steps.__setitem__(0, steps[0] + 1),
    )

    class PortMachine(base):  # type: ignore[valid-type,misc]
        def teardown(self) -> None:
            last[0] = tuple(self.actions)
            runs[0] += 1
            implementation = self.lockstep.implementation
            if not isinstance(implementation, PortProcess | BesideReference):
                return
            port = _port_of(implementation)
            if isinstance(implementation, BesideReference):
                implementation.close_reference()
            if not port.healthy or self._failed:
                port.close()
                return
            if port.resets:
                model = self.lockstep.model
                wrong = closing_reset(port, model.vars(model.initial()))
                if wrong:
                    port.close()
                    found.append(Failure(last[0], DIVERGENCE, wrong, "hypothesis", at_reset=True))
                    raise AssertionError(wrong)
            pool.keep(port)

        _failed = False

        def _check(self, failures: Sequence[str], detail: str) -> None:
            if failures:
                self._failed = True
            super()._check(failures, detail)

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
    if isinstance(error, OutOfTime):
        return _out_of_time(error, last[0], "hypothesis"), runs[0], steps[0]
    if found:
        return found[-1], runs[0], steps[0]
    return Failure(last[0], "exception", f"{type(error).__name__}: {error}", "hypothesis"), runs[0], steps[0]


def _target_of(failures: Sequence[str]) -> str:
    names = [f for f in failures if f != DIVERGENCE]
    return names[0] if names else DIVERGENCE


# -- shrinking and the verdict -----------------------------------------------------------------------


def _fits(model: Model[Any], actions: Sequence[Action]) -> bool:
    """Whether the model takes `actions` from its initial state: a candidate it does not is no failure, and
    costs no port process (most of the shrinker's candidates drop a step a later one needs)."""
    state = model.initial()
    try:
        for action in actions:
            state, _ = model.step(state, action)
    except ActionNotEnabled:
        return False
    return True


def shrink_failure(make_model: Callable[[], Model[Any]], spec: PortSpec, failure: Failure) -> Failure | None:
    """Delta-debug the actions with the port as the oracle (a fresh port per attempt) until `spec`'s deadline:
    past it, every further candidate counts as not failing, so the smallest run found so far is kept and
    the budget holds, shrinking included. None when the failure does not reproduce on a fresh port."""
    seen: dict[tuple[Action, ...], Failure | None] = {}
    timed_out = [False]

    def run(actions: Sequence[Action]) -> Failure | None:
        key = tuple(actions)
        if key not in seen:
            try:
                if spec.deadline is not None and time.monotonic() >= spec.deadline:
                    raise OutOfTime("the budget ran out")  # the model's side of shrinking is bounded too
                fits = not timed_out[0] and _fits(make_model(), actions)
                seen[key] = run_actions(make_model, spec, actions) if fits else None
            except OutOfTime:
                timed_out[0] = True
                seen[key] = None
        return seen[key]

    def fails(actions: Sequence[Action]) -> bool:
        found = run(actions)
        return found is not None and found.target == failure.target

    try:
        actions = shrink(failure.actions, fails, model=make_model())
    except ValueError:
        return failure if timed_out[0] else None  # no time to tell, or it does not reproduce from a fresh start
    again = seen.get(actions)
    detail = again.detail if again is not None else failure.detail
    return Failure(actions, failure.target, detail, failure.engine, again.at_reset if again else failure.at_reset)


@dataclass
class _Search:
    """The running totals of one verify."""

    runs: int = 0
    steps: int = 0
    failure: Failure | None = None
    used: tuple[Callable[[], Model[Any]], PortSpec] | None = None


def verify(
    make_model: Callable[[], Model[Any]],
    spec: PortSpec,
    *,
    budget_s: float,
    seed: int = 0,
    walk_length: int = 40,
    tours: Sequence[tuple[str, Callable[[], Model[Any]], PortSpec]] = (),
    tour_only: bool = False,
    max_states: int = 2000,
    progress: Callable[[str], None] | None = None,
) -> Verdict:
    """Until a failure: the tour of every transition of each of `tours` (name, model, port set-up), then
    (unless `tour_only`) random walks until half the search time left and Hypothesis batches until
    `SEARCH_SHARE` of the budget; then shrink and record the trace within what is left. The budget is a
    hard limit: every wait for the port ends at its deadline, no port starts after it, and a wait it cuts is the
    port's failure (`port-hang`) only when the port had answered nothing before."""
    started = time.perf_counter()
    deadline = time.monotonic() + budget_s
    search_end = time.monotonic() + budget_s * SEARCH_SHARE
    spec = replace(spec, deadline=deadline)
    rng = random.Random(seed)
    search = _Search(used=(make_model, spec))
    parts: list[TourPart] = []
    processes = 0
    notes: list[str] = []

    for name, make_tour_model, tour_spec in tours:
        tour_spec = replace(tour_spec, deadline=deadline)
        pool = PortPool(tour_spec)
        try:
            part, search.failure = tour_on_port(name, make_tour_model, tour_spec, pool, stop_at=search_end,
                                                max_states=max_states)
        finally:
            pool.close()
        processes += pool.started
        parts.append(part)
        search.runs, search.steps = search.runs + part.walks, search.steps + part.steps
        if progress is not None:
            progress(f"  tour {part.line()}")
        if search.failure is not None:
            search.used = (make_tour_model, tour_spec)
            break
        if time.monotonic() >= search_end:
            break

    if search.failure is None and not tour_only:
        pool = PortPool(spec)
        walk_end = time.monotonic() + (search_end - time.monotonic()) / 2
        try:
            walks = 0
            while search.failure is None and (walks == 0 or time.monotonic() < walk_end):  # a verdict rests on a run
                search.failure, n = random_walk(make_model, spec, rng, walk_length, pool)
                search.runs, search.steps, walks = search.runs + 1, search.steps + n, walks + 1
            batch = 0
            while search.failure is None and time.monotonic() < search_end:
                search.failure, r, n = hypothesis_batch(make_model, spec, seed + batch, 5, walk_length, pool)
                search.runs, search.steps, batch = search.runs + r, search.steps + n, batch + 1
        finally:
            pool.close()
        processes += pool.started

    failure = search.failure
    cut = ""
    if failure is not None and failure.out_of_time and search.steps > (1 if failure.actions else 0):
        cut = f"the budget ran out while {failure.where} of a {failure.engine} run waited for the port"
        failure = None  # the port answered before: the budget, not the port, ended the wait
    trace: Trace | None = None
    if failure is not None:
        assert search.used is not None
        model_of, used_spec = search.used
        if progress is not None:
            progress(f"  {failure.target} after {len(failure.actions)} steps ({failure.engine}); shrinking on the port")
        shrunk = shrink_failure(model_of, used_spec, failure)
        if shrunk is None:
            notes.append("the failure does not reproduce on a fresh port: the port's reset leaves state behind "
                         "(or the port is not deterministic); the trace is the run as found")
        else:
            failure = shrunk
        trace = record_on_port(model_of(), used_spec, failure)
        search.used = (model_of, used_spec)
    assert search.used is not None
    return Verdict(failure, search.used[1], search.runs, search.steps, time.perf_counter() - started, tuple(parts),
                   processes, trace, tuple(notes), cut)


def record_on_port(model: Model[Any], spec: PortSpec, failure: Failure) -> Trace:
    """The failing run as a trace with the port's states.

    A misbehaving port (exit 4) has no state at its failing step, so that trace is the model's run
    of every action up to and including the failing one, with the port's failure at that step:
    `replay --port` sends the same actions and meets the same failure there. So is a run the port cannot
    replay before `spec`'s deadline, or one whose failure shows only after it (a reset's).
    """
    if not failure.target.startswith(PORT_PREFIX) and (spec.deadline is None or time.monotonic() < spec.deadline):
        try:
            with spec.running() as implementation:
                trace = record(model, failure.actions, engine="port", implementation=implementation)
            if trace.failure:
                return trace
        except (PortError, OutOfTime, ActionNotEnabled):
            pass
    trace = record(model, failure.actions, engine="port")
    detail = f"{failure.where}: {failure.detail}" if failure.at_reset else failure.detail  # the trace says so too
    return replace(trace, failure={"step": len(failure.actions), "names": [failure.target], "detail": detail})
