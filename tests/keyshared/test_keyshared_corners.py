"""Issue 22's corners: each small configuration reaches its corner and is replayed whole on the reference.

The planted bugs of `tests/mutants/keyshared-*.patch` are the twins of these checks; here we make
sure the corners stay reached and stay within the conformance budget of `brokerspec check`, which
would otherwise cut the replay short before the corner.
"""

from __future__ import annotations

import pytest

from properties.engines.checks import CONFORMANCE_STEPS
from properties.engines.conformance import conform
from properties.engines.coverage import from_exploration
from properties.engines.explorer import explore
from properties.keyshared.binding import MECHANISM, make_model, make_reference
from properties.keyshared.dispatcher import EXPLORE_CONFIGS

CORNERS = {
    "collide": {"two consumers collided on a ring point", "a collided consumer was promoted",
                "a draining hash came back to its draining consumer"},
    "ackjump": {"mark-delete moved past a draining entry"},
    "unblock": {"a hash was unblocked during a pass"},
}


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_corner_configuration_reaches_its_corner(name: str) -> None:
    model = make_model(EXPLORE_CONFIGS[name], "pip379")
    exploration = explore(model, check_liveness=False, check_deadlock=False)
    assert exploration.complete
    assert CORNERS[name] <= from_exploration(MECHANISM, model, exploration).reached


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_corner_configuration_is_replayed_whole_on_the_reference(name: str) -> None:
    config = EXPLORE_CONFIGS[name]
    result = conform(lambda: make_model(config, "pip379"),
                     lambda: make_reference(make_model(config, "pip379").config, "pip379"),
                     max_steps=CONFORMANCE_STEPS // 5)
    assert result.ok and result.complete and result.covered == result.edges, result.summary()
