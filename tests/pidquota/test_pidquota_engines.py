"""pidquota through every engine: lockstep with the reference, explorer, Hypothesis, Z3, corpus, registry."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from itertools import combinations
from pathlib import Path

import pytest
import z3
from hypothesis import Phase, settings

import properties.pidquota.binding
from models.core import Action, Param
from models.pidquota import ACTION_NAMES, EXPLORE_CONFIG, HYPOTHESIS_CONFIG, PidQuotaModel
from properties import registry
from properties.engines.bmc import bmc
from properties.engines.explorer import explore
from properties.engines.lockstep import DIVERGENCE, Lockstep, first_failure
from properties.engines.shrink import failure_oracle
from properties.engines.stateful import build_state_machine, find_failure
from properties.pidquota import proofs as pidquota_z3
from properties.pidquota.binding import (
    MECHANISM,
    MURMUR_CONFIG,
    PidQuotaReference,
    false_positive_rates,
    hasher_vectors_hold,
)
from properties.registry import replay, reproduction_problems
from reference_impl.pidquota import EnhancedDoubleHasher, LayeredBloomFilter
from tests.pidquota import corpus
from traces.format import dumps, load

LOCKSTEP_CONFIGS: dict[str, Mapping[str, Param]] = {
    **MECHANISM.explore_configs,
    "hypothesis": HYPOTHESIS_CONFIG,
    "n_layer_1": {**HYPOTHESIS_CONFIG, "n_layer": 1},
    "three_layers_n3": {**HYPOTHESIS_CONFIG, "layer_count": 3, "n_layer": 3, "max_batch": 3},
}
FAST = settings(max_examples=60, stateful_step_count=30, derandomize=True, database=None, deadline=None)


def _random_run(config: Mapping[str, Param], variant: str, seed: int, steps: int) -> tuple[str, ...]:
    """Random enabled actions in lockstep with the reference; the first failures, if any."""
    lockstep = Lockstep(PidQuotaModel(config, variant), PidQuotaReference(config, variant))
    outcome = first_failure(lockstep, random.Random(seed), steps)
    return outcome.failures if outcome else ()


# --- lockstep with the reference ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LOCKSTEP_CONFIGS))
def test_current_never_diverges_from_the_reference_on_random_runs(name: str) -> None:
    failures = {seed: f for seed in range(500) if (f := _random_run(LOCKSTEP_CONFIGS[name], "current", seed, 25))}
    assert failures == {}


def test_no_readd_reference_matches_its_model_up_to_the_broken_invariant() -> None:
    """The twin fails on PQ-I1 in the model, never by a divergence: the reference has the same flaw."""
    outcomes = [_random_run(HYPOTHESIS_CONFIG, "no_readd", seed, 60) for seed in range(150)]
    assert DIVERGENCE not in {name for f in outcomes for name in f}
    assert sum("PQ-I1" in f for f in outcomes) >= 10


def test_the_reference_adapter_reports_pq_i6_when_the_sensor_is_charged_for_a_hit() -> None:
    reference = PidQuotaReference(EXPLORE_CONFIG, "current")
    reference.apply(Action.of("produce", principal="A", pids=(1,)))
    assert reference.violations() == []
    sensor = reference.manager.sensor_of("A")
    assert sensor is not None
    sensor.record(1, 0, check_quotas=False)  # an extra record(1) that no new PID explains
    reference.apply(Action.of("produce", principal="A", pids=(1,)))
    assert reference.violations() == ["PQ-I6"]


def test_the_reference_adapter_rejects_pids_beyond_the_exact_hashers_range() -> None:
    with pytest.raises(ValueError, match="below the filter's 20 bits"):
        PidQuotaReference({**EXPLORE_CONFIG, "pids": (1, 20)}, "current")


def test_the_murmur_model_predicts_the_real_filters_false_positives_bit_for_bit() -> None:
    """With the default hasher at n_layer 3 (m = 29, k = 7) false positives are common; the model computes the
    same bits from the spec, so lockstep never diverges, and some produce answers "seen" for a PID the
    principal never sent (non-vacuity: the false positives happen and are predicted)."""
    config = {**HYPOTHESIS_CONFIG, "n_layer": 3, "hasher": "murmur"}
    false_positives = 0
    for seed in range(150):
        rnd = random.Random(seed)
        lockstep = Lockstep(PidQuotaModel(config, "current"), PidQuotaReference(config, "current"))
        sent: set[tuple[Param, Param]] = set()
        for _ in range(30):
            action = rnd.choice(lockstep.model.enabled(lockstep.state))
            outcome = lockstep.apply(action)
            assert outcome.failures == (), (seed, outcome.detail)
            if action.name == "produce":
                assert isinstance(outcome.observation, dict)
                new = outcome.observation["new"]
                assert isinstance(new, list) and isinstance(action["pids"], tuple)
                for pid in action["pids"]:
                    key = (action["principal"], pid)
                    false_positives += key not in sent and pid not in new
                    sent.add(key)
    assert false_positives >= 20


# --- explorer ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MECHANISM.explore_configs))
def test_explorer_passes_current_completely(name: str) -> None:
    config = MECHANISM.explore_configs[name]
    result = explore(PidQuotaModel(config, "current"))
    assert result.ok, result.findings
    assert result.complete  # relative time: every run of any length, in finitely many states
    assert set(result.coverage) == set(ACTION_NAMES) - (set() if config["cleanup"] else {"cleanup"})


def test_explorer_reaches_the_interesting_states_of_current() -> None:
    """Non-vacuity: re-adds, expired layers awaiting cleanup, overdue timers, PQ-I4b's condition at depth > 1."""
    model = PidQuotaModel(EXPLORE_CONFIG, "current")
    pairs = [(s, s.entry) for state in explore(model).states for s in state.slots if s.entry is not None]
    assert any(any(a[1] & b[1] for a, b in combinations(e.layers, 2)) for _, e in pairs)  # a PID re-added
    assert any(e.layers[0][0] > model.window for _, e in pairs)
    assert any(e.rot == 0 for _, e in pairs)
    assert any(s.calm and len(e.layers) > 1 for s, e in pairs)


def test_explorer_finds_no_readd_with_a_shortest_path_that_the_reference_reproduces() -> None:
    result = explore(PidQuotaModel(EXPLORE_CONFIG, "no_readd"), stop_on_violation=True)
    assert [f.name for f in result.findings] == ["PQ-I1", "PQ-I2"]
    path = result.findings[0].path
    assert len(path) == 4
    assert corpus.shrunk(EXPLORE_CONFIG, path) == path  # no sub-run or smaller parameter still fails
    reference = PidQuotaReference(EXPLORE_CONFIG, "no_readd")
    observed = [reference.apply(a) for a in path]
    assert observed[0] == {"new": [1]} and observed[-1] == {"new": [2, 1]}  # PID 1, seen just before, is new


# --- Hypothesis --------------------------------------------------------------------------------------


def test_hypothesis_machine_passes_current() -> None:
    machine = build_state_machine(
        lambda: PidQuotaModel(HYPOTHESIS_CONFIG, "current"),
        ACTION_NAMES,
        lambda: PidQuotaReference(HYPOTHESIS_CONFIG, "current"),
    )
    assert find_failure(machine, FAST) is None


def test_hypothesis_machine_catches_no_readd_and_traces_shrink_makes_the_run_one_minimal() -> None:
    run = corpus.hypothesis_run(settings(FAST, phases=[Phase.generate]))
    assert "PQ-I1" in run.failures
    small = corpus.shrunk(HYPOTHESIS_CONFIG, run.actions)
    assert len(small) < len(run.actions)
    # with the reference, as the shrinker runs: its PQ-I1 oracle also sees a PID forgotten before it is re-tracked
    fails = failure_oracle(
        lambda: Lockstep(PidQuotaModel(HYPOTHESIS_CONFIG, "no_readd"),
                         PidQuotaReference(HYPOTHESIS_CONFIG, "no_readd")),
        "PQ-I1",
    )
    assert fails(small)
    assert not any(fails(small[:i] + small[i + 1 :]) for i in range(len(small)))


# --- Z3 ----------------------------------------------------------------------------------------------


def test_z3_proves_current_by_induction_and_catches_both_twins() -> None:
    results = pidquota_z3.proofs(10)
    proved = {r.invariant: r for r, must_hold in results if must_hold}
    assert set(proved) == {"PQ-I1", "PQ-I2", "PQ-W"}
    assert all(r.status == "inductive" and r.induction_k == 1 for r in proved.values())
    twins = {r.invariant: r for r, must_hold in results if not must_hold}
    assert set(twins) == {"PQ-I1", "PQ-I2"}
    assert all(r.status == "counterexample" for r in twins.values())
    assert twins["PQ-I1"].depth == 4 and twins["PQ-I2"].depth == 4
    final = twins["PQ-I2"].states[-1]
    assert final["bad2"] and final["seen"]
    assert [a.name for a in twins["PQ-I2"].actions].count("track_x") >= 2


def test_z3_encoding_can_forget_the_pid_beyond_the_horizon() -> None:
    """Non-vacuity: in `current` x can be forgotten (after H) and is re-added; the proofs are not empty."""
    system = pidquota_z3.cache_system("current")
    probes = {
        "never-forgotten": lambda s: z3.Implies(s["seen"], s["xin"]),
        "never-re-added": lambda s: z3.Implies(s["xin"], s["xc"] == 0),
    }
    results = bmc(dataclasses.replace(system, invariants=probes), depth=4)
    assert [r.status for r in results] == ["counterexample", "counterexample"]


# --- corpus and registry -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", [corpus.EXPLORER_TRACE, corpus.HYPOTHESIS_TRACE], ids=lambda p: p.name)
def test_corpus_trace_reproduces_on_model_and_reference_and_passes_on_current(path: Path) -> None:
    assert reproduction_problems(path) == []
    trace = load(path)
    assert trace.variant == "no_readd" and trace.failure["names"] == ["PQ-I1", "PQ-I2"]
    assert replay(trace, str(path), variant="current", check_vars=False).ok


def test_explorer_corpus_trace_is_what_the_generator_produces() -> None:
    assert dumps(corpus.explorer_trace()) == corpus.EXPLORER_TRACE.read_text(encoding="utf-8")


def test_registry_knows_pidquota_with_its_twin_and_proofs() -> None:
    mechanism = registry.get("pidquota")
    assert mechanism.variants == ("current", "no_readd")
    assert mechanism.twins == {"no_readd": "PQ-I1"}
    assert mechanism.make_model(None, "current").config == EXPLORE_CONFIG
    assert mechanism.proofs is pidquota_z3.proofs


def test_false_positive_sampling_stays_within_the_pq_i3_bound() -> None:
    rows = false_positive_rates([(50, 0.1)], seeds=2, probes=2_000)
    assert rows["fp[n=50,p=0.1,layers=1]_within_pq_i3_bound"] is True
    assert rows["fp[n=50,p=0.1,layers=2]_within_pq_i3_bound"] is True
    assert 0.05 < float(str(rows["fp[n=50,p=0.1,layers=2]_measured"])) < 0.3


# --- the adapter's oracles are independent of the code under test -----------------------------------


def test_the_reference_hashers_reproduce_the_spec_vectors_and_a_wrong_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PQ-I9's oracle is the spec's constants: a consistent hasher that is not the spec's fails it."""
    assert hasher_vectors_hold()
    monkeypatch.setattr(properties.pidquota.binding, "default_pid_hasher", lambda pid: EnhancedDoubleHasher(pid, 1))
    hasher_vectors_hold.cache_clear()
    try:
        assert not hasher_vectors_hold()
        reference = PidQuotaReference(EXPLORE_CONFIG, "current")
        reference.apply(Action.of("produce", principal="A", pids=(1,)))
        assert reference.violations() == ["PQ-I9"]
    finally:
        hasher_vectors_hold.cache_clear()


def test_the_murmur_configuration_spreads_a_pid_over_two_layers() -> None:
    """Why MURMUR_CONFIG's PIDs: 7's bits lie in the union of 1's and 3's, but in neither alone."""
    model = PidQuotaModel(MURMUR_CONFIG)
    one, three, seven = model.bits
    assert (model.k, model.m) == (7, 20)
    assert seven & (one | three) == seven and seven & one != seven and seven & three != seven


def test_containment_on_the_union_is_named_pq_i11(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twin of the per-layer oracle: 1 and 3 land in two layers, then 7 is "seen" by the union only."""
    monkeypatch.setattr(LayeredBloomFilter, "contains", lambda self, x: self.flatten().contains(x))
    reference = PidQuotaReference(MURMUR_CONFIG, "current")
    for pid in (1, 3):
        reference.apply(Action.of("produce", principal="A", pids=(pid,)))
    assert "PQ-I11" in reference.violations()  # the probe of 7 after the second layer appears


def test_a_pid_counted_new_within_the_horizon_is_named_from_the_ghost_history() -> None:
    """The harness's own record: PID 1 was tracked at 0, so at 1 (<= 0 + H, and <= ΔT) it must not be new."""
    reference = PidQuotaReference(EXPLORE_CONFIG, "current")
    reference.apply(Action.of("produce", principal="A", pids=(1,)))
    entry = reference.cache.entry_of("A")
    assert entry is not None
    entry.filter.layers[0].clear()  # the reference forgets; nothing asks it whether it should have
    reference.apply(Action.of("advance", dt=1))
    assert reference.violations() == []  # judged on tracks, at the step where the model would judge them
    assert reference.apply(Action.of("produce", principal="A", pids=(1,))) == {"new": [1]}
    assert reference.violations() == ["PQ-I1", "PQ-I2"]
