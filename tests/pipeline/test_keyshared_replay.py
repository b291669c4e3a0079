"""The compiled pip379 replay agrees with the full model: on simulated subscriptions (clean, and with each
fault the simulator plants) and on those subscriptions mutated record by record, both find the same first
failing step; `conformance` sends only the subscriptions it fails to the full model. No Spark: the
function the `mapInArrow` tasks run is called directly."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from properties.engines.lockstep import DIVERGENCE
from properties.keyshared.eventlog import check as keyshared_check
from properties.keyshared.eventlog.check import python_replay
from properties.keyshared.eventlog.records import (
    EVENTS,
    ClientVerdict,
    LogError,
    Record,
    client_verdict,
    full_verdict,
    partition,
)
from properties.keyshared.eventlog.replay import compiled
from properties.keyshared.eventlog.simulate import FAULTS, partition_records, to_table, walk

FAULTED = (2, 9)


def _first_failures(records: Sequence[Record]) -> tuple[int | None, int | None]:
    """(the compiled replay's first failing step, the full pip379 model's), columns read as the pipeline does."""
    table = to_table(records)
    column = keyshared_check._column
    numbers = [keyshared_check._numbers(column(table, n)) for n in ("consumer", "position", "permits")]
    strings = [keyshared_check._strings(column(table, n)) for n in ("event", "key", "name")]
    fast = compiled("pip379")
    assert fast is not None
    step = fast.first_failure(strings[0], numbers[0], numbers[1], strings[1], strings[2], numbers[2], 0, len(records))
    try:
        full = full_verdict(partition(records), "pip379").step
    except LogError:
        full = 1
    return step, full


@pytest.mark.parametrize("fault", (None, *FAULTS))
def test_compiled_and_full_model_fail_the_same_subscriptions_at_the_same_step(fault: str | None) -> None:
    subscriptions = [partition_records(key, 250, 3, fault if key in FAULTED else None) for key in range(12)]
    steps = [_first_failures(records) for records in subscriptions]
    assert [fast for fast, _ in steps] == [full for _, full in steps]
    assert [key for key, (fast, _) in enumerate(steps) if fast is not None] == (list(FAULTED) if fault else [])


def _mutate(records: list[Record], rng: random.Random) -> list[Record]:
    """One edit of the kind a broken broker or a broken log makes (the fields a record needs stay), seqs renumbered."""
    out = list(records)
    i = rng.randrange(len(out))
    r = out[i]
    kind = rng.randrange(8)
    if kind == 0:
        del out[i]
    elif kind == 1 and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], r
    elif kind == 2 and r[3] is not None:
        out[i] = (*r[:3], rng.choice((1, 2, 3, 4, 5, 6)), *r[4:])
    elif kind == 3 and r[4] is not None:
        out[i] = (*r[:4], max(0, r[4] + rng.choice((-2, -1, 1, 2))), *r[5:])
    elif kind == 4:
        out.insert(i, (r[0], 0, rng.choice(("read", "run")), None, None, None, None, None, None))
    elif kind == 5 and r[8] is not None:
        out[i] = (*r[:8], rng.choice((0, 1, 2, 4, 8, 16)))
    elif kind == 6:
        out[i] = (r[0], r[1], rng.choice(EVENTS), *r[3:])
    elif kind == 7:
        out.insert(i, r)
    return [(r[0], seq, *r[2:]) for seq, r in enumerate(out)]


def test_compiled_and_full_model_agree_on_mutated_subscriptions() -> None:
    rng = random.Random("keyshared mutants")
    subscriptions = [partition_records(key, rng.choice((40, 120, 300)), 5, None) for key in range(24)]
    failing = 0
    for _ in range(300):
        records = rng.choice(subscriptions)
        for _ in range(rng.choice((1, 1, 2, 3))):
            records = _mutate(records, rng)
        fast, full = _first_failures(records)
        assert fast == full, records
        failing += full is not None
    assert 100 < failing < 300  # most edits leave pip379, some do not (a read that finds nothing to do)


def _twin() -> list[Record]:
    """A classic run that delivers differently from pip379 while KS-I1 and KS-I4 hold (subscription 5)."""
    leaver = walk("classic", 5, 30, random.Random("conf:classic:22"))
    assert client_verdict(leaver) == ClientVerdict(None)
    return leaver


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The subscriptions `conformance` sends through the full model, in order."""
    explained: list[int] = []
    leaves = keyshared_check._leaves_current

    def spy(records: Sequence[Record]) -> ClientVerdict | None:
        explained.append(records[0][0])
        return leaves(records)

    monkeypatch.setattr(keyshared_check, "_leaves_current", spy)
    return explained


def test_a_log_that_keeps_the_invariants_but_leaves_pip379_fails_as_a_divergence_through_the_compiled_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clean = [r for key in range(10) if key != 5 for r in walk("pip379", key, 60, random.Random(f"clean:{key}"))]
    leaver = _twin()
    fast, full = _first_failures(leaver)
    assert fast is not None and fast == full
    explained = _spy(monkeypatch)
    table = to_table(sorted(clean + leaver))
    assert python_replay(table) == {}
    assert python_replay(table, conformance=True) == {5: DIVERGENCE}
    assert explained == [5]  # the clean subscriptions never reach the full model


def test_a_model_it_does_not_mirror_is_refused_and_the_full_model_replays_every_subscription(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert compiled("pip379") is not None
    assert compiled("classic") is None and compiled("pip282") is None
    monkeypatch.setattr(keyshared_check, "compiled_replay", lambda: None)
    explained = _spy(monkeypatch)
    clean = [r for key in (1, 2) for r in walk("pip379", key, 40, random.Random(f"clean:{key}"))]
    assert python_replay(to_table(sorted(clean + _twin())), conformance=True) == {5: DIVERGENCE}
    assert explained == [1, 2, 5]


def test_the_invariants_fire_on_the_worlds_the_models_invariants_reject() -> None:
    """pip379 keeps its invariants under the log's configuration, so a log breaks one only where it diverges
    too: the world of a log pip379 follows is brought to each rejected state by hand, as the model's test does."""
    rows = [("add", 1, None, None, "consumer1", 2), *[("publish", None, p, "k", None, None) for p in range(3)],
            ("run", None, None, None, None, None), ("dispatch", 1, 0, None, None, None),
            ("dispatch", 1, 1, None, None, None), ("add", 2, None, None, "consumer2", 2)]
    event, consumer, position, key, name, permits = (list(column) for column in zip(*rows, strict=True))
    fast = compiled("pip379")
    assert fast is not None

    def world() -> None:
        """Consumer 1 holds positions 0 and 1 of key k, consumer 2 holds nothing, position 2 is unread."""
        assert fast.first_failure(event, consumer, position, key, name, permits,
                                  0, len(rows)) is None
        assert not fast.broken and fast.tracker_consistent() and fast.by_id[1].held == {0, 1}

    h = fast.hash("k")
    world()
    fast.deliver(fast.by_id[2], 2, h)
    assert fast.broken  # KS-I1: a second consumer gets a hash the first holds
    world()
    fast.release(fast.by_id[1], 0)
    fast.deliver(fast.by_id[1], 2, h)
    assert fast.broken  # KS-I4: position 2 before the unacked 0, which its consumer no longer holds
    world()
    fast.tracker[h] = [fast.owner_id(h) or 0, 2, 0]
    assert not fast.tracker_consistent()  # KS-I2: the hash's own consumer cannot be draining it
