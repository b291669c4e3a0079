"""The deterministic scheduler (reference_impl/concurrent): every lock and atomic operation a scheduling point.

As trio proves its scheduler deterministic, these tests run the same contended program twice under a seeded
random schedule and require the same history and outcome byte for byte; they enumerate every schedule of a
small racy program to show the points are where Java's are (a get/set increment loses an update in some
interleaving, incrementAndGet in none); and they pin the read/write lock's Java rules.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import pytest

from reference_impl.concurrent.atomic import AtomicInteger
from reference_impl.concurrent.executors import World, java_method
from reference_impl.concurrent.locks import ReentrantLock, ReentrantReadWriteLock


class Counter:
    """A racy counter and a safe one, each bumped under a lock now and then."""

    def __init__(self) -> None:
        self.racy = AtomicInteger("racy")
        self.safe = AtomicInteger("safe")
        self.lock = ReentrantLock("lock")
        self.rw = ReentrantReadWriteLock("rw")
        self.log: list[str] = []

    @java_method("bump")
    def bump(self, name: str) -> None:
        self.racy.set(self.racy.get() + 1)  # read, then write: two points
        self.safe.increment_and_get()
        with self.lock.held():
            self.log.append(name)
        with self.rw.read_lock().held():
            self.log.append(f"{name} read")


def _world(threads: int, rounds: int) -> tuple[World, Counter]:
    world, counter = World(preemptive=True), Counter()
    for i in range(threads):
        thread = world.thread(f"t{i}")
        for _ in range(rounds):
            thread.execute(partial(counter.bump, thread.name), label="bump")
    world.prime()
    return world, counter


def _run(seed: int) -> tuple[list[tuple[str, str | int]], list[str], int, int]:
    world, counter = _world(3, 2)
    world.rng = random.Random(seed)
    world.run("random")
    return world.history, counter.log, counter.racy.value, counter.safe.value


def test_the_same_seed_gives_the_same_schedule_and_outcome() -> None:
    assert _run(7) == _run(7)
    assert len({tuple(_run(seed)[0]) for seed in range(5)}) > 1  # and the seeds do choose different schedules


def test_a_threads_next_label_names_its_method_and_operation_before_the_first_step() -> None:
    world, _ = _world(2, 1)
    assert [t.suspended_at for t in world.thread_states()] == ["bump: racy.get", "bump: racy.get"]


def _schedules(make: Callable[[], tuple[World, Counter]]) -> list[Counter]:
    """Every complete schedule of the program, depth first (each by replaying its prefix on a fresh world)."""
    done: list[Counter] = []
    stack: list[list[str]] = [[]]
    while stack:
        prefix = stack.pop()
        world, counter = make()
        for name in prefix:
            world.step(("run", name))
        options = [t.name for t in world.threads if t.enabled]
        if not options:
            done.append(counter)
        stack.extend([*prefix, name] for name in options)
    return done


def test_every_atomic_access_is_a_point_so_a_get_then_set_increment_can_lose_an_update() -> None:
    outcomes = _schedules(lambda: _world(2, 1))
    assert {c.racy.value for c in outcomes} == {1, 2}  # some interleaving lost one: the points are real
    assert {c.safe.value for c in outcomes} == {2}  # incrementAndGet is one atomic step: never lost


def _each(*calls: Callable[[], None]) -> None:
    for call in calls:
        call()


def test_readers_share_a_read_write_lock_and_a_writer_excludes_them() -> None:
    world, rw = World(preemptive=True), ReentrantReadWriteLock("rw")
    reader, writer = world.thread("reader"), world.thread("writer")
    reader.execute(lambda: _each(rw.read_lock().lock, rw.read_lock().lock))  # reentrant; held when the task ends
    writer.execute(rw.write_lock().lock)
    world.prime()
    world.step(("run", "reader"))
    world.step(("run", "reader"))
    assert rw.readers == {"reader": 2} and not world.get_thread("writer").enabled  # the writer waits
    assert world.stuck() and world.wait_for_graph().has_edge("writer", "reader")


def test_a_writer_may_downgrade_but_a_reader_can_never_upgrade() -> None:
    world, rw = World(preemptive=True), ReentrantReadWriteLock("rw")
    down, up = world.thread("down"), world.thread("up")
    down.execute(lambda: _each(rw.write_lock().lock, rw.read_lock().lock, rw.write_lock().unlock))
    world.prime()
    world.run()
    assert rw.writer is None and rw.readers == {"down": 1}
    rw.readers.clear()
    up.execute(lambda: _each(rw.read_lock().lock, rw.write_lock().lock))
    world.run()
    assert not world.get_thread("up").enabled and world.stuck()  # waits for itself for ever, as in Java


def test_disposing_a_world_unwinds_a_finally_that_takes_a_lock(capsys: pytest.CaptureFixture[str]) -> None:
    world, lock, other = World(preemptive=True), ReentrantLock("lock"), ReentrantLock("other")
    released: list[bool] = []

    def body() -> None:
        try:
            other.lock()
        finally:
            with lock.held():  # a scheduling point reached while unwinding
                released.append(True)

    world.thread("t").execute(body)
    world.prime()
    world.dispose()
    assert released == [] and "did not kill" not in capsys.readouterr().err
