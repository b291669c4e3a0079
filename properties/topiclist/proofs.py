"""Z3 encoding of `AsyncSemaphore` (PIP-442) for bounded proofs of TL-I1..TL-I3 and their twins.

The semaphore is abstracted to what the accounting depends on: `available`, a FIFO queue of at
most `QUEUE` requests (permits, the slot of the permit a growing update replaces, and the enqueue
sequence number), and `SLOTS` issued permits with their current values (swapped to 0 when
released or consumed). The pool size `max` is symbolic (any value in 1..1000), so one proof covers
every pool size. A pass is abstracted to its atomic unit: grant the head, or cancel the head.

TL-I1..TL-I3 are not inductive on their own (a state with a negative permit value satisfies
TL-I2 yet breaks TL-I1 after a release), so the k-induction closes over their conjunction with the
well-formedness invariant `TL-W` (permit values non-negative, queue entries within bounds and
pointing at issued permits, sequence numbers ordered), which is itself proved like the others.

Twins (mutants the same encoding must catch): `release_not_idempotent` adds a permit's
original value on every release (TL-I1/TL-I2), `grant_any_fitting` grants any waiting request
that fits instead of only the head (TL-I3).
"""

from __future__ import annotations

from collections.abc import Mapping

import z3

from models.core import Action
from properties.engines.bmc import Frame, ProofResult, Sort, SymbolicSystem, prove

QUEUE = 3
SLOTS = 4
MUTANTS = {"release_not_idempotent": "TL-I2", "grant_any_fitting": "TL-I3"}
ACTIONS = ("acquire", "grow", "release", "grant", "timeout", "cancel_head", "shrink", "close")


def _state_sorts() -> dict[str, Sort]:
    sorts: dict[str, Sort] = {"max": z3.Int, "avail": z3.Int, "closed": z3.Bool, "qlen": z3.Int,
                                "nseq": z3.Int, "last": z3.Int}
    for i in range(QUEUE):
        sorts.update({f"qn{i}": z3.Int, f"qp{i}": z3.Int, f"qs{i}": z3.Int})
    for j in range(SLOTS):
        sorts.update({f"pv{j}": z3.Int, f"po{j}": z3.Int, f"pu{j}": z3.Bool})
    return sorts


def _sum(terms: list[z3.ArithRef]) -> z3.ArithRef:
    return z3.Sum(*terms) if terms else z3.IntVal(0)


def _at(s: Frame, prefix: str, index: z3.ArithRef, size: int) -> z3.ExprRef:
    """`s[prefix{index}]` for a symbolic index (the value at 0 when out of range)."""
    out = s[f"{prefix}0"]
    for p in range(1, size):
        out = z3.If(index == p, s[f"{prefix}{p}"], out)
    return out


def _unchanged(s: Frame, t: Frame, **changed: z3.ExprRef) -> z3.BoolRef:
    return z3.And(*[t[name] == changed.get(name, s[name]) for name in s])


def _queue_without(s: Frame, index: z3.ArithRef) -> dict[str, z3.ExprRef]:
    """The queue fields after removing entry `index` (later entries shift toward the head)."""
    out: dict[str, z3.ExprRef] = {"qlen": s["qlen"] - 1}
    for p in range(QUEUE):
        for field in ("qn", "qp", "qs"):
            later = s[f"{field}{p + 1}"] if p + 1 < QUEUE else z3.IntVal(0)
            out[f"{field}{p}"] = z3.If(z3.IntVal(p) < index, s[f"{field}{p}"], later)
    return out


def _append(s: Frame, n: z3.ArithRef, prev: z3.ArithRef) -> dict[str, z3.ExprRef]:
    out: dict[str, z3.ExprRef] = {"qlen": s["qlen"] + 1, "nseq": s["nseq"] + 1}
    for p in range(QUEUE):
        here = s["qlen"] == p
        out[f"qn{p}"] = z3.If(here, n, s[f"qn{p}"])
        out[f"qp{p}"] = z3.If(here, prev, s[f"qp{p}"])
        out[f"qs{p}"] = z3.If(here, s["nseq"], s[f"qs{p}"])
    return out


def _issue(s: Frame, slot: z3.ArithRef, value: z3.ArithRef, consumed: z3.ArithRef) -> dict[str, z3.ExprRef]:
    """A new permit of `value` in the unused `slot`; the permit in slot `consumed` is swapped to 0."""
    out: dict[str, z3.ExprRef] = {}
    for j in range(SLOTS):
        out[f"pv{j}"] = z3.If(slot == j, value, z3.If(consumed == j, 0, s[f"pv{j}"]))
        out[f"po{j}"] = z3.If(slot == j, value, s[f"po{j}"])
        out[f"pu{j}"] = z3.Or(s[f"pu{j}"], slot == j)
    return out


def semaphore_system(mutant: str | None = None) -> SymbolicSystem:
    """The semaphore as a `SymbolicSystem`; `mutant` selects one of `MUTANTS` (None is the fix)."""

    def trans(s: Frame, a: Frame, t: Frame) -> z3.BoolRef:
        n, j, k, i = a["n"], a["j"], a["k"], a["i"]
        slot_ok = z3.And(j >= 0, j < SLOTS, _at(s, "pu", j, SLOTS))
        free_ok = z3.And(k >= 0, k < SLOTS, z3.Not(_at(s, "pu", k, SLOTS)))
        value_j = _at(s, "pv", j, SLOTS)
        can_enqueue = z3.And(z3.Not(s["closed"]), s["qlen"] < QUEUE)

        def granted(index: z3.ArithRef) -> z3.BoolRef:
            permits, prev = _at(s, "qn", index, QUEUE), _at(s, "qp", index, QUEUE)
            previous = z3.If(prev >= 0, _at(s, "pv", prev, SLOTS), 0)
            required = permits - previous
            return z3.And(
                z3.Not(s["closed"]), index >= 0, index < s["qlen"], s["avail"] > 0, required <= s["avail"], free_ok,
                _unchanged(s, t, avail=s["avail"] - required, last=_at(s, "qs", index, QUEUE),
                           **_queue_without(s, index), **_issue(s, k, permits, prev)),
            )

        released = _at(s, "po", j, SLOTS) if mutant == "release_not_idempotent" else value_j
        no_slot = z3.IntVal(-1)
        return z3.Or(
            z3.And(a["action"] == 0, can_enqueue, n >= 0, n <= s["max"], _unchanged(s, t, **_append(s, n, no_slot))),
            z3.And(a["action"] == 1, can_enqueue, slot_ok, n > value_j, n <= s["max"],
                   _unchanged(s, t, **_append(s, n, j))),
            z3.And(a["action"] == 2, slot_ok,
                   _unchanged(s, t, avail=s["avail"] + released, **_issue(s, no_slot, z3.IntVal(0), j))),
            z3.And(a["action"] == 3, granted(i if mutant == "grant_any_fitting" else z3.IntVal(0))),
            z3.And(a["action"] == 4, i >= 0, i < s["qlen"], _unchanged(s, t, **_queue_without(s, i))),
            z3.And(a["action"] == 5, z3.Not(s["closed"]), s["qlen"] > 0, s["avail"] > 0,
                   _unchanged(s, t, **_queue_without(s, z3.IntVal(0)))),
            z3.And(a["action"] == 6, slot_ok, free_ok, n >= 0, n <= value_j,
                   _unchanged(s, t, avail=s["avail"] + value_j - n, **_issue(s, k, n, j))),
            z3.And(a["action"] == 7, _unchanged(s, t, closed=z3.BoolVal(True), qlen=z3.IntVal(0))),
        )

    def init(s: Frame) -> z3.BoolRef:
        return z3.And(
            s["max"] >= 1, s["max"] <= 1000, s["avail"] == s["max"], z3.Not(s["closed"]), s["qlen"] == 0,
            s["nseq"] == 0, s["last"] == -1,
            *[z3.And(s[f"pv{j}"] == 0, s[f"po{j}"] == 0, z3.Not(s[f"pu{j}"])) for j in range(SLOTS)],
            *[z3.And(s[f"qn{p}"] == 0, s[f"qp{p}"] == 0, s[f"qs{p}"] == 0) for p in range(QUEUE)],
        )

    def queued(s: Frame, p: int) -> z3.BoolRef:
        return z3.IntVal(p) < s["qlen"]

    invariants = {
        "TL-I1": lambda s: z3.And(s["avail"] >= 0, s["avail"] <= s["max"]),
        "TL-I2": lambda s: s["max"] - s["avail"] == _sum([s[f"pv{j}"] for j in range(SLOTS)]),
        "TL-I3": lambda s: z3.And(
            *[z3.Implies(queued(s, p), s[f"qs{p}"] > s["last"]) for p in range(QUEUE)],
            *[z3.Implies(queued(s, p + 1), s[f"qs{p}"] < s[f"qs{p + 1}"]) for p in range(QUEUE - 1)],
        ),
        "TL-W": lambda s: z3.And(
            s["qlen"] >= 0, s["qlen"] <= QUEUE, s["last"] < s["nseq"], z3.Implies(s["closed"], s["qlen"] == 0),
            *[z3.And(s[f"pv{j}"] >= 0, s[f"pv{j}"] <= s[f"po{j}"], s[f"po{j}"] <= s["max"],
                     z3.Implies(z3.Not(s[f"pu{j}"]), z3.And(s[f"pv{j}"] == 0, s[f"po{j}"] == 0)))
              for j in range(SLOTS)],
            *[z3.Implies(queued(s, p), z3.And(
                s[f"qn{p}"] >= 0, s[f"qn{p}"] <= s["max"], s[f"qs{p}"] < s["nseq"],
                z3.Or(s[f"qp{p}"] == -1, z3.And(s[f"qp{p}"] >= 0, s[f"qp{p}"] < SLOTS,
                                                 _at(s, "pu", s[f"qp{p}"], SLOTS)))))
              for p in range(QUEUE)],
        ),
    }

    def decode(values: Mapping[str, int | bool]) -> Action:
        name = ACTIONS[int(values["action"])]
        picks = {"acquire": ("n",), "grow": ("j", "n"), "release": ("j",), "grant": ("i",) if mutant else (),
                 "timeout": ("i",), "shrink": ("j", "n")}.get(name, ())
        return Action.of(name, **{p: int(values[p]) for p in picks})

    return SymbolicSystem(
        name=f"AsyncSemaphore[{mutant}]" if mutant else "AsyncSemaphore",
        state=_state_sorts(),
        choice={"n": z3.Int, "j": z3.Int, "k": z3.Int, "i": z3.Int},
        action_names=ACTIONS,
        init=init,
        trans=trans,
        invariants=invariants,
        decode=decode,
    )


def proofs(depth: int) -> list[tuple[ProofResult, bool]]:
    """TL-I1..TL-I3 (and TL-W) proved on the semaphore; each mutant must break its invariant."""
    results = [(r, True) for r in prove(semaphore_system(), depth)]
    for mutant, invariant in MUTANTS.items():
        [result] = prove(semaphore_system(mutant), depth, invariants=[invariant])
        results.append((result, False))
    return results
