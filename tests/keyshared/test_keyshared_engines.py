"""keyshared through every engine: lockstep with the reference, explorer, Hypothesis, Z3, corpus, registry."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path

import pytest
import z3
from hypothesis import settings

from models.core import Action, Param, violated
from models.keyshared import KeySharedModel
from models.keyshared.state import ACTION_NAMES
from properties import registry
from properties.engines.bmc import ProofResult, bmc
from properties.engines.explorer import explore
from properties.engines.lockstep import DIVERGENCE, Lockstep, first_failure
from properties.engines.shrink import failure_oracle
from properties.engines.stateful import build_state_machine, find_failure
from properties.keyshared import proofs as keyshared_z3
from properties.keyshared.binding import MECHANISM
from properties.keyshared.dispatcher import EXPLORE_CONFIGS, GATE, HYPOTHESIS_CONFIGS, KeySharedReference
from properties.registry import replay, reproduction_problems
from tests.keyshared import corpus
from traces.format import dumps, load

CONFIGS: dict[str, Mapping[str, Param]] = {**EXPLORE_CONFIGS, **HYPOTHESIS_CONFIGS}
FAST = settings(max_examples=60, stateful_step_count=30, derandomize=True, database=None, deadline=None)


def _random_run(config: Mapping[str, Param], variant: str, seed: int, steps: int) -> tuple[str, ...]:
    """Random enabled actions in lockstep with the reference; the first failures, if any."""
    lockstep = Lockstep(KeySharedModel(config, variant), KeySharedReference(config, variant))
    outcome = first_failure(lockstep, random.Random(seed), steps)
    return outcome.failures + ((outcome.detail,) if outcome.detail else ()) if outcome else ()


# --- lockstep with the reference ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "runs"), [("spec", 1000), ("hot", 600), ("small", 300), ("gap", 300),
                                            ("interleave", 300)])
def test_pip379_never_diverges_nor_breaks_an_invariant_on_random_runs(name: str, runs: int) -> None:
    failures = {seed: f for seed in range(runs) if (f := _random_run(CONFIGS[name], "pip379", seed, 40))}
    assert failures == {}


@pytest.mark.parametrize("variant", ["classic", "pip282"])
def test_historical_references_match_their_models_up_to_the_broken_invariants(variant: str) -> None:
    """The twins fail on the invariants, never by a divergence: the references have the same flaws."""
    outcomes = [_random_run(HYPOTHESIS_CONFIGS["hot"], variant, seed, 40) for seed in range(200)]
    assert DIVERGENCE not in {name for f in outcomes for name in f}
    assert sum("KS-I1" in f for f in outcomes) >= 10


def test_the_spec_as_worded_only_adds_ks_i4_failures_to_pip379() -> None:
    """With both spec gaps back in (the model's defaults), pip379 still never diverges from the reference."""
    outcomes = [_random_run({"actions": HYPOTHESIS_CONFIGS["spec"]["actions"]}, "pip379", seed, 40)
                for seed in range(300)]
    assert {name for f in outcomes for name in f} <= {"KS-I4"}


def test_the_adapter_checks_its_own_client_record_and_the_references_tracker() -> None:
    reference = KeySharedReference(CONFIGS["small"], "pip379")
    for action in [Action("add", (("consumer", 1), ("name", "consumer1"), ("permits", 1))),
                   Action.of("publish", key="4"), Action.of("read")]:
        reference.apply(action)
    assert reference.violations() == [] and reference.vars()["held"] == [[1, [0]]]
    tracker = reference.d.tracker
    assert tracker is not None
    tracker.add_entry(reference.consumers[1], 11707)  # consumer1 "drains" key "4", which it owns
    assert reference.violations() == ["KS-I2"]


# --- explorer ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPLORE_CONFIGS))
def test_explorer_passes_pip379_completely_with_liveness(name: str) -> None:
    """Every invariant holds but a configuration's known finding (jump-read's KS-I5a), which must be found."""
    model = KeySharedModel(EXPLORE_CONFIGS[name], "pip379")
    result = explore(model)
    assert {f.name for f in result.findings} == set(MECHANISM.findings.get(name, {})), result.findings
    assert result.complete
    kinds = (set(model.kinds) | ({"complete_read"} if "begin_read" in model.kinds else set())
             | ({"flow_update"} if model.async_flow else set()))
    assert set(result.coverage) == kinds | {"read"}
    assert bool(model.liveness) == ("settle" in model.kinds)


def test_explorer_reaches_the_interesting_states_of_pip379() -> None:
    """Non-vacuity: blocked draining hashes, unknown-hash replay entries, reads in flight, settled pins."""
    small = explore(KeySharedModel(EXPLORE_CONFIGS["small"], "pip379")).states
    assert any(d.blocked for s in small for d in s.draining)
    assert any(d.ref_count > 1 for s in small for d in s.draining)
    assert any(h == 0 for s in small for _, h in s.replay)
    assert any(s.settled and s.pinned and s.draining for s in small)
    gap = explore(KeySharedModel(EXPLORE_CONFIGS["gap"], "pip379")).states
    assert any(s.normal_read is not None and s.replay_read is not None for s in gap)
    assert any(s.rewind for s in gap)


@pytest.mark.parametrize(("variant", "length"), [("classic", 8), ("pip282", 9)])
def test_explorer_finds_the_twins_with_shortest_paths_that_the_reference_reproduces(variant: str, length: int) -> None:
    config = EXPLORE_CONFIGS["small"]
    path = corpus.explorer_path(config, variant, "KS-I1")
    assert len(path) == length
    assert corpus.shrunk(config, variant, path, "KS-I1") == path  # no sub-run or smaller parameter still fails
    lockstep = Lockstep(KeySharedModel(config, variant), KeySharedReference(config, variant))
    outcomes = [lockstep.apply(a) for a in path]
    assert all(not o.failures for o in outcomes[:-1]) and "KS-I1" in outcomes[-1].failures
    assert explore(KeySharedModel(config, "pip379"), stop_on_violation=True).ok


def test_explorer_finds_classic_issue_1_with_three_consumers_in_seven_steps() -> None:
    config = {**GATE, "names": ("consumer1", "consumer2", "consumer3"), "keys": ("4", "0", "5"), "same_name": False,
              "max_messages": 2, "add_permits": (1,), "max_permits": 1, "actions": ("add", "remove", "publish", "ack",
                                                                                     "read")}
    path = corpus.explorer_path(config, "classic", "KS-I1")
    assert [a.name for a in path] == ["add", "add", "publish", "publish", "read", "add", "read"]
    assert path[-2]["name"] == "consumer3"


@pytest.mark.parametrize("variant", ["classic", "pip282"])
def test_explorer_finds_the_21199_stuck_subscription_in_the_historical_variants(variant: str) -> None:
    """A settled run where the stubborn consumer's unacked message keeps mark-delete back, so a
    rejoined consumer's own key is never delivered (KS-I5b, the #21199 liveness failure)."""
    result = explore(KeySharedModel(EXPLORE_CONFIGS["small"], variant))
    stuck = next(f for f in result.findings if f.name == "KS-I5b")
    assert stuck.kind == "liveness"
    assert stuck.path[-1] == Action.of("settle", stubborn=1) and len(stuck.path) == 6
    assert {f.name for f in result.findings} >= {"KS-I1", "KS-I5b", "KS-I5-hash"}


@pytest.mark.parametrize(("config", "length"), [(corpus.GAP_A, 11), (corpus.GAP_B, 9)], ids=["A", "B"])
def test_explorer_finds_each_spec_gap_on_pip379_and_the_gate_closes_it(config: Mapping[str, Param],
                                                                      length: int) -> None:
    path = corpus.explorer_path(config, "pip379", "KS-I4")
    assert len(path) == length
    assert explore(KeySharedModel({**config, **GATE}, "pip379"), check_liveness=False).ok


# --- Hypothesis --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HYPOTHESIS_CONFIGS))
def test_hypothesis_machine_passes_pip379(name: str) -> None:
    config = HYPOTHESIS_CONFIGS[name]
    machine = build_state_machine(
        lambda: KeySharedModel(config, "pip379"), ACTION_NAMES, lambda: KeySharedReference(config, "pip379")
    )
    assert find_failure(machine, FAST) is None


@pytest.mark.parametrize("variant", ["classic", "pip282"])
def test_hypothesis_machine_catches_the_twins_and_traces_shrink_makes_the_run_one_minimal(variant: str) -> None:
    run = corpus.hypothesis_run(variant)
    assert "KS-I1" in run.failures
    config = HYPOTHESIS_CONFIGS["hot"]
    small = corpus.shrunk(config, variant, run.actions, "KS-I1")
    assert len(small) <= min(len(run.actions), 15)
    fails = failure_oracle(lambda: Lockstep(KeySharedModel(config, variant)), "KS-I1")
    assert fails(small)
    assert not any(fails(small[:i] + small[i + 1 :]) for i in range(len(small)))


# --- Z3 ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proofs() -> list[tuple[ProofResult, bool]]:
    return keyshared_z3.proofs(10)


def test_z3_proves_pip379_by_induction_and_catches_classic(proofs: list[tuple[ProofResult, bool]]) -> None:
    results = proofs
    proved = {r.invariant: r for r, must_hold in results if must_hold}
    assert set(proved) == {"KS-I1", "KS-I2", "KS-W"}
    assert all(r.status == "inductive" and r.induction_k == 1 for r in proved.values())
    (twin,) = [r for r, must_hold in results if not must_hold]
    assert twin.invariant == "KS-I1" and twin.status == "counterexample" and twin.depth == 9
    model = KeySharedModel(keyshared_z3.model_config(), "classic")
    state = model.initial()
    for action in twin.actions:  # Z3's counterexample is a run of the model
        state, _ = model.step(state, action)
    assert violated(model, state)[:1] == ["KS-I1"]


def test_z3_bounded_check_agrees_with_the_proof_and_can_see_draining() -> None:
    """Non-vacuity: within 6 steps pip379 reaches a drained hash held by its old owner while a newer
    message of it waits, and consumer ids get reused; the proof is not about an empty system."""
    system = keyshared_z3.keyshared_system("pip379")
    probes = {
        "never-draining": lambda s: z3.And(*[s[f"town{k}"] == -1 for k in range(2)]),
        "never-two-consumers": lambda s: z3.Not(z3.And(s["conn0"], s["conn1"])),
        "KS-I1": system.invariants["KS-I1"],
    }
    results = {r.invariant: r for r in bmc(dataclasses.replace(system, invariants=probes), depth=6)}
    assert results["never-draining"].status == "counterexample"
    assert results["never-two-consumers"].status == "counterexample"
    assert results["KS-I1"].status == "bounded"


@pytest.mark.parametrize("variant", ["pip379", "classic"])
def test_z3_transition_relation_is_exactly_the_models_step(variant: str) -> None:
    """On random model runs of the encoded fragment, each step's successor is the only one Z3 allows."""
    system = keyshared_z3.keyshared_system(variant)
    model = KeySharedModel(keyshared_z3.model_config(), variant)
    s_frame = {n: make(f"{n}@s") for n, make in system.state.items()}
    t_frame = {n: make(f"{n}@t") for n, make in system.state.items()}
    choice = {n: make(f"{n}@a") for n, make in system.choice.items()}
    choice["action"] = z3.Int("action@a")
    solver = z3.Solver()
    solver.add(system.trans(s_frame, choice, t_frame))
    checked = set()
    for seed in range(12):
        rnd = random.Random(seed)
        keys = [rnd.randrange(2) for _ in range(keyshared_z3.MESSAGES)]
        state = model.initial()
        for _ in range(14):
            actions = [a for a in model.enabled(state) if a.name != "publish" or a["key"] == model.keys[
                keys[len(state.messages)]]]
            action = rnd.choice(actions)
            successor, _ = model.step(state, action)
            before = keyshared_z3.frame_of(model, state, keys)
            after = keyshared_z3.frame_of(model, successor, keys)
            slot = {c.id: model.names.index(c.name) for c in (*state.consumers, *successor.consumers)}
            cid = action.get("consumer")
            solver.push()
            solver.add(*[s_frame[n] == v for n, v in before.items()])
            solver.add(choice["action"] == keyshared_z3.ACTIONS.index(action.name))
            if isinstance(cid, int):
                solver.add(choice["slot"] == slot[cid], choice["id"] == cid)
            if action.name == "add":
                solver.add(choice["permits"] == action["permits"])
            if action.name == "ack":
                solver.add(choice["pos"] == action["position"])
            assert solver.check() == z3.sat, (seed, action)
            solver.add(z3.Or(*[t_frame[n] != v for n, v in after.items()]))
            assert solver.check() == z3.unsat, (seed, action, solver.model())
            solver.pop()
            checked.add(action.name)
            state = successor
    assert checked == set(keyshared_z3.ACTIONS)


# --- corpus and registry -----------------------------------------------------------------------------

TRACES = sorted(corpus.CORPUS.glob("*.json"))


def test_the_corpus_holds_every_kind_of_counterexample() -> None:
    assert {p.name for p in TRACES} == {
        "classic-explorer-KS-I1.json", "pip282-explorer-KS-I1.json", "classic-hypothesis-KS-I1.json",
        "pip282-hypothesis-KS-I1.json", "classic-issue-1.json", "classic-issue-2.json", "pip282-reconnect.json",
        "pip379-gap-a-KS-I4.json", "pip379-gap-b-KS-I4.json", "classic-explorer-KS-I5b.json",
        "pip379-locks-lost-wake-up-LK-6.json", "pip379-locks-batch-lost-wake-up-LK-6.json",
        "pip379-locks-pre23854-LK-4.json", "pip379-locks-wide-lost-wake-up-LK-6.json",
    }
    assert all(len(load(p).actions) <= (21 if "locks" in p.name else 15) for p in TRACES)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_corpus_trace_reproduces_on_model_and_reference(path: Path) -> None:
    assert reproduction_problems(path) == []
    trace = load(path)
    names = trace.failure["names"]
    lock_scope = trace.config.get("scope") == "locks"  # the lost wake-up and the pre-#23854 order, at lock level
    assert isinstance(names, list) and (
        "KS-I1" in names or names in (["KS-I4"], ["KS-I5b"]) or (lock_scope and names in (["LK-6"], ["LK-4"])))
    if trace.variant != "pip379":
        assert replay(trace, str(path), variant="pip379", check_vars=False).ok


@pytest.mark.parametrize("name", ["pip379-gap-a-KS-I4.json", "pip379-gap-b-KS-I4.json"])
def test_the_gap_traces_stop_failing_under_the_gate(name: str) -> None:
    trace = load(corpus.CORPUS / name)
    model = KeySharedModel({**trace.config, **GATE}, "pip379")
    state = model.initial()
    try:
        for action in trace.actions:
            state, _ = model.step(state, action)
    except Exception as exc:  # gap A: the disconnect is not enabled while the Replay read is in flight
        assert type(exc).__name__ == "ActionNotEnabled"
    else:
        assert violated(model, state) == []


@pytest.mark.parametrize("name", sorted(corpus.deterministic()))
def test_deterministic_corpus_traces_are_what_the_generator_produces(name: str) -> None:
    assert dumps(corpus.deterministic()[name]()) == (corpus.CORPUS / name).read_text(encoding="utf-8")


def test_registry_knows_keyshared_with_its_twins_and_proofs() -> None:
    mechanism = registry.get("keyshared")
    assert mechanism is MECHANISM
    assert mechanism.variants == ("pip379", "classic", "pip282")
    assert mechanism.twins == {"classic": "KS-I1", "pip282": "KS-I1"}
    assert mechanism.proofs is keyshared_z3.proofs
    for config in (*EXPLORE_CONFIGS.values(), *HYPOTHESIS_CONFIGS.values()):
        model = mechanism.make_model(config, "pip379")
        assert model.config["disconnect_during_replay_read"] is False and model.config["exempt_nacked_p"] is True


def test_z3_twin_counterexample_needs_the_read_position_gate_of_classic(
    proofs: list[tuple[ProofResult, bool]],
) -> None:
    """The classic counterexample passes on pip379: the draining entry blocks the moved key."""
    (twin,) = [r for r, must_hold in proofs if not must_hold]
    model = KeySharedModel(keyshared_z3.model_config(), "pip379")
    state = model.initial()
    for action in twin.actions:
        state, _ = model.step(state, action)
    assert violated(model, state) == [] and state.draining

