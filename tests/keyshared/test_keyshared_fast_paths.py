"""The model's shortcuts for the explorer give what the plain computation gives.

`KeySharedModel` keeps a few results between calls (the offered actions per signature, the last plain
read and its hook points, the last key, the source state's ring). Here every reachable state of two
small configurations is stepped both ways (on the model the search used, and on another one in an
order that reuses nothing), and the key is compared with the renumbered state it stands for.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import pytest

from models.core import Action, ActionNotEnabled, Observation, Param
from models.keyshared import KeySharedModel, KSState
from models.keyshared.state import VARIANTS

_TWO: dict[str, Param] = {
    "disconnect_during_replay_read": False,
    "exempt_nacked_p": True,
    "names": ("consumer1", "consumer2"),
    "keys": ("4", "5"),
    "max_consumers": 2,
    "max_messages": 2,
    "add_permits": (1,),
    "flow": (1,),
    "max_permits": 1,
}
# Interleaved reads with an ack or a flow inside the pass; the other with every scheduling action.
CONFIGS: dict[str, Mapping[str, Param]] = {
    "interleaved": {**_TWO, "keys": ("4",), "max_permits": 2,
                    "actions": ("add", "remove", "publish", "ack", "flow", "read", "interleaved_read")},
    "scheduled": {**_TWO, "max_messages": 1, "actions": ("add", "remove", "publish", "flow", "ack", "redeliver",
                                                         "read", "fire", "run", "begin_read", "settle")},
}


def _reachable(model: KeySharedModel) -> list[tuple[KSState, list[tuple[Action, KSState, Observation]]]]:
    """Breadth-first, each state's actions stepped in the order offered, as the explorer steps them."""
    initial = model.initial()
    seen: set[Hashable] = {model.key(initial)}
    out: list[tuple[KSState, list[tuple[Action, KSState, Observation]]]] = []
    frontier = [initial]
    while frontier:
        following: list[KSState] = []
        for state in frontier:
            steps = []
            for action in model.enabled(state):
                successor, observation = model.step(state, action)
                steps.append((action, successor, observation))
                if (key := model.key(successor)) not in seen:
                    seen.add(key)
                    following.append(successor)
            out.append((state, steps))
        frontier = following
    return out


def _renumbered(model: KeySharedModel, state: KSState) -> KSState:
    """The key as first written: ids renumbered in join order, and `scheduled_read` dropped when unread."""
    if not model.kinds & {"fire", "run"}:
        state = state._replace(scheduled_read=False)
    ids = {c.id: slot for slot, c in enumerate(state.consumers, start=1)}
    return state._replace(
        consumers=tuple(c._replace(id=ids[c.id]) for c in state.consumers),
        draining=tuple(d._replace(owner=ids[d.owner]) for d in state.draining),
        recently_joined=tuple((ids[cid], p) for cid, p in state.recently_joined),
    )


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("config", CONFIGS)
def test_kept_results_match_the_plain_computation(config: str, variant: str) -> None:
    model, plain = KeySharedModel(CONFIGS[config], variant), KeySharedModel(CONFIGS[config], variant)
    reachable = _reachable(model)
    assert len(reachable) > 200
    for state, steps in reachable:
        assert list(plain._enabled(state)) == [action for action, _, _ in steps]
        # In reverse order, each interleaved_read comes before the plain read of its state: none is reused.
        for action, successor, observation in reversed(steps):
            assert plain.step(state, Action(action.name, action.params)) == (successor, observation), action
            assert model.key(successor) == _renumbered(model, successor)


def test_an_equal_action_built_elsewhere_is_accepted_and_a_foreign_one_refused() -> None:
    model = KeySharedModel(CONFIGS["interleaved"], "pip379")
    state, _ = model.step(model.initial(), Action("add", (("consumer", 1), ("name", "consumer1"), ("permits", 1))))
    assert model.step(state, Action.of("flow", consumer=1, n=1))[0].consumers[0].permits == 2
    with pytest.raises(ActionNotEnabled):
        model.step(state, Action.of("flow", consumer=1, position=1))  # an ack's parameters under flow's name
