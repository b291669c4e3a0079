"""Every walk of a conformance tour is one the model steps, and coverage counts only the steps taken.

An explored state stands for every state of its key (Key_Shared's key renumbers consumer ids, metadata's
orders interchangeable client threads), so a walk can be in another member of a state's class than the one
whose edges the explorer recorded. The tour planner steps the model and takes an edge only where its
action reaches the edge's target class; these tests step every walk of every configuration on the model
itself, and replay each tour in lockstep with the model as the implementation, counting the steps it runs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from models.core import Action, Json, Model, Observation
from properties import registry
from properties.engines.conformance import NOT_EXECUTABLE, Tour, conform, run_walk
from properties.engines.explorer import Exploration, explore
from properties.engines.lockstep import BaseImplementation
from properties.engines.verify import PortPool, PortSpec, tour_on_port

CAP = 2000
"""States per configuration, as `verify`'s tour caps them: enough to reach states a key merges."""
STEPS = 10_000
"""Tour steps replayed per configuration (the shallowest transitions, where merged states are met first)."""

CONFIGS = [(m, name) for m in registry.mechanisms() for name in registry.get(m).every_explore_config]
PORT = Path(__file__).resolve().parents[1] / "ports" / "reference_port.py"
UNBLOCK_WITHOUT_READ = Path(__file__).resolve().parents[1] / "mutants" / "keyshared-unblock-without-read.patch"


def _explored(mechanism: str, config: str) -> tuple[Model[Any], Exploration[Any]]:
    binding = registry.get(mechanism)
    model = binding.make_model(binding.every_explore_config[config], binding.current)
    return model, explore(model, max_states=CAP, check_liveness=False, check_deadlock=False, record_labels=True)


class Counted(BaseImplementation):
    """The model as the implementation, counting the steps it is really given."""

    applied = 0

    def __init__(self, model: Model[Any]) -> None:
        self.model = model
        self.state = model.initial()

    def apply(self, action: Action) -> Observation:
        self.state, observation = self.model.step(self.state, action)
        Counted.applied += 1
        return observation

    def vars(self) -> dict[str, Json]:
        return self.model.vars(self.state)

    def violations(self) -> list[str]:
        return []


@pytest.mark.parametrize(("mechanism", "config"), CONFIGS, ids=[f"{m}-{c}" for m, c in CONFIGS])
def test_every_walk_is_stepped_along_its_edges_and_the_replay_claims_exactly_what_it_ran(
    mechanism: str, config: str
) -> None:
    model, exploration = _explored(mechanism, config)
    planned = Tour.of(exploration, model, STEPS)
    targets = exploration.edges[1]
    keys = [model.key(s) for s in exploration.states]
    for number, walk in enumerate(planned.walks):
        state = model.initial()
        for index, edge in enumerate(walk, start=1):
            state, _ = model.step(state, planned.labels[edge])  # raises ActionNotEnabled where it cannot go on
            assert model.key(state) == keys[targets[edge]], f"walk {number}, step {index}: off the explored graph"
    binding = registry.get(mechanism)

    def make_model() -> Model[Any]:
        return binding.make_model(binding.every_explore_config[config], binding.current)

    Counted.applied = 0
    known = frozenset(binding.findings.get(config, {}))  # reported on their own row
    result = conform(make_model, lambda: Counted(make_model()), planned=planned, known=known)
    assert result.ok, result.deviation
    assert result.steps == Counted.applied == sum(len(w) for w in planned.walks)
    assert result.covered == len({e for walk in planned.walks for e in walk})
    if planned.complete:
        assert result.covered == result.edges


def test_a_walk_the_model_cannot_take_is_a_harness_defect_never_a_pass() -> None:
    """The twin: the walks the planner made before it stepped the model (labels of explored states taken from
    another member of their class) include ones the model cannot take; replaying one names the defect."""
    model, exploration = _explored("keyshared", "collide")
    labels, (sources, targets) = exploration.labels, exploration.edges
    assert labels is not None
    broken = None
    for edge in range(exploration.transitions):  # an edge into another member of its target's class ...
        after, _ = model.step(exploration.states[sources[edge]], labels[edge])
        if after != exploration.states[targets[edge]]:
            for onward in (e for e in range(exploration.transitions) if sources[e] == targets[edge]):
                try:  # ... then one of the explored target's edges that this member cannot take
                    model.step(after, labels[onward])
                except Exception:
                    broken = (*exploration.path_to(sources[edge]), labels[edge], labels[onward])
                    break
        if broken:
            break
    assert broken is not None, "collide has states its key merges whose actions differ"
    found, ran = run_walk(model, Counted(model), broken)
    assert found is not None and found.target == NOT_EXECUTABLE and "harness defect" in found.detail
    assert ran == len(broken) - 1


def test_verify_tours_a_correct_port_over_every_transition_and_names_a_bug_planted_in_one(tmp_path: Path) -> None:
    """The port tour walks the same executable tour: collide (whose key renames consumers) passes on a port
    that answers with the reference, and a port whose reference never reschedules a read is KS-I5a."""
    binding = registry.get("keyshared")
    config = binding.every_explore_config["collide"]

    def make_model() -> Model[Any]:
        return binding.make_model(config, binding.current)

    verdicts = []
    for argv in ([str(PORT)], [str(PORT), str(UNBLOCK_WITHOUT_READ)]):
        spec = PortSpec((sys.executable, *argv), binding, binding.current, make_model().config)
        pool = PortPool(spec)
        try:
            verdicts.append(tour_on_port("collide", make_model, spec, pool, stop_at=time.monotonic() + 600))
        finally:
            pool.close()
    (correct, passed), (_, failed) = verdicts
    assert passed is None and correct.covered == correct.transitions > 6000
    assert failed is not None and failed.target == "KS-I5a"
