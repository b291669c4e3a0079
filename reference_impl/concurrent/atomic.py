"""Java's atomics and volatile fields on the deterministic scheduler: every access a scheduling point.

`AtomicInteger` also stands for an `AtomicIntegerFieldUpdater` on a `volatile int` field (upstream's
idiom for per-object counters): the updater is a static accessor, the field is what is shared.
Outside a preemptive world each access is a plain read or write.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from reference_impl.concurrent.executors import scheduling_point

T = TypeVar("T")


class AtomicInteger:
    """`java.util.concurrent.atomic.AtomicInteger` (or a field updater on a volatile int)."""

    def __init__(self, name: str, value: int = 0) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"AtomicInteger({self.name!r}, {self.value})"

    def get(self) -> int:
        scheduling_point(f"{self.name}.get")
        return self.value

    def set(self, value: int) -> None:
        scheduling_point(f"{self.name}.set")
        self.value = value

    def increment_and_get(self) -> int:
        scheduling_point(f"{self.name}.incrementAndGet")
        self.value += 1
        return self.value

    def decrement_and_get(self) -> int:
        scheduling_point(f"{self.name}.decrementAndGet")
        self.value -= 1
        return self.value

    def add_and_get(self, delta: int) -> int:
        scheduling_point(f"{self.name}.addAndGet")
        self.value += delta
        return self.value

    def get_and_set(self, value: int) -> int:
        scheduling_point(f"{self.name}.getAndSet")
        before, self.value = self.value, value
        return before

    def get_and_add(self, delta: int) -> int:
        scheduling_point(f"{self.name}.getAndAdd")
        before = self.value
        self.value += delta
        return before

    def compare_and_set(self, expected: int, update: int) -> bool:
        scheduling_point(f"{self.name}.compareAndSet")
        if self.value != expected:
            return False
        self.value = update
        return True


class AtomicLong(AtomicInteger):
    """`java.util.concurrent.atomic.AtomicLong` (or a field updater on a volatile long): Python's ints do not
    overflow, so it is an `AtomicInteger` under Java's other name, and its labels say which the code uses."""


class AtomicBoolean:
    """`java.util.concurrent.atomic.AtomicBoolean`: `get` and `compareAndSet`, each a point."""

    def __init__(self, name: str, value: bool = False) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"AtomicBoolean({self.name!r}, {self.value})"

    def get(self) -> bool:
        scheduling_point(f"{self.name}.get")
        return self.value

    def compare_and_set(self, expected: bool, update: bool) -> bool:
        scheduling_point(f"{self.name}.compareAndSet")
        if self.value != expected:
            return False
        self.value = update
        return True


class Volatile(Generic[T]):
    """A `volatile` field (or an `AtomicReference` read and written whole): reads and writes are points."""

    def __init__(self, name: str, value: T) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"Volatile({self.name!r}, {self.value!r})"

    def get(self) -> T:
        scheduling_point(f"{self.name} (volatile read)")
        return self.value

    def set(self, value: T) -> None:
        scheduling_point(f"{self.name} (volatile write)")
        self.value = value

    def get_and_set(self, value: T) -> T:
        """A field updater's `getAndSet` on the volatile field: one atomic swap."""
        scheduling_point(f"{self.name}.getAndSet")
        before, self.value = self.value, value
        return before

    def compare_and_set(self, expected: T, update: T) -> bool:
        scheduling_point(f"{self.name}.compareAndSet")
        if self.value is not expected and self.value != expected:
            return False
        self.value = update
        return True
