"""What every `brokerspec` subcommand shares: exit codes, usage errors, tables, finding a mechanism."""

from __future__ import annotations

import argparse
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



class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")



def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)



TABLE_CELL = 160



"""The widest cell of a printed table; the full text is in `--json` and in the trace."""



def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    rows = [[c if len(str(c)) <= TABLE_CELL else str(c)[: TABLE_CELL - 1] + "…" for c in r] for r in rows]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return "\n".join(lines)



def _mechanisms(names: Sequence[str] | None) -> list[Mechanism]:
    known = registry.mechanisms()
    if not names:
        return list(known.values())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown mechanism {unknown[0]!r} (known: {', '.join(known)})")
    return [known[n] for n in names]



def _model(mechanism: Mechanism, config: Any, variant: str) -> Model[Any]:
    if variant not in mechanism.variants:
        raise UsageError(f"unknown variant {variant!r} for {mechanism.name} (known: {', '.join(mechanism.variants)})")
    try:
        return mechanism.make_model(config, variant)
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:  # a configuration the model refuses
        raise UsageError(f"cannot build the {mechanism.name} model: {exc}") from None



def _load(path: str) -> Trace:
    try:
        return load(Path(path))
    except TraceError as exc:
        raise UsageError(str(exc)) from None



def _at_least(least: float, kind: Callable[[str], Any] = int) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` no smaller than `least` (a negative budget is a usage error)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{text} is below {least:g}")
        return value

    return parse
