"""Z3 proof of MD-I1's ordering half: under PIP-453's ordered worker pool a path's tasks run one at a
time, in submission order; a work-stealing pool (an idle worker takes another worker's head task)
is the twin that must break it.

The pool is abstracted to `TASKS` tasks submitted in index order, each for a symbolic path (0 or 1),
and `WORKERS` single-threaded FIFO workers. The path-to-worker map is symbolic too, so one proof
covers every `choose_thread` outcome, including both paths on one worker. A task is 0 not yet
submitted, 1 queued, 2 running or 3 done; a worker starts the head of its own queue when it is idle
(`start`), and a running task finishes (`finish`). MD-I1 here: for tasks i < j of the same path,
j starts only after i is done. It is proved by k-induction together with the pool's well-formedness
`MD-I1-W` (submitted tasks of a path share a worker, one running task per worker, a worker starts
its tasks in submission order), which is itself proved like the other.
"""

from __future__ import annotations

from collections.abc import Mapping

import z3

from models.core import Action
from properties.engines.bmc import Frame, ProofResult, Sort, SymbolicSystem, bmc, prove

TASKS = 3
WORKERS = 2
ACTIONS = ("submit", "start", "finish")


def _sorts() -> dict[str, Sort]:
    sorts: dict[str, Sort] = {"next": z3.Int, "map0": z3.Int, "map1": z3.Int}
    for i in range(TASKS):
        sorts.update({f"st{i}": z3.Int, f"w{i}": z3.Int, f"path{i}": z3.Int})
    return sorts


def _keep(s: Frame, t: Frame, **changed: z3.ExprRef) -> z3.BoolRef:
    return z3.And(*[t[name] == changed.get(name, s[name]) for name in s])


def _worker_of(s: Frame, i: int) -> z3.ArithRef:
    return z3.If(s[f"path{i}"] == 0, s["map0"], s["map1"])


def _idle(s: Frame, w: z3.ArithRef) -> z3.BoolRef:
    return z3.And(*[z3.Not(z3.And(s[f"st{j}"] == 2, s[f"w{j}"] == w)) for j in range(TASKS)])


def _head(s: Frame, i: int, w: z3.ArithRef) -> z3.BoolRef:
    """Task i is the oldest task queued on worker w."""
    older = [z3.Not(z3.And(s[f"st{j}"] == 1, s[f"w{j}"] == w)) for j in range(i)]
    return z3.And(s[f"st{i}"] == 1, s[f"w{i}"] == w, *older)


def pool_system(stealing: bool = False) -> SymbolicSystem:
    """The ordered pool, or (`stealing`) one whose idle workers with an empty queue steal a head task."""

    def trans(s: Frame, a: Frame, t: Frame) -> z3.BoolRef:
        i, w = a["i"], a["w"]
        options = []
        for k in range(TASKS):
            submitted = {f"st{k}": z3.IntVal(1), f"w{k}": _worker_of(s, k)}
            submit = _keep(s, t, next=s["next"] + 1, **submitted)
            options.append(z3.And(a["action"] == 0, s["next"] == k, i == k, submit))
            own = z3.And(_head(s, k, w), _idle(s, w))
            if stealing:
                empty = z3.And(*[z3.Not(z3.And(s[f"st{j}"] == 1, s[f"w{j}"] == w)) for j in range(TASKS)])
                victim = s[f"w{k}"]
                own = z3.Or(own, z3.And(_idle(s, w), empty, victim != w, _head(s, k, victim)))
            options.append(z3.And(a["action"] == 1, i == k, w >= 0, w < WORKERS, own,
                                  _keep(s, t, **{f"st{k}": z3.IntVal(2), f"w{k}": w})))
            options.append(z3.And(a["action"] == 2, i == k, s[f"st{k}"] == 2, _keep(s, t, **{f"st{k}": z3.IntVal(3)})))
        return z3.Or(*options)

    def init(f: Frame) -> z3.BoolRef:
        constraints = [f["next"] == 0]
        for name in ("map0", "map1"):
            constraints += [f[name] >= 0, f[name] < WORKERS]
        for i in range(TASKS):
            constraints += [f[f"st{i}"] == 0, f[f"w{i}"] == -1, z3.Or(f[f"path{i}"] == 0, f[f"path{i}"] == 1)]
        return z3.And(*constraints)

    def ordered(f: Frame) -> z3.BoolRef:
        pairs = [
            z3.Implies(z3.And(f[f"path{i}"] == f[f"path{j}"], f[f"st{j}"] >= 2), f[f"st{i}"] == 3)
            for i in range(TASKS) for j in range(i + 1, TASKS)
        ]
        return z3.And(*pairs)

    def well_formed(f: Frame) -> z3.BoolRef:
        out = []
        for i in range(TASKS):
            submitted = f[f"st{i}"] >= 1
            out += [
                f[f"st{i}"] >= 0, f[f"st{i}"] <= 3, submitted == (i < f["next"]),
                z3.Or(f[f"path{i}"] == 0, f[f"path{i}"] == 1),
                z3.Implies(submitted, f[f"w{i}"] == _worker_of(f, i)),
            ]
            for j in range(i + 1, TASKS):
                same = f[f"w{i}"] == f[f"w{j}"]
                out += [
                    z3.Implies(z3.And(same, f[f"st{j}"] >= 2), f[f"st{i}"] >= 2),
                    z3.Implies(same, z3.Not(z3.And(f[f"st{i}"] == 2, f[f"st{j}"] == 2))),
                ]
        out += [f["map0"] >= 0, f["map0"] < WORKERS, f["map1"] >= 0, f["map1"] < WORKERS]
        return z3.And(*out)

    def decode(values: Mapping[str, int | bool]) -> Action:
        name = ACTIONS[int(values["action"])]
        if name == "start":
            return Action.of(name, i=int(values["i"]), w=int(values["w"]))
        return Action.of(name, i=int(values["i"]))

    return SymbolicSystem(
        name="metadata-pool-" + ("work_stealing" if stealing else "ordered"),
        state=_sorts(),
        choice={"i": z3.Int, "w": z3.Int},
        action_names=ACTIONS,
        init=init,
        trans=trans,
        invariants={"MD-I1": ordered, "MD-I1-W": well_formed},
        decode=decode,
    )


def proofs(depth: int) -> list[tuple[ProofResult, bool]]:
    """MD-I1 (with its well-formedness) on the ordered pool must hold; on the stealing pool it must fail."""
    held = [(result, True) for result in prove(pool_system(), depth)]
    return [*held, *[(result, False) for result in bmc(pool_system(stealing=True), depth, ["MD-I1"])]]
