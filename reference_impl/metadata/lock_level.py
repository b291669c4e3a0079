"""AbstractBatchedMetadataStore at upstream's lock granularity, on the deterministic scheduler.

`store.py` runs a flush as a few atomic segments under a ledgered flush lock. Upstream (apache/pulsar
`pulsar-metadata/.../impl/batching/AbstractBatchedMetadataStore.java` at 90cba329a1, as merged by #25187,
6d415c6dbf) has callers, the `<N>-batch-flusher` thread and the closer meet only through the store's monitor
(`private synchronized void flush()`, lines 115-127), the two `MpscUnboundedArrayQueue`s (lines 74-75) and the
`isClosed` AtomicBoolean (`AbstractMetadataStore` line 104, read by `isClosed()` lines 967-969). This module
mirrors that code at those meeting points, on `reference_impl.concurrent` (every monitor enter, queue call and
`isClosed` access a scheduling point): `enqueue` (lines 169-187: `isClosed`, `offer`, `size`, the inline
`flush` past `maxOperations`), `flush` looping `DefaultMetadataStoreBatchStrategy.nextBatch` (its lines 40-67:
`isEmpty`, `peek`, `poll` per op, at most `maxOperations` a batch), `internalBatchOperation` (lines 189-203:
`isClosed`, then the backend's `batchOperation`) and close as `ZKMetadataStore.close` (lines 499-508: the
`compareAndSet` of `isClosed` first) then `AbstractBatchedMetadataStore.close` (lines 96-113: both queues polled
and failed with AlreadyClosedException, `scheduledTask.cancel(true)`).

Left out, because no other thread of the scope observes them: an op future's completion (callers never wait on
it here, so it is no point), `batchOperation`'s hand-off to the ZooKeeper client (the backend's own queue),
`zkc.close()`, the stats, the put-size limit of `nextBatch` (the ops are tiny) and the executor's
`shutdownAndAwaitTermination` after the cancel (nothing after it touches the queues).

`order` selects the code: ``current`` (above); ``fixed``, the fix docs/findings/metadata-close-lost-op.md
proposes: close drains the queues holding the monitor, and `enqueue` re-reads `isClosed` after its offer and, if
closed, flushes (under the monitor, so `internalBatchOperation` fails what is left).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reference_impl.concurrent.atomic import AtomicBoolean
from reference_impl.concurrent.executors import ScheduledSimThread, java_method
from reference_impl.concurrent.futures import ArrayBlockingQueue, CompletableFuture, ScheduledFuture
from reference_impl.concurrent.locks import ReentrantLock

ORDERS = ("current", "fixed")
MONITOR = "AbstractBatchedMetadataStore"
"""The store's monitor: `flush` is `synchronized`."""


class AlreadyClosedError(Exception):
    """Java's MetadataStoreException.AlreadyClosedException."""


class NullPointerError(Exception):
    """Java's NullPointerException: what a batch holding the null a lost `poll` returned throws."""


@dataclass(eq=False)
class MetadataOp:
    """One queued operation: its name (the harness's), whether it is a read, and the future its caller got."""

    name: str
    read: bool
    future: CompletableFuture[None]


class AbstractBatchedMetadataStore:
    """The batched store of one `order`; `batch_operation` is the backend's (`ZKMetadataStore.batchOperation`)."""

    def __init__(self, flusher: ScheduledSimThread, max_operations: int, max_delay_ms: int, order: str,
                 batch_operation: Callable[[list[MetadataOp]], None]) -> None:
        if order not in ORDERS:
            raise ValueError(f"unknown batched-store order {order!r} (one of {', '.join(ORDERS)})")
        self.order = order
        self.max_operations = max_operations
        self.batch_operation = batch_operation
        self.read_ops: ArrayBlockingQueue[MetadataOp] = ArrayBlockingQueue("readOps", 0)  # unbounded MPSC
        self.write_ops: ArrayBlockingQueue[MetadataOp] = ArrayBlockingQueue("writeOps", 0)
        self.is_closed = AtomicBoolean("isClosed")
        self.monitor = ReentrantLock(MONITOR)
        self.flush_executor = flusher
        self.scheduled_task = ScheduledFuture("scheduledTask", flusher.schedule_at_fixed_rate(
            self._periodic_flush, max_delay_ms, max_delay_ms, label="flush"))

    def _periodic_flush(self) -> None:
        self.flush()

    def new_op(self, name: str, read: bool) -> MetadataOp:
        """`new OpGet(...)` / `new OpPut(...)`: nothing shared, no point (a harness overrides it to file the op)."""
        return MetadataOp(name, read, CompletableFuture("future"))

    def store_get(self, name: str) -> CompletableFuture[None]:
        op = self.new_op(name, True)
        self.enqueue(self.read_ops, op)
        return op.future

    def store_put(self, name: str) -> CompletableFuture[None]:
        op = self.new_op(name, False)
        self.enqueue(self.write_ops, op)
        return op.future

    @java_method("enqueue")
    def enqueue(self, queue: ArrayBlockingQueue[MetadataOp], op: MetadataOp) -> None:
        if self.is_closed.get():
            op.future._settle(None, AlreadyClosedError())  # no scoped thread waits on it: no point
            return
        queue.offer(op)  # unbounded: never refuses, so the individual-execution fallback is unreachable
        if self.order == "fixed" and self.is_closed.get():
            self.flush()  # the closer may have drained before the offer: fail what is left, under the monitor
            return
        if queue.size() > self.max_operations:
            self.flush()

    @java_method("flush")
    def flush(self) -> None:
        with self.monitor.held():
            for queue in (self.read_ops, self.write_ops):
                if not queue.is_empty():
                    while batch := self.next_batch(queue):
                        self.internal_batch_operation(batch)

    @java_method("nextBatch")
    def next_batch(self, queue: ArrayBlockingQueue[MetadataOp]) -> list[MetadataOp | None]:
        ops: list[MetadataOp | None] = []
        while not queue.is_empty():
            if queue.peek() is None:
                break
            ops.append(queue.poll())  # null if another consumer polled the op peeked above
            if len(ops) == self.max_operations:
                break
        return ops

    @java_method("internalBatchOperation")
    def internal_batch_operation(self, ops: list[MetadataOp | None]) -> None:
        closed = self.is_closed.get()
        for op in ops:  # the closed error's forEach, or recordOpWaiting's loop: each dereferences the op
            if op is None:
                raise NullPointerError("Cannot invoke \"MetadataOp.getFuture()\" because \"op\" is null")
            if closed:
                op.future._settle(None, AlreadyClosedError())
        if not closed:
            self.batch_operation([op for op in ops if op is not None])

    @java_method("close")
    def close(self) -> None:
        if not self.is_closed.compare_and_set(False, True):
            return
        if self.order == "fixed":
            with self.monitor.held():
                self._drain()
        else:
            self._drain()
        self.scheduled_task.cancel()

    def _drain(self) -> None:
        for queue in (self.read_ops, self.write_ops):
            while (op := queue.poll()) is not None:
                op.future._settle(None, AlreadyClosedError("Metadata store is getting closed"))
