"""Pulsar broker settings -> tracker parameters (spec §9), like ``InMemoryDelayedDeliveryTrackerFactory``.

Only the settings of §9 are read; any other broker setting in the mapping is ignored, since a
``broker.conf`` carries hundreds of them. Values may be typed (``int``/``bool``) or the strings a
``broker.conf`` holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from reference_impl.delayed.legacy import LegacyDelayedDeliveryTracker
from reference_impl.delayed.timer import Clock, VirtualTimer
from reference_impl.delayed.tracker import AbstractDelayedDeliveryTracker, InMemoryDelayedDeliveryTracker

IN_MEMORY_FACTORY = "org.apache.pulsar.broker.delayed.InMemoryDelayedDeliveryTrackerFactory"

PULSAR_DEFAULTS: Mapping[str, object] = {
    "delayedDeliveryEnabled": True,
    "delayedDeliveryTrackerFactoryClassName": IN_MEMORY_FACTORY,
    "delayedDeliveryTickTimeMillis": 1000,
    "isDelayedDeliveryDeliverAtTimeStrict": False,
    "delayedDeliveryFixedDelayDetectionLookahead": 50000,
    "managedLedgerMaxEntriesPerLedger": 50000,
}

TrackerKind = Literal["pr23611", "current", "legacy"]


def _bool(settings: Mapping[str, object], name: str) -> bool:
    value = settings.get(name, PULSAR_DEFAULTS[name])
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{name}: expected true or false, got {value!r}")


def _int(settings: Mapping[str, object], name: str) -> int:
    value = settings.get(name, PULSAR_DEFAULTS[name])
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{name}: expected an integer, got {value!r}")


class InMemoryDelayedDeliveryTrackerFactory:
    """Reads the §9 settings once and builds trackers with them.

    ``max_entries_per_ledger`` is not a tracker parameter: it is the benchmark's ``E`` (§8).
    """

    def __init__(self, settings: Mapping[str, object] | None = None) -> None:
        settings = settings if settings is not None else {}
        if not _bool(settings, "delayedDeliveryEnabled"):
            raise ValueError("delayedDeliveryEnabled=false: no tracker is created (the model always tracks)")
        class_name = settings.get("delayedDeliveryTrackerFactoryClassName", IN_MEMORY_FACTORY)
        if class_name not in (IN_MEMORY_FACTORY, IN_MEMORY_FACTORY.rsplit(".", 1)[1]):
            raise ValueError(
                f"delayedDeliveryTrackerFactoryClassName={class_name!r} is not modelled; "
                f"only {IN_MEMORY_FACTORY} is (spec §10)"
            )
        self.tick_time_millis = _int(settings, "delayedDeliveryTickTimeMillis")
        self.strict = _bool(settings, "isDelayedDeliveryDeliverAtTimeStrict")
        self.fixed_delay_detection_lookahead = _int(settings, "delayedDeliveryFixedDelayDetectionLookahead")
        self.max_entries_per_ledger = _int(settings, "managedLedgerMaxEntriesPerLedger")
        if self.tick_time_millis < 1:
            raise ValueError(f"delayedDeliveryTickTimeMillis must be >= 1, got {self.tick_time_millis}")
        if self.fixed_delay_detection_lookahead < 0:
            raise ValueError(
                "delayedDeliveryFixedDelayDetectionLookahead must be >= 0 (0 disables), "
                f"got {self.fixed_delay_detection_lookahead}"
            )
        if self.max_entries_per_ledger < 1:
            raise ValueError(f"managedLedgerMaxEntriesPerLedger must be >= 1, got {self.max_entries_per_ledger}")

    def new_tracker(
        self,
        clock: Clock,
        kind: TrackerKind = "current",
        *,
        timer: VirtualTimer | None = None,
        trigger: Callable[[], None] | None = None,
    ) -> AbstractDelayedDeliveryTracker:
        """A tracker of the given variant, or the legacy heap tracker for ``kind="legacy"``."""
        if kind == "legacy":
            return LegacyDelayedDeliveryTracker(
                self.tick_time_millis,
                clock,
                self.strict,
                self.fixed_delay_detection_lookahead,
                timer=timer,
                trigger=trigger,
            )
        return InMemoryDelayedDeliveryTracker(
            self.tick_time_millis,
            clock,
            self.strict,
            self.fixed_delay_detection_lookahead,
            kind,
            timer=timer,
            trigger=trigger,
        )
