"""Planted bugs: small patches of a reference implementation that `check` must kill, by name.

A mutant is a unified diff (`tests/mutants/<name>.patch`) whose header says what it breaks:

    Mutant: one line saying what the bug is (and where upstream had it, if it did)
    Mechanism: keyshared
    Kills: KS-I1
    Max-Steps: 9

`run` copies the project's packages into a scratch folder, applies the diff there with
`git apply` (the working tree is never touched) and runs `brokerspec check --fail-fast --json` on
the mechanism's current variant in a fresh interpreter that imports the patched copy. The mutant
is *killed* when the check fails on the invariant the header names (a bare divergence is not a
kill: it says that something differs, not what is wrong) with a shrunk trace of at most
`Max-Steps` steps. The time to the kill is what `brokerspec bench` reports.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The source tree the patches apply to (this checkout)."""

FOLDER = ROOT / "tests" / "mutants"
"""Where the project keeps its mutants."""

PACKAGES = ("models", "reference_impl", "properties", "traces")
HEADER_KEYS = ("Mutant", "Mechanism", "Kills", "Max-Steps")


class MutantError(Exception):
    """A mutant file that cannot be read or does not apply: one line naming the file."""


@dataclass(frozen=True)
class Mutant:
    """One planted bug: its diff and what `check` must report on it."""

    name: str
    path: Path
    description: str
    mechanism: str
    kills: str
    max_steps: int


@dataclass(frozen=True)
class Kill:
    """What `check` did with a mutant: the first failing row, if any."""

    mutant: Mutant
    code: int
    engine: str
    failures: tuple[str, ...]
    target: str
    steps: int
    after_s: float
    """Seconds from the start of the check to the end of the failing row (imports excluded)."""
    wall_s: float
    """Seconds of the whole run: interpreter start, imports, check and shrinking."""
    trace: str
    detail: str
    replayed: str = ""
    """What the row's `reproduce:` command printed on the patched copy: its saved trace replayed."""

    @property
    def replays_to_the_kill(self) -> bool:
        """The saved trace replays to the row's finding at the row's step (`replay` prints `TRACE: step N: A, B
        on ...`): a trace that stops short of its row's invariant would fail this."""
        found = re.search(r": step (\d+): (.+?) on ", self.replayed)
        return found is not None and int(found[1]) == self.steps and self.target in found[2].split(", ")

    @property
    def killed(self) -> bool:
        """Killed by name, with a trace no longer than the mutant allows."""
        return self.code == 1 and self.target == self.mutant.kills and 0 < self.steps <= self.mutant.max_steps


def load(path: Path) -> Mutant:
    """The mutant in `path`; `MutantError` naming the file and the missing or bad header line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MutantError(f"{path}: cannot read: {exc.strerror}") from None
    header: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(("--- ", "diff ")):
            break
        key, colon, value = line.partition(":")
        if colon and key in HEADER_KEYS:
            header[key] = value.strip()
    missing = [k for k in HEADER_KEYS if not header.get(k)]
    if missing:
        raise MutantError(f"{path}: header line {missing[0]!r} is missing")
    if not header["Max-Steps"].isdigit():
        raise MutantError(f"{path}: Max-Steps must be a whole number, not {header['Max-Steps']!r}")
    return Mutant(path.stem, path, header["Mutant"], header["Mechanism"], header["Kills"], int(header["Max-Steps"]))


def discover(folder: Path = FOLDER, mechanisms: Sequence[str] | None = None) -> list[Mutant]:
    """Every mutant in `folder` (of `mechanisms`, when given), by name."""
    found = [load(p) for p in sorted(folder.glob("*.patch"))]
    return [m for m in found if not mechanisms or m.mechanism in mechanisms]


def patched_tree(mutant: Mutant, into: Path) -> None:
    """Copy the packages into `into` and apply the mutant's diff there."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__", "corpus"))
    applied = subprocess.run(["git", "apply", "--whitespace=nowarn", str(mutant.path.resolve())], cwd=into,
                             capture_output=True, text=True, check=False)
    if applied.returncode != 0:
        reason = (applied.stderr.strip().splitlines() or ["git apply failed"])[0]
        raise MutantError(f"{mutant.path}: does not apply: {reason}")


def run(
    mutant: Mutant, *, current: str, timeout_s: float = 600.0, extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Kill:
    """Run the default check of the mutant's mechanism, current variant, on a patched copy of the project (with
    `env` added to the environment: `bench --gate` points the graph cache at its own folder)."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as scratch:
        tree = Path(scratch)
        patched_tree(mutant, tree)
        argv = [sys.executable, "-m", "properties.cli", "check", "--mechanism", mutant.mechanism, "--variant", current,
                "--fail-fast", "--json", "--out", str(tree / "out"), *extra]
        environment = {**os.environ, **(env or {}), "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
        started = time.perf_counter()
        try:
            done = subprocess.run(argv, cwd=tree, env=environment, capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            return Kill(mutant, -1, "", (), "timeout", 0, timeout_s, timeout_s, "", f"no verdict in {timeout_s:g}s")
        wall = time.perf_counter() - started
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return Kill(mutant, done.returncode, "", (), "crash", 0, wall, wall, "", last)
        failing = [row for row in report["rows"] if row["code"] != 0]
        if not failing:
            return Kill(mutant, done.returncode, "", (), "survived", 0, wall, wall, "", "every row passed")
        row = failing[0]
        replayed = _reproduced(str(row.get("reproduce", "")), tree, environment, timeout_s)
    return Kill(mutant, done.returncode, str(row["engine"]), tuple(row.get("failures", ())),
                str(row.get("target", "")), int(row.get("steps", 0)), float(row["after_s"]), wall,
                str(row.get("trace", "")), str(row["detail"]), replayed)


def _reproduced(command: str, tree: Path, environment: Mapping[str, str], timeout_s: float) -> str:
    """The output of a row's `reproduce:` command (`brokerspec replay ...`) run on the patched copy."""
    words = shlex.split(command)
    if words[:2] != ["brokerspec", "replay"]:
        return f"no replay command: {command!r}"
    try:
        done = subprocess.run([sys.executable, "-m", "properties.cli", *words[1:]], cwd=tree, env=dict(environment),
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return f"replay: no verdict in {timeout_s:g}s"
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[-1] if (done.stdout or done.stderr) else ""
