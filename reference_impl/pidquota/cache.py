"""KIP-936 ``ProducerIdQuotaManagerCache``: per principal, a time-layered Bloom filter of the PIDs seen.

Spec: ``docs/spec/pidquota.md`` (the cache and its `variant`).

How a harness reads the state after each step (all reads are side-effect free):

* ``principals()`` in insertion order; ``now`` (the cache clock, ``None`` before the first call);
* ``layers_of(p)`` -> ``[(created, expires, cardinality), ...]``, index 0 the oldest (``[]`` if absent);
* ``filter_of(p)`` -> the ``LayeredBloomFilter`` (``.layers`` are ``TimestampedLayer``s with
  ``created``, ``expires``, ``bits``, ``as_index_array()``), ``None`` if absent;
* ``entry_of(p)`` -> ``CacheEntry`` with ``shape``, ``n_layer``, ``count_check.count``,
  ``timer.next_rotation``, and the counters ``merges`` (= extend-check evaluations) and ``readds``;
* ``window_ms`` (W), ``layer_count`` (L), ``delta_t`` (ΔT = W // L), ``variant``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from reference_impl.pidquota.bloom import Hasher, PidHasher, Shape, SimpleBloomFilter, default_pid_hasher, round_half_up
from reference_impl.pidquota.layered import (
    AdvanceOnCount,
    LayeredBloomFilter,
    LayerManager,
    any_of,
    chain,
    remove_empty_target,
)

Variant = Literal["current", "no_readd"]
VARIANTS: tuple[Variant, ...] = get_args(Variant)

Principal = str
LayerInfo = tuple[int, int, int]

_MS_PER_HOUR = 3_600_000


class TimestampedLayer(SimpleBloomFilter):
    """A layer that knows when it was created and when it expires (``created + W``)."""

    def __init__(self, shape: Shape, created: int, expires: int) -> None:
        super().__init__(shape)
        self.created = created
        self.expires = expires

    def __repr__(self) -> str:
        return f"TimestampedLayer(created={self.created}, expires={self.expires}, {self.as_index_array()})"


class RotationTimer:
    """Extend check: true iff ``now >= next_rotation``, and then ``next_rotation = now + ΔT``.

    It is consulted only on a merge whose count check said no, so an idle principal never rotates.
    """

    def __init__(self, clock: Callable[[], int], next_rotation: int, delta_t: int) -> None:
        self._clock = clock
        self.next_rotation = next_rotation
        self.delta_t = delta_t

    def __call__(self, manager: object) -> bool:
        now = self._clock()
        if now >= self.next_rotation:
            self.next_rotation = now + self.delta_t
            return True
        return False


@dataclass
class CacheEntry:
    """One principal's filter and strategy state; ``merges``/``readds`` count what ``track`` merged."""

    filter: LayeredBloomFilter[TimestampedLayer]
    shape: Shape
    n_layer: int
    count_check: AdvanceOnCount
    timer: RotationTimer
    merges: int = 0
    readds: int = 0

    @property
    def next_rotation(self) -> int:
        return self.timer.next_rotation


class ProducerIdQuotaManagerCache:
    """Answers "was this PID seen recently for this principal?" and remembers it for about W.

    ``variant="current"`` re-adds a PID whose newest layer is older than ΔT, so a long-running PID is
    never forgotten; ``variant="no_readd"`` is the KIP's rejected alternative 8 (it forgets them).
    """

    def __init__(
        self,
        window_ms: int,
        layer_count: int = 4,
        false_positive_rate: float = 0.01,
        *,
        variant: Variant = "current",
        pid_hasher: PidHasher = default_pid_hasher,
    ) -> None:
        # layer_count defaults to 4, the KIP's example (spec §8).
        if window_ms <= 0:
            raise ValueError(f"window_ms must be > 0: {window_ms}")
        if layer_count < 2:
            raise ValueError(f"layer_count must be >= 2: {layer_count}")
        if window_ms % layer_count != 0:
            raise ValueError(f"window_ms ({window_ms}) must be a multiple of layer_count ({layer_count})")
        if not 0.0 < false_positive_rate < 1.0:
            raise ValueError(f"false_positive_rate must be in (0, 1): {false_positive_rate}")
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
        self.window_ms = window_ms
        self.layer_count = layer_count
        self.delta_t = window_ms // layer_count
        self.false_positive_rate = false_positive_rate
        self.variant: Variant = variant
        self.pid_hasher = pid_hasher
        self._entries: dict[Principal, CacheEntry] = {}
        self._now: int | None = None

    # --- clock -----------------------------------------------------------------------------------

    @property
    def now(self) -> int | None:
        return self._now

    def _check_clock(self, now: int) -> None:
        if self._now is not None and now < self._now:
            raise ValueError(f"time went backwards: {now} < {self._now}")

    def _clock(self) -> int:
        # The strategies only run inside calls that have set the clock.
        assert self._now is not None
        return self._now

    # --- sizing ----------------------------------------------------------------------------------

    def layer_size(self, rate: float) -> int:
        """``n_layer = max(1, round_half_up(rate · W/1h / L))``: the PIDs one layer is designed for."""
        if not rate > 0:
            raise ValueError(f"producer_id_rate must be > 0: {rate}")
        return max(1, round_half_up(rate * self.window_ms / _MS_PER_HOUR / self.layer_count))

    # --- operations ------------------------------------------------------------------------------

    def track(self, principal: Principal, producer_id_rate: float, pid: int, now: int) -> bool:
        """Record ``pid`` for ``principal``; ``True`` means it was already seen (never counted new).

        ``producer_id_rate`` (PIDs per hour) only sizes a new entry; later calls validate but ignore it.
        """
        self._check_clock(now)
        n_layer = self.layer_size(producer_id_rate)
        h = self.pid_hasher(pid)
        entry = self._entries.get(principal)
        if entry is None:
            entry = self._create_entry(n_layer, now)
            self._entries[principal] = entry
            self._merge(entry, h)
            return False
        self._now = now
        layered = entry.filter
        if layered.contains(h):
            if self.variant == "current":
                newest = layered.get(layered.find(h)[-1])
                if newest.created < now - self.delta_t:
                    # Not recent: re-add into the current target so the PID outlives its old layer.
                    entry.readds += 1
                    self._merge(entry, h)
            return True
        self._merge(entry, h)
        return False

    def is_seen(self, principal: Principal, pid: int, now: int) -> bool:
        """Would ``track`` answer ``True``? No merge, no cleanup, no principal creation.

        Expired layers that no cleanup has removed yet still count, exactly as in ``track``. The only
        effect is that the cache clock moves to ``now`` (so later calls cannot go back in time).
        """
        self._check_clock(now)
        h = self.pid_hasher(pid)
        self._now = now
        entry = self._entries.get(principal)
        return entry is not None and entry.filter.contains(h)

    def clean_map(self, now: int) -> list[Principal]:
        """Clean every filter (insertion order) and drop the principals left empty; returns them."""
        self._check_clock(now)
        self._now = now
        removed: list[Principal] = []
        for principal, entry in list(self._entries.items()):
            entry.filter.cleanup()
            if entry.filter.is_empty():
                del self._entries[principal]
                removed.append(principal)
        return removed

    # --- introspection ---------------------------------------------------------------------------

    def principals(self) -> list[Principal]:
        return list(self._entries)

    def entry_of(self, principal: Principal) -> CacheEntry | None:
        return self._entries.get(principal)

    def filter_of(self, principal: Principal) -> LayeredBloomFilter[TimestampedLayer] | None:
        entry = self._entries.get(principal)
        return entry.filter if entry is not None else None

    def layers_of(self, principal: Principal) -> list[LayerInfo]:
        entry = self._entries.get(principal)
        if entry is None:
            return []
        return [(layer.created, layer.expires, layer.cardinality()) for layer in entry.filter.layers]

    # --- internals -------------------------------------------------------------------------------

    def _create_entry(self, n_layer: int, now: int) -> CacheEntry:
        shape = Shape.from_np(n_layer, self.false_positive_rate)
        window = self.window_ms

        def supplier() -> TimestampedLayer:
            created = self._clock()
            return TimestampedLayer(shape, created, created + window)

        def expire_head(layers: list[TimestampedLayer]) -> None:
            current = self._clock()
            while layers and layers[0].expires < current:
                del layers[0]

        count_check = AdvanceOnCount(n_layer)
        timer = RotationTimer(self._clock, now + self.delta_t, self.delta_t)
        # Set the clock before the supplier makes layer 0 (it reads the clock).
        self._now = now
        manager: LayerManager[TimestampedLayer] = (
            LayerManager.builder()
            .set_supplier(supplier)
            .set_extend_check(any_of(count_check, timer))
            .set_cleanup(chain(remove_empty_target(), expire_head))
            .get()
        )
        return CacheEntry(LayeredBloomFilter(shape, manager), shape, n_layer, count_check, timer)

    def _merge(self, entry: CacheEntry, h: Hasher) -> None:
        entry.merges += 1
        entry.filter.merge(h)
