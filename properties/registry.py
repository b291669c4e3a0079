"""The mechanisms brokerspec knows, by name: the one place a name becomes a `Mechanism`.

Each `properties/<mechanism>/binding.py` exposes one `MECHANISM`; the command line, the pipeline
and the corpus tests find every mechanism here, so adding one means adding its binding below.
Engines never import this module: they are handed a `Mechanism`. A trace names its mechanism, so
the trace entry points (`model_for`, `validate`, `replay`, `reproduction_problems`) resolve that name here and
hand the rest to `properties.engines.replay`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from models.core import Model
from properties.delayed.binding import MECHANISM as DELAYED
from properties.engines import replay as engine
from properties.engines.mechanism import Mechanism
from properties.keyshared.binding import MECHANISM as KEYSHARED
from properties.metadata.binding import MECHANISM as METADATA
from properties.pidquota.binding import MECHANISM as PIDQUOTA
from properties.topiclist.binding import MECHANISM as TOPICLIST
from traces.format import Trace, TraceError, load

_ORDER: tuple[Mechanism, ...] = (TOPICLIST, DELAYED, METADATA, PIDQUOTA, KEYSHARED)


def mechanisms() -> dict[str, Mechanism]:
    """Every registered mechanism by name, in a stable order."""
    return {mechanism.name: mechanism for mechanism in _ORDER}


def get(name: str) -> Mechanism:
    """The mechanism `name`; a `KeyError` whose message lists the known names otherwise."""
    known = mechanisms()
    if name not in known:
        raise KeyError(f"unknown mechanism {name!r} (known: {', '.join(known)})")
    return known[name]


def mechanism_for(trace: Trace, source: str) -> Mechanism:
    """The mechanism a trace names; a `TraceError` naming `source` when there is none of that name."""
    try:
        return get(trace.mechanism)
    except KeyError as exc:
        raise TraceError(f"{source}: {exc.args[0]}") from None


def model_for(trace: Trace, source: str, variant: str | None = None) -> Model[Any]:
    """The model the trace was recorded on (or `variant` of it); a `TraceError` if it does not exist."""
    return engine.model_for(mechanism_for(trace, source), trace, source, variant)


def validate(trace: Trace, source: str, variant: str | None = None, check_vars: bool = True) -> Model[Any]:
    """`properties.engines.replay.validate` on the mechanism the trace names: the one input check of
    `replay`, `shrink`, `report` and `promote`."""
    return engine.validate(mechanism_for(trace, source), trace, source, variant, check_vars)


def replay(
    trace: Trace, source: str, *, against: str = "model", variant: str | None = None, check_vars: bool = True
) -> engine.ReplayResult:
    """`properties.engines.replay.replay` on the mechanism the trace names."""
    return engine.replay(mechanism_for(trace, source), trace, source, against=against, variant=variant,
                         check_vars=check_vars)


def reproduction_problems(path: Path, current: str | None = None) -> list[str]:
    """What is wrong with a saved counterexample (`properties.engines.replay.reproduction_problems`)."""
    trace = load(path)
    return engine.reproduction_problems(mechanism_for(trace, str(path)), trace, path, current)
