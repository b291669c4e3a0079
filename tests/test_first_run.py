"""What a new user meets first: commands as the README writes them, one-line errors, nothing overwritten."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from properties.cli import PASS, USAGE, VIOLATED, main
from properties.cli.common import PIPE_WIDTH, table
from properties.cli.main import parser
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
       ["explore", "--mechanism", "keyshared", "--config", "x"],
       ["explore", "--mechanism", "keyshared", "--config", ""],
       ["check", "--mechanism", "pidquota", "--variant", " "], ["replay", str(LIVENESS), "--variant", ""]]


@pytest.mark.parametrize("argv", BAD)
def test_a_bad_number_or_name_is_one_line_and_exit_3(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err


def test_a_long_detail_gets_lines_of_its_own_within_the_width_and_a_path_is_never_cut() -> None:
    path = "/tmp/" + "d" * 90 + "/keyshared/pip282-explorer-gap-KS-I1.json"
    detail = "invariant KS-I1 in 9 steps " * 8 + f"(a key held by two consumers): {path}; " + "x" * 400
    shown = table([["keyshared", "explorer[gap]", detail, "1.0s"], ["pidquota", "z3", "proved", "0.0s"]],
                   ["mechanism", "engine", "detail", "time"], long=2, width=PIPE_WIDTH)
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= PIPE_WIDTH
    assert lines[2].split() == ["keyshared", "explorer[gap]", "1.0s"]  # the row, then its detail below it
    assert any(line.strip() == path + ";" for line in lines)
    assert "".join(line.strip() for line in lines[3:-1]).replace(" ", "") == detail.replace(" ", "")
    assert lines[-1].split() == ["pidquota", "z3", "0.0s", "proved"]  # a short detail stays on its row


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every subcommand, `pipeline check` and `pipeline explore` included."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found.update(_subcommands(sub, f"{prefix}{name} "))
    return found


def test_every_option_of_every_command_says_what_it_does() -> None:
    commands = _subcommands(parser())
    assert {"check", "verify", "simulate", "pipeline check", "pipeline explore"} <= set(commands)
    for command, each in commands.items():
        silent = [a.dest for a in each._actions if not a.help and a.option_strings]
        assert not silent, (command, silent)


def test_pipeline_alone_names_its_subcommands_and_what_they_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline"]) == USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: pipeline: name a subcommand: check (") and "; explore (" in err
    assert len(err.splitlines()) == 1


def test_on_a_narrow_terminal_the_cells_are_not_aligned_and_every_line_fits() -> None:
    rows = [["pidquota", "conformance[two_principals]", "current", "twin caught (PQ-I1)", "every 22113 transitions "
             "of 3681 states replayed in 5980 walks, 83054 steps", "14.7s"]]
    lines = table(rows, ["mechanism", "engine", "variant/invariant", "verdict", "detail", "time"], long=4,
                   width=80).splitlines()
    assert lines[2] == "pidquota conformance[two_principals] current twin caught (PQ-I1) 14.7s"
    assert lines[3].startswith("    every 22113") and max(len(line) for line in lines) <= 80


def test_explore_conformance_replays_a_configuration_on_the_reference(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`explore --conformance`: the known finding is the explorer's verdict, and every transition conforms."""
    argv = ["explore", "--mechanism", "keyshared", "--config", "locks-batch", "--conformance", "--out", str(tmp_path)]
    assert main(argv) == VIOLATED  # LK-6, the known lost wake-up
    out = capsys.readouterr().out
    assert "conformance keyshared/pip379/locks-batch: pass: every 171 transitions of 133 states" in out
