"""Bounded model checking and k-induction with Z3 over a symbolic transition system.

A `SymbolicSystem` states a model as Z3 formulas over one frame of variables per step: `init`
on frame 0, `trans` between frame i, the action chosen at i and frame i+1, and named invariants
on a frame. `prove` answers, per invariant, either "holds to depth k" (every execution of at most
k steps keeps it), "inductive" (k-induction closed the proof for every depth), or a concrete
shortest counterexample whose actions can be replayed and written as a trace.

`bmc` and `k_induction` each build and solve their formulas in a Z3 context of their own, so a
verdict and its counterexample are a function of the system and the depth alone: in Z3's one
global context, terms made by earlier proofs in the process shift the ids of the new terms and
with them the solver's search, and the same proof returned a different counterexample.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import z3

from models.core import Action

Frame = dict[str, z3.ExprRef]
Sort = Callable[[str], z3.ExprRef]


@dataclass(frozen=True)
class SymbolicSystem:
    """A transition system in Z3 terms.

    `state` and `choice` map variable names to Z3 constructors (`z3.Int`, `z3.Bool`); a choice
    frame holds the action taken at a step (an `action` index into `action_names` plus its
    parameters). `decode` turns a concrete choice frame back into a model `Action`.
    """

    name: str
    state: Mapping[str, Sort]
    choice: Mapping[str, Sort]
    action_names: Sequence[str]
    init: Callable[[Frame], z3.BoolRef]
    trans: Callable[[Frame, Frame, Frame], z3.BoolRef]
    invariants: Mapping[str, Callable[[Frame], z3.BoolRef]]
    decode: Callable[[Mapping[str, int | bool]], Action]


@dataclass(frozen=True)
class ProofResult:
    """The verdict on one invariant: `bounded`, `inductive` or `counterexample` (with its path)."""

    system: str
    invariant: str
    status: str
    depth: int
    induction_k: int | None = None
    states: tuple[dict[str, int | bool], ...] = ()
    actions: tuple[Action, ...] = ()
    elapsed_s: float = 0.0

    @property
    def holds(self) -> bool:
        return self.status in ("bounded", "inductive")

    def summary(self) -> str:
        if self.status == "inductive":
            return f"{self.induction_k}-inductive: holds at every depth (so to {self.depth})"
        if self.status == "bounded":
            return f"holds to depth {self.depth}"
        return f"counterexample at depth {self.depth}: " + ", ".join(str(a) for a in self.actions)


@contextmanager
def _own_context() -> Iterator[None]:
    """Make a fresh Z3 context the default one while a proof builds and solves its formulas.

    The systems build their terms with Z3's defaults (`z3.Int(name)`, `z3.IntVal(0)`, ...), which
    take the module's main context; swapping it keeps every proof module free of context
    plumbing, and a term built outside (in another context) fails loudly as a context mismatch.
    """
    saved = z3.z3._main_ctx
    z3.z3._main_ctx = z3.Context()
    try:
        yield
    finally:
        z3.z3._main_ctx = saved


def _frame(sorts: Mapping[str, Sort], suffix: str) -> Frame:
    return {name: make(f"{name}@{suffix}") for name, make in sorts.items()}


def _value(model: z3.ModelRef, expr: z3.ExprRef) -> int | bool:
    value = model.eval(expr, model_completion=True)
    if z3.is_bool(value):
        return bool(z3.is_true(value))
    return int(value.as_long())


def _choice_frame(system: SymbolicSystem, i: int) -> Frame:
    frame = _frame(system.choice, f"a{i}")
    frame["action"] = z3.Int(f"action@a{i}")
    return frame


def _counterexample(
    system: SymbolicSystem, model: z3.ModelRef, frames: list[Frame], choices: list[Frame], depth: int
) -> tuple[tuple[dict[str, int | bool], ...], tuple[Action, ...]]:
    states = tuple({n: _value(model, e) for n, e in frames[i].items()} for i in range(depth + 1))
    actions = tuple(
        system.decode({n: _value(model, e) for n, e in choices[i].items()}) for i in range(depth)
    )
    return states, actions


def bmc(system: SymbolicSystem, depth: int, invariants: Sequence[str] | None = None) -> list[ProofResult]:
    """Check each invariant on every execution of at most `depth` steps; shortest counterexamples."""
    with _own_context():
        return _bmc(system, depth, invariants)


def _bmc(system: SymbolicSystem, depth: int, invariants: Sequence[str] | None) -> list[ProofResult]:
    started = time.perf_counter()
    names = list(invariants if invariants is not None else system.invariants)
    solver = z3.Solver()
    frames = [_frame(system.state, "0")]
    choices: list[Frame] = []
    solver.add(system.init(frames[0]))
    if solver.check() == z3.unsat:
        raise ValueError(f"{system.name}: no initial state satisfies init, so any proof would be vacuous")
    open_names = list(names)
    results: dict[str, ProofResult] = {}
    for d in range(depth + 1):
        solver.push()
        solver.add(z3.Or(*[z3.Not(system.invariants[n](frames[d])) for n in open_names]))
        any_broken = solver.check() == z3.sat
        solver.pop()
        for name in list(open_names) if any_broken else []:
            solver.push()
            solver.add(z3.Not(system.invariants[name](frames[d])))
            if solver.check() == z3.sat:
                states, actions = _counterexample(system, solver.model(), frames, choices, d)
                results[name] = ProofResult(
                    system.name, name, "counterexample", d, None, states, actions,
                    time.perf_counter() - started,
                )
                open_names.remove(name)
            solver.pop()
        if d == depth or not open_names:
            break
        choice = _choice_frame(system, d)
        choice_range = z3.And(choice["action"] >= 0, choice["action"] < len(system.action_names))
        frames.append(_frame(system.state, str(d + 1)))
        choices.append(choice)
        solver.add(choice_range, system.trans(frames[d], choice, frames[d + 1]))
    for name in open_names:
        elapsed = time.perf_counter() - started
        results[name] = ProofResult(system.name, name, "bounded", depth, elapsed_s=elapsed)
    return [results[n] for n in names]


def k_induction(system: SymbolicSystem, max_k: int, invariants: Sequence[str] | None = None) -> int | None:
    """The smallest k <= max_k for which the conjunction of the invariants is k-inductive, else None.

    The step case assumes the invariants on k consecutive states of any execution (not only
    reachable ones) and asks Z3 for a successor that breaks one; unsat closes the induction, and
    together with `bmc` to depth k-1 this proves the invariants for every depth.
    """
    with _own_context():
        return _k_induction(system, max_k, invariants)


def _k_induction(system: SymbolicSystem, max_k: int, invariants: Sequence[str] | None) -> int | None:
    names = list(invariants if invariants is not None else system.invariants)

    def conj(frame: Frame) -> z3.BoolRef:
        return z3.And(*[system.invariants[n](frame) for n in names])

    for k in range(1, max_k + 1):
        solver = z3.Solver()
        frames = [_frame(system.state, f"k{i}") for i in range(k + 1)]
        for i in range(k):
            choice = _choice_frame(system, i)
            solver.add(choice["action"] >= 0, choice["action"] < len(system.action_names))
            solver.add(system.trans(frames[i], choice, frames[i + 1]), conj(frames[i]))
        solver.add(z3.Not(conj(frames[k])))
        if solver.check() == z3.unsat:
            return k
    return None


def prove(
    system: SymbolicSystem, depth: int, max_k: int = 3, invariants: Sequence[str] | None = None
) -> list[ProofResult]:
    """Every invariant for all executions of at most `depth` steps, or for all depths by induction.

    k-induction is tried first: if the conjunction is k-inductive, BMC to depth k-1 is the base
    case and together they prove every depth (so in particular `depth`). Otherwise BMC runs to
    `depth` and returns the shortest counterexamples it meets.
    """
    started = time.perf_counter()
    k = k_induction(system, max_k, invariants)
    if k is not None:
        base = bmc(system, k - 1, invariants)
        if all(r.holds for r in base):
            elapsed = time.perf_counter() - started
            return [ProofResult(r.system, r.invariant, "inductive", depth, k, elapsed_s=elapsed) for r in base]
        return base
    return bmc(system, depth, invariants)
