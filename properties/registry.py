"""The mechanisms brokerspec knows, by name: the one place a name becomes a `Mechanism`.

Each `properties/<mechanism>/binding.py` exposes one `MECHANISM`; the command line, the pipeline
and the corpus tests find every mechanism here, so adding one means adding its binding below.
Engines never import this module: they are handed a `Mechanism`.
"""

from __future__ import annotations

from properties.delayed.binding import MECHANISM as DELAYED
from properties.engines.mechanism import Mechanism
from properties.keyshared.binding import MECHANISM as KEYSHARED
from properties.metadata.binding import MECHANISM as METADATA
from properties.pidquota.binding import MECHANISM as PIDQUOTA
from properties.topiclist.binding import MECHANISM as TOPICLIST

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
