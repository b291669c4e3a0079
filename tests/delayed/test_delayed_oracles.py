"""The reference adapter's independent oracles for DD-I3, DD-I4 and DD-I10 (`properties.delayed.binding`).

Each test breaks one thing behind the tracker's back and checks that the adapter names exactly the
invariant the spec says is broken, judged from its own ledger of accepted triples; the planted bugs
`tests/mutants/delayed-*.patch` are the same checks' twins under the default `check`.
"""

from __future__ import annotations

import pytest

from models.core import Action
from models.delayed import EXPLORE_CONFIG
from properties.delayed.binding import DelayedReference

# EXPLORE_CONFIG: T = 3, P = 2, non-strict, current: key = trim(D), BC(now) = now + 2.


def _two_in_one_bucket() -> DelayedReference:
    """(1, 0) and (2, 0) at D = 5 (key 4), then now = 2: both due."""
    reference = DelayedReference(EXPLORE_CONFIG, "current")
    for action in (
        Action.of("add", ledger=1, entry=0, deliver_at=5),
        Action.of("add", ledger=2, entry=0, deliver_at=5),
        Action.of("advance", now=2),
    ):
        reference.apply(action)
    assert reference.violations() == []
    return reference


def test_a_drain_in_order_passes() -> None:
    reference = _two_in_one_bucket()
    assert reference.apply(Action.of("get_scheduled", limit=1)) == {"offered": [[1, 0]], "delivered": [[1, 0]]}
    assert reference.violations() == []


def test_dd_i4_a_later_ledger_offered_first() -> None:
    reference = _two_in_one_bucket()
    buckets = reference.tracker.buckets
    drain = buckets.drain

    def later_first(cutoff: int, n: int) -> list[tuple[int, int, int]]:
        everything = drain(cutoff, 10)
        for triple in everything[:-n]:
            buckets.add(*triple)  # put the first ones back
        return everything[-n:]

    buckets.drain = later_first  # type: ignore[method-assign]
    reference.apply(Action.of("get_scheduled", limit=1))
    assert reference.violations() == ["DD-I4"]


def test_dd_i3_a_message_filed_under_another_key() -> None:
    reference = DelayedReference(EXPLORE_CONFIG, "current")
    reference.apply(Action.of("add", ledger=1, entry=0, deliver_at=5))
    buckets = reference.tracker.buckets
    buckets.clear()
    buckets.add(6, 1, 0)  # the ledger says key trim(5) = 4
    assert "DD-I3" in reference.violations()


@pytest.mark.parametrize(("now", "expected"), [(2, ["DD-I3"]), (3, ["DD-I10", "DD-I3"])])
def test_dd_i3_and_dd_i10_a_due_message_not_found(
    monkeypatch: pytest.MonkeyPatch, now: int, expected: list[str]
) -> None:
    """Due at 2 (key 4 <= BC); at 3 legacy has offered D = 5 for P - 1 = 1 ms already (D - T = 2)."""
    reference = DelayedReference(EXPLORE_CONFIG, "current")
    reference.apply(Action.of("add", ledger=1, entry=0, deliver_at=5))
    monkeypatch.setattr(reference.tracker, "bucket_cutoff_time", lambda: -1)
    reference.apply(Action.of("advance", now=now))
    reference.apply(Action.of("get_scheduled", limit=2))
    assert reference.violations() == expected
