"""§6 variants: ``no_readd`` (KIP rejected alternative 8) breaks PQ-I1 and PQ-I2; ``current`` keeps them.

Each scenario runs the same produce trace on both variants through the manager (so cleanups follow the
manager schedule) and checks the invariants on the recorded (time, principal, pid, counted-new) events.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reference_impl.pidquota import ProducerIdQuotaManager, ProducerIdQuotaManagerCache, Variant

MIN = 60_000
W = 60 * MIN
L = 2
DELTA_T = W // L
HORIZON = W - DELTA_T

Sighting = tuple[int, str, int, bool]  # (time, principal, pid, counted as new)
Trace = list[tuple[int, str, list[int]]]


def _run(variant: Variant, trace: Trace) -> list[Sighting]:
    manager = ProducerIdQuotaManager(ProducerIdQuotaManagerCache(W, L, variant=variant), default_quota=100)
    sightings: list[Sighting] = []
    for t, principal, pids in trace:
        new = set(manager.on_produce(principal, pids, t).new_pids)
        sightings.extend((t, principal, pid, pid in new) for pid in dict.fromkeys(pids))
    return sightings


def pq_i1_violations(sightings: list[Sighting]) -> list[Sighting]:
    """Sightings counted new although the same (principal, pid) was tracked at most H earlier."""
    last: dict[tuple[str, int], int] = {}
    bad: list[Sighting] = []
    for t, principal, pid, new in sightings:
        key = (principal, pid)
        if new and key in last and t <= last[key] + HORIZON:
            bad.append((t, principal, pid, new))
        last[key] = t
    return bad


def pq_i2_violations(sightings: list[Sighting]) -> list[Sighting]:
    """In a run of sightings at most ΔT apart, any but the first counted new."""
    last: dict[tuple[str, int], int] = {}
    bad: list[Sighting] = []
    for t, principal, pid, new in sightings:
        key = (principal, pid)
        if new and key in last and t - last[key] <= DELTA_T:
            bad.append((t, principal, pid, new))
        last[key] = t
    return bad


def _d6() -> Trace:
    """D6: one long-running PID every 10 min for 3 h."""
    return [(m * MIN, "A", [424242]) for m in range(0, 181, 10)]


def _busy_principal() -> Trace:
    """The long-running PID 1 next to a fresh PID each time, so the principal is never idle: the PID is
    forgotten through its layer expiring (expire_head), not through the principal being removed."""
    return [(m * MIN, "A", [1, 1000 + m]) for m in range(0, 181, 10)]


def _two_principals() -> Trace:
    """A's two long-running PIDs every 25 min (< ΔT) while B is busy with fresh PIDs every 5 min:
    B's activity does not keep A's layers alive (PQ-I8)."""
    trace: Trace = []
    for m in range(0, 201, 5):
        if m % 25 == 0:
            trace.append((m * MIN, "A", [5, 6]))
        trace.append((m * MIN, "B", [2000 + m]))
    return trace


SCENARIOS: dict[str, Callable[[], Trace]] = {
    "d6": _d6,
    "busy_principal": _busy_principal,
    "two_principals": _two_principals,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_readd_breaks_pq_i1_and_pq_i2_where_current_keeps_them(scenario: str) -> None:
    trace = SCENARIOS[scenario]()
    broken = _run("no_readd", trace)
    assert pq_i1_violations(broken), "no_readd should forget a long-running PID within H"
    assert pq_i2_violations(broken), "no_readd should count a long-running PID twice"
    kept = _run("current", trace)
    assert pq_i1_violations(kept) == []
    assert pq_i2_violations(kept) == []


def test_d6_violations_are_at_90_and_180() -> None:
    broken = _run("no_readd", _d6())
    assert [t // MIN for t, _, _, _ in pq_i2_violations(broken)] == [90, 180]
    assert [t // MIN for t, _, _, _ in pq_i1_violations(broken)] == [90, 180]


def test_busy_principal_forgets_through_layer_expiry() -> None:
    broken = _run("no_readd", _busy_principal())
    assert [t // MIN for t, _, pid, new in broken if pid == 1 and new] == [0, 90, 180]
    cache = ProducerIdQuotaManagerCache(W, L, variant="no_readd")
    manager = ProducerIdQuotaManager(cache, default_quota=100)
    for t, principal, pids in _busy_principal():
        manager.on_produce(principal, pids, t)
        assert cache.principals() == ["A"]  # never removed, so the forgetting is per layer
