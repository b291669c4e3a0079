"""What every `brokerspec` subcommand shares: exit codes, usage errors, tables, finding a mechanism."""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from models.core import Model
from properties import registry
from properties.engines.mechanism import Mechanism
from traces.format import Trace, TraceError, load

PASS, VIOLATED, DIVERGED, USAGE, INFRA = 0, 1, 2, 3, 4


INTERRUPTED = 130
"""Ctrl-C, as shells report a process ended by SIGINT."""


class UsageError(Exception):
    """Bad arguments or input: one line, exit code 3."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


PIPE_WIDTH = 160
"""The width tables fit when stdout is not a terminal (a log file, a CI page); the full text is in `--json`."""


def table_width() -> int:
    """The terminal's width when stdout is one, else `PIPE_WIDTH`."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
    return PIPE_WIDTH


def _is_path(word: str) -> bool:
    """A word that names a file (a trace, a report): it is never cut, so it can be copied whole."""
    return "/" in word


def wrapped(text: str, width: int, indent: str, first: str | None = None) -> list[str]:
    """`text` in lines of at most `width` (indent included; `first` is the first line's, default `indent`), cut
    between words; a word too long for a line is cut too, unless it is a path, which gets a line of its own
    however long."""
    first = indent if first is None else first
    room = max(width - len(indent), 20)
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > room:
            lines.append(line)
            line = ""
        while len(word) > room and not _is_path(word):
            lines.append(word[:room])
            word = word[room:]
        line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return [(first if n == 0 else indent) + line for n, line in enumerate(lines)]


NARROW = 20
"""Fewer columns than this left for the long cell: the terminal is too narrow to align the others."""


def table(rows: Sequence[Sequence[str]], header: Sequence[str], long: int | None = None,
           width: int | None = None) -> str:
    """The rows as aligned columns within `width` (default `table_width()`), the `long` column (default the
    last) printed last: on the row's line where it fits, else wrapped on lines of its own below it. On a
    terminal too narrow for the aligned columns, each row's cells are only separated by a space."""
    width = width or table_width()
    long = len(header) - 1 if long is None else long
    order = [i for i in range(len(header)) if i != long]
    widths = {i: max(len(str(r[i])) for r in [header, *rows]) for i in order}
    room = width - sum(widths.values()) - 2 * len(order)
    if room < NARROW:
        widths, room = dict.fromkeys(order, 0), 0

    def prefix(cells: Sequence[str]) -> str:
        return ("  " if room else " ").join(str(cells[i]).ljust(widths[i]) for i in order)

    fitting = [len(str(r[long])) for r in rows if len(str(r[long])) <= room]
    dashes = ["-" * widths.get(i, 0) for i in range(len(header))]
    lines = [f"{prefix(header)}  {header[long]}".rstrip(),
             f"{prefix(dashes)}  {'-' * max([len(header[long]), *fitting])}"] if room else [
        prefix(header), f"    {header[long]}"]
    for row in rows:
        cell = str(row[long])
        if len(cell) <= room:
            lines.append(f"{prefix(row)}  {cell}".rstrip())
        else:
            lines.append(prefix(row).rstrip())
            lines.extend(wrapped(cell, width, "    "))
    return "\n".join(lines)


def mechanisms(names: Sequence[str] | None) -> list[Mechanism]:
    known = registry.mechanisms()
    if not names:
        return list(known.values())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown mechanism {unknown[0]!r} (known: {', '.join(known)})")
    return [known[n] for n in names]


def make_model(mechanism: Mechanism, config: Any, variant: str) -> Model[Any]:
    if variant not in mechanism.variants:
        raise UsageError(f"unknown variant {variant!r} for {mechanism.name} (known: {', '.join(mechanism.variants)})")
    try:
        return mechanism.make_model(config, variant)
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:  # a configuration the model refuses
        raise UsageError(f"cannot build the {mechanism.name} model: {exc}") from None


def load_trace(path: str) -> Trace:
    try:
        return load(Path(path))
    except TraceError as exc:
        raise UsageError(str(exc)) from None


def name(text: str) -> str:
    """An argparse type: a variant's or configuration's name, never empty (an empty one would silently mean
    the default)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty name")
    return text


MAX_SECONDS = 7 * 86_400.0
"""The longest wait or budget a command takes (a week): a larger one overflows the selectors' timeouts."""


def at_least(least: float, kind: Callable[[str], Any] = int, most: float | None = None) -> Callable[[str], Any]:
    """An argparse type: a finite number of `kind` no smaller than `least` (a negative budget is a usage error) and
    no larger than `most` when given."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < least:
            raise argparse.ArgumentTypeError(f"{text} is below {least:g}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"{text} is above {most:g}")
        return value

    return parse


def seconds(least: float = 0.0) -> Callable[[str], float]:
    """An argparse type: seconds, finite, from `least` to `MAX_SECONDS`."""
    parse: Callable[[str], float] = at_least(least, float, MAX_SECONDS)
    return parse
