"""The JVM controller on the toy (`tests/jvm/toy`): two threads, one lock, one monitor, one atomic, one volatile.

The agent rewrites the toy's scheduling points; the tests check that each thread reports its next point (class,
method, line, operation, object), that a run moves exactly the thread named and no other, that a held lock or
monitor blocks the other thread until it is released (also when a synchronized method throws), and that the
schedules the controller is given decide the outcome: the racy counter loses an update on one schedule only.
"""

from __future__ import annotations

import pytest

from properties.jvm.explore import explore, replay
from properties.jvm.threads import LockLevelError, Point, Snapshot
from tests.jvm.conftest import PortFactory, line_of


def _point(snap: Snapshot, name: str) -> Point:
    point = snap.thread(name).point
    assert point is not None, snap
    return point


def test_each_thread_reports_its_next_point(toy_port: PortFactory) -> None:
    snap = toy_port({"mode": "racy"}).snapshot
    read = line_of("Counter.java", "// racy read")
    for name in ("a", "b"):
        assert snap.thread(name).state == "enabled"
        assert _point(snap, name) == Point("toy.Counter", "racyIncrement", read, "AtomicInteger.get", "AtomicInteger@1")
    assert snap.vars == {"value": 0, "seen": 0}


def test_a_run_moves_exactly_the_thread_named(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "racy"})
    before = port.snapshot
    after = port.run("a")
    assert _point(after, "a").op == "AtomicInteger.set"
    assert _point(after, "a").line == line_of("Counter.java", "// racy write")
    assert after.thread("b") == before.thread("b")


@pytest.mark.parametrize(("schedule", "value"), [(("a", "b", "a", "b"), 1), (("a", "a", "b", "b"), 2),
                                                 (("b", "a", "b", "a"), 1), (("b", "b", "a", "a"), 2)])
def test_the_schedule_decides_whether_an_update_is_lost(toy_port: PortFactory, schedule: tuple[str, ...],
                                                        value: int) -> None:
    port = toy_port({"mode": "racy"})
    for name in schedule:
        snap = port.run(name)
    assert snap.finished and snap.vars["value"] == value


def test_a_held_lock_blocks_the_other_thread_until_it_is_released(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "locked"})
    snap = port.run("a")
    assert snap.thread("a").holds == ("ReentrantLock@1",)
    assert snap.thread("b").state == "blocked" and _point(snap, "b").op == "ReentrantLock.lock"
    with pytest.raises(LockLevelError, match=r"thread b is blocked at toy\.Counter\.lockedIncrement"):
        port.run("b")
    port.run("a")
    snap = port.run("a")
    assert snap.thread("a").state == "done" and snap.thread("a").holds == ()
    assert snap.thread("b").state == "enabled"
    for _ in range(3):
        snap = port.run("b")
    assert snap.finished and snap.vars["value"] == 2


def test_a_synchronized_method_and_block_are_monitor_points(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "monitor"})
    entry = _point(port.snapshot, "a")
    assert (entry.method, entry.op, entry.object) == ("bump", "synchronized", "counter")
    assert entry.line == line_of("Counter.java", "guarded++;")  # the method's first line
    snap = port.run("a")
    assert _point(snap, "a").op == "volatile write Counter.seen" and snap.thread("a").holds == ("counter",)
    assert snap.thread("b").state == "blocked"
    snap = port.run("a")  # the write, the release, then the block's monitorenter
    assert _point(snap, "a") == Point("toy.Counter", "publish", line_of("Counter.java", "synchronized (this) {"),
                                      "monitorenter", "counter")
    assert snap.thread("a").holds == () and snap.thread("b").state == "enabled" and snap.vars["seen"] == 1


def test_a_throw_out_of_a_synchronized_method_releases_the_monitor(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "throwing"})
    snap = port.run("a")
    assert snap.thread("a").holds == ("counter",) and snap.thread("b").state == "blocked"
    snap = port.run("a")
    assert snap.thread("a").state == "done" and snap.thread("a").uncaught == "java.lang.IllegalStateException: boom"
    assert snap.thread("b").state == "enabled" and snap.thread("a").holds == ()


def test_only_the_named_classes_are_rewritten(toy_port: PortFactory) -> None:
    """The twin of every test above: with only the scenario rewritten, the counter has no points, and each
    thread runs to its end when it is first run."""
    snap = toy_port({"mode": "racy"}, packages=("toy.TwoThreads",)).snapshot
    assert snap.finished and snap.vars["value"] == 2


def test_a_reset_brings_back_the_initial_state(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "locked", "own": True})  # a JVM of its own: its snapshot is the hello's
    initial = port.snapshot
    port.run("a")
    assert port.reset() == initial
    assert port.run("b").thread("b").holds == ("ReentrantLock@1",)


def _lost_update(snap: Snapshot, _thread: str | None) -> list[str]:
    return ["lost update"] if snap.finished and snap.vars["value"] != 2 else []


def test_the_exploration_finds_the_lost_update_and_replays_it(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "racy"})
    found = explore(port, _lost_update, preemptions=1)
    assert found.violations == ("lost update",) and len(found.schedule) == 4
    replayed = replay(port, found.schedule, _lost_update)
    assert replayed.violations == ("lost update",) and replayed.last == found.last
    assert replayed.steps == len(found.schedule) and not replayed.misfit


def test_the_exploration_of_the_locked_counter_finds_nothing(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "locked"})
    found = explore(port, _lost_update, preemptions=3)
    assert found.violations == () and found.schedules >= 2


def test_readers_share_the_read_lock_and_the_writer_waits_for_both(toy_port: PortFactory) -> None:
    port = toy_port({"mode": "readers"})
    assert _point(port.snapshot, "c").op == "ReentrantReadWriteLock.WriteLock.lock"
    port.run("a")
    snap = port.run("b")  # a second reader takes the read lock beside the first
    assert snap.thread("a").holds == snap.thread("b").holds == ("ReadLock@1",)
    assert snap.thread("c").state == "blocked"
    port.run("a")
    snap = port.run("a")  # a's write of `seen`, its release: b still reads
    assert snap.thread("a").state == "done" and snap.thread("c").state == "blocked"
    port.run("b")
    snap = port.run("b")
    assert snap.thread("c").state == "enabled"
    snap = port.run("c")
    assert snap.thread("c").holds == ("WriteLock@1",)


def test_a_thread_that_waits_outside_the_scheduler_is_a_hang_naming_where(toy_port: PortFactory) -> None:
    """The twin of the one-thread-at-a-time rule: a latch the agent does not rewrite (JDK code) blocks for real; the
    controller gives up after its timeout (1 s here) and says where the thread waits."""
    port = toy_port({"mode": "hang"})
    with pytest.raises(LockLevelError, match=r"thread a did not reach its next point within 1000 ms: it waits "
                                             r"outside the scheduler, at .* in .*toy\.Counter\.hang\(Counter\.java:"):
        port.run("a")
