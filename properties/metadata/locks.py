"""The metadata lock scope bound to the reference: upstream-granularity code stepped in lockstep with the model.

`MetadataLocksReference` runs `reference_impl.metadata.lock_level.AbstractBatchedMetadataStore` on a preemptive
`World`: the two caller threads of the configuration's scripts (each operation a task), the `N-batch-flusher`
scheduled thread, the closer, every monitor enter, queue call and `isClosed` access a scheduling point. A model
action ``caller(step=L)`` runs the thread's next step, which must be the operation labelled L (a thread about to do
something else is a divergence named as such); ``clock`` fires the flusher's fixed-rate task.

It judges MD-LK1, MD-LK3, MD-LK4 and MD-I10 from its own ledger, never from the store's opinion: the backend here is the
harness's (`batchOperation`), which records which thread handed it each batch and who held the monitor then; the
future each operation returned; the label each thread was about to run and the monitor's holder before the step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from models.core import Action, Json, Observation, Param
from models.metadata_locks import CALLERS, DONE, FAILED, MONITOR, PENDING, SENT, MetadataLocksModel, judge_vars
from properties.engines.lockstep import BaseImplementation, refusal
from reference_impl.concurrent.executors import World, current_thread_name
from reference_impl.concurrent.futures import CompletableFuture
from reference_impl.metadata.lock_level import (
    AbstractBatchedMetadataStore,
    AlreadyClosedError,
    MetadataOp,
    NullPointerError,
)

PERIOD_MS = 5
"""batchingMaxDelayMillis: the flusher's fixed rate."""


class _FiledStore(AbstractBatchedMetadataStore):
    """The store whose new ops the harness files (by name) as they are created, before any point."""

    def __init__(self, futures: dict[str, CompletableFuture[None]], *args: Any) -> None:
        super().__init__(*args)
        self.filed = futures

    def new_op(self, name: str, read: bool) -> MetadataOp:
        op = super().new_op(name, read)
        self.filed[name] = op.future
        return op


class MetadataLocksReference(BaseImplementation):
    """The upstream-granularity batched store of one order, its threads simulated, and the harness's ledger."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        self.model = model = MetadataLocksModel(config, variant)  # parses and completes the configuration
        self.world = World(preemptive=True)
        callers = [self.world.thread(name) for name in CALLERS]
        self.flusher = self.world.scheduled_thread("flusher")
        self.closer = self.world.thread("closer")
        self.sent: set[str] = set()
        self.broken: set[str] = set()
        self.futures: dict[str, CompletableFuture[None]] = {}
        self.store = _FiledStore(self.futures, self.flusher, model.max_operations, PERIOD_MS, model.order,
                                 self._batch_operation)
        for thread, script in zip(callers, model.scripts, strict=True):
            for index, op in enumerate(script):
                thread.execute(partial(self._op, f"{thread.name}.{index}", op), label=op)
        if model.close:
            self.closer.execute(self.store.close, label="close")
        self.disagreement = ""
        self.world.prime()

    def _op(self, name: str, op: str) -> None:
        if op == "get":
            self.store.store_get(name)
        else:
            self.store.store_put(name)

    def _batch_operation(self, ops: Sequence[MetadataOp]) -> None:
        """The backend: MD-LK1 on who hands it a batch, MD-I10 on when (never once close set the flag)."""
        if self.store.monitor.holder != current_thread_name():
            self.broken.add("MD-LK1")
        if self.store.is_closed.value:
            self.broken.add("MD-I10")
        self.sent.update(op.name for op in ops)

    # -- Implementation -----------------------------------------------------------------------------------------
    def apply(self, action: Action) -> Observation:
        if action.name == "clock":
            advances = [c for c in self.world.choices() if c[0] == "advance"]
            if not advances or self.flusher.running is not None:
                self.disagreement = "clock: the flusher's task is not due"
                return None
            self.world.step(advances[0])
        else:
            name, step = action.name, str(action["step"])
            refused = refusal(name, step, self._label(name), self.world.get_thread(name).enabled)
            if refused:
                self.disagreement = refused
                return None
            if step.endswith(".poll") and self.store.monitor.holder not in (None, name):
                self.broken.add("MD-LK4")
            self.world.step(("run", name))
        self.world.prime()
        for thread_name, _task, error in self.world.uncaught:
            if not isinstance(error, NullPointerError):
                raise RuntimeError(f"{thread_name} raised {type(error).__name__}: {error}") from error
        self._judge()
        return None

    def _label(self, name: str) -> str:
        return self.world.next_operation(name) or DONE

    def _outcome(self, name: str) -> str:
        future = self.futures[name]
        if name in self.sent:
            return SENT
        if future.done and isinstance(future.error, AlreadyClosedError):
            return FAILED
        return PENDING

    def vars(self) -> dict[str, Json]:
        return {
            "closed": self.store.is_closed.value,
            "read_ops": [op.name for op in self.store.read_ops.items],
            "write_ops": [op.name for op in self.store.write_ops.items],
            "ops": [[name, self._outcome(name)] for name in sorted(self.futures)],
            "locks": {MONITOR: [] if self.store.monitor.holder is None else [self.store.monitor.holder]},
            "cancelled": self.store.scheduled_task.timer.cancelled,
            "threads": [[name, self._label(name)] for name in (*CALLERS, "flusher", "closer")],
            "broken": [*sorted(self.broken)],
        }

    def violations(self) -> list[str]:
        return sorted(self.broken) + (["divergence"] if self.disagreement else [])

    def close(self) -> None:
        self.world.dispose()

    def _judge(self) -> None:
        """MD-LK3: once close has run and every thread is idle, every op has been sent or failed; MD-LK1 and MD-LK3
        on the ledger's variables (`judge_vars`)."""
        idle = all(t.current is None and not t.queued for t in self.world.thread_states())
        if self.model.close and idle and any(self._outcome(n) == PENDING for n in self.futures):
            self.broken.add("MD-LK3")
        self.broken |= judge_vars(self.vars())
