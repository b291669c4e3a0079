"""The §8 memory benchmark code on small inputs (the full N = 10^7 run is ``brokerspec bench``, not a test)."""

from __future__ import annotations

import pytest
from pyroaring import BitMap64

from reference_impl.delayed import trim
from reference_impl.delayed.bench import (
    EXPECTED,
    MIB,
    SEED_ENTRIES_PER_LEDGER,
    SEED_N,
    SEED_T1,
    MemoryResult,
    fill_index,
    format_table,
    main,
    measure_memory,
)


def independent_sizes(x: int, y: int, n: int, e: int, t1: int) -> tuple[int, int, int, int]:
    """Buckets, bitmaps, bytes as filled and run-optimised bytes, built with ``update(list)`` per bitmap."""
    groups: dict[tuple[int, int], list[int]] = {}
    for j in range(n):
        groups.setdefault((trim(t1 + j // x, y), 10_000 + j // e), []).append(j % e)
    plain = optimised = 0
    for ids in groups.values():
        bitmap = BitMap64()
        bitmap.update(ids)
        plain += len(bitmap.serialize())
        bitmap.run_optimize()
        optimised += len(bitmap.serialize())
    return len({key for key, _ in groups}), len(groups), plain, optimised


@pytest.mark.parametrize(("x", "y"), [(1, 10), (4, 10), (8, 10), (8, 15)])
def test_small_run_matches_an_independent_build(x: int, y: int) -> None:
    n, e = 120_000, 5_000
    result = measure_memory(x, y, n, e, SEED_T1)
    assert (result.buckets, result.bitmaps, result.bytes_one_by_one, result.bytes_run_optimized) == (
        independent_sizes(x, y, n, e, SEED_T1)
    )
    assert result.accounted_bytes == result.bytes_one_by_one
    assert result.mismatches() == []  # not the seed parameters: only the accounting is checked


def test_via_tracker_gives_the_same_index() -> None:
    direct = fill_index(4, 10, 30_000, 5_000, SEED_T1)
    tracked = fill_index(4, 10, 30_000, 5_000, SEED_T1, via_tracker=True)
    assert direct.triples() == tracked.triples()
    assert direct.memory == tracked.memory == tracked.serialized_size()


def test_via_tracker_rejects_a_start_under_the_cutoff() -> None:
    with pytest.raises(ValueError, match="cutoff"):
        fill_index(1, 10, 10, 5, 1024, via_tracker=True)


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError):
        fill_index(0, 10, 10, 5, SEED_T1)


def test_expected_table_is_consistent_with_the_spec_figures() -> None:
    """§8: (a) MiB, AES and ratio to 24 B x N as printed in the spec."""
    mib = {(1, 10): 19.34, (4, 10): 19.14, (8, 10): 10.36, (8, 15): 1.84}
    aes = {(1, 10): 2.028, (4, 10): 2.007, (8, 10): 1.086, (8, 15): 0.193}
    ratio = {(1, 10): 8.45, (4, 10): 8.36, (8, 10): 4.53, (8, 15): 0.80}
    for key, (buckets, bitmaps, plain, optimised) in EXPECTED.items():
        r = MemoryResult(
            key[0], key[1], SEED_N, SEED_ENTRIES_PER_LEDGER, SEED_T1, buckets, bitmaps, plain, optimised, plain
        )
        assert r.mismatches() == []
        assert round(r.mib, 2) == mib[key]
        assert round(r.aes, 3) == aes[key]
        assert round(100 * r.ratio_to_legacy, 2) == ratio[key]
        assert r.legacy_bytes == 240_000_000
        assert round(r.legacy_bytes / MIB, 1) == 228.9
    assert EXPECTED[(1, 10)][0] == 9767 and EXPECTED[(4, 10)][0] == 2443
    assert MemoryResult(8, 15, 1, 1, 0, 0, 0, 0, 0, 0).messages_per_bucket == 262_144


def test_seed_bucket_counts_follow_from_t1() -> None:
    """9767 and 2443 buckets: the span of trimmed timestamps for N = 10^7 from t1 = 3,277,800."""
    for x, buckets in ((1, 9767), (4, 2443)):
        last = SEED_T1 + (SEED_N - 1) // x
        assert (trim(last, 10) - trim(SEED_T1, 10)) // 1024 + 1 == buckets


def test_mismatches_report_wrong_figures() -> None:
    buckets, bitmaps, plain, optimised = EXPECTED[(1, 10)]
    wrong = MemoryResult(1, 10, SEED_N, SEED_ENTRIES_PER_LEDGER, SEED_T1, buckets, bitmaps, plain + 1, optimised, plain)
    problems = wrong.mismatches()
    assert len(problems) == 2
    assert any("(a) bytes" in p for p in problems)
    assert any("accounted" in p for p in problems)


def test_cli_small_run_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-n", "20000", "-e", "5000", "--config", "1,10", "--config", "8,15"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["x", "y", "M", "buckets", "bitmaps"]
    assert lines[1].split()[:3] == ["1", "10", "1024"]
    assert lines[2].split()[:3] == ["8", "15", "262144"]
    assert "legacy baseline" in lines[3]
    assert format_table([]) == lines[0]


def test_cli_rejects_a_malformed_config() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["-n", "10", "--config", "1;10"])
    assert exc.value.code == 2
