"""Delayed delivery on timestamp buckets of roaring bitmaps (Pulsar PR #23611); spec ``delayed_delivery.md``.

A harness builds a ``VirtualTimer`` on its own clock, a tracker (``InMemoryDelayedDeliveryTracker`` with
``variant="current"`` or ``"pr23611"``, or ``LegacyDelayedDeliveryTracker``) on that timer, and optionally a
``DispatcherModel`` around the tracker. It then steps: ``read``/``add_message``, ``dispatch_round``, clock
advances, ``timer.fire``/``fire_due``, ``clear``. The module docstrings of ``tracker`` and ``dispatcher``
say how to read the state for the invariants DD-I1..DD-I10. The §8 memory benchmark lives in
``reference_impl.delayed.bench`` (not imported here, so ``python -m`` runs it cleanly).
"""

from reference_impl.delayed.dispatcher import NO_DELAY, Delivery, DispatcherModel, Offer
from reference_impl.delayed.factory import PULSAR_DEFAULTS, InMemoryDelayedDeliveryTrackerFactory, TrackerKind
from reference_impl.delayed.legacy import LEGACY_BYTES_PER_MESSAGE, LegacyDelayedDeliveryTracker
from reference_impl.delayed.timer import Clock, TimeoutHandle, TimerTask, VirtualTimer
from reference_impl.delayed.tracker import (
    MAX_LONG,
    MIN_LONG,
    VARIANTS,
    AbstractDelayedDeliveryTracker,
    BucketIndex,
    InMemoryDelayedDeliveryTracker,
    Position,
    Triple,
    Variant,
    closed_form_size,
    positions,
    precision_bits,
    round_up,
    trim,
)

__all__ = [
    "LEGACY_BYTES_PER_MESSAGE",
    "MAX_LONG",
    "MIN_LONG",
    "NO_DELAY",
    "PULSAR_DEFAULTS",
    "VARIANTS",
    "AbstractDelayedDeliveryTracker",
    "BucketIndex",
    "Clock",
    "Delivery",
    "DispatcherModel",
    "InMemoryDelayedDeliveryTracker",
    "InMemoryDelayedDeliveryTrackerFactory",
    "LegacyDelayedDeliveryTracker",
    "Offer",
    "Position",
    "TimeoutHandle",
    "TimerTask",
    "TrackerKind",
    "Triple",
    "Variant",
    "VirtualTimer",
    "closed_form_size",
    "positions",
    "precision_bits",
    "round_up",
    "trim",
]
