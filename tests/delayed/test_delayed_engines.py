"""The delayed model bound to the reference: lockstep, explorer, Hypothesis, Z3, corpus and the bench hook.

The corpus under ``traces/corpus/delayed/`` is produced by :func:`write_corpus` (run it by hand after a
model change: ``python -c "from tests.delayed.test_delayed_engines import write_corpus; write_corpus()"``);
the tests check that every saved trace still reproduces and that the explorer's traces are exactly
what the explorer finds today.
"""

from __future__ import annotations

import random
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from models.core import Action, Param
from models.delayed import ACTION_NAMES, EXPLORE_CONFIG, HYPOTHESIS_CONFIG, DelayedModel, DelayedState
from properties import registry
from properties.delayed import binding as delayed_properties
from properties.delayed import proofs as delayed_z3
from properties.delayed.binding import MECHANISM, DelayedReference, plot_memory, seed_theory_aes
from properties.engines.explorer import explore
from properties.engines.lockstep import DIVERGENCE, Lockstep
from properties.engines.replay import record
from properties.engines.shrink import failure_oracle, shrink
from properties.engines.stateful import FailedRun, build_state_machine, find_failure
from properties.registry import replay, reproduction_problems
from reference_impl.delayed import round_up, trim
from reference_impl.delayed.bench import measure_memory
from traces.format import Trace, dumps, load, save

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus" / "delayed"
MODES = {"non-strict": False, "strict": True}
ENGINES = ("explorer", "hypothesis")
HYPOTHESIS = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def lockstep(config: dict[str, Param], variant: str, reference_variant: str | None = None) -> Lockstep[DelayedState]:
    return Lockstep(DelayedModel(config, variant), DelayedReference(config, reference_variant or variant))


# ----- lockstep with the reference -----


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("base", [EXPLORE_CONFIG, HYPOTHESIS_CONFIG], ids=["explore", "hypothesis"])
def test_random_lockstep_on_current_never_diverges_nor_breaks(base: dict[str, Param], strict: bool) -> None:
    config = {**base, "strict": strict}
    taken: Counter[str] = Counter()
    offered = paused = 0
    for seed in range(500):
        rng = random.Random(seed)
        run = lockstep(config, "current")
        for step in range(25):
            action = rng.choice(list(run.model.enabled(run.state)))
            outcome = run.apply(action)
            assert outcome.failures == (), (seed, step, action, outcome.detail)
            taken[action.name] += 1
            observation = outcome.observation or {}
            offered += len(observation.get("offered", []))  # type: ignore[arg-type]
            paused += observation.get("pause") is True
    assert set(taken) == set(ACTION_NAMES)
    assert offered > 100
    assert paused > 0 or base is HYPOTHESIS_CONFIG  # three held messages are rare in the large config


def test_lockstep_reports_a_reference_that_keys_differently() -> None:
    config = {**EXPLORE_CONFIG, "strict": True}
    for seed in range(50):
        rng = random.Random(seed)
        run = lockstep(config, "current", reference_variant="pr23611")
        for _ in range(25):
            outcome = run.apply(rng.choice(list(run.model.enabled(run.state))))
            if outcome.failures:
                assert DIVERGENCE in outcome.failures
                return
    pytest.fail("a pr23611 reference was never told apart from the current model")


@pytest.mark.parametrize(("strict", "deliver_at", "now"), [(False, 5, 1), (True, 1, 0)])
def test_the_reference_checks_dd_i1_and_dd_i9_on_its_own_logs(strict: bool, deliver_at: int, now: int) -> None:
    """The explorer's witnesses: key trim(D) is due under pr23611's cutoff C(now) while D is not."""
    reference = DelayedReference({**EXPLORE_CONFIG, "strict": strict}, "pr23611")
    for action in [
        Action.of("add", ledger=1, entry=0, deliver_at=deliver_at),
        Action.of("advance", now=now),
        Action.of("get_scheduled", limit=2),
    ]:
        reference.apply(action)
    assert reference.violations() == ["DD-I1", "DD-I9"]


def test_the_reference_checks_its_storage_and_timer() -> None:
    reference = DelayedReference(EXPLORE_CONFIG, "current")
    reference.apply(Action.of("add", ledger=1, entry=0, deliver_at=5))
    assert reference.violations() == []
    tracker = reference.tracker
    tracker.count += 1
    assert reference.violations() == ["DD-I5"]
    tracker.count -= 1
    tracker.buckets.memory += 1
    assert reference.violations() == ["DD-I7"]
    tracker.buckets.memory -= 1
    tracker.timer.new_timeout(tracker, 9)
    assert reference.violations() == ["DD-I6"]


def test_the_reference_allows_a_stale_handle_only_after_clear() -> None:
    reference = DelayedReference(EXPLORE_CONFIG, "current")
    reference.apply(Action.of("add", ledger=1, entry=0, deliver_at=5))
    reference.apply(Action.of("clear"))
    assert reference.vars()["timer"] == [4, 4]
    assert reference.violations() == []
    reference.apply(Action.of("get_scheduled", limit=1))  # update_timer disarms the stale handle
    assert reference.vars()["timer"] == []
    reference.apply(Action.of("add", ledger=2, entry=0, deliver_at=5))
    reference.tracker.buckets.clear()  # emptied behind the tracker's back: no clear(), so no exception
    reference.tracker.count = 0
    assert reference.violations() == ["DD-I3", "DD-I6"]  # and the ledger still holds the message


# ----- the explorer -----


@pytest.mark.parametrize("strict", [False, True])
def test_explorer_passes_current_with_liveness(strict: bool) -> None:
    model = DelayedModel({**EXPLORE_CONFIG, "strict": strict})
    result = explore(model, check_liveness=True)
    assert result.complete and result.ok, result.findings
    assert set(result.coverage) == set(ACTION_NAMES)
    states = result.states
    assert any(s.stale for s in states)  # a handle left armed by clear (DD-I6's exception)
    assert any(s.timer is not None and s.timer[1] > s.timer[0] for s in states)  # the tick throttle
    assert any(len({k for k, _ in s.tracked}) < len(s.tracked) for s in states)  # two messages in a bucket
    assert any(not s.fixed and s.tracked for s in states)
    assert any(
        s.fixed and s.tracked_count >= model.lookahead and s.tracked[0][0] > s.now + model.bc_offset for s in states
    )  # should_pause answers True here
    assert any(s.owed and not s.tracked for s in states)  # cleared and still owed: DD-L1 needs a re-read


@pytest.mark.parametrize(("mode", "length"), [("non-strict", 3), ("strict", 2)])
def test_explorer_finds_pr23611_with_a_shortest_path(mode: str, length: int) -> None:
    config, path = engine_run("explorer", MODES[mode])
    assert len(path) == length
    assert path[-1].name == "get_scheduled"
    trace = record(
        DelayedModel(config, "pr23611"), path, engine="explorer", implementation=DelayedReference(config, "pr23611")
    )
    assert trace.failure["step"] == length and trace.failure["names"] == ["DD-I1", "DD-I9"]


# ----- the Hypothesis machine -----


@pytest.mark.parametrize("strict", [False, True])
def test_hypothesis_machine_passes_current(strict: bool) -> None:
    config = {**HYPOTHESIS_CONFIG, "strict": strict}
    machine = build_state_machine(
        lambda: DelayedModel(config), ACTION_NAMES, lambda: DelayedReference(config, "current")
    )
    assert find_failure(machine, HYPOTHESIS) is None


@pytest.mark.parametrize("mode", list(MODES))
def test_hypothesis_machine_finds_pr23611(mode: str) -> None:
    _, found = engine_run("hypothesis", MODES[mode])
    _, actions = pr23611_run("hypothesis", MODES[mode])
    assert 1 <= len(actions) <= len(found)
    assert len(actions) <= 8
    assert [a.name for a in actions][-1] == "get_scheduled"


# ----- Z3 -----


def test_z3_proves_current_and_catches_the_twins() -> None:
    results = delayed_z3.proofs(0)
    assert MECHANISM.proofs is delayed_z3.proofs
    assert [r.holds for r, _ in results] == [must for _, must in results]
    assert sum(must for _, must in results) == 4 and len(results) == 8
    for result, must_hold in results:
        if must_hold:
            assert result.status == "valid"
            continue
        [values] = result.states
        d, now, tick, bits = values["deliver_at"], values["now"], values["tick"], values["precision"].bit_length() - 1
        strict = "non-strict" not in result.system
        cutoff = now if strict else now + tick
        if result.system.startswith("offer-rule[pr23611"):  # offered under pr23611's rule, yet early
            assert trim(d, bits) == values["key"] <= cutoff < d
        else:  # current, not offered yet although legacy offered it P - 2 ms ago: the P - 1 bound is tight
            key = round_up(d, bits) if strict else trim(d, bits)
            bucket_cutoff = cutoff if strict else now + tick - (1 << bits) + 1
            assert key == values["key"] > bucket_cutoff and cutoff - d >= (1 << bits) - 2


def test_z3_the_clock_bound_is_needed_only_at_the_end_of_the_long_range() -> None:
    result = delayed_z3.saturation_counterexample()
    assert not result.holds
    [values] = result.states
    assert values["now"] > delayed_z3.NOW_MAX and values["deliver_at"] > values["now"] >= values["key"]


# ----- corpus -----


@cache
def engine_run(engine: str, strict: bool) -> tuple[dict[str, Param], tuple[Action, ...]]:
    """The pr23611 DD-I1 bug as the engine finds it."""
    if engine == "explorer":
        config = {**EXPLORE_CONFIG, "strict": strict}
        result = explore(DelayedModel(config, "pr23611"), stop_on_violation=True, check_liveness=False)
        found = next(f.path for f in result.findings if f.name == "DD-I1")
    else:
        config = {**HYPOTHESIS_CONFIG, "strict": strict}
        runs: list[FailedRun] = []
        machine = build_state_machine(
            lambda: DelayedModel(config, "pr23611"),
            ACTION_NAMES,
            lambda: DelayedReference(config, "pr23611"),
            on_failure=runs.append,
        )
        assert find_failure(machine, HYPOTHESIS) is not None
        assert "DD-I1" in runs[-1].failures
        found = runs[-1].actions
    return config, found


@cache
def pr23611_run(engine: str, strict: bool) -> tuple[dict[str, Param], tuple[Action, ...]]:
    """``engine_run`` shrunk by ``properties.engines.shrink``."""
    config, found = engine_run(engine, strict)
    oracle = failure_oracle(lambda: lockstep(config, "pr23611"), "DD-I1")
    return config, shrink(found, oracle)


def corpus_trace(engine: str, mode: str) -> Trace:
    config, actions = pr23611_run(engine, MODES[mode])
    return record(
        DelayedModel(config, "pr23611"), actions, engine=engine, implementation=DelayedReference(config, "pr23611")
    )


def corpus_path(engine: str, mode: str) -> Path:
    return CORPUS / f"pr23611-{mode}-{engine}.json"


def write_corpus() -> None:
    """Regenerate the saved traces from the engines (one per mode and engine)."""
    for engine in ENGINES:
        for mode in MODES:
            save(corpus_trace(engine, mode), corpus_path(engine, mode))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", list(MODES))
def test_corpus_trace_reproduces(engine: str, mode: str) -> None:
    path = corpus_path(engine, mode)
    assert reproduction_problems(path) == []
    trace = load(path)
    assert (trace.variant, trace.engine, trace.config["strict"]) == ("pr23611", engine, MODES[mode])
    assert 1 <= len(trace.actions) <= 8
    assert trace.failure["names"] == ["DD-I1", "DD-I9"]
    on_current = replay(trace, str(path), variant="current", check_vars=False)  # every action is possible there
    assert on_current.ok and on_current.steps == len(trace.steps)


@pytest.mark.parametrize("mode", list(MODES))
def test_corpus_explorer_traces_are_what_the_explorer_finds(mode: str) -> None:
    assert corpus_path("explorer", mode).read_text(encoding="utf-8") == dumps(corpus_trace("explorer", mode))


def test_corpus_holds_only_the_expected_traces() -> None:
    expected = {corpus_path(engine, mode).name for engine in ENGINES for mode in MODES}
    assert {p.name for p in CORPUS.glob("*.json")} == expected


def test_the_registry_binds_delayed() -> None:
    mechanism = registry.get("delayed")
    assert mechanism.twins == {"pr23611": "DD-I1"}
    assert {c["strict"] for c in mechanism.explore_configs.values()} == {False, True}
    assert mechanism.make_reference is not None
    assert isinstance(mechanism.make_reference(EXPLORE_CONFIG, "pr23611"), DelayedReference)
    assert mechanism.make_model(None, "pr23611").variant == "pr23611"


# ----- bench hook -----


def test_theory_matches_the_seed() -> None:
    assert seed_theory_aes(1024) == 2.0
    assert seed_theory_aes(8192) == 1.0
    assert seed_theory_aes(262_144) == pytest.approx(0.16384)


def test_plot_memory_writes_a_png(tmp_path: Path) -> None:
    sweep = {(x, y): measure_memory(x, y, 20_000, 5_000) for x in (1, 4, 8) for y in (4, 8)}
    seed = {(1, 8): sweep[(1, 8)]}
    path = plot_memory(sweep, seed, tmp_path / "delayed" / "memory.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_bench_reports_the_table_and_the_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook end to end on small inputs (the seed's N = 10^7 run is ``brokerspec bench``)."""
    monkeypatch.setattr(delayed_properties, "SEED_N", 40_000)
    monkeypatch.setattr(delayed_properties, "PLOT_N", 20_000)
    monkeypatch.setattr(delayed_properties, "PLOT_YS", (4, 8))
    row = delayed_properties.bench(tmp_path)
    assert row["memory[x=1,y=10]_buckets"] == -(-(1000 + 40_000) // 1024)  # 1 per ms from t1 = 1000 (mod 1024)
    assert row["memory[x=8,y=15]_seed_theory_MB"] == 1.55
    assert row["memory_matches_spec"] is True
    assert row["memory_seed_bucket_counts_match"] is False  # not the seed's N
    assert Path(str(row["memory_plot"])).read_bytes()[:4] == b"\x89PNG"
