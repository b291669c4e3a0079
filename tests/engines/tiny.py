"""A tiny bounded-counter mechanism with planted bugs, to test the engines against known answers.

`fixed` keeps `x <= limit` and can always get back to 0; `overflow` lets `add` jump past the
limit (shortest counterexample: add(2), add(2) with limit 3); `stuck` forbids `reset` once
locked, so a locked counter above 0 can never return to 0 (a liveness bug) and a locked counter
at the limit has nothing left to do (a deadlock).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple

import z3

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param
from properties.engines.bmc import Frame, SymbolicSystem
from properties.engines.lockstep import BaseImplementation
from properties.engines.mechanism import Mechanism

VARIANTS = ("fixed", "overflow", "stuck")
NAMES = ("inc", "add", "lock", "reset")


class Counter(NamedTuple):
    x: int
    locked: bool


class CounterModel:
    mechanism = "tiny"
    terminal_ok = symmetric_key = threaded = None
    """No optional member of `Model`: a state without an enabled action is a deadlock, no values are alike, and
    the actions are no threads' steps."""
    action_names: Sequence[str] = NAMES

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "fixed") -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}")
        self.config: Mapping[str, Param] = dict(config or {"limit": 3})
        self.variant = variant
        limit = self.config["limit"]
        assert isinstance(limit, int)
        self.limit = limit
        self.invariants: Sequence[Invariant[Counter]] = [
            Invariant[Counter]("C-I1", lambda s: s.x <= self.limit, "x never exceeds the limit")
        ]
        self.liveness: Sequence[Liveness[Counter]] = [
            Liveness[Counter]("C-L1", lambda s: s.x == 0, "the counter can always return to 0")
        ]

    def initial(self) -> Counter:
        return Counter(0, False)

    def enabled(self, state: Counter) -> Sequence[Action]:
        out = []
        if state.x < self.limit:
            out.append(Action.of("inc"))
        for n in (1, 2):
            if state.x + n <= self.limit or (self.variant == "overflow" and state.x < self.limit):
                out.append(Action.of("add", n=n))
        if not state.locked:
            out.append(Action.of("lock"))
        if not (self.variant == "stuck" and state.locked):
            out.append(Action.of("reset"))
        return out

    def step(self, state: Counter, action: Action) -> tuple[Counter, Observation]:
        if action not in self.enabled(state):
            raise ActionNotEnabled(action, f"x={state.x} locked={state.locked}")
        if action.name == "inc":
            nxt = state._replace(x=state.x + 1)
        elif action.name == "add":
            n = action["n"]
            assert isinstance(n, int)
            nxt = state._replace(x=state.x + n)
        elif action.name == "lock":
            nxt = state._replace(locked=True)
        else:
            nxt = Counter(0, False)
        return nxt, {"x": nxt.x}

    def key(self, state: Counter) -> Hashable:
        return state

    def vars(self, state: Counter) -> dict[str, Json]:
        return {"x": state.x, "locked": state.locked}


class CounterImpl(BaseImplementation):
    """A mutable implementation; `off_by_one` makes `add` count one too many (a divergence)."""

    def __init__(self, off_by_one: bool = False) -> None:
        self.x = 0
        self.locked = False
        self.off_by_one = off_by_one

    def apply(self, action: Action) -> Observation:
        if action.name == "inc":
            self.x += 1
        elif action.name == "add":
            n = action["n"]
            assert isinstance(n, int)
            self.x += n + (1 if self.off_by_one else 0)
        elif action.name == "lock":
            self.locked = True
        else:
            self.x, self.locked = 0, False
        return {"x": self.x}

    def vars(self) -> dict[str, Json]:
        return {"x": self.x, "locked": self.locked}

    def violations(self) -> list[str]:
        return []


def symbolic(limit: int = 3, variant: str = "fixed") -> SymbolicSystem:
    """The counter as Z3 formulas, with the same variants as `CounterModel` (but `stuck`)."""

    def trans(s: Frame, a: Frame, t: Frame) -> z3.BoolRef:
        keep_x, keep_lock = t["x"] == s["x"], t["locked"] == s["locked"]
        add_guard = s["x"] < limit if variant == "overflow" else s["x"] + a["n"] <= limit
        return z3.Or(
            z3.And(a["action"] == 0, s["x"] < limit, t["x"] == s["x"] + 1, keep_lock),
            z3.And(a["action"] == 1, z3.Or(a["n"] == 1, a["n"] == 2), add_guard, t["x"] == s["x"] + a["n"], keep_lock),
            z3.And(a["action"] == 2, z3.Not(s["locked"]), keep_x, t["locked"]),
            z3.And(a["action"] == 3, t["x"] == 0, z3.Not(t["locked"])),
        )

    def decode(values: Mapping[str, int | bool]) -> Action:
        name = NAMES[int(values["action"])]
        return Action.of("add", n=int(values["n"])) if name == "add" else Action.of(name)

    return SymbolicSystem(
        name=f"tiny-{variant}",
        state={"x": z3.Int, "locked": z3.Bool},
        choice={"n": z3.Int},
        action_names=NAMES,
        init=lambda f: z3.And(f["x"] == 0, z3.Not(f["locked"])),
        trans=trans,
        invariants={"C-I1": lambda f: f["x"] <= limit},
        decode=decode,
    )


MECHANISM = Mechanism(
    name="tiny",
    spec="tests/engines/tiny.py",
    make_model=lambda config, variant: CounterModel(config, variant),
    make_reference=lambda config, variant: CounterImpl(),
    current="fixed",
    twins={"overflow": "C-I1"},
    explore_configs={"small": {"limit": 3}},
    hypothesis_configs={"default": {"limit": 6}},
)
