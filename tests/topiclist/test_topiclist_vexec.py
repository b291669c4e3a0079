"""Virtual executor, VFuture semantics and the asyncio adapter (spec §2.0)."""

from __future__ import annotations

import asyncio

import pytest

from reference_impl.topiclist import (
    AsyncioExecutor,
    AsyncSemaphore,
    CancellationError,
    PermitAcquireTimeoutError,
    VFuture,
    VirtualExecutor,
    completed_future,
    failed_future,
)


def test_entries_run_in_trigger_then_creation_order() -> None:
    ex = VirtualExecutor()
    ran: list[str] = []
    ex.schedule(lambda: ran.append("late"), 10)
    ex.submit(lambda: ran.append("first"))
    ex.schedule(lambda: ran.append("also-late"), 10)
    ex.submit(lambda: ran.append("second"))
    assert ex.run() == 2
    assert ran == ["first", "second"]
    ex.advance_to(10)
    assert ran == ["first", "second", "late", "also-late"]
    assert ex.now == 10
    assert ex.idle()


def test_step_runs_one_due_entry_and_reports_none_due() -> None:
    ex = VirtualExecutor()
    ran: list[int] = []
    ex.submit(lambda: ran.append(1))
    ex.schedule(lambda: ran.append(2), 5)
    assert ex.step() is True
    assert ex.step() is False
    assert ran == [1]
    assert not ex.idle()
    assert ex.pending() == ((5, 1),)


def test_run_includes_entries_submitted_meanwhile() -> None:
    ex = VirtualExecutor()
    ran: list[int] = []

    def first() -> None:
        ran.append(1)
        ex.submit(lambda: ran.append(2))

    ex.submit(first)
    ex.run()
    assert ran == [1, 2]


def test_set_clock_runs_nothing_and_then_overdue_entries_run_in_order() -> None:
    ex = VirtualExecutor()
    ran: list[int] = []
    ex.schedule(lambda: ran.append(20), 20)
    ex.schedule(lambda: ran.append(10), 10)
    ex.set_clock(50)
    assert ran == []
    assert ex.now == 50
    ex.run()
    assert ran == [10, 20]
    with pytest.raises(ValueError, match="back"):
        ex.set_clock(49)
    with pytest.raises(ValueError, match="back"):
        ex.advance_to(10)


def test_advance_to_moves_now_to_each_trigger_before_running_it() -> None:
    ex = VirtualExecutor()
    seen: list[int] = []
    ex.schedule(lambda: seen.append(ex.now), 7)
    ex.schedule(lambda: ex.schedule(lambda: seen.append(ex.now), 5), 3)
    ex.advance_to(100)
    assert seen == [7, 8]
    assert ex.now == 100


def test_cancelled_entry_never_runs_and_executor_becomes_idle() -> None:
    ex = VirtualExecutor()
    ran: list[int] = []
    handle = ex.schedule(lambda: ran.append(1), 5)
    handle.cancel()
    handle.cancel()
    assert ex.idle()
    assert ex.next_trigger_time() is None
    ex.advance_to(10)
    assert ran == []


def test_future_callbacks_run_in_registration_order_inside_completion() -> None:
    f: VFuture[int] = VFuture(7)
    order: list[str] = []
    f.add_done_callback(lambda _f: order.append("a"))
    f.add_done_callback(lambda _f: order.append("b"))
    assert order == []
    assert f.complete(3) is True
    assert order == ["a", "b"]
    f.add_done_callback(lambda _f: order.append("late"))
    assert order == ["a", "b", "late"]
    assert f.complete(4) is False
    assert f.fail(RuntimeError()) is False
    assert f.cancel() is False
    assert f.result() == 3
    assert f.exception() is None
    assert f.id == 7


def test_future_failure_and_caller_cancel() -> None:
    f: VFuture[int] = VFuture()
    with pytest.raises(RuntimeError, match="not done"):
        f.result()
    err = KeyError("x")
    assert f.fail(err) is True
    assert f.exception() is err
    with pytest.raises(KeyError):
        f.result()
    g: VFuture[int] = VFuture()
    assert g.cancel() is True
    assert g.cancelled()
    assert isinstance(g.exception(), CancellationError)
    assert g.complete(1) is False


def test_then_compose_and_then_apply_follow_completable_future_rules() -> None:
    src: VFuture[int] = VFuture()
    inner: VFuture[str] = VFuture()
    composed = src.then_compose(lambda v: inner)
    applied = src.then_apply(lambda v: v * 2)
    src.complete(21)
    assert applied.result() == 42
    assert not composed.done()
    inner.complete("ok")
    assert composed.result() == "ok"

    def boom(_v: int) -> VFuture[str]:
        raise ValueError("sync")

    raised = completed_future(1).then_compose(boom)
    assert isinstance(raised.exception(), ValueError)
    passed = failed_future(KeyError("k")).then_apply(lambda v: v)
    assert isinstance(passed.exception(), KeyError)
    # Cancelling a dependent does not cancel its source (Java thenApply).
    source: VFuture[int] = VFuture()
    dependent = source.then_apply(lambda v: v)
    dependent.cancel()
    assert not source.done()


def test_asyncio_adapter_runs_the_same_semaphore_and_futures_are_awaitable() -> None:
    async def scenario() -> tuple[int, int, bool, bool]:
        ex = AsyncioExecutor(asyncio.get_running_loop())
        sem = AsyncSemaphore(5, 10, 20, executor=ex)
        p1 = await sem.acquire(5)
        f2 = sem.acquire(3)
        await asyncio.sleep(0)
        assert not f2.done()  # the pass stopped at available == 0
        sem.release(p1)
        p2 = await f2
        with pytest.raises(PermitAcquireTimeoutError):
            await sem.acquire(5)  # real 20 ms timeout
        ran: list[int] = []
        ex.schedule(lambda: ran.append(1), 1).cancel()
        await asyncio.sleep(0.03)
        return p2.permits, sem.available_permits, ran == [], ex.idle()

    assert asyncio.run(scenario()) == (3, 2, True, True)
