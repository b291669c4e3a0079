"""Record runs as traces, and replay traces against the model or the reference implementation.

Recording and replaying share `properties.engines.lockstep`, so a trace replays to exactly the failure it
recorded. A replay re-checks that every action is enabled where it is taken and that every state
matches the recorded variables: a trace that no longer fits the code is an input error naming the
step, never a silent pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.core import Action, ActionNotEnabled, Json, Model
from properties.engines.lockstep import DIVERGENCE, Implementation, Lockstep, StepOutcome, same_json, to_text
from properties.engines.mechanism import Mechanism
from traces.format import INIT, Trace, TraceError, TraceStep, normalise
from traces.limits import config_problem


@dataclass(frozen=True)
class ReplayResult:
    """Where the replay first failed (`step` is None when it did not) and how."""

    steps: int
    step: int | None
    failures: tuple[str, ...]
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.step is None


STUCK_KINDS = ("deadlock", "liveness")
"""Findings judged on the last state of a trace rather than by an invariant at some step."""
SEARCH_LIMIT = 200_000
"""States searched from the last state of a liveness trace before the judgement is called inconclusive."""


def stuck_detail(model: Model[Any], state: Any, kind: str, name: str) -> str | None:
    """Why `state` is stuck as a `kind` finding called `name`, or None when it is not.

    A deadlock has no enabled action (and is no accepted terminal state); a liveness failure reaches
    no good state of the property `name` by any path, which a search from `state` decides.
    """
    if kind == "deadlock":
        terminal_ok = model.terminal_ok
        if model.enabled(state) or (terminal_ok is not None and terminal_ok(state)):
            return None
        return "no action is enabled"
    prop = next((p for p in model.liveness if p.name == name), None)
    if prop is None:
        raise TraceError(f"{model.mechanism} has no liveness property {name!r} in this configuration")
    seen = {model.key(state)}
    frontier = [state]
    while frontier:
        if len(seen) > SEARCH_LIMIT:
            raise TraceError(f"{name}: more than {SEARCH_LIMIT} states reachable from the last state; inconclusive")
        nxt = []
        for s in frontier:
            if prop.good(s):
                return None
            for action in model.enabled(s):
                successor, _ = model.step(s, action)
                if (key := model.key(successor)) not in seen:
                    seen.add(key)
                    nxt.append(successor)
        frontier = nxt
    return f"none of the {len(seen)} states reachable from here is good: {prop.description}"


def _init_step(outcome: StepOutcome) -> TraceStep:
    return TraceStep(Action(INIT), outcome.vars, outcome.observation, outcome.failures)


def record(
    model: Model[Any],
    actions: Sequence[Action],
    *,
    engine: str,
    seed: int | None = None,
    implementation: Implementation | None = None,
    stop_at_failure: bool = True,
    stuck: tuple[str, str] | None = None,
    target: str | None = None,
) -> Trace:
    """Execute `actions` (in lockstep with `implementation` if given) and keep every state.

    `stuck` = (kind, name) records a deadlock or liveness finding at the last state when no invariant
    failed before it, so that replaying the trace judges that state again. A `target` (the failure a
    check's row names) is the trace's failure where the run reaches it: the recording goes on past earlier
    failures (a divergence the implementation later breaks `target` after), each kept in its step's
    violations, which `replay` then expects on its way.
    """
    lockstep = Lockstep(model, implementation)
    first = lockstep.initial_outcome()
    steps = [_init_step(first)]
    failure: dict[str, Json] = {}
    failed_at: int | None = None
    reached = False  # whether the failure is the one wanted: `target`'s, or any where there is no target
    if first.failures:
        failure, failed_at = {"step": 0, "names": list(first.failures), "detail": first.detail}, 0
        reached = target is None or target in first.failures
    for index, action in enumerate(actions, start=1):
        if failure and stop_at_failure and reached:
            break
        outcome = lockstep.apply(action)
        steps.append(TraceStep(action, outcome.vars, outcome.observation, outcome.failures))
        if outcome.failures and (not failure or (target in outcome.failures and not reached)):
            failure, failed_at = {"step": index, "names": list(outcome.failures), "detail": outcome.detail}, index
            reached = target is None or target in outcome.failures
    if failed_at is not None and not reached and stop_at_failure:
        steps = steps[: failed_at + 1]  # `target` never broken: the trace stops where the run first failed
    if stuck is not None and not failure:
        kind, name = stuck
        detail = stuck_detail(model, lockstep.state, kind, name)
        if detail is None:
            raise ValueError(f"the last state of the run is not a {kind} ({name})")
        failure = {"step": len(steps) - 1, "names": [name], "kind": kind, "detail": detail}
    return Trace(
        mechanism=model.mechanism,
        variant=model.variant,
        engine=engine,
        config=dict(model.config),
        steps=tuple(steps),
        seed=seed,
        failure=failure,
    )


def model_for(mechanism: Mechanism, trace: Trace, source: str, variant: str | None = None) -> Model[Any]:
    """The model the trace was recorded on (or `variant` of it); a `TraceError` if it does not exist, or if the
    configuration is beyond the mechanism's `limits` (it would size a replay past seconds)."""
    problem = config_problem(trace.config, mechanism.limits)
    if problem is not None:
        raise TraceError(f"{source}: #meta.brokerspec.{problem}")
    try:
        return mechanism.make_model(trace.config, variant or trace.variant)
    except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
        raise TraceError(f"{source}: cannot build the {trace.mechanism} model: {exc}") from None


def validate(
    mechanism: Mechanism, trace: Trace, source: str, variant: str | None = None, check_vars: bool = True
) -> Model[Any]:
    """The model the trace runs on, once the trace is known to fit it; a one-line `TraceError` otherwise.

    The one check that `replay`, `shrink`, `report` and `promote` share, so whatever one refuses all
    refuse with the same message: the model must build from the recorded configuration, every state
    must record exactly the model's variables (unless `variant` replays the actions on another
    variant, whose variables may differ, or `check_vars` is off: a port's trace records the port's
    states, which the port replay does not compare), every action must be one of the model's, with the
    parameter types the model offers, and enabled where it is taken, and a liveness finding must
    name a property of the model.
    """
    model = model_for(mechanism, trace, source, variant)
    own = check_vars and variant in (None, trace.variant)
    known = set(model.action_names)
    state = model.initial()
    for index, step in enumerate(trace.steps):
        if index > 0:
            action = step.action
            if action.name not in known:
                raise TraceError(f"{source}: step {index}: unknown action {action.name!r} for {trace.mechanism}")
            mistyped = _mistyped(model.enabled(state), action)
            if mistyped is not None:
                raise TraceError(f"{source}: step {index}: {action}: {mistyped}")
            try:
                state, _ = model.step(state, action)
            except ActionNotEnabled as exc:
                raise TraceError(f"{source}: step {index}: {exc}") from None
            except (ValueError, TypeError, KeyError, IndexError, ArithmeticError) as exc:  # parameters it cannot take
                raise TraceError(f"{source}: step {index}: {action}: the model cannot take it: {exc!r}") from None
        if own:
            _check_var_names(model.vars(state), step.vars, f"{source}: step {index}", trace.mechanism)
    kind, names = trace.failure.get("kind"), trace.failure.get("names")
    liveness = {p.name for p in model.liveness}
    if kind == "liveness" and isinstance(names, list) and names and names[0] not in liveness:
        raise TraceError(f"{source}: #meta.brokerspec.failure: {trace.mechanism} has no liveness property "
                         f"{names[0]!r} in this configuration")
    return model


def _check_var_names(model_vars: dict[str, Json], recorded: dict[str, Json], where: str, mechanism: str) -> None:
    """A state that lacks one of the model's variables, or records one the model does not have, is bad input
    (it cannot be compared), not a divergence of the model."""
    missing = sorted(set(model_vars) - set(recorded))
    if missing:
        raise TraceError(f"{where}: missing variable {missing[0]!r} of the {mechanism} model")
    extra = sorted(set(recorded) - set(model_vars))
    if extra:
        raise TraceError(f"{where}: variable {extra[0]!r} is not one of the {mechanism} model's")


def replay(
    mechanism: Mechanism,
    trace: Trace,
    source: str,
    *,
    against: str = "model",
    variant: str | None = None,
    check_vars: bool = True,
) -> ReplayResult:
    """Re-run the trace's actions; raise `TraceError` where the trace does not fit (`validate`), else
    report failures.

    `against` is "model" or "reference"; `variant` replays the same actions on another variant
    (then recorded states are not compared, since they are expected to differ). Each recorded state
    and observation is compared with the replayed one, key by key: a difference is a divergence.
    """
    model = validate(mechanism, trace, source, variant, check_vars)
    implementation: Implementation | None = None
    if against == "reference":
        make = mechanism.for_config(trace.config).make_reference
        if make is None:
            raise TraceError(f"{source}: {trace.mechanism} has no reference implementation to replay against")
        implementation = make(trace.config, variant or trace.variant)
    elif against != "model":
        raise TraceError(f"{source}: cannot replay against {against!r} (model or reference)")
    compare = check_vars and variant in (None, trace.variant)
    lockstep = Lockstep(model, implementation)
    outcome = lockstep.initial_outcome()
    for index, step in enumerate(trace.steps):
        if index > 0:
            outcome = lockstep.apply(step.action)  # `validate` walked the same actions on the same model
        if compare:
            detail = _recorded_difference(step, outcome, "model" if implementation is None else "reference")
            if detail:
                return ReplayResult(len(trace.steps), index, (DIVERGENCE,), detail)
        if outcome.failures:
            if on_the_way(trace, index, outcome.failures):
                continue
            return ReplayResult(len(trace.steps), index, outcome.failures, outcome.detail)
    kind, names = trace.failure.get("kind"), trace.failure.get("names")
    if kind in STUCK_KINDS and isinstance(names, list) and names:
        try:
            why = stuck_detail(model, lockstep.state, str(kind), str(names[0]))
        except TraceError as exc:
            raise TraceError(f"{source}: {exc}") from None
        if why is not None:
            last = len(trace.steps) - 1
            return ReplayResult(len(trace.steps), last, (str(names[0]),), f"{kind}: {why}")
    return ReplayResult(len(trace.steps), None, ())


def on_the_way(trace: Trace, index: int, failures: Sequence[str]) -> bool:
    """Whether `failures` at step `index` are ones the trace recorded there before its own failure (a divergence
    the implementation went on from to break the failure's invariant): expected, so the replay goes on."""
    step = trace.failure.get("step")
    return isinstance(step, int) and index < step and sorted(failures) == sorted(trace.steps[index].violations)


def _recorded_difference(step: TraceStep, outcome: StepOutcome, side: str) -> str:
    """The first variable, then the first observation key, whose recorded value differs from the replayed
    one (strictly, as JSON: a recorded `true` is not a replayed `1`); empty when they all agree."""
    replayed = normalise(outcome.vars)
    if isinstance(replayed, dict):
        for name in sorted(set(replayed) | set(step.vars)):
            if not same_json(replayed.get(name), step.vars.get(name)):
                return f"variable {name!r}: recorded {step.vars.get(name)!r}, replayed {replayed.get(name)!r}"
    observed = normalise(outcome.observation if outcome.observation is not None else {})
    recorded = step.observation if step.observation is not None else {}
    if isinstance(observed, dict) and isinstance(recorded, dict):
        for key in sorted(set(observed) | set(recorded)):
            if not same_json(observed.get(key), recorded.get(key)):
                mine = to_text(recorded[key]) if key in recorded else "(missing)"
                theirs = to_text(observed[key]) if key in observed else "(missing)"
                return f"observation {key!r}: recorded {mine}, {side} {theirs}"
    elif not same_json(observed, recorded):
        return f"observation: recorded {to_text(recorded)}, {side} {to_text(observed)}"
    return ""


def _mistyped(enabled: Sequence[Action], action: Action) -> str | None:
    """Which parameter of `action` has another type than in the enabled action it equals, or None.

    `1 == True == 1.0`, so a model looking actions up by equality would take `consumer: true` or
    `dt: 50.0` in a hand-edited trace for the int the model offers; the trace is refused instead.
    """
    offered = next((a for a in enabled if a == action), None)
    if offered is None:
        return None  # the model's own step says why it is not enabled
    for (name, value), (_, expected) in zip(action.params, offered.params, strict=True):
        if _types(value) != _types(expected):
            return (f"parameter {name!r} is {type(value).__name__} {value!r} where the model offers "
                    f"{type(expected).__name__} {expected!r}")
    return None


def _types(value: object) -> object:
    return tuple(_types(v) for v in value) if isinstance(value, tuple) else type(value)


def reproduction_problems(mechanism: Mechanism, trace: Trace, path: Path, current: str | None = None) -> list[str]:
    """What is wrong with a saved counterexample: empty when it still reproduces as recorded.

    The trace must fail at the recorded step with the recorded invariants, on the model and on
    the reference implementation; and when it was found on a historical variant, the same actions
    must pass on `current` wherever they are enabled there (the bug stays fixed).
    """
    problems: list[str] = []
    expected_step = trace.failure.get("step")
    names = trace.failure.get("names")
    expected_names = sorted(str(n) for n in names) if isinstance(names, list) else []
    sides = ["model"] + (["reference"] if mechanism.for_config(trace.config).make_reference is not None else [])
    for side in sides:
        result = replay(mechanism, trace, str(path), against=side)
        if result.step != expected_step or sorted(result.failures) != expected_names:
            problems.append(
                f"{path}: against the {side}: expected {expected_names} at step {expected_step}, "
                f"got {list(result.failures)} at step {result.step} {result.detail}".rstrip()
            )
    fixed = current or mechanism.current
    if trace.variant != fixed:
        try:
            result = replay(mechanism, trace, str(path), variant=fixed, check_vars=False)
        except TraceError:
            result = ReplayResult(0, None, ())  # the historical actions are not all possible on current
        if not result.ok:
            problems.append(f"{path}: still fails on {fixed}: {list(result.failures)} at step {result.step}")
    return problems

