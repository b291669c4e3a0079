"""Rounding, cutoff and memory arithmetic (spec §3, §4.4) and the BucketIndex storage."""

from __future__ import annotations

import random

import pytest
from pyroaring import BitMap64

from reference_impl.delayed import (
    MAX_LONG,
    BucketIndex,
    InMemoryDelayedDeliveryTracker,
    closed_form_size,
    precision_bits,
    round_up,
    trim,
)
from tests.delayed.support import ManualClock

PRECISION_TABLE = [
    (1, 0, 1),
    (2, 1, 2),
    (3, 1, 2),
    (8, 3, 8),
    (100, 6, 64),
    (500, 8, 256),
    (512, 9, 512),
    (1000, 9, 512),
    (1023, 9, 512),
    (1024, 10, 1024),
    (5000, 12, 4096),
]


@pytest.mark.parametrize(("tick", "bits", "precision"), PRECISION_TABLE)
def test_precision_table(tick: int, bits: int, precision: int) -> None:
    assert precision_bits(tick) == bits
    tracker = InMemoryDelayedDeliveryTracker(tick, ManualClock(), False, 0)
    assert (tracker.precision_bits, tracker.precision_millis) == (bits, precision)
    assert precision <= tick


def test_precision_bits_non_positive_tick_is_zero_like_upstream() -> None:
    assert precision_bits(0) == 0
    assert precision_bits(-5) == 0


def test_trim_and_round_up() -> None:
    assert trim(60400, 9) == 59904
    assert round_up(60400, 9) == 60416
    assert trim(60416, 9) == round_up(60416, 9) == 60416
    assert trim(11, 6) == 0
    assert round_up(11, 6) == 64
    assert trim(-1, 9) == -512  # two's complement, as Java's & on longs
    assert round_up(-1, 9) == 0
    assert trim(5, 0) == round_up(5, 0) == 5


def test_round_up_saturates_at_trimmed_max_long() -> None:
    assert round_up(MAX_LONG - 511, 9) == MAX_LONG - 511  # 2**63 - 512: exact multiple, no overflow
    assert round_up(MAX_LONG - 510, 9) == MAX_LONG - 511  # x + P - 1 would overflow: saturate
    assert round_up(MAX_LONG, 9) == trim(MAX_LONG, 9) == 2**63 - 512
    assert round_up(MAX_LONG, 0) == MAX_LONG


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("variant", ["current", "pr23611"])
def test_bucket_key_and_cutoffs(strict: bool, variant: str) -> None:
    clock = ManualClock(5000)
    tracker = InMemoryDelayedDeliveryTracker(1000, clock, strict, 0, variant)  # type: ignore[arg-type]
    assert tracker.cutoff_time() == (5000 if strict else 6000)
    rounds_up = variant == "current" and strict
    assert tracker.bucket_key(60400) == (60416 if rounds_up else 59904)
    assert tracker.bucket_key(60416) == 60416
    if variant == "current" and not strict:
        assert tracker.bucket_cutoff_time() == 5000 + 1000 - 512 + 1
    else:
        assert tracker.bucket_cutoff_time() == tracker.cutoff_time()


@pytest.mark.parametrize(("ids", "size"), [([7], 30), (list(range(1024)), 2076), (list(range(4096)), 8220)])
def test_closed_form_examples(ids: list[int], size: int) -> None:
    bitmap = BitMap64()
    bitmap.update(ids)
    assert len(bitmap.serialize()) == closed_form_size(bitmap) == size


def test_closed_form_large_chunk_and_high_halves() -> None:
    bitmap = BitMap64()
    bitmap.update(list(range(5000)))  # one bitset container
    assert closed_form_size(bitmap) == 8 + 12 + 8 + 8192 == len(bitmap.serialize())
    bitmap.add(2**16 + 3)  # second container, same high half
    bitmap.add(2**32 + 1)  # second high half
    assert closed_form_size(bitmap) == 8 + 24 + (8 + 8192) + (8 + 2) + (8 + 2) == len(bitmap.serialize())


def test_bucket_index_add_is_idempotent_and_accounts_memory() -> None:
    index = BucketIndex()
    assert index.is_empty()
    with pytest.raises(LookupError):
        index.first_key()
    assert index.add(64, 1, 5) is True
    assert index.memory == 30
    assert index.add(64, 1, 5) is False
    assert index.memory == 30
    assert index.add(0, 2, 1) is True
    assert index.first_key() == 0
    assert index.keys() == [0, 64]
    assert index.triples() == [(0, 2, 1), (64, 1, 5)]
    assert index.count() == 2
    assert index.memory == index.serialized_size() == 60
    index.clear()
    assert (index.memory, index.count(), index.keys()) == (0, 0, [])


def test_bucket_index_drain_order_and_partial_bitmaps() -> None:
    index = BucketIndex()
    for key, ledger, entry in [(10, 2, 9), (10, 2, 3), (10, 1, 8), (20, 0, 1), (30, 0, 0), (10, 2, 4)]:
        index.add(key, ledger, entry)
    assert index.drain(20, 3) == [(10, 1, 8), (10, 2, 3), (10, 2, 4)]
    assert index.triples() == [(10, 2, 9), (20, 0, 1), (30, 0, 0)]
    assert index.memory == index.serialized_size()
    assert index.drain(20, 0) == []
    assert index.drain(9, 5) == []
    assert index.drain(20, 5) == [(10, 2, 9), (20, 0, 1)]
    assert index.keys() == [30]
    assert index.memory == index.serialized_size() == 30


def test_bucket_index_memory_matches_serialize_under_random_churn() -> None:
    """Add and drain across array/bitset thresholds and several high halves; memory stays exact."""
    rng = random.Random(23611)
    index = BucketIndex()
    held: set[tuple[int, int, int]] = set()
    bases = [0, 2**16 - 50, 2**32 - 10, 2**40]
    largest_bitmap = 0
    for step in range(120):
        if step % 4 == 3:
            n = rng.choice([1, 7, 300, 5000])
            cutoff = rng.choice([0, 1, 2])
            drained = index.drain(cutoff, n)
            expected = sorted(t for t in held if t[0] <= cutoff)[:n]
            assert drained == expected
            held.difference_update(drained)
        else:
            key, ledger, base = rng.randrange(3), rng.randrange(2), rng.choice(bases)
            for entry in range(base, base + rng.choice([1, 60, 2500, 5000])):
                assert index.add(key, ledger, entry) == ((key, ledger, entry) not in held)
                held.add((key, ledger, entry))
        assert index.memory == index.serialized_size() == sum(closed_form_size(b) for b in index.bitmaps())
        assert index.count() == len(held)
        largest_bitmap = max([largest_bitmap, *(len(b.serialize()) for b in index.bitmaps())])
    assert largest_bitmap > 8192, "the churn never reached a bitset container"


def test_bitset_container_drained_below_threshold_shrinks_back_to_array() -> None:
    index = BucketIndex()
    for entry in range(5000):
        index.add(0, 1, entry)
    assert index.memory == 8220
    index.drain(0, 1000)
    assert index.memory == index.serialized_size() == 8 + 12 + 8 + 2 * 4000
