"""Spec §6: the ``pr23611`` variant breaks DD-I1 and DD-I9 on concrete scenarios; ``current`` keeps them.

DD-I2 (no early delivery) holds in both, because the dispatcher re-checks the exact ``D``.
"""

from __future__ import annotations

import pytest

from reference_impl.delayed import DispatcherModel, InMemoryDelayedDeliveryTracker, Variant
from tests.delayed.support import ManualClock, check_invariants, early_deliveries, early_offers


def run_per_ms(
    variant: Variant, tick: int, strict: bool, messages: list[tuple[int, int, int]], start: int, end: int
) -> DispatcherModel:
    """Read ``messages`` at ``start``, then one round and due timer firings per ms until ``end``."""
    clock = ManualClock(start)
    tracker = InMemoryDelayedDeliveryTracker(tick, clock, strict, 0, variant)
    dispatcher = DispatcherModel(tracker, max_messages_per_round=len(messages))
    for ledger, entry, d in messages:
        dispatcher.read(ledger, entry, d)
    for now in range(start, end):
        clock.set(now)
        tracker.timer.fire_due()
        dispatcher.dispatch_round()
        check_invariants(tracker)
    return dispatcher


def max_earliness(dispatcher: DispatcherModel) -> int:
    return max(o.deliver_at - o.now for o in dispatcher.offers)


SCENARIOS = {
    # E4 at tick 100: strict, D = 11 read at now 10.
    "e4": (100, True, [(1, 1, 11)], 10, 80),
    # E11: strict, T = 1000.
    "e11": (1000, True, [(1, 1, 60400), (2, 2, 61000)], 59000, 61500),
    # The worked example in non-strict mode.
    "worked-non-strict": (1000, False, [(1, 1, 60400)], 58000, 60500),
    # D = k*P + P - 1 maximises earliness: T + P - 1 non-strict, P - 1 strict.
    "max-non-strict": (100, False, [(1, 1, 10 * 64 + 63)], 0, 800),
    "max-strict": (100, True, [(1, 1, 10 * 64 + 63)], 0, 800),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_pr23611_violates_dd_i1_and_dd_i9_where_current_does_not(name: str) -> None:
    tick, strict, messages, start, end = SCENARIOS[name]
    buggy = run_per_ms("pr23611", tick, strict, messages, start, end)
    fixed = run_per_ms("current", tick, strict, messages, start, end)

    assert early_offers(buggy) != []  # DD-I1 broken
    assert buggy.wasted_replays > 0  # DD-I9 broken
    assert early_offers(fixed) == []
    assert fixed.wasted_replays == 0

    for dispatcher in (buggy, fixed):  # DD-I2 and completeness in both
        assert early_deliveries(dispatcher) == []
        assert sorted(d.position for d in dispatcher.deliveries) == sorted(
            (ledger, entry) for ledger, entry, _ in messages
        )


@pytest.mark.parametrize(("strict", "limit"), [(False, 100 + 64 - 1), (True, 64 - 1)])
def test_pr23611_earliness_reaches_the_documented_bound(strict: bool, limit: int) -> None:
    name = "max-strict" if strict else "max-non-strict"
    tick, _, messages, start, end = SCENARIOS[name]
    assert max_earliness(run_per_ms("pr23611", tick, strict, messages, start, end)) == limit
    current = run_per_ms("current", tick, strict, messages, start, end)
    assert max_earliness(current) <= (0 if strict else tick)


def test_e4_offer_is_one_ms_early_under_pr23611() -> None:
    tick, strict, messages, start, end = SCENARIOS["e4"]
    offers = early_offers(run_per_ms("pr23611", tick, strict, messages, start, end))
    assert [(o.now, o.deliver_at) for o in offers] == [(10, 11)]


def test_e11_under_per_ms_rounds_pr23611_offers_from_the_trimmed_key() -> None:
    """With a round every ms the first offer is at trim(60400) = 59904, 496 ms before D (table row)."""
    tick, strict, messages, start, end = SCENARIOS["e11"]
    buggy = run_per_ms("pr23611", tick, strict, messages, start, end)
    first = early_offers(buggy)[0]
    assert (first.position, first.now, first.deliver_at - first.now) == ((1, 1), 59904, 496)
    assert buggy.deliveries[0].now == 60400
