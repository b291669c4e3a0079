"""The metadata mechanism through every engine: lockstep with the reference, explorer, Hypothesis, Z3,
the corpus and the bench. `pip453` passes everything; `legacy` and `blocking_callback` deadlock (MD-I5)."""

from __future__ import annotations

import gc
import random
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import pytest
from hypothesis import Phase, settings

from models.core import Action, Param
from models.metadata import ACTION_NAMES, EXPLORE_CONFIG, EXPLORE_CONFIGS, HYPOTHESIS_CONFIG, VARIANTS
from properties import registry
from properties.engines.explorer import explore
from properties.engines.lockstep import DIVERGENCE, Lockstep
from properties.engines.stateful import FailedRun, build_state_machine, find_failure
from properties.metadata.binding import MECHANISM, MetadataReference, bench, make_model, worker_of
from properties.metadata.proofs import proofs
from properties.registry import reproduction_problems
from reference_impl.concurrent import executors
from traces.format import dumps, load

from .corpus import CORPUS, explorer_trace

CONFIGS: dict[str, Mapping[str, Param]] = {**EXPLORE_CONFIGS, "hypothesis": HYPOTHESIS_CONFIG}
CYCLES = {"legacy": ("N", "N"), "blocking_callback": ("N-event", "N-event")}


def random_run(
    config: Mapping[str, Param], variant: str, seed: int, waits: set[str], steps: int = 40
) -> tuple[list[Action], list[str]]:
    """Seeded random actions in lockstep; (actions, first failures). Close is drawn rarely, to reach depth.

    `waits` collects what blocked threads waited for (the lock's name, or the op's kind).
    """
    rng = random.Random(seed)
    model = make_model(config, variant)
    reference = MetadataReference(config, variant)
    lockstep = Lockstep(model, reference)
    actions: list[Action] = []
    try:
        for _ in range(steps):
            enabled = [a for a in model.enabled(lockstep.state) if a.name != "close" or rng.random() < 0.05]
            actions.append(rng.choice(enabled or list(model.enabled(lockstep.state))))
            outcome = lockstep.apply(actions[-1])
            threads = cast(dict[str, dict[str, str]], outcome.vars["threads"])
            waits |= {t["wait"].split(":")[0].split("(")[0] for t in threads.values()} - {""}
            if outcome.failures:
                return actions, [*outcome.failures, outcome.detail]
        return actions, []
    finally:
        reference.close()


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_lockstep_with_the_reference_never_diverges(config: str, variant: str) -> None:
    runs = (400 if variant == "pip453" else 150) if config == "hypothesis" else 60
    deadlocks = 0
    waits: set[str] = set()
    for seed in range(runs):
        actions, failures = random_run(CONFIGS[config], variant, seed, waits)
        assert DIVERGENCE not in failures, (seed, failures, [str(a) for a in actions])
        if variant == "pip453":
            assert failures == [], (seed, failures, [str(a) for a in actions])
        deadlocks += "MD-I5" in failures
    if variant != "pip453" and config in ("small", "hypothesis"):
        assert deadlocks > 0  # the random walks do reach the twins' deadlock
    if variant == "pip453" and config == "hypothesis":
        assert waits == {"get", "N-flush-lock", "N-cache0"}  # every kind of wait is reached


def test_reference_projection_matches_on_a_deadlock_and_the_adapter_disposes_its_world() -> None:
    config = {**EXPLORE_CONFIG, "paths": ("/p", "/q"), "initial": ("/p",)}
    reference = MetadataReference(config, "blocking_callback")
    world = reference.world
    flush = [Action("advance")] + [Action("run", (("thread", "N-batch-flusher"),))] * 3
    backend, event = Action("run", (("thread", "N-backend"),)), Action("run", (("thread", "N-event"),))
    for action in [Action("store_callback", (("c", 0), ("p", "/p"), ("q", "/q"))), *flush, backend, event]:
        reference.apply(action)
    assert world.deadlock() == [("N-event", "N-event", "get(/q)")] and not world.stuck()  # get(/q) is queued
    for action in [*flush, backend]:
        reference.apply(action)
    assert world.deadlock() == [("N-event", "N-event", "get(/q)")] and world.stuck()  # §6b, verbatim
    assert world.thread_states()[0].queued == ("complete[1]",)  # answered, behind the blocked task
    assert reference.vars()["deadlock"] == [["N-event", "N-event", "get(/q)"]]
    assert reference.violations() == ["MD-I5"]
    assert world.thread_states()[0].current is not None
    del reference
    gc.collect()
    assert all(t.is_shutdown for t in world.threads) and world.thread_states()[0].current is None


@pytest.mark.parametrize("config", EXPLORE_CONFIGS)
def test_explorer_passes_current_with_liveness(config: str) -> None:
    result = explore(make_model(EXPLORE_CONFIGS[config], "pip453"))
    assert result.complete and result.ok, result.findings
    assert len(result.states) > 1000


def test_explorer_covers_every_action_and_every_kind_of_wait() -> None:
    covered: set[str] = set()
    waits: set[str] = set()
    runs = [(config, "pip453") for config in EXPLORE_CONFIGS.values()] + [(EXPLORE_CONFIGS["unbatched"], "legacy")]
    for config, variant in [*runs, (EXPLORE_CONFIGS["unbatched"], "blocking_callback")]:
        model = make_model(config, variant)
        result = explore(model, check_liveness=False)
        covered |= set(result.coverage)
        waits |= {th.wait[0] for s in result.states for th in s.threads if th.wait and model.stuck(s) is False}
    assert covered == set(ACTION_NAMES)
    assert waits == {"op", "flush", "key"}  # a join on get(q), the flush lock, a key lock (memory: two refreshes)


@pytest.mark.parametrize("variant", ["legacy", "blocking_callback"])
def test_explorer_finds_the_blocking_callback_deadlock_with_its_cycle(variant: str) -> None:
    model = make_model(EXPLORE_CONFIG, variant)
    result = explore(model, stop_on_violation=True, check_liveness=False)
    [finding] = result.findings
    assert (finding.kind, finding.name) == ("invariant", "MD-I5")
    assert len(finding.path) == {"legacy": 7, "blocking_callback": 6}[variant]
    state = model.initial()
    for action in finding.path:
        state, _ = model.step(state, action)
    waiter, waited = CYCLES[variant]
    [(u, v, label)] = model.cycle(state)
    assert (u, v) == (waiter, waited) and label.startswith("get(")
    with_liveness = explore(make_model(EXPLORE_CONFIGS["unbatched"], variant))
    assert {f.name for f in with_liveness.findings} == {"MD-I5", "MD-L1"}


def machine(variant: str, found: list[FailedRun]) -> type:
    return build_state_machine(
        lambda: make_model(HYPOTHESIS_CONFIG, variant),
        ACTION_NAMES,
        lambda: MetadataReference(HYPOTHESIS_CONFIG, variant),
        on_failure=found.append,
    )


def test_hypothesis_machine_passes_current() -> None:
    found: list[FailedRun] = []
    fast = settings(max_examples=60, stateful_step_count=30, deadline=None, derandomize=True, database=None)
    assert find_failure(machine("pip453", found), fast) is None
    assert found == []


@pytest.mark.parametrize("variant", ["legacy", "blocking_callback"])
def test_hypothesis_machine_catches_the_deadlock(variant: str) -> None:
    found: list[FailedRun] = []
    search = settings(
        max_examples=100, stateful_step_count=40, deadline=None, derandomize=True, database=None,
        phases=[Phase.generate],  # shrinking replays the reference hundreds of times; the corpus test shrinks
    )
    error = find_failure(machine(variant, found), search)
    assert error is not None and "MD-I5" in str(error)
    assert found[-1].failures == ("MD-I5",)


def test_z3_proves_per_path_order_and_the_work_stealing_twin_breaks_it() -> None:
    results = proofs(10)
    held = [r for r, must_hold in results if must_hold]
    twins = [r for r, must_hold in results if not must_hold]
    assert [(r.invariant, r.status) for r in held] == [("MD-I1", "inductive"), ("MD-I1-W", "inductive")]
    [twin] = twins
    assert (twin.invariant, twin.status, twin.depth) == ("MD-I1", "counterexample", 4)
    # Z3's model depends on what the process solved before (under xdist, other tests), so the order of the
    # two submits and two starts may vary; what breaks MD-I1 is two starts of one path's ops on two workers.
    assert sorted(a.name for a in twin.actions) == ["start", "start", "submit", "submit"]
    assert twin.actions[0].name == "submit"
    assert len({a["w"] for a in twin.actions if a.name == "start"}) == 2
    assert all(r.elapsed_s < 10 for r, _ in results)


def test_registered_mechanism() -> None:
    mechanism = registry.get("metadata")
    assert mechanism is MECHANISM
    assert mechanism.variants == ("pip453", "legacy", "blocking_callback")
    assert dict(mechanism.twins) == {"legacy": "MD-I5", "blocking_callback": "MD-I5"}
    assert [inv.name for inv in make_model(None, "pip453").invariants] == [
        "MD-I1", "MD-I2", "MD-I3", "MD-I4", "MD-I5", "MD-I7",
    ]


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.json")), ids=lambda p: Path(p).stem)
def test_corpus_trace_reproduces(path: Path) -> None:
    assert reproduction_problems(path) == []
    trace = load(path)
    assert trace.failure["names"] == ["MD-I5"] and len(trace.actions) <= 8
    waiter, waited = CYCLES[trace.variant]
    [[u, v, label]] = cast(list[list[str]], trace.steps[-1].vars["deadlock"])
    assert (u, v) == (waiter, waited) and str(label).startswith("get(")


def test_corpus_explorer_trace_is_regenerated_byte_for_byte() -> None:
    assert dumps(explorer_trace("legacy")) == (CORPUS / "legacy-explorer-MD-I5.json").read_text(encoding="utf-8")


def test_bench_reports_the_queue_waits_and_the_flush_burst() -> None:
    out = bench(Path())
    assert (out["canonical_legacy_wait_max_ms"], out["canonical_pip453_1w_wait_max_ms"]) == (19, 5)  # §6a
    assert str(out["canonical_legacy_MD-I6"]).startswith("EXCEEDED")
    assert str(out["canonical_pip453_1w_MD-I6"]).startswith("holds")
    assert out["burst_pip453_4w_serde_drained_ms"] < out["burst_pip453_1w_serde_drained_ms"]  # type: ignore[operator]
    assert out["stall_fixed_rate_flush_starts"] == "5 25 25 25 25 30"  # §6c: 4 flushes at t=25
    assert out["stall_fixed_delay_flush_starts"] == "5 25 30"
    assert (out["stall_fixed_rate_MD-P1"], out["stall_fixed_delay_MD-P1"]) == ("fails", "holds")


# --- the adapter's oracles are independent of the code under test -----------------------------------


def _walk_until_failure(config: Mapping[str, Param], seeds: range, steps: int = 40) -> set[str]:
    """Every failure name met by seeded random lockstep walks of the current variant."""
    names: set[str] = set()
    for seed in seeds:
        rng = random.Random(seed)
        reference = MetadataReference(config, "pip453")
        lockstep = Lockstep(make_model(config, "pip453"), reference)
        for _ in range(steps):
            outcome = lockstep.apply(rng.choice(lockstep.model.enabled(lockstep.state)))
            if outcome.failures:
                names.update(outcome.failures)
                break
        reference.close()
    return names


def test_md_i1_worker_comes_from_the_spec_hash_not_the_reference_executor() -> None:
    """The spec's table: "/a" maps to worker 1 of 4 and to 2 of 5; the adapter names threads from it."""
    model = make_model({**EXPLORE_CONFIG, "workers": 4}, "pip453")
    assert worker_of(model, "/a") == "N-worker-OrderedExecutor-1-0"
    assert worker_of(make_model({**EXPLORE_CONFIG, "workers": 5}, "pip453"), "/a") == "N-worker-OrderedExecutor-2-0"


def test_a_consistent_but_wrong_routing_is_named_md_i1(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twin of the independent MD-I1 oracle: a reference that routes every path to one worker keeps per-path
    affinity (asking it where a path belongs would agree with it), yet MD-I1 is reported."""
    monkeypatch.setattr(executors, "choose_thread_index", lambda key, n: 0)
    assert "MD-I1" in _walk_until_failure(EXPLORE_CONFIG, range(30))


def test_a_choice_the_reference_does_not_offer_is_a_divergence_not_a_crash() -> None:
    reference = MetadataReference(EXPLORE_CONFIG, "pip453")
    reference.apply(Action.of("run", thread="N-backend"))  # nothing queued there
    assert reference.violations() == [DIVERGENCE] and "does not offer" in reference.disagreement
    reference.close()
