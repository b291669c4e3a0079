"""What a new user meets first: commands as the README writes them, one-line errors, nothing overwritten."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from properties.cli import PASS, USAGE, VIOLATED, main
from properties.cli.common import TABLE_CELL, _table
from properties.cli.main import _parser
from properties.cli.promote import CORPUS
from traces.format import load

LIVENESS = CORPUS / "keyshared" / "classic-explorer-KS-I5b.json"


def test_explore_needs_no_config_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--mechanism", "topiclist", "--max-states", "200"]) in (PASS, VIOLATED)
    assert capsys.readouterr().out.startswith("topiclist/current/")


def test_a_liveness_trace_shrinks_and_still_fails(tmp_path: Path) -> None:
    out = tmp_path / "shrunk.json"
    assert main(["shrink", str(LIVENESS), "-o", str(out)]) == PASS
    assert load(out).failure["kind"] == "liveness"
    assert main(["replay", str(out)]) == VIOLATED


def test_shrink_never_overwrites_its_input(tmp_path: Path) -> None:
    source = tmp_path / "trace"  # no .json suffix
    shutil.copyfile(LIVENESS, source)
    before = source.read_bytes()
    assert main(["shrink", str(source)]) == PASS
    assert source.read_bytes() == before and (tmp_path / "trace.shrunk.json").exists()


BAD = [["check", "--budget", "-1"], ["check", "--batches", "0"], ["prove", "--depth", "x"], ["check", "--workers", "0"],
       ["explore", "--mechanism", "keyshared", "--config", "x"]]


@pytest.mark.parametrize("argv", BAD)
def test_a_bad_number_or_name_is_one_line_and_exit_3(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err


def test_a_long_detail_is_cut_in_the_table_only() -> None:
    table = _table([["keyshared", "x" * 3000]], ["mechanism", "detail"])
    assert max(len(line) for line in table.splitlines()) < TABLE_CELL + 20
    assert table.splitlines()[-1].rstrip().endswith("…")


def test_every_option_of_these_commands_says_what_it_does() -> None:
    subcommands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("check", "explore", "shrink", "promote", "prove", "mutants", "replay"):
        parser = subcommands.choices[command]
        silent = [a.dest for a in parser._actions if not a.help and a.option_strings]
        assert not silent, (command, silent)
