"""The seed's memory experiment (spec §8): TimeBucket bitmaps versus the 24-byte triple heap.

``measure_memory(x, y)`` is what ``brokerspec bench`` calls; ``python -m reference_impl.delayed.bench``
prints the table for the four seed configurations and exits 1 if a figure differs from §8's
expected output. It is a measurement, not a test: about 10 s per configuration at N = 10^7.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pyroaring import BitMap64

from reference_impl.delayed.legacy import LEGACY_BYTES_PER_MESSAGE
from reference_impl.delayed.tracker import BucketIndex, InMemoryDelayedDeliveryTracker, trim

SEED_N = 10_000_000
SEED_ENTRIES_PER_LEDGER = 50_000  # managedLedgerMaxEntriesPerLedger default
SEED_T1 = 3_277_800  # 100 * 2**15 + 1000: reproduces the seed's bucket counts (§8)
FIRST_LEDGER = 10_000
SEED_CONFIGS: tuple[tuple[int, int], ...] = ((1, 10), (4, 10), (8, 10), (8, 15))

# (x, y) -> (buckets, bitmaps, one-by-one bytes, run-optimised bytes) for the seed parameters (§8).
EXPECTED: dict[tuple[int, int], tuple[int, int, int, int]] = {
    (1, 10): (9767, 9966, 20_279_048, 269_082),
    (4, 10): (2443, 2641, 20_073_948, 71_307),
    (8, 10): (1222, 1421, 10_863_340, 38_367),
    (8, 15): (39, 238, 1_931_496, 6_426),
}

MIB = 2**20


@dataclass(frozen=True)
class MemoryResult:
    """One (x, y) measurement; ``bytes_one_by_one`` is column (a), ``bytes_run_optimized`` column (b)."""

    x: int
    y: int
    n: int
    entries_per_ledger: int
    t1: int
    buckets: int
    bitmaps: int
    bytes_one_by_one: int
    bytes_run_optimized: int
    accounted_bytes: int  # the index's incrementally maintained counter; must equal bytes_one_by_one

    @property
    def messages_per_bucket(self) -> int:
        """``M = x * 2**y``."""
        return self.x << self.y

    @property
    def legacy_bytes(self) -> int:
        """The triple-heap baseline, 24 B per message."""
        return LEGACY_BYTES_PER_MESSAGE * self.n

    @property
    def mib(self) -> float:
        """Column (a) in MiB, the unit the seed calls MB."""
        return self.bytes_one_by_one / MIB

    @property
    def aes(self) -> float:
        """Average entry size, bytes per message, column (a)."""
        return self.bytes_one_by_one / self.n

    @property
    def ratio_to_legacy(self) -> float:
        """Column (a) over the 24 B x N baseline."""
        return self.bytes_one_by_one / self.legacy_bytes

    def mismatches(self) -> list[str]:
        """Differences from §8's expected output (only defined for the seed parameters)."""
        problems: list[str] = []
        if self.accounted_bytes != self.bytes_one_by_one:
            problems.append(f"accounted {self.accounted_bytes} != serialized {self.bytes_one_by_one}")
        expected = EXPECTED.get((self.x, self.y))
        seed = (self.n, self.entries_per_ledger, self.t1) == (SEED_N, SEED_ENTRIES_PER_LEDGER, SEED_T1)
        if expected is not None and seed:
            got = (self.buckets, self.bitmaps, self.bytes_one_by_one, self.bytes_run_optimized)
            for name, want, have in zip(("buckets", "bitmaps", "(a) bytes", "(b) bytes"), expected, got, strict=True):
                if want != have:
                    problems.append(f"x={self.x} y={self.y}: {name} {have} != expected {want}")
        return problems


def fill_index(x: int, y: int, n: int, entries_per_ledger: int, t1: int, *, via_tracker: bool = False) -> BucketIndex:
    """Generate the seed's messages one by one, into a raw ``BucketIndex`` or through a tracker."""
    if x < 1 or y < 0 or n < 1 or entries_per_ledger < 1:
        raise ValueError(
            f"need x >= 1, y >= 0, n >= 1, entries_per_ledger >= 1; got {x}, {y}, {n}, {entries_per_ledger}"
        )
    if via_tracker:
        tracker = InMemoryDelayedDeliveryTracker(1 << y, lambda: 0, False, 0)
        for j in range(n):
            if not tracker.add_message(FIRST_LEDGER + j // entries_per_ledger, j % entries_per_ledger, t1 + j // x):
                raise ValueError(f"message {j} falls under the cutoff; choose t1 > 2**y")
        return tracker.buckets
    index = BucketIndex()
    add = index.add
    for j in range(n):
        add(trim(t1 + j // x, y), FIRST_LEDGER + j // entries_per_ledger, j % entries_per_ledger)
    return index


def measure_memory(
    x: int,
    y: int,
    n: int = SEED_N,
    entries_per_ledger: int = SEED_ENTRIES_PER_LEDGER,
    t1: int = SEED_T1,
    *,
    via_tracker: bool = False,
) -> MemoryResult:
    """Fill, then measure (a) as filled and (b) after ``run_optimize()`` on copies.

    The copies go through ``serialize``/``deserialize``: ``BitMap64.copy()`` in pyroaring 1.2.0 rebuilds
    the bitmap and already yields run containers, which would hide the effect being measured.
    """
    index = fill_index(x, y, n, entries_per_ledger, t1, via_tracker=via_tracker)
    bitmaps = index.bitmaps()
    run_optimized = 0
    for bitmap in bitmaps:
        copy = BitMap64.deserialize(bitmap.serialize())
        copy.run_optimize()
        run_optimized += len(copy.serialize())
    return MemoryResult(
        x=x,
        y=y,
        n=n,
        entries_per_ledger=entries_per_ledger,
        t1=t1,
        buckets=len(index.keys()),
        bitmaps=len(bitmaps),
        bytes_one_by_one=index.serialized_size(),
        bytes_run_optimized=run_optimized,
        accounted_bytes=index.memory,
    )


def format_table(results: Sequence[MemoryResult]) -> str:
    """The §8 report: one row per (x, y), sizes in MiB."""
    header = (
        f"{'x':>2} {'y':>3} {'M':>8} {'buckets':>8} {'bitmaps':>8} {'(a) bytes':>12} {'(a) MiB':>8} "
        f"{'AES B':>6} {'vs 24B*N':>9} {'(b) bytes':>10} {'(b) MiB':>8}"
    )
    rows = [header]
    for r in results:
        rows.append(
            f"{r.x:>2} {r.y:>3} {r.messages_per_bucket:>8} {r.buckets:>8} {r.bitmaps:>8} "
            f"{r.bytes_one_by_one:>12,} {r.mib:>8.2f} {r.aes:>6.3f} {r.ratio_to_legacy:>9.2%} "
            f"{r.bytes_run_optimized:>10,} {r.bytes_run_optimized / MIB:>8.2f}"
        )
    if results:
        baseline = results[0].legacy_bytes
        rows.append(f"legacy baseline: 24 B x N = {baseline:,} B = {baseline / MIB:.1f} MiB")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the table; exit 1 on a mismatch with §8 (checked for the seed parameters only)."""
    parser = argparse.ArgumentParser(prog="python -m reference_impl.delayed.bench", description=__doc__)
    parser.add_argument("-n", type=int, default=SEED_N, help="messages (default 10^7)")
    parser.add_argument("-e", "--entries-per-ledger", type=int, default=SEED_ENTRIES_PER_LEDGER)
    parser.add_argument("--t1", type=int, default=SEED_T1)
    parser.add_argument("--config", action="append", metavar="X,Y", help="repeatable; default: the seed's four")
    parser.add_argument("--via-tracker", action="store_true", help="fill through InMemoryDelayedDeliveryTracker")
    args = parser.parse_args(argv)
    configs: list[tuple[int, int]] = []
    for text in args.config or [f"{x},{y}" for x, y in SEED_CONFIGS]:
        try:
            x_text, y_text = text.split(",")
            configs.append((int(x_text), int(y_text)))
        except ValueError:
            parser.error(f"--config {text!r}: expected X,Y with two integers")
    try:
        results = [
            measure_memory(x, y, args.n, args.entries_per_ledger, args.t1, via_tracker=args.via_tracker)
            for x, y in configs
        ]
    except ValueError as exc:
        parser.error(str(exc))
    print(format_table(results))
    problems = [p for r in results for p in r.mismatches()]
    for problem in problems:
        print(f"MISMATCH: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
