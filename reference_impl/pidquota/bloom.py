"""Bloom filter building blocks, bit-exact with Apache Commons Collections 4.5.0 ``bloomfilter``.

Spec: ``docs/spec/pidquota.md`` (shapes, hashers and per-layer containment).

How a harness reads the state (all reads are side-effect free):

* ``Shape.k`` / ``Shape.m`` and ``str(shape)`` (``"Shape[k=3 m=24]"``);
* ``SimpleBloomFilter.bits`` (the bit set as one Python ``int``, bit i = index i),
  ``as_index_array()`` (ascending set indices), ``bit_words()`` (the Java ``long[]`` layout, as
  unsigned 64-bit words), ``cardinality()`` and ``is_empty()``;
* ``EnhancedDoubleHasher.initial`` / ``increment`` (already reduced mod 2**64, unsigned).
"""

from __future__ import annotations

import copy as _copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, Self, TypeAlias, runtime_checkable

import mmh3

INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1
_U64 = 2**64
LN_2 = math.log(2.0)
_DENOMINATOR = -LN_2 * LN_2


def round_half_up(x: float) -> int:
    """Java ``Math.round``: floor(x + 1/2) computed exactly, NaN -> 0, saturating to the long range.

    Java >= 7 does not compute ``x + 0.5`` in floating point (that would round 0.49999999999999994 up);
    ``x - floor(x)`` is exact for every double, so this matches Java on all inputs.
    """
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return LONG_MAX if x > 0 else LONG_MIN
    f = math.floor(x)
    r = f + 1 if x - f >= 0.5 else f
    return max(LONG_MIN, min(LONG_MAX, r))


def _check_number_of_items(n: int) -> None:
    if n < 1:
        raise ValueError(f"Number of items must be greater than 0: {n}")


def _check_number_of_bits(m: int) -> None:
    if m < 1:
        raise ValueError(f"Number of bits must be greater than 0: {m}")
    if m > INT_MAX:
        raise ValueError(f"Number of bits must be at most {INT_MAX}: {m}")


def _check_number_of_hash_functions(k: int) -> None:
    if k < 1:
        raise ValueError(f"Number of hash functions must be greater than 0: {k}")


def _check_probability(p: float) -> None:
    # The negated range test also rejects NaN, as in commons.
    if not (0.0 < p < 1.0):
        raise ValueError(f"Probability must be greater than 0 and less than 1: {p}")


def _check_calculated_probability(p: float) -> None:
    if p >= 1.0:
        raise ValueError(f"Calculated probability is greater than or equal to 1: {p}")


def _calculate_number_of_hash_functions(n: int, m: int) -> int:
    k = round_half_up(LN_2 * m / n)
    if k < 1:
        raise ValueError(f"Filter too small: Calculated number of hash functions ({k}) was less than 1")
    return k


@dataclass(frozen=True)
class Shape:
    """The (k, m) pair of a Bloom filter; built through the ``from_*`` factories, like commons ``Shape``."""

    k: int
    m: int

    def __post_init__(self) -> None:
        _check_number_of_hash_functions(self.k)
        _check_number_of_bits(self.m)

    @classmethod
    def from_km(cls, k: int, m: int) -> Shape:
        return cls(k, m)

    @classmethod
    def from_nm(cls, n: int, m: int) -> Shape:
        _check_number_of_items(n)
        _check_number_of_bits(m)
        shape = cls(_calculate_number_of_hash_functions(n, m), m)
        _check_calculated_probability(shape.probability(n))
        return shape

    @classmethod
    def from_nmk(cls, n: int, m: int, k: int) -> Shape:
        _check_number_of_items(n)
        _check_number_of_bits(m)
        _check_number_of_hash_functions(k)
        shape = cls(k, m)
        _check_calculated_probability(shape.probability(n))
        return shape

    @classmethod
    def from_np(cls, n: int, p: float) -> Shape:
        _check_number_of_items(n)
        _check_probability(p)
        m = math.ceil(n * math.log(p) / _DENOMINATOR)
        if m > INT_MAX:
            raise ValueError(f"Resulting filter has more than {INT_MAX} bits: {m}")
        shape = cls(_calculate_number_of_hash_functions(n, m), m)
        _check_calculated_probability(shape.probability(n))
        return shape

    @classmethod
    def from_pmk(cls, p: float, m: int, k: int) -> Shape:
        _check_probability(p)
        _check_number_of_bits(m)
        _check_number_of_hash_functions(k)
        log_term = math.log(-math.expm1(math.log(p) / k))
        # Java divides by log_term == 0.0 without error: -k/0.0 = -inf, m/-inf = -0.0, so n = 0.
        n = 0 if log_term == 0.0 else math.ceil(m / (-k / log_term))
        shape = cls(k, m)
        # Java narrows the double with ``(int) n``, which saturates at Integer.MAX_VALUE.
        _check_calculated_probability(shape.probability(min(n, INT_MAX)))
        return shape

    def probability(self, n: int) -> float:
        """``(1 - e^(-kn/m))^k``, the false-positive probability at n items; 0 for n = 0.

        The product k*n is exact here; Java computes it in 32-bit ints, which only differs above 2**31.
        """
        if n < 0:
            raise ValueError(f"Number of items must be greater than or equal to 0: {n}")
        if n == 0:
            return 0.0
        return math.pow(-math.expm1(-(self.k * n) / self.m), self.k)

    def estimate_n(self, cardinality: int) -> float:
        """``-(m/k)·log1p(-c/m)``: inf at c = m and NaN above (Java semantics; Python's log1p would raise)."""
        x = -cardinality / self.m
        if x == -1.0:
            return math.inf
        if x < -1.0:
            return math.nan
        return -(self.m / self.k) * math.log1p(x)

    def estimate_max_n(self) -> float:
        return self.m * LN_2 / self.k

    def __str__(self) -> str:
        return f"Shape[k={self.k} m={self.m}]"


@runtime_checkable
class Hasher(Protocol):
    """Produces k indices in [0, m) for a shape; duplicates are allowed (commons ``Hasher``)."""

    def indices(self, shape: Shape) -> list[int]: ...


class EnhancedDoubleHasher:
    """Commons 4.5.0 enhanced double hashing: ``idx_i = (h1 - i·h2 + (i³ - i)/6) mod m``, unsigned."""

    def __init__(self, initial: int, increment: int) -> None:
        self.initial = initial % _U64
        self.increment = increment % _U64

    @classmethod
    def from_bytes(cls, buf: bytes) -> EnhancedDoubleHasher:
        """Split at ``len//2`` (the increment gets the odd byte); each half is read big-endian from its
        first <= 8 bytes, left-aligned in the long."""
        if len(buf) == 0:
            raise ValueError("buffer length must be greater than 0")
        segment = len(buf) // 2
        return cls(_to_long(buf[:segment]), _to_long(buf[segment:]))

    def indices(self, shape: Shape) -> list[int]:
        bits, k = shape.m, shape.k
        index = self.initial % bits
        result = [index]
        inc = self.increment % bits
        # For k >= m the cubic term is folded in with a counter that wraps at m, so that one
        # conditional add keeps ``inc`` in range (commons' "tetrahedral incrementer"). Upstream quirk kept
        # for bit-exactness: with m = 1 the counter starts at m and never resets, so k >= 4 emits 1.
        tet = 1
        for i in range(1, k):
            index -= inc
            if index < 0:
                index += bits
            result.append(index)
            if k >= bits:
                inc -= tet
                tet += 1
                if tet == bits:
                    tet = 0
            else:
                inc -= i
            if inc < 0:
                inc += bits
        return result

    def __repr__(self) -> str:
        return f"EnhancedDoubleHasher({self.initial:#x}, {self.increment:#x})"


def _to_long(part: bytes) -> int:
    head = part[:8]
    return int.from_bytes(head, "big") << (8 * (8 - len(head)))


class IncrementingHasher:
    """Test helper from the commons test suite: ``initial + i·increment (mod m)`` for i < k."""

    def __init__(self, initial: int, increment: int) -> None:
        self.initial = initial % _U64
        self.increment = increment % _U64

    def indices(self, shape: Shape) -> list[int]:
        start, step = self.initial % shape.m, self.increment % shape.m
        return [(start + i * step) % shape.m for i in range(shape.k)]


def default_pid_hasher(pid: int) -> EnhancedDoubleHasher:
    """Murmur3 x64 128 (seed 0) of the PID as an 8-byte big-endian signed long, split into (h1, h2)."""
    if not LONG_MIN <= pid <= LONG_MAX:
        raise ValueError(f"producer id is not a signed 64-bit long: {pid}")
    h1, h2 = mmh3.hash64(pid.to_bytes(8, "big", signed=True), seed=0, x64arch=True, signed=False)
    return EnhancedDoubleHasher(h1, h2)


PidHasher = Callable[[int], Hasher]
BloomInput: TypeAlias = "Hasher | Iterable[int] | SimpleBloomFilter"


class SimpleBloomFilter:
    """A bit-set Bloom filter of one shape (commons ``SimpleBloomFilter``), held as a Python ``int``."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self._bits = 0

    @property
    def bits(self) -> int:
        return self._bits

    def merge(self, x: BloomInput) -> bool:
        """OR ``x`` in; always ``True`` like commons.

        Indices are set in order and the first one outside [0, m) raises, leaving earlier ones set
        (upstream sets bits while iterating). A filter with bits at or above m is rejected before any
        change (upstream would leave out-of-range bits behind, a state we do not model).
        """
        if isinstance(x, SimpleBloomFilter):
            if x.bits >> self.shape.m:
                raise ValueError(f"BitMapExtractor set a bit higher than the limit for the shape: {self.shape.m}")
            self._bits |= x.bits
            return True
        for i in _indices_of(x, self.shape):
            self._bits |= 1 << self._checked(i)
        return True

    def contains(self, x: BloomInput) -> bool:
        """True iff every bit of ``x`` is set here. Out-of-range indices raise (the spec's rule; commons
        would short-circuit on the first missing bit)."""
        if isinstance(x, SimpleBloomFilter):
            return (self._bits & x.bits) == x.bits
        wanted = 0
        for i in _indices_of(x, self.shape):
            wanted |= 1 << self._checked(i)
        return (self._bits & wanted) == wanted

    def _checked(self, i: int) -> int:
        if not 0 <= i < self.shape.m:
            raise ValueError(f"IndexExtractor should only send values in the range[0,{self.shape.m}): {i}")
        return i

    def cardinality(self) -> int:
        return self._bits.bit_count()

    def is_empty(self) -> bool:
        return self._bits == 0

    def estimate_n(self) -> int:
        """Estimated item count, rounded half up; a full filter (inf) gives ``2**31 - 1``."""
        d = self.shape.estimate_n(self.cardinality())
        if math.isinf(d):
            return INT_MAX
        if math.isnan(d):
            raise ValueError(f"Cardinality too large: {self.cardinality()}")
        return min(INT_MAX, round_half_up(d))

    def copy(self) -> Self:
        """An independent copy; subclasses keep their metadata (the bit set is an immutable int)."""
        return _copy.copy(self)

    def clear(self) -> None:
        self._bits = 0

    def bit_words(self) -> list[int]:
        """The Java ``long[]`` of ceil(m/64) words as unsigned ints: index i is word i//64, bit i%64."""
        mask = _U64 - 1
        return [(self._bits >> (64 * w)) & mask for w in range((self.shape.m + 63) // 64)]

    def as_index_array(self) -> list[int]:
        """The set indices in ascending order (commons ``IndexExtractor.asIndexArray``)."""
        out: list[int] = []
        rest = self._bits
        while rest:
            low = rest & -rest
            out.append(low.bit_length() - 1)
            rest ^= low
        return out

    def process_indices(self, pred: Callable[[int], bool]) -> bool:
        """Visit the set indices in ascending order; stop and return False at the first false."""
        return all(pred(i) for i in self.as_index_array())

    def __repr__(self) -> str:
        return f"SimpleBloomFilter({self.shape}, {self.as_index_array()})"


def _indices_of(x: Hasher | Iterable[int], shape: Shape) -> Iterable[int]:
    # hasattr, not isinstance against the runtime-checkable Protocol: that check alone halves `track` throughput
    indices = getattr(x, "indices", None)
    return indices(shape) if callable(indices) else x  # type: ignore[return-value]
