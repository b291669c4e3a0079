"""Z3 proofs, over 64-bit bit-vectors, that the bucket offer rule is never early (DD-I1) nor late (DD-I10).

The offer rule (§3) is stateless: a tracked message with exact time ``D`` is offered at ``now`` iff
``key(D) <= BC(now)``. So the proof is a single validity query, not BMC: for every ``D`` in
``[0, 2^63)`` (``add_message`` never stores ``D < 0``), every ``now`` in ``[0, NOW_MAX]`` and every tick
``T`` in ``[1, 2^20]``, with ``P`` the highest power of two ``<= T``, Java's wrapping 64-bit arithmetic
and signed comparisons, ``offered`` implies ``D <= now`` (strict) or ``D - now <= T`` (non-strict); and
not offered implies that the message is at most ``P - 1`` ms later than legacy would offer it. The
bounds are evaluated in 66 bits, so they cannot wrap. ``unsat`` of the negation proves the claim for
all of these inputs at once; ``sat`` gives a concrete counterexample.

``NOW_MAX`` keeps the clock 2^21 ms short of ``Long.MAX_VALUE``. Without it the strict rule fails at
the very end of the range: ``round_up`` saturates at ``trim(MAX)``, which is below ``D`` for
``D > trim(MAX)``, so at ``now >= 2^63 - P`` such a message is offered before ``D``
(``saturation_counterexample`` shows it).

Twins: the ``pr23611`` rule (trimmed key, ``BC = C``) must be early in both modes (DD-I1), and the
lateness bound must be tight (claiming ``P - 2`` must fail).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from properties.engines.bmc import ProofResult

__all__ = ["MAX_TICK", "NOW_MAX", "ValidityResult", "offer_rule_proof", "proofs", "saturation_counterexample"]

WIDTH = 64
MAX_LONG = 2**63 - 1
MAX_TICK = 2**20
NOW_MAX = MAX_LONG - 2**21


@dataclass(frozen=True)
class ValidityResult(ProofResult):
    """The verdict of one validity query: ``valid`` for every input, or a ``counterexample``; no depth."""

    @property
    def holds(self) -> bool:
        return self.status == "valid"

    def summary(self) -> str:
        if self.holds:
            return f"valid for every D in [0, 2^63), now in [0, {NOW_MAX}], T in [1, 2^20] (unbounded)"
        [values] = self.states
        return "counterexample: " + ", ".join(f"{name}={value}" for name, value in values.items())


def _wide(x: z3.BitVecRef) -> z3.BitVecRef:
    return z3.SignExt(2, x)


def offer_rule_proof(
    variant: str, strict: bool, invariant: str, *, tighter: int = 0, now_max: int = NOW_MAX
) -> ValidityResult:
    """Prove ``invariant`` ("DD-I1": never early, "DD-I10": at most ``P - 1 - tighter`` ms late) of ``variant``."""
    started = time.perf_counter()
    d, now, tick, p = z3.BitVecs("deliver_at now tick precision", WIDTH)
    one = z3.BitVecVal(1, WIDTH)
    max_long = z3.BitVecVal(MAX_LONG, WIDTH)

    def trim(x: z3.BitVecRef) -> z3.BitVecRef:
        return x & -p

    round_up = z3.If(d > max_long - (p - one), trim(max_long), trim(d + p - one))
    key = round_up if variant == "current" and strict else trim(d)
    cutoff = now if strict else now + tick
    bucket_cutoff = now + tick - p + one if variant == "current" and not strict else cutoff
    offered = key <= bucket_cutoff  # signed, like Java's long comparison
    wide_cutoff = _wide(now) + (0 if strict else _wide(tick))
    if invariant == "DD-I1":
        claim = z3.Implies(offered, _wide(d) <= wide_cutoff)
    else:
        claim = z3.Implies(z3.Not(offered), _wide(d) >= wide_cutoff - _wide(p) + 2 + tighter)
    premises = z3.And(
        tick >= (2 if tighter else 1),
        tick <= MAX_TICK,  # P >= 2 makes a tighter bound a real claim
        p != 0,
        p & (p - one) == 0,
        z3.ULE(p, tick),
        z3.ULT(tick, p << 1),  # P = 2^floor(log2 T)
        d >= 0,
        now >= 0,
        now <= now_max,
    )
    solver = z3.Solver()
    solver.add(premises, z3.Not(claim))
    verdict = solver.check()
    bound = f",late<=P-{1 + tighter}" if tighter else ""
    system = f"offer-rule[{variant},{'strict' if strict else 'non-strict'}{bound}]"
    elapsed = time.perf_counter() - started
    if verdict == z3.unsat:
        return ValidityResult(system, invariant, "valid", 0, elapsed_s=elapsed)
    if verdict != z3.sat:
        raise RuntimeError(f"{system} {invariant}: Z3 answered {verdict}")
    small = z3.Optimize()  # a readable counterexample: the smallest clock, tick and deliverAt
    small.add(premises, z3.Not(claim))
    for v in (now, tick, d):
        small.minimize(v)
    small.check()
    model = small.model()
    values = {
        name: model.eval(v, model_completion=True).as_signed_long()
        for name, v in (
            ("deliver_at", d),
            ("now", now),
            ("tick", tick),
            ("precision", p),
            ("key", key),
            ("bucket_cutoff", bucket_cutoff),
        )
    }
    values["d_minus_now"] = values["deliver_at"] - values["now"]
    return ValidityResult(system, invariant, "counterexample", 0, states=(values,), elapsed_s=elapsed)


def saturation_counterexample() -> ValidityResult:
    """The strict ``current`` rule with the clock allowed up to ``Long.MAX_VALUE``: early at the very end."""
    return offer_rule_proof("current", True, "DD-I1", now_max=MAX_LONG)


def proofs(depth: int) -> list[tuple[ProofResult, bool]]:
    """DD-I1 and DD-I10 of ``current`` in both modes; twins: ``pr23611`` is early, the bound is tight.

    ``depth`` is unused: each claim is one unbounded validity query.
    """
    out: list[tuple[ProofResult, bool]] = []
    for strict in (False, True):
        out.append((offer_rule_proof("current", strict, "DD-I1"), True))
        out.append((offer_rule_proof("current", strict, "DD-I10"), True))
        out.append((offer_rule_proof("pr23611", strict, "DD-I1"), False))
        out.append((offer_rule_proof("current", strict, "DD-I10", tighter=1), False))
    return out
