"""Holders taking tokens from a shared pool: a model symmetric in its holders, with planted bugs.

`fixed` keeps the pool's total within `limit`; `leaky` lets a holder take past it (TK-I1 breaks after
`limit + 1` takes, its shortest counterexample); `sticky` forbids a full holder to give back, so the
holders can no longer all return to nothing (TK-L1). In each the holders are alike, so `symmetric_key`
sorts their counts. `lopsided` gives holder 0 a capacity of 1: holders are no longer alike, and the
same sorting is a wrong symmetry that the checks must refuse.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param

VARIANTS = ("fixed", "leaky", "sticky", "lopsided")

Holders = tuple[int, ...]


class TokensModel:
    mechanism = "tokens"
    terminal_ok = threaded = None
    """A state without an enabled action is a deadlock (`Model.terminal_ok`); the actions are no threads' steps
    (`Model.threaded`)."""
    action_names: Sequence[str] = ("take", "give")

    def __init__(self, holders: int = 3, capacity: int = 2, limit: int = 4, variant: str = "fixed") -> None:
        assert variant in VARIANTS
        self.variant = variant
        self.config: Mapping[str, Param] = {"holders": holders, "capacity": capacity, "limit": limit}
        self.holders, self.limit = holders, limit
        self.capacity = tuple(1 if variant == "lopsided" and h == 0 else capacity for h in range(holders))
        self.invariants: Sequence[Invariant[Holders]] = [
            Invariant[Holders]("TK-I1", lambda s: sum(s) <= self.limit, "the holders hold at most the pool's limit")
        ]
        self.liveness: Sequence[Liveness[Holders]] = [
            Liveness[Holders]("TK-L1", lambda s: not any(s), "every token can always come back")
        ]

    def initial(self) -> Holders:
        return (0,) * self.holders

    def enabled(self, state: Holders) -> Sequence[Action]:
        out = []
        for h, held in enumerate(state):
            if held < self.capacity[h] and (self.variant == "leaky" or sum(state) < self.limit):
                out.append(Action.of("take", holder=h))
            if held and not (self.variant == "sticky" and held == self.capacity[h]):
                out.append(Action.of("give", holder=h))
        return out

    def step(self, state: Holders, action: Action) -> tuple[Holders, Observation]:
        if action not in self.enabled(state):
            raise ActionNotEnabled(action, f"holders hold {state}")
        h = action["holder"]
        assert isinstance(h, int)
        delta = 1 if action.name == "take" else -1
        return (*state[:h], state[h] + delta, *state[h + 1 :]), None

    def key(self, state: Holders) -> Hashable:
        return state

    def symmetric_key(self, state: Holders) -> Hashable:
        return tuple(sorted(state))

    def vars(self, state: Holders) -> dict[str, Json]:
        return {"held": list(state)}
