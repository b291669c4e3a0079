"""Layer manager and layered Bloom filter, as in Apache Commons Collections 4.5.0 (COLLECTIONS-843).

Spec: ``docs/spec/pidquota.md`` (the layered filter).

How a harness reads the state (all reads are side-effect free; none evaluates the extend check):

* ``LayerManager.layers`` -> the layers as a tuple, index 0 the oldest, the last one the target;
  ``get_depth()``, ``first()``, ``last()``, ``get(depth)``;
* ``LayerManager.extend_check`` / ``filter_cleanup`` / ``filter_supplier`` are the strategy objects;
  an ``AdvanceOnCount`` exposes its counter as ``count`` (evaluations since the last ``True``);
* ``LayeredBloomFilter.layer_manager`` and ``layers``; ``find``, ``contains``, ``flatten``,
  ``cardinality``, ``is_empty`` never rotate, never clean.

Rotation and expiry are lazy: they happen only inside ``merge`` (through ``get_target``), ``next`` and
``cleanup``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeAlias, TypeVar

from reference_impl.pidquota.bloom import BloomInput, Shape, SimpleBloomFilter

T = TypeVar("T", bound=SimpleBloomFilter)

ExtendCheck: TypeAlias = "Callable[[LayerManager[Any]], bool]"
Cleanup: TypeAlias = Callable[[list[T]], None]


# --- extend checks (commons ``LayerManager.ExtendCheck``) -------------------------------------------


class AdvanceOnCount:
    """True on every ``break_at``-th evaluation. It counts evaluations (= merges), not distinct items."""

    def __init__(self, break_at: int) -> None:
        if break_at <= 0:
            raise ValueError(f"'break_at' must be greater than 0: {break_at}")
        self.break_at = break_at
        self.count = 0

    def __call__(self, manager: LayerManager[Any]) -> bool:
        self.count += 1
        if self.count == self.break_at:
            self.count = 0
            return True
        return False


def advance_on_count(break_at: int) -> AdvanceOnCount:
    return AdvanceOnCount(break_at)


def advance_on_populated() -> ExtendCheck:
    """Advance as soon as the target holds any bit."""
    return lambda manager: not manager.last().is_empty()


def advance_on_saturation(max_n: float) -> ExtendCheck:
    """Advance once the target's estimated item count reaches ``max_n``."""
    if max_n <= 0:
        raise ValueError(f"'max_n' must be greater than 0: {max_n}")

    def check(manager: LayerManager[Any]) -> bool:
        target: SimpleBloomFilter = manager.last()
        return max_n <= target.shape.estimate_n(target.cardinality())

    return check


def never_advance() -> ExtendCheck:
    return lambda manager: False


def any_of(*checks: ExtendCheck) -> ExtendCheck:
    """Left-to-right short circuit, like Java ``Predicate.or``: later checks are not evaluated."""
    return lambda manager: any(check(manager) for check in checks)


def all_of(*checks: ExtendCheck) -> ExtendCheck:
    """Left-to-right short circuit, like Java ``Predicate.and``."""
    return lambda manager: all(check(manager) for check in checks)


# --- cleanups (commons ``LayerManager.Cleanup``); they mutate the list in place -------------------


def no_cleanup() -> Cleanup[Any]:
    return lambda layers: None


def on_max_size(n: int) -> Cleanup[Any]:
    """Drop the oldest layers while there are more than ``n``."""
    if n <= 0:
        raise ValueError(f"'max_size' must be greater than 0: {n}")

    def cleanup(layers: list[Any]) -> None:
        while len(layers) > n:
            del layers[0]

    return cleanup


def remove_empty_target() -> Cleanup[Any]:
    """Remove the last layer (only that one) if it is empty, so an unused target is not kept."""

    def cleanup(layers: list[Any]) -> None:
        if layers and layers[-1].is_empty():
            del layers[-1]

    return cleanup


def remove_if(pred: Callable[[T], bool]) -> Cleanup[T]:
    def cleanup(layers: list[T]) -> None:
        layers[:] = [layer for layer in layers if not pred(layer)]

    return cleanup


def chain(*cleanups: Cleanup[T]) -> Cleanup[T]:
    """Run the cleanups in order (Java ``Consumer.andThen``)."""

    def cleanup(layers: list[T]) -> None:
        for step in cleanups:
            step(layers)

    return cleanup


# --- manager -----------------------------------------------------------------------------------------


class Builder(Generic[T]):
    """Commons ``LayerManager.Builder``; defaults ``never_advance()`` and ``no_cleanup()``, no supplier."""

    def __init__(self) -> None:
        self._supplier: Callable[[], T | None] | None = None
        self._extend_check: ExtendCheck | None = never_advance()
        self._cleanup: Cleanup[T] | None = no_cleanup()

    def set_supplier(self, supplier: Callable[[], T | None] | None) -> Builder[T]:
        self._supplier = supplier
        return self

    def set_extend_check(self, extend_check: ExtendCheck | None) -> Builder[T]:
        self._extend_check = extend_check
        return self

    def set_cleanup(self, cleanup: Cleanup[T] | None) -> Builder[T]:
        self._cleanup = cleanup
        return self

    def get(self) -> LayerManager[T]:
        return LayerManager(self._supplier, self._extend_check, self._cleanup)


class LayerManager(Generic[T]):
    """An ordered list of layers (index 0 the oldest, the last the target) plus three strategies."""

    def __init__(
        self,
        filter_supplier: Callable[[], T | None] | None,
        extend_check: ExtendCheck | None,
        filter_cleanup: Cleanup[T] | None,
        initialize: bool = True,
    ) -> None:
        if filter_supplier is None:
            raise ValueError("filter_supplier must not be None")
        if extend_check is None:
            raise ValueError("extend_check must not be None")
        if filter_cleanup is None:
            raise ValueError("filter_cleanup must not be None")
        self.filter_supplier = filter_supplier
        self.extend_check = extend_check
        self.filter_cleanup = filter_cleanup
        self._layers: list[T] = []
        if initialize:
            self._add_filter()

    @staticmethod
    def builder() -> Builder[Any]:
        return Builder()

    @property
    def layers(self) -> tuple[T, ...]:
        return tuple(self._layers)

    def _add_filter(self) -> None:
        layer = self.filter_supplier()
        if layer is None:
            raise ValueError("filter_supplier returned None")
        self._layers.append(layer)

    def get_target(self) -> T:
        """The only place the extend check runs: once per call, advancing first if it says so."""
        if self.extend_check(self):
            self.next()
        return self.last()

    def next(self) -> None:
        """Clean up, then append a fresh layer (even if the cleanup emptied the list)."""
        self.filter_cleanup(self._layers)
        self._add_filter()

    def cleanup(self) -> None:
        """Clean up; a fresh layer is added only if the cleanup left no layer."""
        self.filter_cleanup(self._layers)
        if not self._layers:
            self._add_filter()

    def clear(self) -> None:
        self._layers.clear()
        self._add_filter()

    def copy(self) -> LayerManager[T]:
        """Deep-copies the layers but shares the strategy objects (and so any counter or timer state)."""
        other = LayerManager(self.filter_supplier, self.extend_check, self.filter_cleanup, initialize=False)
        other._layers = [layer.copy() for layer in self._layers]
        return other

    def first(self) -> T:
        return self._layers[0]

    def last(self) -> T:
        return self._layers[-1]

    def get(self, depth: int) -> T:
        if not 0 <= depth < len(self._layers):
            raise IndexError(f"Depth must be in the range [0,{len(self._layers)}): {depth}")
        return self._layers[depth]

    def get_depth(self) -> int:
        return len(self._layers)

    def process_bloom_filters(self, pred: Callable[[T], bool]) -> bool:
        """Oldest to newest; stops at (and returns False on) the first false."""
        return all(pred(layer) for layer in self._layers)


# --- layered filter ----------------------------------------------------------------------------------

LayeredInput: TypeAlias = "BloomInput | LayeredBloomFilter[Any]"


class LayeredBloomFilter(Generic[T]):
    """A Bloom filter made of layers; membership is per layer, never on the union (see C17)."""

    def __init__(self, shape: Shape, layer_manager: LayerManager[T]) -> None:
        self.shape = shape
        self.layer_manager = layer_manager

    @property
    def layers(self) -> tuple[T, ...]:
        return self.layer_manager.layers

    def _create_filter(self, x: BloomInput) -> SimpleBloomFilter:
        if isinstance(x, SimpleBloomFilter):
            return x
        bf = SimpleBloomFilter(self.shape)
        bf.merge(x)
        return bf

    def merge(self, x: BloomInput) -> bool:
        """Merge into the target: exactly one extend-check evaluation, which may rotate first."""
        return self.layer_manager.get_target().merge(x)

    def contains(self, x: LayeredInput) -> bool:
        """True iff some single layer holds all of x; for a layered x, each of its layers must be held."""
        if isinstance(x, LayeredBloomFilter):
            return x.process_bloom_filters(self.contains)
        bf = self._create_filter(x)
        return not self.process_bloom_filters(lambda layer: not layer.contains(bf))

    def find(self, x: BloomInput) -> list[int]:
        """Ascending indices of the layers that contain x; visits every layer."""
        bf = self._create_filter(x)
        return [i for i, layer in enumerate(self.layer_manager.layers) if layer.contains(bf)]

    def flatten(self) -> SimpleBloomFilter:
        bf = SimpleBloomFilter(self.shape)
        for layer in self.layer_manager.layers:
            bf.merge(layer)
        return bf

    def cardinality(self) -> int:
        return self.flatten().cardinality()

    def estimate_n(self) -> int:
        return self.flatten().estimate_n()

    def estimate_union(self, other: SimpleBloomFilter | LayeredBloomFilter[Any]) -> int:
        union = self.flatten()
        union.merge(other.flatten() if isinstance(other, LayeredBloomFilter) else other)
        return union.estimate_n()

    def is_empty(self) -> bool:
        return self.process_bloom_filters(lambda layer: layer.is_empty())

    def next(self) -> None:
        self.layer_manager.next()

    def cleanup(self) -> None:
        self.layer_manager.cleanup()

    def clear(self) -> None:
        self.layer_manager.clear()

    def copy(self) -> LayeredBloomFilter[T]:
        return LayeredBloomFilter(self.shape, self.layer_manager.copy())

    def get(self, depth: int) -> T:
        return self.layer_manager.get(depth)

    def get_depth(self) -> int:
        return self.layer_manager.get_depth()

    def process_bloom_filters(self, pred: Callable[[T], bool]) -> bool:
        return self.layer_manager.process_bloom_filters(pred)

    def process_indices(self, pred: Callable[[int], bool]) -> bool:
        """Each layer's indices in turn, so an index set in two layers is visited twice."""
        return self.process_bloom_filters(lambda layer: layer.process_indices(pred))


def fixed_layered(shape: Shape, max_depth: int) -> LayeredBloomFilter[SimpleBloomFilter]:
    """Commons test helper: a new layer per populated target, keeping at most ``max_depth`` layers."""
    manager: LayerManager[SimpleBloomFilter] = (
        LayerManager.builder()
        .set_supplier(lambda: SimpleBloomFilter(shape))
        .set_extend_check(advance_on_populated())
        .set_cleanup(on_max_size(max_depth))
        .get()
    )
    return LayeredBloomFilter(shape, manager)
