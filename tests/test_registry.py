"""Every registered mechanism is wired the same way, so the engines and the CLI can trust it."""

from __future__ import annotations

import pytest

from models.core import violated
from properties import registry
from properties.cli.promote import corpus
from properties.engines.mechanism import Mechanism

MECHANISMS = list(registry.mechanisms().values())
IDS = [m.name for m in MECHANISMS]


def test_every_mechanism_of_the_design_is_registered() -> None:
    assert IDS, "no mechanism registered: brokerspec check would prove nothing"
    assert set(IDS) == {"topiclist", "keyshared", "delayed", "pidquota", "metadata"}


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=IDS)
def test_a_bad_variant_or_config_key_is_one_clear_error_naming_it(mechanism: Mechanism) -> None:
    with pytest.raises(ValueError, match=f"^unknown variant 'nope' of {mechanism.name} \\(known: "):
        mechanism.make_model(None, "nope")
    with pytest.raises(ValueError, match=f"^unknown config key\\(s\\) of {mechanism.name}: typo \\(known: "):
        mechanism.make_model({"typo": 1}, mechanism.current)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=IDS)
def test_models_build_for_every_variant_and_start_sound(mechanism: Mechanism) -> None:
    for variant in mechanism.variants:
        for config in (*mechanism.explore_configs.values(), *mechanism.hypothesis_configs.values()):
            model = mechanism.make_model(config, variant)
            assert model.mechanism == mechanism.name and model.variant == variant
            initial = model.initial()
            assert violated(model, initial) == []
            assert {a.name for a in model.enabled(initial)} <= set(model.action_names)
            assert model.key(initial) == model.key(model.initial())


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=IDS)
def test_each_twin_names_an_invariant_the_model_checks(mechanism: Mechanism) -> None:
    assert mechanism.twins, f"{mechanism.name} has no known-bad variant: its checks could not be shown to fail"
    for variant, invariant in mechanism.twins.items():
        model = mechanism.make_model(None, variant)
        names = {i.name for i in model.invariants} | {p.name for p in model.liveness} | {"deadlock"}
        assert invariant in names, f"{mechanism.name}/{variant}: {invariant} is not checked by the model"


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=IDS)
def test_each_twin_has_a_committed_counterexample(mechanism: Mechanism) -> None:
    saved = corpus(mechanism.name)
    assert saved, f"traces/corpus/{mechanism.name}/ is empty"
