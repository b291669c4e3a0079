"""Java's locks on the deterministic scheduler: `ReentrantLock` (and `synchronized` monitors) and
`ReentrantReadWriteLock`, each acquisition a scheduling point of a preemptive world.

Outside a preemptive world (the harness calling directly, or the metadata store's segment-grained world)
an acquisition that would wait raises or suspends exactly as `SimLock.acquire` does.

`ReentrantReadWriteLock` keeps Java's rules that matter for safety: readers share, a writer excludes
everyone, both are reentrant, a writer may take the read lock (downgrade), and a reader can never take
the write lock (no upgrade: a thread that tries waits for ever, as in Java). One rule is left out on
purpose: the non-fair lock's "a reader waits behind a queued writer" (`readerShouldBlock`). Dropping it
only adds interleavings, so no safety violation is missed, but a deadlock that needs it is not found.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from reference_impl.concurrent.executors import SimLock, current_thread_name, preemptive, scheduling_point


class ReentrantLock(SimLock):
    """`java.util.concurrent.locks.ReentrantLock` (and a `synchronized` monitor): a reentrant mutex."""

    def lock(self) -> None:
        self.acquire()

    def unlock(self) -> None:
        self.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        """`lock(); try { ... } finally { unlock(); }`."""
        self.acquire()
        try:
            yield
        finally:
            self.release()


class ReentrantReadWriteLock:
    """A read/write lock with per-thread hold counts; `read_lock()` and `write_lock()` are its two views."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.writer: str | None = None
        self.write_holds = 0
        self.readers: dict[str, int] = {}
        self._read = ReadLock(self)
        self._write = WriteLock(self)

    def __repr__(self) -> str:
        return f"ReentrantReadWriteLock({self.name!r}, writer={self.writer!r}, readers={sorted(self.readers)})"

    def read_lock(self) -> ReadLock:
        return self._read

    def write_lock(self) -> WriteLock:
        return self._write

    def holders(self) -> tuple[str, ...]:
        """The threads holding it in any mode (the writer first), for reports and projections."""
        readers = tuple(sorted(t for t in self.readers if t != self.writer))
        return ((self.writer,) if self.writer is not None else ()) + readers


class _View:
    mode = ""

    def __init__(self, rw: ReentrantReadWriteLock) -> None:
        self.rw = rw

    @property
    def wait_label(self) -> str:
        return f"{self.rw.name}.{self.mode}"

    @property
    def wait_target(self) -> str | None:
        holders = [t for t in self.rw.holders() if t != current_thread_name()]
        return holders[0] if holders else None

    def blocks(self, thread: str) -> bool:
        raise NotImplementedError

    def lock(self) -> None:
        me = current_thread_name()
        if preemptive():
            scheduling_point(f"{self.wait_label}.lock", self)
        if self.blocks(me):
            raise RuntimeError(f"{me} cannot take {self.wait_label}: held by {', '.join(self.rw.holders())}")
        self._take(me)

    def unlock(self) -> None:
        raise NotImplementedError

    def _take(self, me: str) -> None:
        raise NotImplementedError

    @contextmanager
    def held(self) -> Iterator[None]:
        """`lock(); try { ... } finally { unlock(); }`."""
        self.lock()
        try:
            yield
        finally:
            self.unlock()


class ReadLock(_View):
    mode = "readLock"

    def blocks(self, thread: str) -> bool:
        return self.rw.writer not in (None, thread)

    def _take(self, me: str) -> None:
        self.rw.readers[me] = self.rw.readers.get(me, 0) + 1

    def unlock(self) -> None:
        me = current_thread_name()
        held = self.rw.readers.get(me, 0)
        if held == 0:
            raise RuntimeError(f"{me} releases {self.wait_label} it does not hold")  # IllegalMonitorStateException
        if held == 1:
            del self.rw.readers[me]
        else:
            self.rw.readers[me] = held - 1


class WriteLock(_View):
    mode = "writeLock"

    def blocks(self, thread: str) -> bool:
        if self.rw.writer == thread:
            return False
        return self.rw.writer is not None or bool(self.rw.readers)

    def _take(self, me: str) -> None:
        self.rw.writer = me
        self.rw.write_holds += 1

    def unlock(self) -> None:
        me = current_thread_name()
        if self.rw.writer != me:
            raise RuntimeError(f"{me} releases {self.wait_label} held by {self.rw.writer}")
        self.rw.write_holds -= 1
        if self.rw.write_holds == 0:
            self.rw.writer = None

    def is_held_by_current_thread(self) -> bool:
        return self.rw.writer == current_thread_name()
