"""The Z3 proof of TL-I1..TL-I3 on AsyncSemaphore, its mutant twins, and that it is not vacuous."""

from __future__ import annotations

import pytest
import z3

from properties.engines.bmc import bmc, prove
from properties.topiclist.proofs import MUTANTS, QUEUE, proofs, semaphore_system


def test_invariants_are_inductive_and_hold_to_depth_ten() -> None:
    held = [r for r, must_hold in proofs(10) if must_hold]
    assert {r.invariant for r in held} == {"TL-I1", "TL-I2", "TL-I3", "TL-W"}
    assert all(r.status == "inductive" and r.induction_k == 1 and r.depth == 10 for r in held)


def test_each_mutant_twin_is_caught_on_its_invariant_with_a_short_counterexample() -> None:
    twins = {r.system: r for r, must_hold in proofs(10) if not must_hold}
    release = twins["AsyncSemaphore[release_not_idempotent]"]
    assert release.status == "counterexample" and release.invariant == MUTANTS["release_not_idempotent"]
    last = release.actions[-1]
    assert last.name == "release"
    before = release.states[-2]
    assert before[f"pv{last['j']}"] == 0 < before[f"po{last['j']}"]  # releasing a permit already swapped to zero
    after = release.states[-1]
    assert after["max"] - after["avail"] != sum(after[f"pv{j}"] for j in range(4))
    grant = twins["AsyncSemaphore[grant_any_fitting]"]
    assert grant.status == "counterexample" and grant.invariant == "TL-I3" and grant.depth == 3
    assert grant.actions[-1].name == "grant" and grant.actions[-1]["i"] != 0  # it overtook the head


def test_the_encoding_reaches_full_queues_grants_and_timeouts() -> None:
    """Non-vacuity: a proof over a transition relation that cannot move would prove anything."""
    system = semaphore_system()
    probes = {
        "queue-never-full": lambda s: s["qlen"] < QUEUE,
        "never-granted": lambda s: s["last"] < 0,
        "pool-never-drained": lambda s: s["avail"] > 0,
    }
    probing = type(system)(**{**system.__dict__, "invariants": probes})
    results = {r.invariant: r for r in bmc(probing, depth=4)}
    assert all(r.status == "counterexample" for r in results.values()), results
    assert results["queue-never-full"].depth == QUEUE


def test_a_broken_init_is_refuted_at_depth_zero_and_an_empty_one_rejected() -> None:
    system = semaphore_system()
    broken = type(system)(**{**system.__dict__, "init": lambda s: s["avail"] == s["max"] + 1})
    [result] = prove(broken, 3, invariants=["TL-I1"])
    assert result.status == "counterexample" and result.depth == 0
    empty = type(system)(**{**system.__dict__, "init": lambda s: z3.And(system.init(s), s["avail"] == s["max"] + 1)})
    with pytest.raises(ValueError, match="vacuous"):
        prove(empty, 3)
