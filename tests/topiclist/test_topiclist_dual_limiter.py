"""Dual limiter, its helpers, sizes and hash (spec §2.2, §4.6), and the configuration mapping (§8)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reference_impl.topiclist import (
    AsyncDualMemoryLimiter,
    DualPermit,
    GetTopicsResponse,
    LimitType,
    Permit,
    PermitAcquireQueueFullError,
    SerializationError,
    SizedReply,
    VFuture,
    VirtualExecutor,
    WatchSuccess,
    WatchUpdate,
    acquire_direct_and_write,
    completed_future,
    failed_future,
    from_config,
    heap_size,
    topics_hash,
    wire_size,
)

HEAP = LimitType.HEAP_MEMORY
DIRECT = LimitType.DIRECT_MEMORY


def make(heap: int = 100, direct: int = 100, queue: int = 10, timeout: int = 1000) -> AsyncDualMemoryLimiter:
    return AsyncDualMemoryLimiter(heap, queue, timeout, direct, queue, timeout, executor=VirtualExecutor())


def ex_of(limiter: AsyncDualMemoryLimiter) -> VirtualExecutor:
    assert isinstance(limiter.executor, VirtualExecutor)
    return limiter.executor


def grant(limiter: AsyncDualMemoryLimiter, size: int, kind: LimitType) -> DualPermit:
    f = limiter.acquire(size, kind)
    ex_of(limiter).run()
    return f.result()


class FakeChannel:
    """Records serialize/write calls; `fault` makes serialize raise."""

    def __init__(self) -> None:
        self.fault = False
        self.written: list[SizedReply] = []
        self.listeners: list[Callable[[bool], None]] = []

    def serialize(self, reply: SizedReply) -> None:
        if self.fault:
            raise SerializationError("boom")

    def write(self, reply: SizedReply, listener: Callable[[bool], None]) -> None:
        self.written.append(reply)
        self.listeners.append(listener)


# -- limiter ----------------------------------------------------------------------------------------


def test_pools_are_separate_and_share_one_executor() -> None:
    lim = make(heap=50, direct=80)
    h = grant(lim, 30, HEAP)
    d = grant(lim, 70, DIRECT)
    assert (h.limit_type, h.permits, d.limit_type, d.permits) == (HEAP, 30, DIRECT, 70)
    assert lim.limiter(HEAP).acquired_permits == 30
    assert lim.limiter(DIRECT).acquired_permits == 70
    assert lim.heap.executor is lim.direct.executor
    u = lim.update(h, 10)
    assert u.result().permits == 10 and u.result().limit_type is HEAP
    assert lim.heap.acquired_permits == 10
    lim.release(d)
    lim.release(u.result())
    assert (lim.heap.acquired_permits, lim.direct.acquired_permits) == (0, 0)


def test_request_futures_carry_the_pool_request_id() -> None:
    lim = make()
    first, second = lim.acquire(1, HEAP), lim.acquire(1, HEAP)
    assert (first.id, second.id) == (1, 2)
    assert lim.heap.queue[0].seq == first.id


def test_foreign_wrappers_are_rejected() -> None:
    lim, other = make(), make()
    foreign = grant(other, 5, HEAP)
    bare = grant(lim, 5, HEAP).underlying
    for bad in (foreign, bare, Permit(3)):
        with pytest.raises(ValueError, match=r"^Invalid permit type$"):
            lim.release(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^Invalid permit type$"):
            lim.update(bad, 1)  # type: ignore[arg-type]
    assert lim.heap.acquired_permits == 5


def test_synchronous_value_error_propagates_from_every_entry_point() -> None:
    lim = make(heap=10, direct=10)
    with pytest.raises(ValueError, match="larger than maxPermits=10"):
        lim.acquire(11, HEAP)
    with pytest.raises(ValueError, match="Invalid negative permits value: -1"):
        lim.with_acquired_permits(-1, HEAP, None, completed_future, failed_future)
    big = GetTopicsResponse(1, ("x" * 20,), "00000000", True)
    with pytest.raises(ValueError, match="larger than maxPermits=10"):
        acquire_direct_and_write(FakeChannel(), lim, None, big, failed_future)
    assert lim.heap.request_count == 0 and lim.direct.request_count == 0


def test_close_closes_both_pools() -> None:
    lim = make()
    lim.close()
    assert lim.heap.closed and lim.direct.closed


# -- with_acquired_permits / with_updated_permits ---------------------------------------------------------


def test_with_acquired_permits_releases_when_fn_future_completes_before_the_result() -> None:
    lim = make()
    stage: VFuture[str] = VFuture()
    seen: list[int] = []

    def fn(p: DualPermit) -> VFuture[str]:
        seen.append(p.permits)
        return stage

    result = lim.with_acquired_permits(40, HEAP, None, fn, failed_future)
    observed: list[int] = []
    result.add_done_callback(lambda _r: observed.append(lim.heap.acquired_permits))
    ex_of(lim).run()
    assert seen == [40]
    assert lim.heap.acquired_permits == 40
    stage.complete("done")
    assert result.result() == "done"
    assert observed == [0]


def test_with_acquired_permits_fn_failure_and_sync_raise_release_the_permit() -> None:
    lim = make()
    failing = lim.with_acquired_permits(10, HEAP, None, lambda p: failed_future(KeyError("async")), failed_future)

    def raises(_p: DualPermit) -> VFuture[None]:
        raise RuntimeError("sync")

    raising = lim.with_acquired_permits(10, HEAP, None, raises, failed_future)
    ex_of(lim).run()
    assert isinstance(failing.exception(), KeyError)
    assert isinstance(raising.exception(), RuntimeError)
    assert lim.heap.acquired_permits == 0


def test_with_acquired_permits_acquire_failure_calls_the_error_handler() -> None:
    lim = make(heap=10, queue=1)
    grant(lim, 10, HEAP)
    lim.acquire(1, HEAP)  # fills the one queue slot
    errors: list[BaseException] = []
    called: list[DualPermit] = []

    def on_err(e: BaseException) -> VFuture[str]:
        errors.append(e)
        return completed_future("handled")

    def fn(p: DualPermit) -> VFuture[str]:
        called.append(p)
        return completed_future("x")

    result = lim.with_acquired_permits(5, HEAP, None, fn, on_err)
    assert result.result() == "handled"
    assert [type(e) for e in errors] == [PermitAcquireQueueFullError]
    assert called == []
    assert lim.heap.acquired_permits == 10

    def on_err_raises(_e: BaseException) -> VFuture[str]:
        raise LookupError("handler")

    broken = lim.with_acquired_permits(5, HEAP, None, fn, on_err_raises)
    assert isinstance(broken.exception(), LookupError)


def test_caller_idiom_estimate_then_actual_releases_everything() -> None:
    lim = make(heap=100)
    inner_permit: list[int] = []

    def inner(p: DualPermit) -> VFuture[str]:
        inner_permit.append(p.permits)
        return completed_future("sent")

    def outer(initial: DualPermit) -> VFuture[str]:
        return lim.with_updated_permits(initial, 70, None, inner, failed_future)

    result = lim.with_acquired_permits(30, HEAP, None, outer, failed_future)
    ex_of(lim).run()
    assert result.result() == "sent"
    assert inner_permit == [70]
    assert lim.heap.acquired_permits == 0


def test_caller_idiom_failed_update_is_freed_by_the_outer_release() -> None:
    lim = make(heap=100, queue=1)
    blocker = grant(lim, 60, HEAP)
    acquired_during: list[int] = []

    def outer(initial: DualPermit) -> VFuture[str]:
        def refused(_e: BaseException) -> VFuture[str]:
            acquired_during.append(lim.heap.acquired_permits)
            return completed_future("refused")

        lim.acquire(1, HEAP)  # occupies the only queue slot: the growing update gets QueueFull
        return lim.with_updated_permits(initial, 90, None, lambda p: completed_future("sent"), refused)

    result = lim.with_acquired_permits(30, HEAP, None, outer, failed_future)
    ex_of(lim).run()
    assert result.result() == "refused"
    assert acquired_during == [90]  # the initial 30 still counted while the handler runs
    assert lim.heap.acquired_permits == 61  # blocker and the extra request; the 30 came back
    lim.release(blocker)


def test_exceptional_release_off_keeps_the_permit_on_failure_only() -> None:
    lim = make()
    ok = lim.with_acquired_permits(10, HEAP, None, completed_future, failed_future, exceptional_release=False)
    bad = lim.with_acquired_permits(
        20, HEAP, None, lambda p: failed_future(KeyError()), failed_future, exceptional_release=False
    )

    def raises(_p: DualPermit) -> VFuture[None]:
        raise RuntimeError

    raised = lim.with_acquired_permits(30, HEAP, None, raises, failed_future, exceptional_release=False)
    ex_of(lim).run()
    assert ok.done() and bad.done() and raised.done()
    assert lim.heap.acquired_permits == 50


# -- acquire_direct_and_write ---------------------------------------------------------------------------


def test_acquire_direct_and_write_completes_when_queued_and_releases_when_written() -> None:
    lim = make(direct=1000)
    ch = FakeChannel()
    reply = GetTopicsResponse(7, ("a", "b"), topics_hash(["a", "b"]), True)
    result = acquire_direct_and_write(ch, lim, None, reply, failed_future)
    assert not result.done()
    ex_of(lim).run()
    assert result.done() and result.exception() is None
    assert ch.written == [reply]
    assert lim.direct.acquired_permits == wire_size(reply)
    ch.listeners[0](False)
    assert lim.direct.acquired_permits == 0


def test_acquire_direct_and_write_serialization_fault_and_acquire_failure() -> None:
    lim = make(direct=1000, queue=1)
    ch = FakeChannel()
    ch.fault = True
    reply = WatchUpdate(1, ("n",), (), "00000000")
    faulted = acquire_direct_and_write(ch, lim, None, reply, failed_future)
    ex_of(lim).run()
    assert isinstance(faulted.exception(), SerializationError)
    assert lim.direct.acquired_permits == 0
    assert ch.written == []
    lim.close()
    refused = acquire_direct_and_write(ch, lim, None, reply, lambda e: completed_future(None))
    assert refused.done() and refused.exception() is None
    assert ch.written == []


def test_acquire_direct_and_write_without_exceptional_release() -> None:
    lim = make(direct=1000)
    reply = WatchSuccess(1, 2, "00000000", ())
    faulty = FakeChannel()
    faulty.fault = True
    acquire_direct_and_write(faulty, lim, None, reply, failed_future, exceptional_release=False)
    ex_of(lim).run()
    assert lim.direct.acquired_permits == wire_size(reply)
    ch = FakeChannel()
    acquire_direct_and_write(ch, lim, None, reply, failed_future, exceptional_release=False)
    acquire_direct_and_write(ch, lim, None, reply, failed_future, exceptional_release=False)
    ex_of(lim).run()
    ch.listeners[0](False)
    assert lim.direct.acquired_permits == 3 * wire_size(reply)
    ch.listeners[1](True)
    assert lim.direct.acquired_permits == 2 * wire_size(reply)


# -- sizes and hash ----------------------------------------------------------------------------------------


def test_wire_size_counts_every_string_of_the_reply() -> None:
    assert wire_size(GetTopicsResponse(1, ("a", "bb"), "00000000", True)) == 32 + 5 + 6 + 12
    assert wire_size(GetTopicsResponse(1, (), "e4a876e3", False)) == 44
    assert wire_size(WatchSuccess(1, 9, "00000000", ("é",))) == 32 + 6 + 12
    assert wire_size(WatchUpdate(9, ("n1",), ("d12",), "00000000")) == 32 + 6 + 7 + 12


def test_heap_size_is_utf8_length_plus_32_per_topic() -> None:
    assert heap_size([]) == 0
    assert heap_size(["a", "é"]) == 33 + 34
    assert heap_size(["persistent://public/default/a"]) == 29 + 32


def test_topics_hash_examples() -> None:
    assert topics_hash([]) == "00000000"
    assert topics_hash(["persistent://public/default/a"]) == "e4a876e3"
    many = ["persistent://t/n/b", "persistent://t/n/a", "persistent://t/n/c"]
    assert topics_hash(many) == topics_hash(sorted(many)) != topics_hash(many[:2])
    assert len(topics_hash(many)) == 8


# -- configuration (§8) --------------------------------------------------------------------------------------


def test_from_config_defaults_and_mapping() -> None:
    cfg = from_config({})
    assert (cfg.heap_max, cfg.direct_max) == (100 * 1024 * 1024, 100 * 1024 * 1024)
    assert (cfg.heap_timeout_ms, cfg.direct_timeout_ms) == (25_000, 25_000)
    assert (cfg.heap_queue, cfg.direct_queue) == (10_000, 10_000)
    assert cfg.lookup_max == 50_000
    custom = from_config(
        {
            "maxTopicListInFlightHeapMemSizeMB": "2",
            "maxTopicListInFlightDirectMemSizeMB": 0,
            "maxTopicListInFlightHeapMemSizePermitsAcquireTimeoutMillis": "150",
            "maxTopicListInFlightDirectMemSizePermitsAcquireTimeoutMillis": 250,
            "maxTopicListInFlightHeapMemSizePermitsAcquireQueueSize": 5,
            "maxTopicListInFlightDirectMemSizePermitsAcquireQueueSize": " 6 ",
            "maxConcurrentLookupRequest": 7,
            "maxConcurrentLookupRequests": 8,
            "unrelatedSetting": "ignored",
        }
    )
    assert (custom.heap_max, custom.direct_max) == (2 * 1024 * 1024, 0)
    assert (custom.heap_timeout_ms, custom.direct_timeout_ms) == (150, 250)
    assert (custom.heap_queue, custom.direct_queue) == (5, 6)
    assert custom.lookup_max == 7
    assert from_config({"maxConcurrentLookupRequests": 8}, proxy=True).lookup_max == 8
    lim = custom.create_limiter(VirtualExecutor())
    assert (lim.heap.max_permits, lim.heap.max_queue_size, lim.heap.timeout_ms) == (2 * 1024 * 1024, 5, 150)
    assert lim.direct.unbounded and lim.direct.acquire(10**12).done()  # 0 MB disables the direct limit


def test_from_config_rejects_non_integers_by_name() -> None:
    with pytest.raises(ValueError, match=r"^maxTopicListInFlightHeapMemSizeMB: expected an integer"):
        from_config({"maxTopicListInFlightHeapMemSizeMB": "lots"})
