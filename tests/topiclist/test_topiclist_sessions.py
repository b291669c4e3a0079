"""The topic-list watcher across metadata sessions (`scope: sessions`): the model, its reference and the finding.

One change and two losses reconcile in every interleaving; a second change lets an update still queued at a loss be
dropped while the snapshot counts it (docs/findings/topiclist-sessions-dropped-queued-update.md), which the model and
the reference both show. `tests/mutants/topiclist-sessions-no-reconcile.patch` is TL-S1's twin through `check`.
"""

from __future__ import annotations

import pytest

from models.core import Action
from models.topiclist.common import topics_hash
from models.topiclist.sessions import DEFAULT_CONFIG, SessionsModel
from properties.engines.explorer import explore
from properties.engines.lockstep import Lockstep
from properties.topiclist.binding import SESSIONS_EXPLORE_CONFIGS
from properties.topiclist.sessions import SessionsReference

A = "persistent://public/default/a"
FINDING = [Action.of("toggle", topic=A), Action.of("toggle", topic=A), Action("lose"), Action("reconnect"),
           Action("step"), Action("step"), Action("complete_listing")]
"""The finding's trace: -a in flight, +a queued, the loss drops +a, the reconciliation finds nothing to send."""


def test_one_change_reconciles_in_every_interleaving() -> None:
    model = SessionsModel(SESSIONS_EXPLORE_CONFIGS["sessions"])
    result = explore(model, terminal_ok=model.terminal_ok)
    assert (result.ok, len(result.states)) == (True, 135)


def test_a_second_change_loses_the_queued_update() -> None:
    model = SessionsModel(SESSIONS_EXPLORE_CONFIGS["sessions-race"])
    result = explore(model, terminal_ok=model.terminal_ok)
    assert [(f.name, list(f.path)) for f in result.findings] == [("TL-S1", FINDING)]


def test_the_reference_shows_the_finding_on_its_own_records() -> None:
    reference = SessionsReference(DEFAULT_CONFIG, "current")
    lockstep = Lockstep(SessionsModel(DEFAULT_CONFIG), reference)
    outcomes = [lockstep.apply(action) for action in FINDING]
    assert [o.failures for o in outcomes] == [()] * 6 + [("TL-S1",)]
    assert reference.vars()["client"] == {"topics": [], "hash": "00000000"}
    assert reference.namespace == [A]


def test_a_change_during_the_loss_is_reconciled() -> None:
    reference = SessionsReference(DEFAULT_CONFIG, "current")
    lockstep = Lockstep(SessionsModel(DEFAULT_CONFIG), reference)
    b = "persistent://public/default/b"
    for action in (Action("lose"), Action.of("toggle", topic=b), Action("reconnect"), Action("step"),
                   Action("complete_listing"), Action("step")):
        assert not lockstep.apply(action).failures
    assert reference.vars()["client"] == {"topics": [A, b], "hash": topics_hash((A, b))}


def test_a_bad_configuration_is_named() -> None:
    with pytest.raises(ValueError, match="initial must be among topics"):
        SessionsModel({**DEFAULT_CONFIG, "initial": ("persistent://public/default/c",)})
