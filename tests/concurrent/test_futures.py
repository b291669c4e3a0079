"""Futures, blocking queues, the scheduled executor and the swap atomics on the deterministic scheduler.

Each call on a shared object must be a scheduling point labelled after the Java call, so that a reference written
after upstream's source stops exactly where Java's threads can be preempted; a future's dependents must run on
the completing thread inside its step; and the swap must be one point where a read and a write are two (the
difference the semaphore's lock scope turns on).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from reference_impl.concurrent.atomic import AtomicBoolean, AtomicLong, Volatile
from reference_impl.concurrent.executors import World, current_thread_name, java_method
from reference_impl.concurrent.futures import (
    ArrayBlockingQueue,
    CancellationError,
    CompletableFuture,
    ScheduledExecutorService,
)


def _labels(world: World, name: str) -> list[str]:
    """Step thread `name` to its end, collecting the label of each point it stopped at."""
    seen: list[str] = []
    while True:
        state = next(t for t in world.thread_states() if t.name == name)
        if state.suspended_at is None:
            return seen
        seen.append(state.suspended_at)
        world.step(("run", name))


def _one_thread(body: Callable[[], object]) -> World:
    world = World(preemptive=True)
    world.thread("t").execute(body, label="body")
    world.prime()
    return world


def test_every_call_on_a_shared_object_is_a_labelled_point() -> None:
    future: CompletableFuture[int] = CompletableFuture("future")
    queue: ArrayBlockingQueue[int] = ArrayBlockingQueue("queue", 1)
    counter, flag, field = AtomicLong("availablePermits", 2), AtomicBoolean("closed"), Volatile("permit.permits", 3)

    @java_method("work")
    def work() -> None:
        queue.offer(1)
        queue.peek()
        queue.is_empty()
        queue.remove(1)
        counter.add_and_get(-1)
        field.get_and_set(0)
        flag.compare_and_set(False, True)
        future.is_done()
        future.complete(7)

    world = _one_thread(work)
    assert _labels(world, "t") == [
        "work: queue.offer", "work: queue.peek", "work: queue.isEmpty", "work: queue.remove",
        "work: availablePermits.addAndGet", "work: permit.permits.getAndSet", "work: closed.compareAndSet",
        "work: future.isDone", "work: future.complete"]
    assert (counter.value, field.value, flag.value, future.value) == (1, 0, True, 7)


def test_a_swap_is_one_point_so_two_racing_swaps_never_both_see_the_value() -> None:
    """getAndSet: whoever swaps first gets the value, the other 0, in every interleaving (a read then a write
    lets both read it: the semaphore's `unswapped` order)."""
    def swap(field: Volatile[int], got: dict[str, int]) -> None:
        got[current_thread_name()] = field.get_and_set(0)

    for first, second in (("a", "b"), ("b", "a")):
        field = Volatile("permit.permits", 5)
        got: dict[str, int] = {}
        world = World(preemptive=True)
        for name in ("a", "b"):
            world.thread(name).execute(partial(swap, field, got))
        world.prime()
        world.step(("run", first))
        world.step(("run", second))
        assert got == {first: 5, second: 0}


def test_dependents_run_inline_on_the_completing_thread() -> None:
    future: CompletableFuture[int] = CompletableFuture("future")
    ran_on: list[str] = []

    def double(value: int) -> int:
        ran_on.append(current_thread_name())
        return value * 2

    doubled = future.then_apply(double, name="doubled")
    world = _one_thread(lambda: future.complete(4))
    assert _labels(world, "t") == ["future.complete"]
    assert ran_on == ["t"] and doubled.done and doubled.value == 8


def test_a_dependent_registered_on_a_done_future_runs_at_once_and_failures_pass_through() -> None:
    done = CompletableFuture.completed(3, name="future")
    assert done.then_apply(lambda v: v + 1, name="next").value == 4
    failed: CompletableFuture[int] = CompletableFuture("future")
    seen: list[BaseException | None] = []
    relayed = failed.when_complete(lambda _v, e: seen.append(e), name="relayed")
    assert failed.cancel() and not failed.cancel()  # only a pending future is cancelled
    assert failed.cancelled and isinstance(seen[0], CancellationError) and relayed.cancelled
    assert not failed.complete(1) and failed.value is None


def test_a_full_queue_refuses_and_remove_goes_by_identity() -> None:
    queue: ArrayBlockingQueue[list[int]] = ArrayBlockingQueue("queue", 1)
    first, twin = [1], [1]
    assert queue.offer(first) and not queue.offer([2])
    assert not queue.remove(twin) and queue.remove(first) and queue.is_empty()
    unbounded: ArrayBlockingQueue[int] = ArrayBlockingQueue("queue", 0)
    assert all(unbounded.offer(i) for i in range(10)) and unbounded.poll() == 0


def test_a_cancelled_timer_never_runs_even_when_it_is_already_queued() -> None:
    world = World(preemptive=True)
    executor = ScheduledExecutorService(world.scheduled_thread("executor"))
    ran: list[str] = []
    handles = [executor.schedule(partial(ran.append, name), 10, label=name, handle="timeoutTask")
               for name in ("kept", "dropped")]
    assert world.pending_timers() == ["kept", "dropped"]
    world.step(("advance", 10))  # both due: queued on the executor, not started
    handles[1].cancel()
    world.run()
    assert ran == ["kept"]


def test_submissions_are_points_of_the_submitting_thread() -> None:
    world = World(preemptive=True)
    executor = ScheduledExecutorService(world.scheduled_thread("executor"))

    def submit() -> None:
        executor.execute(lambda: None, label="pass")
        executor.schedule(lambda: None, 5, label="timeout", handle="timeoutTask")

    world.thread("t").execute(submit)
    world.prime()
    assert _labels(world, "t") == ["executor.execute", "executor.schedule"]
    assert world.get_thread("executor").queued == ("pass",) and world.pending_timers() == ["timeout"]
