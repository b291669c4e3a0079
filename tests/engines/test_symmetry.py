"""Symmetry reduction keeps one state per orbit and the same verdicts at the same shortest lengths,
and a canonicalisation that is no symmetry is refused."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from properties.engines.explorer import Exploration, SymmetryError, explore, symmetry_error
from tests.engines.tiny import CounterModel
from tests.engines.tokens import Holders, TokensModel


def _verdicts(result: Exploration[Holders]) -> list[tuple[str, str, int]]:
    return [(f.kind, f.name, len(f.path)) for f in result.findings]


def _replayed(model: TokensModel, result: Exploration[Holders]) -> list[Holders]:
    """The last state of every finding's path, replayed on the model (every recorded path is a real one)."""
    ends = []
    for finding in result.findings:
        state = model.initial()
        for action in finding.path:
            state, _ = model.step(state, action)
        ends.append(state)
    return ends


def test_one_state_per_orbit_with_the_same_verdict() -> None:
    plain = explore(TokensModel())
    reduced = explore(TokensModel(), symmetry=True)
    assert plain.ok and reduced.ok and reduced.symmetry and not plain.symmetry
    assert len(plain.states) == 23  # counts of 0..2 in three holders, at most 4 in all
    assert len(reduced.states) == 8  # the multisets among them
    assert len({tuple(sorted(s)) for s in reduced.states}) == 8
    assert reduced.max_depth == plain.max_depth


@pytest.mark.parametrize("variant", ["leaky", "sticky"])
def test_a_planted_bug_is_found_at_the_same_shortest_length(variant: str) -> None:
    model = TokensModel(variant=variant)
    plain, reduced = explore(model), explore(model, symmetry=True)
    assert len(reduced.states) < len(plain.states)
    assert _verdicts(reduced) == _verdicts(plain) != []
    if variant == "leaky":
        assert _verdicts(reduced) == [("invariant", "TK-I1", 5)]
        assert sum(_replayed(model, reduced)[0]) == 5
    else:
        assert _verdicts(reduced) == [("deadlock", "deadlock", 4), ("liveness", "TK-L1", 2)]
        assert not model.enabled(_replayed(model, reduced)[0])


def test_a_wrong_canonicalisation_is_refused_where_it_merges_different_verdicts() -> None:
    class Forgetful(TokensModel):
        def symmetric_key(self, state: Holders) -> Hashable:
            return tuple(sorted(state))[1:]  # forgets the smallest count: merges totals that TK-I1 tells apart

    with pytest.raises(SymmetryError, match="TK-I1"):
        explore(Forgetful(variant="leaky"), symmetry=True)


def test_the_audit_refuses_holders_that_are_not_alike() -> None:
    assert symmetry_error(TokensModel()) is None
    assert symmetry_error(TokensModel(variant="leaky")) is None
    assert symmetry_error(TokensModel(variant="sticky")) is None
    why = symmetry_error(TokensModel(variant="lopsided"))
    assert why is not None and "successors" in why
    # the reduced search of the wrong symmetry is wrong indeed: it misses states of the real one
    lopsided = TokensModel(variant="lopsided")
    orbits = {tuple(sorted(s)) for s in explore(lopsided).states}
    assert len(explore(lopsided, symmetry=True).states) < len(orbits)


def test_symmetry_is_the_plain_search_where_none_is_declared_and_refuses_labels() -> None:
    plain, reduced = explore(CounterModel()), explore(CounterModel(), symmetry=True)
    assert len(reduced.states) == len(plain.states) and reduced.edges == plain.edges
    with pytest.raises(ValueError, match="replayed"):
        explore(TokensModel(), symmetry=True, record_labels=True)
    with pytest.raises(ValueError, match="no symmetry"):
        symmetry_error(CounterModel())
