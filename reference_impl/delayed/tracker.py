"""InMemoryDelayedDeliveryTracker with timestamp buckets on roaring bitmaps (PR #23611 + #26012 + #26188).

Spec: ``docs/spec/delayed.md``. Times are integer milliseconds,
positions are ``(ledger_id, entry_id)``.

How a harness reads the state after each step (all reads are side-effect free unless noted):

* ``snapshot()`` -> sorted ``(bucket_key, ledger, entry)`` triples (DD-I3, DD-I4, DD-I5);
* ``get_number_of_delayed_messages()`` / ``count`` and ``get_buffer_memory_usage()`` are the
  incrementally maintained counters; ``buckets.count()`` and ``buckets.serialized_size()`` recompute
  them from the bitmaps (DD-I5, DD-I7); ``buckets.keys()`` / ``buckets.items()`` expose the layout;
* ``timer_state()`` -> ``(handle, target, last_tick_run)`` and ``timer.pending()`` (DD-I6);
* ``highest_delivery_time_tracked`` and ``messages_have_fixed_delay`` (DD-I8);
* ``bucket_key(d)``, ``cutoff_time()`` (C), ``bucket_cutoff_time()`` (BC) for the current clock.

``has_message_available()`` and ``should_pause_all_deliveries()`` are *not* pure: when no bucket is
due they call ``update_timer()`` (§4.2), exactly like upstream.
"""

from __future__ import annotations

import bisect
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Literal, get_args

from pyroaring import BitMap64

from reference_impl.delayed.timer import Clock, TimeoutHandle, VirtualTimer

MIN_LONG = -(2**63)
MAX_LONG = 2**63 - 1

Variant = Literal["pr23611", "current"]
VARIANTS: tuple[Variant, ...] = get_args(Variant)

Position = tuple[int, int]
Triple = tuple[int, int, int]

_CHUNK_BITS = 16  # one roaring container covers 2^16 consecutive values
_HIGH_BITS = 32  # BitMap64 keeps one 32-bit roaring bitmap per distinct high half
_MAX_CONTAINER_BYTES = 8192  # a bitset container; arrays cost 2 B per value up to 4096 values


def precision_bits(tick_time_millis: int) -> int:
    """``floor(log2 T)``; upstream uses 0 for ``T <= 0`` (the tracker itself rejects ``T < 1``)."""
    return tick_time_millis.bit_length() - 1 if tick_time_millis > 0 else 0


def trim(x: int, bits: int) -> int:
    """Round down to a multiple of ``2**bits`` (two's complement ``&``, as in Java)."""
    return x & -(1 << bits)


def round_up(x: int, bits: int) -> int:
    """Round up to a multiple of ``2**bits``; saturates at ``trim(Long.MAX_VALUE)`` instead of overflowing."""
    step = 1 << bits
    if x + step - 1 <= MAX_LONG:
        return trim(x + step - 1, bits)
    return trim(MAX_LONG, bits)


def _container_bytes(card: int) -> int:
    """Serialized bytes of one non-run container: 8 B of header and offset, then the payload."""
    return 0 if card == 0 else 8 + min(2 * card, _MAX_CONTAINER_BYTES)


def closed_form_size(bitmap: BitMap64) -> int:
    """``8 + 12*h + sum(8 + min(2*card, 8192))`` over containers (§4.4). O(card); for harness checks."""
    highs: set[int] = set()
    size = 8
    for chunk, values in itertools.groupby(bitmap, key=lambda v: v >> _CHUNK_BITS):
        highs.add(chunk >> (_HIGH_BITS - _CHUNK_BITS))
        size += _container_bytes(sum(1 for _ in values))
    return size + 12 * len(highs)


def _span(value: int, bits: int) -> tuple[int, int]:
    """The half-open range of the aligned ``2**bits`` block that holds ``value``."""
    start = trim(value, bits)
    return start, start + (1 << bits)


def positions(triples: Iterable[Triple]) -> list[Position]:
    """Project triples to sorted positions (what ``get_scheduled_messages`` reports)."""
    return sorted((ledger, entry) for _, ledger, entry in triples)


class BucketIndex:
    """Sorted map ``key -> ledger -> BitMap64`` of entry ids, with O(1)-per-change memory accounting.

    Keys are kept in a sorted list (dict + bisect); ledgers are sorted when walked. Bitmaps are only
    filled with ``add`` (never ``update(range)``) and never run-optimised, so every bitmap obeys the
    closed form of §4.4 and ``memory == serialized_size()`` holds after every operation.
    """

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._buckets: dict[int, dict[int, BitMap64]] = {}
        self.memory = 0

    def add(self, key: int, ledger: int, entry: int) -> bool:
        """Insert ``entry`` under ``key``/``ledger``; True if it was absent."""
        ledgers = self._buckets.get(key)
        if ledgers is None:
            ledgers = self._buckets[key] = {}
            bisect.insort(self._keys, key)
        bitmap = ledgers.get(ledger)
        if bitmap is None:
            bitmap = ledgers[ledger] = BitMap64()
            self.memory += 8
        elif entry in bitmap:
            return False
        high_lo, high_hi = _span(entry, _HIGH_BITS)
        if bitmap.range_cardinality(high_lo, high_hi) == 0:
            self.memory += 12
        chunk_lo, chunk_hi = _span(entry, _CHUNK_BITS)
        card = bitmap.range_cardinality(chunk_lo, chunk_hi)
        self.memory += _container_bytes(card + 1) - _container_bytes(card)
        bitmap.add(entry)
        return True

    def drain(self, cutoff: int, n: int) -> list[Triple]:
        """Remove and return up to ``n`` triples with ``key <= cutoff`` in ``(key, ledger, entry)`` order.

        Within a bitmap the ``min(n, card)`` smallest ids go, by ``remove_range`` (§4.3).
        """
        drained: list[Triple] = []
        while n > 0 and self._keys and self._keys[0] <= cutoff:
            key = self._keys[0]
            ledgers = self._buckets[key]
            for ledger in sorted(ledgers):
                bitmap = ledgers[ledger]
                taken = list(itertools.islice(bitmap, n))
                self.memory -= self._removal_bytes(bitmap, taken)
                # The taken ids are the smallest ones, so they form the whole range [first, last].
                bitmap.remove_range(taken[0], taken[-1] + 1)
                drained.extend((key, ledger, entry) for entry in taken)
                n -= len(taken)
                if not bitmap:
                    del ledgers[ledger]
                if n == 0:
                    break
            if not ledgers:
                del self._buckets[key]
                self._keys.pop(0)
        return drained

    @staticmethod
    def _removal_bytes(bitmap: BitMap64, taken: list[int]) -> int:
        """Bytes freed by removing ``taken`` (sorted, all present) from ``bitmap``; call before removing."""
        freed = 8 if len(taken) == len(bitmap) else 0
        for high, values in itertools.groupby(taken, key=lambda v: v >> _HIGH_BITS):
            low, up = _span(high << _HIGH_BITS, _HIGH_BITS)
            if sum(1 for _ in values) == bitmap.range_cardinality(low, up):
                freed += 12
        for chunk, values in itertools.groupby(taken, key=lambda v: v >> _CHUNK_BITS):
            low, up = _span(chunk << _CHUNK_BITS, _CHUNK_BITS)
            card = bitmap.range_cardinality(low, up)
            freed += _container_bytes(card) - _container_bytes(card - sum(1 for _ in values))
        return freed

    def first_key(self) -> int:
        """The smallest bucket key; ``LookupError`` when empty."""
        if not self._keys:
            raise LookupError("no buckets")
        return self._keys[0]

    def is_empty(self) -> bool:
        """True when no bucket is held."""
        return not self._keys

    def count(self) -> int:
        """Sum of bitmap cardinalities, recomputed (the tracker's ``count`` must equal it, DD-I5)."""
        return sum(len(bitmap) for bitmap in self.bitmaps())

    def serialized_size(self) -> int:
        """``sum(len(bm.serialize()))``, recomputed (``memory`` must equal it, DD-I7)."""
        return sum(len(bitmap.serialize()) for bitmap in self.bitmaps())

    def keys(self) -> list[int]:
        """Bucket keys in ascending order (a key without ledgers would break DD-I5)."""
        return list(self._keys)

    def items(self) -> list[tuple[int, int, BitMap64]]:
        """``(key, ledger, bitmap)`` in ascending order. The bitmaps are live: do not mutate them."""
        return [
            (key, ledger, self._buckets[key][ledger]) for key in self._keys for ledger in sorted(self._buckets[key])
        ]

    def bitmaps(self) -> list[BitMap64]:
        """All bitmaps in ``(key, ledger)`` order (live objects)."""
        return [bitmap for _, _, bitmap in self.items()]

    def triples(self) -> list[Triple]:
        """Every held ``(key, ledger, entry)``, sorted."""
        return [(key, ledger, entry) for key, ledger, bitmap in self.items() for entry in bitmap]

    def clear(self) -> None:
        """Drop everything and zero ``memory``."""
        self._keys.clear()
        self._buckets.clear()
        self.memory = 0


def _check_long(name: str, value: int, low: int) -> None:
    """Positions and times are Java longs; out-of-range input is a caller error, not a wrap-around."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= MAX_LONG:
        raise ValueError(f"{name}={value} is outside [{low}, 2**63)")


def _noop() -> None:
    """Default trigger: a tracker used without a dispatcher."""


class AbstractDelayedDeliveryTracker(ABC):
    """What every tracker shares: cutoff, fixed-delay detection, and the timer of §4.6.

    Upstream keeps the timer in ``AbstractDelayedDeliveryTracker`` and the fixed-delay fields in each
    in-memory tracker; here both trackers (bucketed and legacy) inherit them from this class.
    ``trigger`` is public so a ``DispatcherModel`` can wire its ``dispatch_round`` to it.
    """

    def __init__(
        self,
        tick_time_millis: int,
        clock: Clock,
        strict: bool,
        fixed_delay_detection_lookahead: int,
        *,
        timer: VirtualTimer | None = None,
        trigger: Callable[[], None] | None = None,
    ) -> None:
        if tick_time_millis < 1:
            raise ValueError(f"tick_time_millis must be >= 1, got {tick_time_millis}")
        if fixed_delay_detection_lookahead < 0:
            raise ValueError(f"fixed_delay_detection_lookahead must be >= 0, got {fixed_delay_detection_lookahead}")
        self.tick_time_millis = tick_time_millis
        self.clock = clock
        self.strict = strict
        self.fixed_delay_detection_lookahead = fixed_delay_detection_lookahead
        self.timer = timer if timer is not None else VirtualTimer(clock)
        self.trigger: Callable[[], None] = trigger if trigger is not None else _noop
        self.highest_delivery_time_tracked = 0
        self.messages_have_fixed_delay = True
        self.handle: TimeoutHandle | None = None
        self.target: int | None = None  # upstream: currentTimeoutTarget, -1 for "none"
        self.last_tick_run = 0

    # ----- contents (per tracker kind) -----

    @abstractmethod
    def _track(self, ledger_id: int, entry_id: int, deliver_at: int) -> None:
        """Store an accepted message (§4.1 step 2 / §4.7)."""

    @abstractmethod
    def get_number_of_delayed_messages(self) -> int:
        """Messages held (``count``)."""

    @abstractmethod
    def get_buffer_memory_usage(self) -> int:
        """Bytes of the index (§4.4, §4.7)."""

    @abstractmethod
    def next_delivery_time(self) -> int:
        """The head's time; ``LookupError`` when empty."""

    @abstractmethod
    def has_message_available(self) -> bool:
        """Whether the head is due; calls ``update_timer()`` when it is not."""

    @abstractmethod
    def get_scheduled_messages(self, max_messages: int) -> list[Position]:
        """Remove and return due positions, sorted by ``(ledger, entry)``."""

    @abstractmethod
    def clear(self) -> None:
        """Drop all messages; leaves ``highest``/``fixed`` and the timer alone (§4.4)."""

    @abstractmethod
    def snapshot(self) -> list[Triple]:
        """Every held ``(key, ledger, entry)`` (legacy: ``(D, ledger, entry)``), sorted."""

    # ----- shared behaviour -----

    def cutoff_time(self) -> int:
        """``C(now)``: a message with ``D <= C(now)`` may be delivered now."""
        now = self.clock()
        return now if self.strict else now + self.tick_time_millis

    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """True: held back. False: deliver now (nothing stored) (§4.1)."""
        _check_long("ledger_id", ledger_id, 0)
        _check_long("entry_id", entry_id, 0)
        _check_long("deliver_at", deliver_at, MIN_LONG)
        if deliver_at < 0 or deliver_at <= self.cutoff_time():
            self.messages_have_fixed_delay = False
            return False
        self._track(ledger_id, entry_id, deliver_at)
        self.update_timer()
        if deliver_at < self.highest_delivery_time_tracked - self.tick_time_millis:
            self.messages_have_fixed_delay = False
        self.highest_delivery_time_tracked = max(self.highest_delivery_time_tracked, deliver_at)
        return True

    def _reset_if_empty(self) -> None:
        """End of a drain: an empty tracker starts fixed-delay detection afresh."""
        if self.get_number_of_delayed_messages() == 0:
            self.highest_delivery_time_tracked = 0
            self.messages_have_fixed_delay = True

    def should_pause_all_deliveries(self) -> bool:
        """Fixed-delay pause; short-circuits, so ``has_message_available()`` runs only if reached."""
        return (
            self.fixed_delay_detection_lookahead > 0
            and self.messages_have_fixed_delay
            and self.get_number_of_delayed_messages() >= self.fixed_delay_detection_lookahead
            and not self.has_message_available()
        )

    def update_timer(self) -> None:
        """Arm one timeout for the head key, at most one trigger per tick (§4.6)."""
        if self.get_number_of_delayed_messages() == 0:
            self._disarm()
            return
        head = self.next_delivery_time()
        if head == self.target:
            return
        self._disarm()
        now = self.clock()
        delay = head - now
        if delay <= 0:
            return  # already due: the dispatcher picks it up on its next read
        delay = max(delay, self.last_tick_run + self.tick_time_millis - now)
        self.target = head
        self.handle = self.timer.new_timeout(self, delay)

    def _disarm(self) -> None:
        """Cancel the armed handle, if any, and forget it."""
        if self.handle is not None:
            self.handle.cancel()
        self.handle = None
        self.target = None

    def run(self, handle: TimeoutHandle | None) -> None:
        """TimerTask entry point: a live handle triggers one dispatcher read (§4.6)."""
        if handle is None or handle.cancelled:
            return
        self.last_tick_run = self.clock()
        if handle is self.handle:
            self.handle = None
            self.target = None
        self.trigger()

    def close(self) -> None:
        """Cancel the armed timeout; contents stay (upstream releases them with the object)."""
        self._disarm()

    def timer_state(self) -> tuple[TimeoutHandle | None, int | None, int]:
        """``(handle, target, last_tick_run)`` for DD-I6."""
        return self.handle, self.target, self.last_tick_run


class InMemoryDelayedDeliveryTracker(AbstractDelayedDeliveryTracker):
    """The bucketed tracker. ``variant="current"`` is §3-§4; ``"pr23611"`` is the original PR (§6).

    ``current`` keys a message by ``round_up(D)`` when strict and ``trim(D)`` otherwise, and a bucket is
    due once all of its possible ``D`` values are (``BC``); ``pr23611`` keys by ``trim(D)`` and compares
    the key with the message cutoff, so it offers up to ``T + P - 1`` ms early (DD-I1).
    """

    def __init__(
        self,
        tick_time_millis: int,
        clock: Clock,
        strict: bool,
        fixed_delay_detection_lookahead: int,
        variant: Variant = "current",
        *,
        timer: VirtualTimer | None = None,
        trigger: Callable[[], None] | None = None,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
        super().__init__(tick_time_millis, clock, strict, fixed_delay_detection_lookahead, timer=timer, trigger=trigger)
        self.variant: Variant = variant
        self.precision_bits = precision_bits(tick_time_millis)
        self.precision_millis = 1 << self.precision_bits
        self.buckets = BucketIndex()
        self.count = 0

    def bucket_key(self, deliver_at: int) -> int:
        """The bucket a message with this ``D`` goes to (§3)."""
        if self.variant == "current" and self.strict:
            return round_up(deliver_at, self.precision_bits)
        return trim(deliver_at, self.precision_bits)

    def bucket_cutoff_time(self) -> int:
        """``BC(now)``: buckets with ``key <= BC(now)`` are due (§3)."""
        if self.variant == "current" and not self.strict:
            return self.clock() + self.tick_time_millis - self.precision_millis + 1
        return self.cutoff_time()

    def _track(self, ledger_id: int, entry_id: int, deliver_at: int) -> None:
        if self.buckets.add(self.bucket_key(deliver_at), ledger_id, entry_id):
            self.count += 1

    def get_number_of_delayed_messages(self) -> int:
        return self.count

    def get_buffer_memory_usage(self) -> int:
        return self.buckets.memory

    def next_delivery_time(self) -> int:
        return self.buckets.first_key()

    def has_message_available(self) -> bool:
        available = not self.buckets.is_empty() and self.buckets.first_key() <= self.bucket_cutoff_time()
        if not available:
            self.update_timer()
        return available

    def get_scheduled_messages(self, max_messages: int) -> list[Position]:
        """Drain due buckets in key order (§4.3).

        Returns every emitted position, so a position held under two keys can appear twice (upstream
        collects into a ``TreeSet``; the spec's DD-I4 counts emitted triples, so we keep them all).
        """
        drained = self.buckets.drain(self.bucket_cutoff_time(), max_messages)
        self.count -= len(drained)
        self._reset_if_empty()
        self.update_timer()
        return positions(drained)

    def clear(self) -> None:
        self.buckets.clear()
        self.count = 0

    def snapshot(self) -> list[Triple]:
        return self.buckets.triples()
