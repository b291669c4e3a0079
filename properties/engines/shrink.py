"""Delta debugging over a failing run: fewer steps, then smaller parameters, same failure.

A candidate is kept only if every action is still enabled where it is taken (the model raises
otherwise) and the run still fails with the target invariant. Removal follows Zeller's ddmin
over the step list; adjacent steps of one kind are merged (two clock advances become one); then
parameters are lowered one at a time toward 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from models.core import Action, ActionNotEnabled, Model, Param
from properties.engines.lockstep import Lockstep
from properties.engines.replay import stuck_detail

Oracle = Callable[[Sequence[Action]], bool]
T = TypeVar("T")

Choice = tuple[str, int]
"""A step as the Hypothesis machine draws it: the action's name and its index among the enabled actions of
that name. Re-deriving the action from the choice in whatever state the run has reached lets a step be
dropped even when later parameters depended on it (an absolute time, a request id), as Hypothesis shrinks."""


def failure_oracle(make_lockstep: Callable[[], Lockstep[Any]], target: str) -> Oracle:
    """True when the actions, run from a fresh lockstep, reach a state failing `target`."""

    def fails(actions: Sequence[Action]) -> bool:
        lockstep = make_lockstep()
        if target in lockstep.initial_outcome().failures:
            return True
        try:
            for action in actions:
                if target in lockstep.apply(action).failures:
                    return True
        except ActionNotEnabled:
            return False
        return False

    return fails


def stuck_oracle(make_model: Callable[[], Any], kind: str, name: str) -> Oracle:
    """True when the actions, run on a fresh model, end in a state stuck as the `kind` finding `name`
    (a deadlock, or a state from which the liveness property `name` can no longer be met)."""
    def fails(actions: Sequence[Action]) -> bool:
        model = make_model()
        state = model.initial()
        try:
            for action in actions:
                state, _ = model.step(state, action)
        except ActionNotEnabled:
            return False
        return stuck_detail(model, state, kind, name) is not None

    return fails


def _ddmin(actions: list[T], fails: Callable[[list[T]], bool]) -> list[T]:
    granularity = 2
    while len(actions) >= 2:
        size = max(1, len(actions) // granularity)
        chunks = [actions[i : i + size] for i in range(0, len(actions), size)]
        for i in range(len(chunks)):
            candidate = [a for j, chunk in enumerate(chunks) if j != i for a in chunk]
            if fails(candidate):
                actions = candidate
                granularity = max(granularity - 1, 2)
                break
        else:
            if granularity >= len(actions):
                break
            granularity = min(len(actions), granularity * 2)
    return actions


def _smaller(value: Param) -> list[Param]:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return []
    return sorted({0, 1, value // 2, value - 1} - {value})


def _lower_params(actions: list[Action], fails: Oracle) -> list[Action]:
    for index, action in enumerate(actions):
        for position, (name, value) in enumerate(action.params):
            for smaller in _smaller(value):
                params = list(action.params)
                params[position] = (name, smaller)
                candidate_action = replace(action, params=tuple(params))
                candidate = [*actions[:index], candidate_action, *actions[index + 1 :]]
                if fails(candidate):
                    actions, action = candidate, candidate_action
                    break
    return actions


def _merge_neighbours(actions: list[Action], fails: Oracle) -> list[Action]:
    """Two adjacent actions of one name with one integer parameter (e.g. two clock advances) -> one with the sum."""
    index = 0
    while index + 1 < len(actions):
        first, second = actions[index], actions[index + 1]
        if first.name == second.name and len(first.params) == len(second.params) == 1:
            (name, a), (other, b) = first.params[0], second.params[0]
            if name == other and isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                candidate = [*actions[:index], Action(first.name, ((name, a + b),)), *actions[index + 2 :]]
                if fails(candidate):
                    actions = candidate
                    continue
        index += 1
    return actions


def choices_of(model: Model[Any], actions: Sequence[Action]) -> list[Choice]:
    """Each action as (name, index among the enabled actions of that name); `ActionNotEnabled` if one is not."""
    state = model.initial()
    out: list[Choice] = []
    for action in actions:
        same = [a for a in model.enabled(state) if a.name == action.name]
        if action not in same:
            raise ActionNotEnabled(action, "not among the enabled actions")
        out.append((action.name, same.index(action)))
        state, _ = model.step(state, action)
    return out


def actions_of(model: Model[Any], choices: Sequence[Choice]) -> list[Action]:
    """The run the choices make from the initial state: a kind with nothing enabled is skipped, and an
    index past the end takes the last enabled action of its kind."""
    state = model.initial()
    out: list[Action] = []
    for name, index in choices:
        same = [a for a in model.enabled(state) if a.name == name]
        if not same:
            continue
        action = same[min(index, len(same) - 1)]
        out.append(action)
        state, _ = model.step(state, action)
    return out


def _shrink_choices(model: Model[Any], actions: list[Action], fails: Oracle) -> list[Action]:
    """ddmin over the choices, then each index lowered toward 0, re-deriving the actions every time."""
    try:
        choices = choices_of(model, actions)
    except ActionNotEnabled:
        return actions

    def still(candidate: list[Choice]) -> bool:
        return fails(actions_of(model, candidate))

    choices = _ddmin(choices, still)
    for position, (name, index) in enumerate(choices):
        for lower in range(index):
            candidate = [*choices[:position], (name, lower), *choices[position + 1 :]]
            if still(candidate):
                choices = candidate
                break
    return actions_of(model, choices)  # every choice list kept above fails, the first one as `actions` did


def shrink(
    actions: Sequence[Action], fails: Oracle, max_rounds: int = 8, model: Model[Any] | None = None
) -> tuple[Action, ...]:
    """The smallest run found that still `fails`; `actions` itself must fail.

    With the `model`, steps are also dropped as choices re-derived in each state (`Choice`), which
    removes steps that the value-based passes cannot (a clock advance that later times depend on).
    """
    current = list(actions)
    if not fails(current):
        raise ValueError("shrink needs a failing run to start from")
    for _ in range(max_rounds):
        before = list(current)
        current = _lower_params(_merge_neighbours(_ddmin(current, fails), fails), fails)
        if model is not None:
            current = _shrink_choices(model, current, fails)
        if current == before:
            break
    return tuple(current)
