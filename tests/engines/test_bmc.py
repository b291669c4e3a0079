"""BMC finds the planted bug at the explorer's depth, and k-induction proves the fixed counter; a
proof's verdict and counterexample do not depend on the Z3 work that ran before it in the process."""

from __future__ import annotations

import dataclasses

import pytest
import z3

from properties import registry
from properties.engines.bmc import ProofResult, bmc, k_induction, prove
from properties.engines.explorer import explore
from properties.engines.mechanism import Mechanism
from tests.engines.tiny import CounterModel, symbolic


def test_bmc_finds_overflow_at_the_same_depth_as_the_explorer() -> None:
    [result] = bmc(symbolic(3, "overflow"), depth=6)
    assert result.status == "counterexample"
    shortest = explore(CounterModel({"limit": 3}, "overflow")).findings[0]
    assert result.depth == len(shortest.path) == 2
    model = CounterModel({"limit": 3}, "overflow")
    state = model.initial()
    for action in result.actions:
        state, _ = model.step(state, action)
    assert state.x > 3
    assert result.states[-1]["x"] == state.x


def test_fixed_counter_holds_to_depth_and_is_inductive() -> None:
    [bounded] = bmc(symbolic(3, "fixed"), depth=8)
    assert bounded.status == "bounded" and bounded.depth == 8
    assert k_induction(symbolic(3, "fixed"), 3) == 1
    [proved] = prove(symbolic(3, "fixed"), depth=4)
    assert proved.status == "inductive" and proved.holds


def test_induction_fails_for_the_overflow_variant() -> None:
    assert k_induction(symbolic(3, "overflow"), 3) is None
    [result] = prove(symbolic(3, "overflow"), depth=4)
    assert not result.holds


def _unrelated_z3_work() -> None:
    """Terms and a search in Z3's global context, like what an earlier check leaves in the process."""
    xs = z3.Ints(" ".join(f"unrelated{i}" for i in range(40)))
    solver = z3.Solver()
    solver.add(z3.Distinct(*xs), *[x >= 0 for x in xs], z3.Sum(*xs) == 1000)
    assert solver.check() == z3.sat


def _verdicts(mechanism: Mechanism) -> list[tuple[object, ...]]:
    assert mechanism.proofs is not None
    return [(r.system, r.invariant, r.status, r.depth, r.states, r.actions) for r, _ in mechanism.proofs(10)]


def test_every_proof_gives_the_same_counterexample_whatever_z3_work_ran_before() -> None:
    """`brokerspec check` runs the mechanisms in forked workers in an order set by the last run's
    timings; each saved counterexample trace must not depend on it."""
    proved = [m for m in registry.mechanisms().values() if m.proofs is not None]
    first = {m.name: _verdicts(m) for m in proved}
    assert sum(1 for v in first.values() for r in v if r[2] == "counterexample" and r[5]) >= 5
    for mechanism in reversed(proved):
        _unrelated_z3_work()
        assert _verdicts(mechanism) == first[mechanism.name], mechanism.name


def test_a_proof_leaves_the_global_context_as_it_was_and_refuses_terms_built_outside() -> None:
    outside = z3.Int("outside")
    before = z3.main_ctx()
    [result] = bmc(symbolic(3, "overflow"), depth=4)
    assert isinstance(result, ProofResult) and result.depth == 2
    assert z3.main_ctx() is before
    leaky = symbolic(3, "overflow")
    invariants = {"C-I1": lambda f: f["x"] <= outside}
    with pytest.raises(z3.Z3Exception, match="context mismatch"):
        bmc(dataclasses.replace(leaky, invariants=invariants), depth=2)
