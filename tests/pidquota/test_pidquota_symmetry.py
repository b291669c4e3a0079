"""pidquota's symmetry: principals, and PIDs under the exact hasher, are renamed without changing a verdict.

Every configuration that declares a symmetry is audited (its orbits form a bisimulation), explores
fewer states up to symmetry, and finds `no_readd`'s bug at the same shortest length; the murmur hasher
declares none, and renaming its PIDs anyway is refused.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import lru_cache, partial
from itertools import permutations

import pytest

from models.pidquota import PidQuotaModel, PQState
from properties.engines.explorer import SymmetryError, explore, symmetry_error
from properties.pidquota.binding import MECHANISM, MURMUR_CONFIG

SYMMETRIC = {"small": 1462, "two_principals": 1886, "three_layers": 8895}
"""The orbits of each configuration that declares a symmetry (of 2,916, 3,681 and 17,722 states)."""


def test_only_configurations_with_values_alike_declare_a_symmetry() -> None:
    declared = {name for name, config in MECHANISM.explore_configs.items()
                if PidQuotaModel(config).symmetric_key is not None}
    assert declared == set(SYMMETRIC)  # horizon: one principal, one PID; murmur: PIDs' bits overlap


@pytest.mark.parametrize("variant", ["current", "no_readd"])
@pytest.mark.parametrize("name", ["small", "two_principals"])
def test_the_declared_symmetry_is_one(name: str, variant: str) -> None:
    assert symmetry_error(PidQuotaModel(MECHANISM.explore_configs[name], variant)) is None


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
def test_fewer_states_same_verdicts_same_shortest_lengths(name: str) -> None:
    config = MECHANISM.explore_configs[name]
    for variant in ("current", "no_readd"):
        model = PidQuotaModel(config, variant)
        plain, reduced = explore(model), explore(model, symmetry=True)
        assert len(reduced.states) < len(plain.states)
        if variant == "current":
            assert len(reduced.states) == SYMMETRIC[name] and reduced.ok and plain.ok
        found = [(f.kind, f.name, len(f.path)) for f in reduced.findings]
        assert found == [(f.kind, f.name, len(f.path)) for f in plain.findings]
        assert variant == "current" or ("invariant", "PQ-I1", len(plain.findings[0].path)) in found


def test_renaming_murmur_pids_is_refused() -> None:
    """Under the murmur hasher PIDs set overlapping bits: renaming them is no symmetry, as the audit finds."""
    model = PidQuotaModel({**MURMUR_CONFIG, "pids": (1, 2, 3), "n_layer": 3})
    assert model.symmetric_key is None
    renamings = permutations(range(len(model.pids)))
    model._forms = tuple(lru_cache(None)(partial(model._slot_form, r)) for r in renamings)
    model.symmetric_key = model._symmetric_key
    assert symmetry_error(model) is not None


def test_a_key_that_forgets_a_broken_invariant_is_refused() -> None:
    class Forgetful(PidQuotaModel):
        def _symmetric_key(self, state: PQState) -> Hashable:
            return super()._symmetric_key(state._replace(broken=0))  # forgets which history invariant broke

    with pytest.raises(SymmetryError, match=r"PQ-I1|PQ-I2"):
        explore(Forgetful(MECHANISM.explore_configs["small"], "no_readd"), symmetry=True)
