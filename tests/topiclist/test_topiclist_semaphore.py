"""AsyncSemaphore: the worked examples of §7 and the rules of §4.1-4.5."""

from __future__ import annotations

import functools

import pytest

from reference_impl.topiclist import (
    LONG_MAX,
    AsyncSemaphore,
    Outcome,
    Permit,
    PermitAcquireAlreadyClosedError,
    PermitAcquireCancelledError,
    PermitAcquireQueueFullError,
    PermitAcquireTimeoutError,
    SemaphoreSnapshot,
    VFuture,
    VirtualExecutor,
)


def make(
    max_permits: int, queue: int = 10, timeout: int = 5000, recorder: list[int] | None = None
) -> tuple[AsyncSemaphore, VirtualExecutor]:
    ex = VirtualExecutor()
    sem = AsyncSemaphore(
        max_permits,
        queue,
        timeout,
        executor=ex,
        queue_latency_recorder=None if recorder is None else recorder.append,
    )
    return sem, ex


def granted(sem: AsyncSemaphore, ex: VirtualExecutor, n: int) -> Permit:
    f = sem.acquire(n)
    ex.run()
    return f.result()


def failure(f: VFuture[Permit]) -> type[BaseException]:
    error = f.exception()
    assert error is not None
    return type(error)


# -- §7 worked examples ---------------------------------------------------------------------------


def test_a1_completion_is_asynchronous_even_when_permits_are_free() -> None:
    sem, ex = make(1)
    f = sem.acquire(1)
    assert not f.done()
    ex.run()
    p = f.result()
    assert p.permits == 1
    assert sem.available_permits == 0
    sem.release(p)
    assert sem.available_permits == 1
    sem10, ex10 = make(10)
    assert granted(sem10, ex10, 5).permits == 5


def test_a2_pass_stops_when_nothing_is_available_and_release_submits_a_pass() -> None:
    sem, ex = make(5)
    p1 = granted(sem, ex, 5)
    f2 = sem.acquire(3)
    ex.run()
    assert not f2.done()
    sem.release(p1)
    assert sem.available_permits == 5
    assert ex.step() is True  # the submitted pass
    assert f2.result().permits == 3
    assert sem.available_permits == 2


def test_a3_full_queue_fails_at_once() -> None:
    sem, ex = make(1, queue=2)
    granted(sem, ex, 1)
    f2, f3 = sem.acquire(1), sem.acquire(1)
    assert sem.queue_size == 2
    f4 = sem.acquire(1)
    assert f4.done()
    assert failure(f4) is PermitAcquireQueueFullError
    assert sem.queue_size == 2
    assert not f2.done() and not f3.done()


def test_a6_invalid_counts_raise_synchronously_and_leave_no_trace() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 4)
    before = (sem.queue_size, sem.available_permits, p.permits, sem.request_count)
    with pytest.raises(ValueError) as neg:
        sem.acquire(-1)
    assert str(neg.value) == "Invalid negative permits value: -1"
    with pytest.raises(ValueError) as big:
        sem.acquire(11)
    assert str(big.value) == "Requested permits=11 is larger than maxPermits=10"
    with pytest.raises(ValueError) as uneg:
        sem.update(p, -1)
    assert str(uneg.value) == "Invalid negative permits value: -1"
    with pytest.raises(ValueError) as ubig:
        sem.update(p, 11)
    assert str(ubig.value) == "Requested permits=11 is larger than maxPermits=10"
    assert (sem.queue_size, sem.available_permits, p.permits, sem.request_count) == before
    assert not ex.step()


def test_a8_growing_update_consumes_the_old_permit() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 5)
    assert sem.available_permits == 5
    f = sem.update(p, 8)
    assert not f.done()
    ex.run()
    p8 = f.result()
    assert p8.permits == 8
    assert p.permits == 0
    assert sem.available_permits == 2
    granted(sem, ex, 2)
    assert sem.available_permits == 0
    g = sem.acquire(1)
    ex.run()
    ex.advance_to(1000)
    assert not g.done()
    sem.release(p8)
    assert sem.available_permits == 8
    ex.run()
    assert g.result().permits == 1
    assert sem.available_permits == 7
    sem.release(p)
    assert sem.available_permits == 7
    assert not ex.step()  # releasing 0 submits no pass


def test_a11_strict_fifo_with_head_of_line_blocking() -> None:
    waits: list[int] = []
    sem, ex = make(10, recorder=waits)
    q = [sem.acquire(2) for _ in range(5)]
    ex.run()
    qp = [f.result() for f in q]
    assert sem.available_permits == 0
    r3, r4, r2 = sem.acquire(3), sem.acquire(4), sem.acquire(2)
    ex.run()
    assert not (r3.done() or r4.done() or r2.done())
    seq = {r3.id: "r3", r4.id: "r4", r2.id: "r2"}

    def queue() -> list[str]:
        return [seq[p.seq] for p in sem.queue]

    assert queue() == ["r3", "r4", "r2"]
    table = [  # (available after, queue after, granted so far)
        (2, ["r3", "r4", "r2"], []),
        (1, ["r4", "r2"], ["r3"]),
        (3, ["r4", "r2"], ["r3"]),
        (1, ["r2"], ["r3", "r4"]),
        (1, [], ["r3", "r4", "r2"]),
    ]
    for permit, (available, queued, done) in zip(qp, table, strict=True):
        sem.release(permit)
        ex.run()
        assert sem.available_permits == available
        assert queue() == queued
        assert [name for name, f in (("r3", r3), ("r4", r4), ("r2", r2)) if f.done()] == done
    assert (r3.result().permits, r4.result().permits, r2.result().permits) == (3, 4, 2)
    assert sem.acquired_permits == 9
    assert waits == [0] * 8


def test_a12_unbounded_pool_completes_at_once_without_accounting() -> None:
    waits: list[int] = []
    for timeout in (5000, 100):
        sem, ex = make(0, timeout=timeout, recorder=waits)
        assert ex.idle()  # no deferred pass
        fs = [sem.acquire(1), sem.acquire(100), sem.acquire(1000)] + [sem.acquire(10) for _ in range(100)]
        assert all(f.done() for f in fs)
        assert [f.result().permits for f in fs[:3]] == [1, 100, 1000]
        assert sem.queue_size == 0
        assert sem.available_permits == LONG_MAX
        assert sem.acquired_permits == 0
        big = fs[2].result()
        sem.release(fs[0].result())
        assert fs[0].result().permits == 1  # release is a no-op
        u50, u0 = sem.update(fs[1].result(), 50), sem.update(fs[1].result(), 0)
        assert (u50.result().permits, u0.result().permits) == (50, 0)
        ex.advance_to(150)
        assert big.permits == 1000
        assert sem.acquire(10, is_cancelled=lambda: True).result().permits == 10
        sem.close()
        assert sem.acquire(3).result().permits == 3
        assert sem.live == {}
    assert waits == []


# -- §4.3 timeouts, cancellation, pass triggers ---------------------------------------------------


def test_cancellation_noticed_at_head_when_permits_are_available() -> None:
    sem, ex = make(10)
    hold = granted(sem, ex, 10)
    cancelled = False
    f = sem.acquire(5, is_cancelled=lambda: cancelled)
    ex.run()
    cancelled = True
    sem.release(hold)
    ex.run()
    assert failure(f) is PermitAcquireCancelledError
    assert sem.queue_size == 0
    assert sem.available_permits == 10
    assert sem.outcomes[Outcome.CANCELLED] == 1


def test_cancelled_request_that_is_never_head_with_available_permits_times_out() -> None:
    waits: list[int] = []
    sem, ex = make(10, recorder=waits)
    granted(sem, ex, 10)
    at_zero = sem.acquire(5, is_cancelled=lambda: True)
    ex.run()  # available == 0: the pass stops before looking at the head
    assert not at_zero.done()
    ex.advance_to(5000)
    assert failure(at_zero) is PermitAcquireTimeoutError
    # Not at the head: a blocked head shields a cancelled request behind it.
    sem2, ex2 = make(10)
    granted(sem2, ex2, 8)
    head = sem2.acquire(5)
    behind = sem2.acquire(1, is_cancelled=lambda: True)
    ex2.run()
    assert not behind.done() and not head.done()
    ex2.advance_to(5000)
    assert failure(behind) is PermitAcquireTimeoutError
    assert sem2.outcomes[Outcome.CANCELLED] == 0
    assert sem2.outcomes[Outcome.TIMEOUT] == 2


def test_caller_cancel_stays_queued_until_dropped_at_the_head() -> None:
    waits: list[int] = []
    sem, ex = make(10, recorder=waits)
    hold = granted(sem, ex, 10)
    f = sem.acquire(5)
    ex.run()
    assert f.cancel()
    assert sem.queue_size == 1
    ex.advance_to(4999)  # runs the deferred pass at 2500: available is 0, nothing happens
    ex.set_clock(5000)
    assert ex.step() is True  # the timeout task: it does nothing...
    assert ex.step() is False  # ...and submits no pass
    assert sem.queue_size == 1
    assert waits == [0]  # only the grant of `hold`
    sem.release(hold)
    ex.run()
    assert sem.queue_size == 0
    assert sem.available_permits == 10
    assert sem.outcomes[Outcome.CALLER_CANCELLED] == 1
    assert sem.outcomes[Outcome.TIMEOUT] == 0


def test_caller_cancelled_entry_still_occupies_a_queue_slot() -> None:
    sem, ex = make(1, queue=1)
    granted(sem, ex, 1)
    f = sem.acquire(1)
    f.cancel()
    assert failure(sem.acquire(1)) is PermitAcquireQueueFullError


def test_timeout_removes_the_request_records_and_submits_a_pass_for_the_next_head() -> None:
    waits: list[int] = []
    sem, ex = make(10, recorder=waits)
    granted(sem, ex, 6)
    big = sem.acquire(5)
    ex.set_clock(100)
    small = sem.acquire(3)
    ex.run()
    assert not small.done()
    ex.set_clock(5000)
    assert ex.step()  # deferred pass (at 2500): nothing to grant
    assert ex.step()  # big's timeout
    assert failure(big) is PermitAcquireTimeoutError
    assert not small.done()
    assert ex.step()  # the pass the timeout submitted
    assert small.result().permits == 3
    assert waits == [0, LONG_MAX, 5000, 4900]


def test_acquire_zero_needs_available_above_zero() -> None:
    sem, ex = make(3)
    assert granted(sem, ex, 0).permits == 0
    hold = granted(sem, ex, 3)
    f = sem.acquire(0)
    ex.run()
    assert not f.done()
    sem.release(hold)
    ex.run()
    assert f.result().permits == 0


def test_deferred_pass_is_scheduled_once_at_half_the_timeout() -> None:
    _sem, ex = make(10, timeout=5000)
    assert ex.pending() == ((2500, 0),)
    ex.advance_to(10_000)
    assert ex.idle()  # it does not repeat
    sem2, ex2 = make(10, timeout=5000)
    sem2.close()
    assert ex2.idle()


def test_deferred_pass_is_the_only_trigger_that_notices_a_late_cancellation() -> None:
    sem, ex = make(10)
    granted(sem, ex, 9)
    cancelled = False
    head = sem.acquire(5, is_cancelled=lambda: cancelled)
    nxt = sem.acquire(1)
    ex.run()
    cancelled = True
    ex.advance_to(2499)
    assert not head.done() and not nxt.done()
    ex.advance_to(2500)
    assert failure(head) is PermitAcquireCancelledError
    assert nxt.result().permits == 1


# -- §4.4 update ----------------------------------------------------------------------------------


def test_growing_update_waits_in_fifo_order_without_priority() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 5)
    hold = granted(sem, ex, 5)
    q = sem.acquire(2)
    u = sem.update(p, 7)
    ex.run()
    assert sem.snapshot().queue == ((q.id, 2, None), (u.id, 7, 5))
    sem.release(hold)
    ex.run()
    assert q.result().permits == 2
    assert u.result().permits == 7
    assert p.permits == 0
    assert sem.available_permits == 1


def test_failed_growing_update_leaves_the_old_permit_valid_and_counted() -> None:
    sem, ex = make(10, queue=1)
    p = granted(sem, ex, 5)
    granted(sem, ex, 5)
    u = sem.update(p, 8)
    full = sem.update(p, 9)
    assert failure(full) is PermitAcquireQueueFullError
    ex.advance_to(5000)
    assert failure(u) is PermitAcquireTimeoutError
    assert p.permits == 5
    assert sem.acquired_permits == 10
    sem.close()
    assert failure(sem.update(p, 6)) is PermitAcquireAlreadyClosedError
    assert p.permits == 5
    sem.release(p)
    assert sem.available_permits == 5


def test_growing_update_recomputes_required_from_the_old_permits_current_value() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 5)
    hold = granted(sem, ex, 5)
    u = sem.update(p, 8)
    ex.run()
    sem.release(p)  # the old permit drops to 0 while the update waits
    ex.run()
    assert not u.done()  # now it needs the full 8 > 5
    sem.release(hold)
    ex.run()
    assert u.result().permits == 8
    assert sem.available_permits == 2


def test_update_of_a_released_permit() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 5)
    sem.release(p)
    ex.run()
    z = sem.update(p, 0)
    assert z.done() and z.result().permits == 0
    assert sem.available_permits == 10
    assert not ex.step()
    g = sem.update(p, 4)
    assert not g.done()
    ex.run()
    assert g.result().permits == 4
    assert sem.available_permits == 6


def test_shrinking_and_equal_updates_are_synchronous_and_consume_the_old_permit() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 8)
    s = sem.update(p, 3)
    assert s.done()
    p3 = s.result()
    assert (p3.permits, p.permits, sem.available_permits) == (3, 0, 7)
    assert ex.step() is True  # leftover > 0 submitted a pass
    e = sem.update(p3, 3)
    assert e.result().permits == 3 and p3.permits == 0
    assert sem.available_permits == 7
    assert ex.step() is False  # no leftover, no pass
    z = sem.update(e.result(), 0)
    assert z.result().permits == 0
    assert sem.available_permits == 10
    assert sem.outcomes[Outcome.IMMEDIATE] == 3


def test_shrinking_update_and_release_work_after_close() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 8)
    q = granted(sem, ex, 2)
    sem.close()
    assert sem.update(p, 2).result().permits == 2
    assert sem.available_permits == 6
    sem.release(q)
    assert sem.available_permits == 8
    # Upstream's processQueue() returns at once when closed: nothing is submitted (issue 20 #4).
    assert ex.idle()


def test_invalid_permit_type() -> None:
    sem, _ex = make(10)
    other, ex2 = make(10)
    foreign = granted(other, ex2, 1)
    for bad in (Permit(1), foreign, object()):
        with pytest.raises(ValueError) as e1:
            sem.release(bad)  # type: ignore[arg-type]
        assert str(e1.value) == "Invalid permit type"
        with pytest.raises(ValueError) as e2:
            sem.update(bad, 1)  # type: ignore[arg-type]
        assert str(e2.value) == "Invalid permit type"
    assert sem.available_permits == 10


# -- §4.5 release and close -------------------------------------------------------------------------


def test_release_is_idempotent() -> None:
    sem, ex = make(10)
    p = granted(sem, ex, 4)
    sem.release(p)
    sem.release(p)
    assert sem.available_permits == 10


def test_close_fails_queued_requests_in_fifo_order_and_later_acquires() -> None:
    sem, ex = make(10)
    hold = granted(sem, ex, 10)
    order: list[int] = []
    fs = [sem.acquire(i + 1) for i in range(3)]
    for i, f in enumerate(fs):
        f.add_done_callback(functools.partial(lambda i, _f: order.append(i), i))
    fs[1].cancel()
    ex.run()
    order.clear()
    sem.close()
    sem.close()
    assert order == [0, 2]
    assert failure(fs[0]) is PermitAcquireAlreadyClosedError
    assert fs[1].cancelled()
    assert sem.queue_size == 0
    assert ex.idle()  # timeouts and the deferred pass were cancelled
    assert sem.outcomes[Outcome.ALREADY_CLOSED] == 2
    assert sem.outcomes[Outcome.CALLER_CANCELLED] == 1
    late = sem.acquire(1)
    assert failure(late) is PermitAcquireAlreadyClosedError
    with pytest.raises(ValueError):
        sem.acquire(11)  # validation still comes first
    sem.release(hold)
    ex.run()
    assert sem.available_permits == 10


# -- observable state ---------------------------------------------------------------------------------


def test_snapshot_live_permits_and_outcome_counts() -> None:
    sem, ex = make(10, queue=2)
    a = granted(sem, ex, 4)
    b = granted(sem, ex, 6)
    w1 = sem.update(a, 5)
    w2 = sem.acquire(3)
    full = sem.acquire(1)
    snap = sem.snapshot()
    assert (w1.id, w2.id, full.id) == (3, 4, 5)  # request ids: every validated call, in order
    assert snap == SemaphoreSnapshot(available=0, closed=False, queue=((3, 5, 4), (4, 3, None)), acquired=10)
    assert hash(snap) == hash(sem.snapshot())
    assert sum(p.permits for p in sem.live.values()) == sem.acquired_permits
    assert set(sem.live) == {a.id, b.id}
    sem.release(b)
    ex.run()
    assert sum(p.permits for p in sem.live.values()) == sem.acquired_permits == 8
    assert w1.result().permits == 5 and w2.result().permits == 3
    assert failure(full) is PermitAcquireQueueFullError
    assert sem.outcomes == {Outcome.GRANTED: 4, Outcome.QUEUE_FULL: 1}
    assert sum(sem.outcomes.values()) + sem.queue_size == sem.request_count == 5
