"""The deterministic scheduler contract (spec §2.0, §2.1) and the path-to-worker mapping (§7)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from reference_impl.metadata import (
    EXTERNAL,
    RejectedExecutionError,
    SimFuture,
    World,
    choose_thread_index,
    current_thread_name,
    java_string_hash,
    join,
    yield_point,
)

# -- §7 path -> worker ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "h", "idx4", "idx5"),
    [
        ("/test-local/0", 1200119296, 0, 3),
        ("/test-local/4", 1200119300, 2, 0),
        ("/a", 1554, 1, 2),
        ("/admin/policies/public/default", -1965123925, 1, 0),
    ],
)
def test_worked_example_path_to_worker(world: World, path: str, h: int, idx4: int, idx5: int) -> None:
    assert java_string_hash(path) == h
    assert choose_thread_index(path, 4) == idx4
    assert choose_thread_index(path, 5) == idx5
    ex5 = world.ordered_executor("metadata-store-worker", 5)
    assert ex5.choose_thread(path).name == f"metadata-store-worker-OrderedExecutor-{idx5}-0"


def test_unsigned_shift_of_a_negative_hash() -> None:
    h = java_string_hash("/admin/policies/public/default")
    extended = h & 0xFFFF_FFFF_FFFF_FFFF
    assert extended == 18446744071744427691
    assert extended >> 1 == 9223372035872213845
    assert (extended >> 1) % 5 == 0
    # An arithmetic (signed) shift would give another worker: the unsigned shift is what BookKeeper does.
    assert (h >> 1) % 5 != 0


def test_key1_hash_of_f7() -> None:
    assert java_string_hash("/key1") == 46693985
    assert choose_thread_index("/key1", 5) == 2


def test_hash_is_over_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    assert java_string_hash("é") == 0xE9
    assert java_string_hash("") == 0


def test_single_thread_always_index_zero_and_none_key_uses_rng() -> None:
    w1, w2 = World(seed=7), World(seed=7)
    single = w1.ordered_executor("one", 1)
    state = w1.rng.getstate()
    assert single.choose_thread("/anything") is single.threads[0]
    assert single.choose_thread(None) is single.threads[0]
    assert w1.rng.getstate() == state  # n == 1 draws nothing
    a, b = w1.ordered_executor("a", 4), w2.ordered_executor("a", 4)
    picks_a = [a.choose_thread(None).name for _ in range(20)]
    picks_b = [b.choose_thread(None).name for _ in range(20)]
    assert picks_a == picks_b
    assert len(set(picks_a)) > 1


def test_execute_ordered_runs_a_key_serially_in_submission_order(world: World) -> None:
    ex = world.ordered_executor("w", 3)
    seen: list[tuple[str, str, int]] = []

    def task(key: str, i: int) -> Callable[[], None]:
        return lambda: seen.append((current_thread_name(), key, i))

    for i in range(4):
        for key in ("/a", "/b", "/c"):
            ex.execute_ordered(key, task(key, i))
    world.run("random")
    assert len(seen) == 12
    for key in ("/a", "/b", "/c"):
        mine = [(t, i) for t, k, i in seen if k == key]
        assert mine == [(ex.choose_thread(key).name, i) for i in range(4)]


# -- choices, segments, costs -----------------------------------------------------------------------


def test_choices_busy_threads_and_advance(world: World) -> None:
    a, b = world.thread("a"), world.thread("b")
    log: list[tuple[str, int]] = []
    a.execute(lambda: log.append(("a1", world.now)), cost=3)
    a.execute(lambda: log.append(("a2", world.now)))
    assert world.choices() == [("run", a)]
    world.step(("run", a))
    assert log == [("a1", 0)]  # effects happen at the start instant
    assert a.busy_until == 3
    assert world.choices() == [("advance", 3)]
    with pytest.raises(ValueError):
        world.step(("run", a))
    with pytest.raises(ValueError):
        world.step(("advance", 2))
    world.step(("advance", 3))
    b.execute(lambda: world.charge(2))
    assert world.choices() == [("run", a), ("run", b)]
    world.step(("run", "b"))  # by name, as a replayed trace does
    assert b.busy_until == 5
    assert world.history == [("run", "a"), ("advance", 3), ("run", "b")]


def test_charge_outside_a_segment_is_ignored_and_negative_rejected(world: World) -> None:
    world.charge(10)
    assert world.now == 0 and world.choices() == []
    with pytest.raises(ValueError):
        world.charge(-1)


def test_yield_point_ends_the_segment_and_lets_others_run(world: World) -> None:
    a, b = world.thread("a"), world.thread("b")
    log: list[str] = []

    def two_steps() -> None:
        log.append("a:1")
        yield_point("middle")
        log.append("a:2")

    a.execute(two_steps)
    b.execute(lambda: log.append("b"))
    world.step(("run", a))
    assert log == ["a:1"]
    state = {s.name: s for s in world.thread_states()}["a"]
    assert state.suspended_at == "middle" and state.enabled and state.blocked_on is None
    world.step(("run", b))
    world.step(("run", a))
    assert log == ["a:1", "b", "a:2"]


def test_fifo_runs_earliest_created_thread_and_random_is_seeded() -> None:
    def history(policy: Any, seed: int) -> list[tuple[str, str | int]]:
        with World(seed) as w:
            threads = [w.thread(f"t{i}") for i in range(3)]
            for t in threads:
                for _ in range(3):
                    t.execute(lambda: None)
            w.run(policy)
            return w.history

    assert history("fifo", 0)[:3] == [("run", "t0")] * 3
    assert history("random", 5) == history("random", 5)
    assert history("random", 5) != history("fifo", 5)


# -- futures ----------------------------------------------------------------------------------------


def test_continuation_on_pending_future_runs_on_completing_thread_in_order(world: World) -> None:
    completer = world.thread("completer")
    f: SimFuture[int] = world.future("f", "completer")
    seen: list[tuple[str, int]] = []
    f.then_apply(lambda v: seen.append(("first", v)))
    f.then_apply(lambda v: seen.append((current_thread_name(), v)))
    completer.execute(lambda: f.complete(1))
    world.step(("run", completer))
    assert seen == [("first", 1), ("completer", 1)]


def test_continuation_on_done_future_runs_on_registering_thread(world: World) -> None:
    f: SimFuture[int] = world.future("f")
    assert f.complete(1)
    seen: list[str] = []
    f.then_apply(lambda v: seen.append(current_thread_name()))
    assert seen == [EXTERNAL]
    t = world.thread("t")
    t.execute(lambda: f.then_apply(lambda v: seen.append(current_thread_name())))
    world.run()
    assert seen == [EXTERNAL, "t"]


def test_second_completion_is_refused_but_counted(world: World) -> None:
    f: SimFuture[int] = world.future("f")
    assert f.complete(1)
    assert not f.complete(2)
    assert not f.fail(RuntimeError("late"))
    assert f.result() == 1 and f.attempts == 3


def test_derived_futures_propagate_and_name_completers(world: World) -> None:
    ex = world.thread("ex")
    f: SimFuture[int] = world.future("op", "src")
    assert f.then_apply(lambda v: v).completer == "src"
    assert f.then_apply_async(lambda v: v, ex).completer == "ex"
    boom = f.then_apply(lambda v: 1 // 0)
    recovered = boom.exceptionally(lambda e: -1)
    composed = f.then_compose(lambda v: f.then_apply(lambda x: x + 10))
    observed: list[tuple[int | None, BaseException | None]] = []
    seen = f.when_complete(lambda v, e: observed.append((v, e)))
    f.complete(1)
    assert isinstance(boom.exception(), ZeroDivisionError)
    assert recovered.result() == -1
    assert composed.result() == 11
    assert seen.result() == 1 and observed == [(1, None)]


def test_async_continuation_is_submitted_failure_is_not_and_rejection_fails(world: World) -> None:
    ex = world.thread("ex")
    ok: SimFuture[int] = world.future("ok")
    d = ok.then_apply_async(lambda v: (current_thread_name(), v), ex)
    ok.complete(3)
    assert not d.done() and ex.queued == ("async:ok",)
    world.run()
    assert d.result() == ("ex", 3)

    bad: SimFuture[int] = world.future("bad")
    d2 = bad.then_compose_async(lambda v: bad, ex)
    bad.fail(KeyError("x"))
    assert isinstance(d2.exception(), KeyError)
    assert not ex.queued  # no submission for a failure

    ex.shutdown()
    late: SimFuture[int] = world.future("late")
    late.complete(1)
    d3 = late.then_apply_async(lambda v: v, ex)
    assert isinstance(d3.exception(), RejectedExecutionError)
    with pytest.raises(RejectedExecutionError):
        ex.execute(lambda: None)


# -- blocking, wait-for graph, stuck, quiescent ------------------------------------------------------


def test_join_blocks_the_thread_and_its_queue(world: World) -> None:
    a, b = world.thread("a"), world.thread("b")
    f: SimFuture[str] = world.future("f", "b")
    got: list[str] = []
    a.execute(lambda: got.append(join(f)))
    a.execute(lambda: got.append("queued"))
    world.step(("run", a))
    assert world.choices() == []
    assert list(world.wait_for_graph().edges(data="label")) == [("a", "b", "f")]
    assert world.deadlock() is None
    assert world.stuck()  # nothing can run, yet a is blocked
    b.execute(lambda: f.complete("v"))
    world.run()
    assert got == ["v", "queued"] and world.quiescent()


def test_join_on_done_future_does_not_end_the_segment(world: World) -> None:
    f: SimFuture[int] = world.future("f")
    f.complete(5)
    a = world.thread("a")
    got: list[int] = []
    a.execute(lambda: got.extend([join(f), join(f)]))
    world.step(("run", a))
    assert got == [5, 5] and a._current is None


def test_join_outside_a_thread_on_pending_future_raises(world: World) -> None:
    with pytest.raises(RuntimeError):
        join(world.future("pending"))


def test_two_thread_deadlock_cycle(world: World) -> None:
    a, b = world.thread("a"), world.thread("b")
    fa: SimFuture[None] = world.future("fa", "a")
    fb: SimFuture[None] = world.future("fb", "b")
    a.execute(lambda: (join(fb), fa.complete(None)))
    b.execute(lambda: (join(fa), fb.complete(None)))
    world.run("fifo")
    cycle = world.deadlock()
    assert cycle is not None and sorted(cycle) == [("a", "b", "fb"), ("b", "a", "fa")]
    assert world.stuck() and not world.quiescent()


def test_reentrant_lock_contention_and_holder_edge(world: World) -> None:
    lock = world.lock("L")
    a, b = world.thread("a"), world.thread("b")
    order: list[str] = []

    def holder() -> None:
        lock.acquire()
        lock.acquire()  # re-entrant
        order.append("a in")
        yield_point("holding")
        lock.release()
        yield_point("still holding")
        lock.release()
        order.append("a out")

    def waiter() -> None:
        lock.acquire()
        order.append("b in")
        lock.release()

    a.execute(holder)
    b.execute(waiter)
    world.step(("run", a))
    world.step(("run", b))
    assert list(world.wait_for_graph().edges(data="label")) == [("b", "a", "L")]
    assert world.choices() == [("run", a)]
    world.step(("run", a))
    assert world.choices() == [("run", a)]  # count 1: still held
    world.run()
    assert order == ["a in", "a out", "b in"] and lock.holder is None


def test_quiescent_ignores_idle_periodic_timers_and_stuck_counts_pending_ops(world: World) -> None:
    t = world.scheduled_thread("t")
    work: list[int] = []
    t.schedule_at_fixed_rate(lambda: work.clear(), 5, 5, idle=lambda: not work)
    assert world.quiescent()
    work.append(1)
    assert not world.quiescent() and not world.stuck()
    world.run()
    assert work == [] and world.quiescent() and world.now == 5
    op: SimFuture[None] = world.future("never", "t")
    world.register_op(op)
    assert world.stuck()  # nothing can run and an op future is pending


def test_uncaught_task_error_is_recorded_and_stops_a_periodic_task(world: World) -> None:
    t = world.scheduled_thread("t")
    runs: list[int] = []

    def flaky() -> None:
        runs.append(world.now)
        raise ValueError("boom")

    t.schedule_at_fixed_rate(flaky, 1, 1)
    world.run(until=lambda: world.now >= 5)
    assert runs == [1]
    assert [(n, type(e)) for n, _, e in world.uncaught] == [("t", ValueError)]


# -- timers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("fixed_rate", [5, 25, 25, 25, 25, 30]), ("fixed_delay", [5, 25, 30])],
)
def test_periodic_catch_up_after_a_stall(world: World, mode: str, expected: list[int]) -> None:
    """A stall of S=20 after the run at s0=5 (P=5): fixed rate runs B=floor(25/5)-floor(5/5)=4 at t=25."""
    t = world.scheduled_thread("t")
    starts: list[int] = []

    def tick() -> None:
        starts.append(world.now)
        if world.now == 5:
            t.execute(lambda: world.charge(20))

    schedule = t.schedule_at_fixed_rate if mode == "fixed_rate" else t.schedule_with_fixed_delay
    schedule(tick, 5, 5)
    world.run(until=lambda: world.now >= 30 and not t._queue and t._current is None)
    assert starts == expected


def test_one_shot_timers_fire_in_deadline_then_creation_order(world: World) -> None:
    t = world.scheduled_thread("t")
    log: list[str] = []
    t.schedule(lambda: log.append("b"), 5)
    t.schedule(lambda: log.append("a"), 3)
    t.schedule(lambda: log.append("c"), 5)
    world.run()
    assert log == ["a", "b", "c"] and world.now == 5


def test_shutdown_keeps_queued_work_and_one_shot_timers_but_cancels_periodic(world: World) -> None:
    t = world.scheduled_thread("t")
    log: list[str] = []
    t.execute(lambda: log.append("queued"))
    t.schedule(lambda: log.append("timer"), 10)
    periodic = t.schedule_at_fixed_rate(lambda: log.append("tick"), 5, 5)
    t.shutdown()
    assert periodic.cancelled
    with pytest.raises(RejectedExecutionError):
        t.schedule(lambda: None, 1)
    world.run()
    assert log == ["queued", "timer"]


def test_cancel_removes_a_queued_periodic_run(world: World) -> None:
    t = world.scheduled_thread("t")
    hog = world.thread("hog")
    log: list[int] = []
    handle = t.schedule_at_fixed_rate(lambda: log.append(world.now), 1, 1)
    t.execute(lambda: world.charge(5))
    world.step(("run", t))
    world.step(("advance", 1))
    assert t.queued == (handle.label,)
    handle.cancel()
    assert not t.queued
    hog.execute(lambda: None)
    world.run()
    assert log == []


# -- teardown ---------------------------------------------------------------------------------------


def test_dispose_unwinds_blocked_tasks_and_no_os_thread_is_ever_started() -> None:
    baseline = threading.active_count()
    unwound: list[int] = []

    def blocked(i: int, never: SimFuture[None]) -> None:
        try:
            join(never)
        finally:
            unwound.append(i)

    for i in range(30):
        with World() as w:
            t = w.thread("t")
            t.execute(partial(blocked, i, w.future("never")))
            w.thread("idle").execute(lambda: None)
            w.run()
            assert w.stuck() and unwound == list(range(i))  # t is blocked forever
            assert threading.active_count() == baseline
        assert unwound == list(range(i + 1))  # unwound by dispose, not whenever the GC gets to it
    assert threading.active_count() == baseline



def test_disposing_a_world_inside_another_worlds_task_leaves_that_task_running_as_itself() -> None:
    """A finalizer (``MetadataReference``'s) may dispose a world wherever the garbage collector runs."""
    with World() as other, World() as w:
        other.thread("o").execute(partial(join, other.future("never")))
        other.run()
        seen: list[str] = []

        def task() -> None:
            other.dispose()
            seen.append(current_thread_name())
            yield_point("still a segment boundary")
            seen.append(current_thread_name())

        w.thread("t").execute(task)
        w.step(w.choices()[0])
        assert seen == ["t"] and other.thread_states()[0].current is None
        w.step(w.choices()[0])
        assert seen == ["t", "t"] and current_thread_name() == EXTERNAL

# -- exceptions escaping a task ---------------------------------------------------------------------


class _HarnessAbort(BaseException):
    """Stands for a test framework's failure exception (pytest's ``Failed`` is a BaseException)."""


def _step_elsewhere(body: Callable[[], None]) -> None:
    """Run ``body`` on a daemon thread and fail, rather than hang the suite, if it does not return."""
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            body()
        except BaseException as e:
            errors.append(e)

    runner = threading.Thread(target=guarded, daemon=True)
    runner.start()
    runner.join(timeout=20)
    assert not runner.is_alive(), "a step did not return: the world hangs on an escaped exception"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit, _HarnessAbort])
@pytest.mark.parametrize("segment", ["first", "resumed"])
def test_a_base_exception_escaping_a_task_ends_the_step_with_it(kind: type[BaseException], segment: str) -> None:
    """Issue 17: the exception leaves ``step`` at once, with a note naming the task; the world goes on."""
    seen: list[BaseException] = []
    after: list[str] = []

    def body() -> None:
        w = World(seed=0)
        client = w.thread("client-0")
        gate = w.future("gate", "client-0")

        def task() -> None:
            if segment == "resumed":
                join(gate)  # raise deeper in a later segment of the task
            raise kind("stop")

        client.execute(task, label="doomed")

        def later() -> None:
            yield_point("y")  # the thread's next task still suspends and resumes
            after.append(current_thread_name())

        client.execute(later)
        if segment == "resumed":
            w.step(w.choices()[0])
            gate.complete(None)
        with pytest.raises(kind) as raised:
            w.step(w.choices()[0])
        seen.append(raised.value)
        assert w.history[-1] == ("run", "client-0") and w.uncaught == []
        assert w.thread_states()[0].current is None
        assert w.run() == 2 and after == ["client-0"] and w.quiescent()

    _step_elsewhere(body)
    assert [type(e) for e in seen] == [kind]
    assert any("'doomed' on simulated thread client-0 at t=0" in note for note in seen[0].__notes__)


def test_a_base_exception_stops_a_periodic_task_like_an_uncaught_error() -> None:
    runs: list[int] = []

    def body() -> None:
        w = World(seed=0)

        def tick() -> None:
            runs.append(w.now)
            raise _HarnessAbort

        w.scheduled_thread("t").schedule_at_fixed_rate(tick, 1, 1)
        with pytest.raises(_HarnessAbort):
            w.run()
        assert w.uncaught == [] and w.quiescent() and w.choices() == []

    _step_elsewhere(body)
    assert runs == [1]
