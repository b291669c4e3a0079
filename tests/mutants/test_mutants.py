"""Every planted bug in this folder is killed by the default `check`, on the invariant it breaks.

Each `*.patch` is a small diff of a reference implementation with a header naming the invariant it
must break and the longest shrunk trace allowed (`properties/cli/mutants.py`). The check runs on a
patched copy of the project in a fresh interpreter, with its default, deterministic budgets: a
mutant that survives, or is found only as an anonymous divergence, fails this test.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from properties import registry
from properties.cli import mutants

HERE = Path(__file__).parent
ALL = mutants.discover(HERE)


def test_every_mechanism_has_planted_bugs() -> None:
    assert {m.mechanism for m in ALL} == set(registry.mechanisms())


@pytest.mark.parametrize("mutant", ALL, ids=[m.name for m in ALL])
def test_check_kills_the_mutant_by_name(mutant: mutants.Mutant) -> None:
    kill = mutants.run(mutant, current=registry.get(mutant.mechanism).current)
    assert kill.killed, (f"{mutant.name}: expected {mutant.kills} in at most {mutant.max_steps} steps, got "
                         f"{kill.target} ({kill.engine}, {kill.steps} steps): {kill.detail}")
    assert kill.replays_to_the_kill, f"{mutant.name}: the row's trace replays to {kill.replayed!r}"


def test_a_mutant_that_does_not_apply_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "stale.patch"
    bad.write_text("Mutant: stale\nMechanism: pidquota\nKills: PQ-I1\nMax-Steps: 3\n\n"
                   "--- a/reference_impl/pidquota/cache.py\n+++ b/reference_impl/pidquota/cache.py\n"
                   "@@ -1,1 +1,1 @@\n-no such line\n+anything\n", encoding="utf-8")
    with pytest.raises(mutants.MutantError, match=r"stale\.patch: does not apply"):
        mutants.patched_tree(mutants.load(bad), tmp_path / "tree")


def test_a_header_line_missing_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "headless.patch"
    bad.write_text("Mutant: no kills line\nMechanism: pidquota\n\n--- a/x\n+++ b/x\n", encoding="utf-8")
    with pytest.raises(mutants.MutantError, match=r"headless\.patch: header line 'Kills' is missing"):
        mutants.load(bad)


@pytest.mark.parametrize("gap", sorted((HERE / "gaps").glob("*.patch")), ids=lambda p: p.stem)
def test_every_known_gap_still_applies_to_the_tree(gap: Path, tmp_path: Path) -> None:
    """The gaps (tests/mutants/gaps/README.md) stay current: each is a readable mutant that applies to the tree."""
    known = mutants.load(gap)
    assert known.mechanism in registry.mechanisms()
    mutants.patched_tree(known, tmp_path / "tree")


def test_a_kill_whose_trace_stops_short_of_its_row_is_told_apart() -> None:
    """The twin of the replay assertion above: a row saying LK-4 in 23 steps whose trace replays to a divergence
    at step 22 (the trace recorded before it went on toward the row's finding) does not replay to the kill."""
    mutant = ALL[0]
    short = mutants.Kill(mutant, 1, "conformance[locks]", ("LK-4", "divergence"), "LK-4", 23, 1.0, 2.0, "t.json", "",
                         "t.json: step 22: divergence on keyshared/pip379 against the reference. state locks: ...")
    assert not short.replays_to_the_kill
    whole = replace(short, replayed="t.json: step 23: LK-4, divergence on keyshared/pip379 against the reference.")
    assert whole.replays_to_the_kill
