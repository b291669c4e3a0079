"""AsyncSemaphoreImpl at upstream's lock granularity: two caller threads and the executor, every interleaving.

The `semaphore` scope (`semaphore.py`) makes each call and each queue pass atomic. Upstream does not: callers run
`acquire`, `update` and `release` on their own threads, the grants run in `internalProcessQueue` on the
semaphore's single-threaded scheduled executor, and they meet only through the `availablePermits` atomic, the
permits' volatile values (swapped to 0 by `getAndSet`), the blocking queue, the request futures and executor
submissions. This model follows upstream's source (apache/pulsar `AsyncSemaphoreImpl.java`, 04ff2c9e after
#25066 and 55c51bd9 before it; `reference_impl/topiclist/lock_level.py` cites the lines) and splits it where the
deterministic scheduler of `reference_impl.concurrent` does: before every lock acquisition, atomic or volatile
access, queue call, future completion or cancellation, and executor submission.

Each caller thread runs a script of operations compiled (`_Assembler`) into instructions; the executor runs the
passes and timeouts submitted to it, in order. An instruction with a label is a scheduling point: a step runs the
thread's labelled instruction and every unlabelled one after it, up to its next label (across operations and, on
the executor, across tasks), so the label a thread shows is the Java operation it is about to perform
(``"internalProcessQueue: availablePermits.addAndGet"``), exactly the label the reference's thread shows.
Permits `P0`, `P1`, ... (`held`) are held before the threads start; each script operation that returns a future
names its request ``"<thread>.<index in the script>"``.

Operations: ``acquire N``; ``update Pi N`` (grow or shrink seed permit Pi); ``release Pi``; ``cancel`` (the
caller cancels the future its previous operation returned). The ``clock`` action moves time to the next timer's
deadline (the one-shot pass half a timeout after construction, then the requests' timeouts in the order they
were scheduled); with ``clock: false`` time stands still (every run shorter than a timeout).

`order` selects the code: ``current``; ``fixed`` (the fix docs/findings/topiclist-semaphore-lock-level.md
proposes); ``pre25066`` (before apache/pulsar#25066); ``unswapped`` (``releasePermits`` a read then a write:
the atomicity of its ``getAndSet`` dropped).

Invariants, raised as flags by the step that breaks them: SL-1 ``0 <= availablePermits <= max_permits``; SL-2 no
permit counted twice (available plus the values of the permits callers hold never exceeds max_permits); SL-3 no
permit lost (once the callers are done and the executor is idle, available plus held equals max_permits); SL-4 no
lost wake-up (whenever the executor is idle and no caller is on its way to submit a pass, the queue's head, unless
its caller cancelled it, needs more than is available).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

from models.core import Action, ActionNotEnabled, Invariant, Json, Liveness, Observation, Param, configured
from models.topiclist.configs import VARIANTS

ORDERS = ("current", "fixed", "pre25066", "unswapped")
"""The semaphore's code; the mechanism's variants (`VARIANTS`) differ only in the flows, so the scope accepts each."""
CALLERS = ("caller", "other")
THREADS = (*CALLERS, "executor")
ACTION_NAMES = (*THREADS, "clock")
DONE = "done"
MONITOR = "AsyncSemaphoreImpl"
"""The monitor `internalProcessQueue` is synchronized on: held by the executor from a pass's first step to its end."""
PASS, TIMEOUT = "internalProcessQueue", "timeoutTask"
"""The executor's task labels (a pass, and a request's timeout); the deferred pass is a PASS timer."""
PENDING, GRANTED, TIMED_OUT, QUEUE_FULL, CANCELLED = "pending", "granted", "timed out", "queue full", "cancelled"
INVARIANTS = (
    ("SL-1", "0 <= availablePermits <= max_permits after every step"),
    ("SL-2", "no permit counted twice: available plus the values of the permits the callers hold never exceeds "
             "max_permits"),
    ("SL-3", "no permit lost: once the callers are done and the executor is idle, available plus the values of the "
             "permits the callers hold equals max_permits"),
    ("SL-4", "no lost wake-up: whenever the executor is idle with nothing queued and no caller is on its way to "
             "submit a pass, the queue's head, unless its caller cancelled it, needs more permits than are available"),
)
SUBMITTING = frozenset({
    "internalAcquire: executor.schedule", "setTimeoutTask: request.timeoutTask (volatile write)",
    "release: availablePermits.addAndGet", "update: availablePermits.addAndGet", "processQueue: closed.get",
    "processQueue: executor.execute"})
"""The labels of a caller that has queued a request or returned permits and has not yet submitted its pass: SL-4's
premise leaves such a moment out (the pass is coming)."""

DEFAULT_CONFIG: dict[str, Param] = {
    "scope": "semaphore-locks",
    "order": "current",
    "max_permits": 2,
    "max_queue": 2,  # the ArrayBlockingQueue's capacity
    "held": (1,),  # permits P0, P1, ... held before the threads start
    "caller": ("update P0 2",),
    "other": ("release P0",),
    "clock": False,
    "unchecked": (),  # invariants left out (a known finding that would end every Hypothesis run)
}

NO_TIMER, TIMER_PENDING, TIMER_QUEUED, TIMER_CANCELLED, TIMER_RAN = range(5)


class Request(NamedTuple):
    name: str
    permits: int
    prev: int  # the permit a growing update reuses (current orders) or releases in thenApply (pre25066), else -1
    acquire: int  # pre25066: the additional permits counted when it was queued
    future: str
    returned: str  # pre25066 growing update: the future update returned ("" when the caller sees `future`)
    then_apply: bool  # pre25066: the thenApply was registered while `future` was pending
    timer: int
    timer_field: bool  # request.timeoutTask is set
    visible: bool  # the operation returned its future to the caller
    permit: int  # the permit its grant created, -1

    @property
    def seen(self) -> str:
        """The state of the future the caller holds."""
        return self.returned or self.future


class Regs(NamedTuple):
    req: int = -1
    permit: int = -1
    r: int = 0  # what a read or swap of a permit returned
    old: int = 0
    cur: int = 0
    take: int = 0
    back: int = 0
    ok: bool = False
    timer: bool = False


class Thread(NamedTuple):
    op: int  # callers: index of the operation in the script; the executor: 0 pass, 1 timeout
    pc: int
    regs: Regs


class SemLocksState(NamedTuple):
    available: int
    queue: tuple[int, ...]
    requests: tuple[Request, ...]
    permits: tuple[int, ...]  # every permit object's value: the held ones first, then those grants created
    timers: tuple[tuple[int, str, int], ...]  # (group, task label, request) in firing order
    ticks: int  # clock moves so far: a timer scheduled now is in group `ticks`
    exec_queue: tuple[tuple[str, int], ...]  # (task label, request) submitted and not started
    executor: Thread | None
    threads: tuple[Thread, Thread]
    broken: tuple[str, ...]


class Instruction(NamedTuple):
    label: str | None
    code: str
    arg: Any = 0
    target: int = -1


class _Assembler:
    """Builds one program from upstream's methods, in the order the source runs them."""

    def __init__(self, order: str) -> None:
        self.order = order
        self.code: list[Instruction] = []

    def emit(self, label: str | None, code: str, arg: Any = 0) -> int:
        self.code.append(Instruction(label, code, arg))
        return len(self.code) - 1

    def here(self, *sources: int) -> None:
        for i in sources:
            self.code[i] = self.code[i]._replace(target=len(self.code))

    def jump_back(self, target: int) -> None:
        self.code.append(Instruction(None, "jump", 0, target))

    def release_permits(self) -> None:
        """releasePermits on the permit in `regs.permit`, into `regs.r`."""
        if self.order == "unswapped":
            self.emit("releasePermits: permit.permits (volatile read)", "read permit")
            self.emit("releasePermits: permit.permits (volatile write)", "zero permit")
        else:
            self.emit("releasePermits: permit.permits.getAndSet", "swap permit")

    def process_queue(self) -> None:
        self.emit("processQueue: closed.get", "nop")
        self.emit("processQueue: executor.execute", "submit pass")

    def internal_acquire(self) -> None:
        self.emit("internalAcquire: closed.get", "nop")
        full = self.emit("internalAcquire: queue.offer", "offer")
        self.emit("internalAcquire: executor.schedule", "schedule timeout")
        self.emit("setTimeoutTask: request.timeoutTask (volatile write)", "set timer field")
        self.process_queue()
        self.here(full)

    def cancel_timeout_task(self) -> None:
        unset = self.emit("cancelTimeoutTask: request.timeoutTask (volatile read)", "read timer field")
        self.emit("cancelTimeoutTask: timeoutTask.cancel", "cancel timer")
        self.emit("cancelTimeoutTask: request.timeoutTask (volatile write)", "clear timer field")
        self.here(unset)

    # -- caller operations ----------------------------------------------------------------------------------------
    def acquire(self, name: str, permits: int) -> None:
        self.emit(None, "new request", (name, permits, -1, permits))
        self.internal_acquire()

    def update(self, name: str, permit: int, permits: int) -> None:
        self.emit(None, "permit", permit)
        self.emit("getPermits: permit.permits (volatile read)", "read old")
        shrink = self.emit(None, "unless grows", permits)
        if self.order == "pre25066":
            self._update_pre25066(name, permit, permits, shrink)
            return
        self.emit(None, "new request", (name, permits, permit, permits))
        self.internal_acquire()
        done = self.emit(None, "jump")
        self.here(shrink)
        self.release_permits()
        fallback = self.emit(None, "leftover", permits)
        none_left = self.emit(None, "unless leftover", permits)
        self.emit("update: availablePermits.addAndGet", "add leftover", permits)
        self.process_queue()
        self.here(none_left)
        self.emit(None, "immediate", (name, permits))
        done_too = self.emit(None, "jump")
        self.here(fallback)
        self.acquire(name, permits)
        self.here(done, done_too)

    def _update_pre25066(self, name: str, permit: int, permits: int, shrink: int) -> None:
        self.emit(None, "new request", (name, permits, permit, -1))  # -1: the additional permits, from regs.old
        self.internal_acquire()
        pending = self.emit("update: future.thenApply", "then apply")
        self.release_permits()
        self.emit(None, "deliver returned")
        self.here(pending)
        self.emit("update: returnedFuture.whenComplete", "nop")
        done = self.emit(None, "jump")
        self.here(shrink)
        equal = self.emit(None, "unless shrinks", permits)
        self.emit("update: availablePermits.addAndGet", "add difference", permits)
        self.process_queue()
        self.here(equal)
        self.release_permits()
        self.emit(None, "immediate", (name, permits))
        self.here(done)

    def release(self, permit: int) -> None:
        self.emit(None, "permit", permit)
        self.release_permits()
        nothing = self.emit(None, "unless released")
        self.emit("release: availablePermits.addAndGet", "add released")
        self.process_queue()
        self.here(nothing)

    def cancel(self, name: str) -> None:
        self.emit(None, "find", name)
        plain = self.emit(None, "unless returned")
        settled = self.emit("cancel: returnedFuture.cancel", "cancel returned")
        self.emit("update$whenComplete: future.cancel", "cancel future")
        done = self.emit(None, "jump")
        self.here(plain)
        self.emit("cancel: future.cancel", "cancel future")
        self.here(done, settled)

    # -- the executor's tasks -------------------------------------------------------------------------------------
    def internal_process_queue(self) -> None:
        self.emit("internalProcessQueue: AsyncSemaphoreImpl.lock", "nop")
        loop = self.emit("internalProcessQueue: closed.get", "nop")
        exits = [self.emit("internalProcessQueue: queue.isEmpty", "exit if empty"),
                 self.emit("internalProcessQueue: availablePermits.get", "read available"),
                 self.emit("internalProcessQueue: queue.peek", "peek")]
        fresh = self.emit("internalProcessQueue: future.isDone", "unless done")
        self.cancel_timeout_task()
        self.emit("internalProcessQueue: queue.remove", "remove head")
        self.jump_back(loop)
        self.here(fresh)
        if self.order == "pre25066":
            exits.append(self.emit(None, "fits pre25066"))
        else:
            plain = self.emit(None, "unless previous")
            self.emit("getPermits: permit.permits (volatile read)", "read required")
            exits.append(self.emit(None, "fits"))
            self.release_permits()
            exits.append(self.emit(None, "take reusing"))
            grant = self.emit(None, "jump")
            self.here(plain)
            exits.append(self.emit(None, "fits plain"))
            self.here(grant)
        self.emit("internalProcessQueue: availablePermits.addAndGet", "take")
        self.cancel_timeout_task()
        self.emit("internalProcessQueue: queue.remove", "remove head")
        self.emit("internalProcessQueue: future.complete", "complete")
        if self.order == "pre25066":
            after = self.emit(None, "unless then apply")
            self.release_permits()
            self.emit(None, "deliver returned")
            self.here(after)
        completed = self.emit(None, "unless failed")
        self.emit("internalProcessQueue: availablePermits.addAndGet", "give back")
        self.here(completed)
        self.jump_back(loop)
        self.here(*exits)
        self.emit(None, "end task")

    def timeout(self) -> None:
        done = self.emit("timeoutTask: future.isDone", "exit if done")
        gone = self.emit("timeoutTask: queue.remove", "remove or exit")
        self.emit("timeoutTask: future.completeExceptionally", "time out")
        self.process_queue()
        self.here(done, gone)
        self.emit(None, "end task")


def _op_program(order: str, thread: str, index: int, op: str, held: int) -> tuple[Instruction, ...]:
    asm = _Assembler(order)
    name = f"{thread}.{index}"
    words = op.split()
    if words[0] == "acquire":
        asm.acquire(name, int(words[1]))
    elif words[0] == "update":
        asm.update(name, int(words[1][1:]), int(words[2]))
    elif words[0] == "release":
        asm.release(int(words[1][1:]))
    else:
        asm.cancel(f"{thread}.{index - 1}")
    asm.emit(None, "end op", name)
    return tuple(asm.code)


def _task_program(order: str, kind: str) -> tuple[Instruction, ...]:
    asm = _Assembler(order)
    if kind == PASS:
        asm.internal_process_queue()
    else:
        asm.timeout()
    return tuple(asm.code)


def _script(config: Mapping[str, Param], thread: str, held: int, max_permits: int) -> tuple[str, ...]:
    script = config[thread]
    if not isinstance(script, tuple) or not all(isinstance(op, str) for op in script):
        raise ValueError(f"topiclist semaphore-locks config {thread} must be a tuple of operations")
    ops = tuple(str(op) for op in script)
    for i, op in enumerate(ops):
        words = op.split()
        size_ok = len(words) >= 2 and words[-1].isdigit() and int(words[-1]) <= max_permits
        permit_ok = len(words) >= 2 and words[1][:1] == "P" and words[1][1:].isdigit() and int(words[1][1:]) < held
        ok = ((words[0] == "acquire" and len(words) == 2 and size_ok)
              or (words[0] == "update" and len(words) == 3 and permit_ok and size_ok)
              or (words[0] == "release" and len(words) == 2 and permit_ok)
              or (op == "cancel" and i > 0 and ops[i - 1].split()[0] in ("acquire", "update")))
        if not ok:
            raise ValueError(f"topiclist semaphore-locks config {thread}: {op!r} is not 'acquire N', 'update Pi N', "
                             f"'release Pi' (N <= max_permits {max_permits}, i < {held} held permits) or 'cancel' "
                             "after an acquire or update")
    return ops


class SemaphoreLocksModel:
    """Two caller threads and the executor on one AsyncSemaphoreImpl; every interleaving of its scheduling points."""

    mechanism = "topiclist"
    symmetric_key = threaded = None
    """No values are alike (`Model.symmetric_key`); the actions are the callers', the executor's and the clock's
    steps, but no footprints are declared, so no reduction applies (`Model.threaded`)."""

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "current") -> None:
        self.variant = variant
        self.config: Mapping[str, Param] = configured("topiclist (semaphore-locks scope)", variant, VARIANTS, config,
                                                      DEFAULT_CONFIG)
        order, max_permits, max_queue, held, clock, unchecked = (
            self.config[k] for k in ("order", "max_permits", "max_queue", "held", "clock", "unchecked"))
        if self.config["scope"] != "semaphore-locks":
            raise ValueError(f"topiclist semaphore-locks config needs scope 'semaphore-locks', got "
                             f"{self.config['scope']!r}")
        if order not in ORDERS:
            raise ValueError(f"topiclist semaphore-locks config order must be one of {', '.join(ORDERS)}")
        if not (isinstance(max_permits, int) and not isinstance(max_permits, bool) and 1 <= max_permits <= 8
                and isinstance(max_queue, int) and not isinstance(max_queue, bool) and 0 <= max_queue <= 4):
            raise ValueError("topiclist semaphore-locks config needs 1 <= max_permits <= 8 and 0 <= max_queue <= 4")
        sizes = [h for h in held if isinstance(h, int) and not isinstance(h, bool) and h > 0] if isinstance(
            held, tuple) else []
        if not isinstance(held, tuple) or len(sizes) != len(held) or sum(sizes) > max_permits:
            raise ValueError("topiclist semaphore-locks config held must be a tuple of positive permits whose sum is "
                             "at most max_permits")
        if not isinstance(clock, bool):
            raise ValueError("topiclist semaphore-locks config clock must be true or false")
        names = [name for name, _ in INVARIANTS]
        if not isinstance(unchecked, tuple) or not set(unchecked) <= set(names):
            raise ValueError(f"topiclist semaphore-locks config unchecked must be a tuple of invariant names "
                             f"({', '.join(names)})")
        self.order, self.max_permits, self.max_queue, self.clock = str(order), max_permits, max_queue, clock
        self.held = tuple(sizes)
        self.scripts = tuple(_script(self.config, t, len(self.held), max_permits) for t in CALLERS)
        self.programs = tuple(tuple(_op_program(self.order, t, i, op, len(self.held)) for i, op in enumerate(script))
                              for t, script in zip(CALLERS, self.scripts, strict=True))
        self.tasks = {kind: _task_program(self.order, kind) for kind in (PASS, TIMEOUT)}
        self.action_names: Sequence[str] = ACTION_NAMES
        self.invariants: Sequence[Invariant[SemLocksState]] = tuple(
            Invariant(name, _unbroken(name), text) for name, text in INVARIANTS if name not in unchecked)
        self.liveness: Sequence[Liveness[SemLocksState]] = ()
        idle = Thread(0, 0, Regs())
        start = _Run(self, SemLocksState(
            max_permits - sum(self.held), (), (), self.held, ((-1, PASS, -1),), 0, (), None, (idle, idle), ()))
        for i in (0, 1):  # each caller runs to its first scheduling point: nothing before it is shared
            start.run(i, first=False)
        self._initial = start.result()

    def initial(self) -> SemLocksState:
        return self._initial

    def key(self, state: SemLocksState) -> Hashable:
        return state

    def terminal_ok(self, state: SemLocksState) -> bool:
        return True

    def label(self, state: SemLocksState, thread: int) -> str:
        if thread == 2:
            t = state.executor
            return DONE if t is None else str(self.tasks[PASS if t.op == 0 else TIMEOUT][t.pc].label)
        t = state.threads[thread]
        programs = self.programs[thread]
        return DONE if t.op == len(programs) else str(programs[t.op][t.pc].label)

    def enabled(self, state: SemLocksState) -> Sequence[Action]:
        out = [Action.of(name, step=self.label(state, i)) for i, name in enumerate(THREADS)
               if self.label(state, i) != DONE]
        if self.clock and state.timers:
            out.append(Action.of("clock"))
        return out

    def step(self, state: SemLocksState, action: Action) -> tuple[SemLocksState, Observation]:
        if action not in self.enabled(state):
            raise ActionNotEnabled(action, "not offered in this state (see SemaphoreLocksModel.enabled)")
        run = _Run(self, state)
        if action.name == "clock":
            run.fire_timers()
        else:
            run.run(THREADS.index(action.name))
        run.start_executor()
        run.judge()
        return run.result(), None

    def quiescent(self, state: SemLocksState) -> bool:
        """The callers are done and the executor has nothing to run (timers may still be pending)."""
        return (state.executor is None and not state.exec_queue
                and all(t.op == len(self.programs[i]) for i, t in enumerate(state.threads)))

    def held_values(self, state: SemLocksState) -> list[tuple[str, int]]:
        """The permits the callers hold: the ones held at the start, then each granted future they were returned."""
        held = [(f"P{i}", state.permits[i]) for i in range(len(self.held))]
        held += sorted((r.name, state.permits[r.permit]) for r in state.requests if r.visible and r.seen == GRANTED)
        return held

    def vars(self, state: SemLocksState) -> dict[str, Json]:
        return {
            "available": state.available,
            "queue": [state.requests[r].name for r in state.queue],
            "requests": [[r.name, r.seen] for r in sorted(state.requests) if r.visible],
            "permits": [[name, value] for name, value in self.held_values(state)],
            "timers": [label for _, label, _ in state.timers],
            "executor_queue": [label for label, _ in state.exec_queue],
            "locks": {MONITOR: ["executor"] if state.executor is not None and state.executor.op == 0
                      and state.executor.pc > 0 else []},
            "threads": [[name, self.label(state, i)] for i, name in enumerate(THREADS)],
            "broken": list(state.broken),
        }


def _unbroken(name: str) -> Any:
    return lambda s: name not in s.broken


class _Run:
    """One step on a thawed state."""

    def __init__(self, model: SemaphoreLocksModel, s: SemLocksState) -> None:
        self.model, self.order = model, model.order
        self.available, self.queue, self.requests = s.available, list(s.queue), list(s.requests)
        self.permits, self.timers, self.ticks = list(s.permits), list(s.timers), s.ticks
        self.exec_queue, self.executor, self.threads = list(s.exec_queue), s.executor, list(s.threads)
        self.broken = set(s.broken)

    def result(self) -> SemLocksState:
        return SemLocksState(self.available, tuple(self.queue), tuple(self.requests), tuple(self.permits),
                             tuple(self.timers), self.ticks, tuple(self.exec_queue), self.executor,
                             (self.threads[0], self.threads[1]), tuple(sorted(self.broken)))

    # -- time and the executor ----------------------------------------------------------------------------------
    def fire_timers(self) -> None:
        group = self.timers[0][0]
        while self.timers and self.timers[0][0] == group:
            _, label, req = self.timers.pop(0)
            self.exec_queue.append((label, req))
            if req != -1:
                self._req(req, timer=TIMER_QUEUED)
        self.ticks += 1

    def start_executor(self) -> None:
        """A task submitted to the idle executor runs to its first scheduling point (its first instruction)."""
        if self.executor is None and self.exec_queue:
            label, req = self.exec_queue.pop(0)
            self.executor = Thread(0 if label == PASS else 1, 0, Regs(req=req))
            if req != -1:
                self._req(req, timer=TIMER_RAN)

    # -- running a thread ---------------------------------------------------------------------------------------
    def run(self, i: int, first: bool = True) -> None:
        """Thread `i` runs its labelled instruction (unless `first` is false) and on up to its next label."""
        if i == 2:
            assert self.executor is not None
            t = self.executor
            program = self.model.tasks[PASS if t.op == 0 else TIMEOUT]
            self.pc, self.regs = t.pc, t.regs
            while True:
                ins = program[self.pc]
                if ins.label is not None and not first:
                    self.executor = Thread(t.op, self.pc, self.regs)
                    return
                first = False
                self.jump: int | None = None
                if ins.code == "end task":
                    self.executor = None
                    self.start_executor()
                    if self.executor is None:
                        return
                    t = self.executor
                    program = self.model.tasks[PASS if t.op == 0 else TIMEOUT]
                    self.pc, self.regs = t.pc, t.regs
                    continue
                self.execute(ins)
                self.pc = self.pc + 1 if self.jump is None else self.jump
        t = self.threads[i]
        programs = self.model.programs[i]
        op, self.pc, self.regs = t.op, t.pc, t.regs
        while op < len(programs):
            ins = programs[op][self.pc]
            if ins.label is not None and not first:
                break
            first = False
            self.jump = None
            self.execute(ins)
            self.pc = self.pc + 1 if self.jump is None else self.jump
            if self.pc >= len(programs[op]):
                op, self.pc, self.regs = op + 1, 0, Regs()
        self.threads[i] = Thread(op, self.pc, self.regs)

    def _req(self, index: int, **changes: Any) -> None:
        self.requests[index] = self.requests[index]._replace(**changes)

    def _set(self, **changes: Any) -> None:
        self.regs = self.regs._replace(**changes)

    def _submit(self, label: str, req: int) -> None:
        self.exec_queue.append((label, req))

    def execute(self, ins: Instruction) -> None:
        code, arg, regs = ins.code, ins.arg, self.regs
        request = self.requests[regs.req] if regs.req != -1 else None
        if code == "nop":
            pass
        elif code == "jump":
            self.jump = ins.target
        elif code == "new request":
            name, permits, prev, acquire = arg
            if acquire == -1:
                acquire = permits - regs.old
            self.requests.append(Request(name, permits, prev, acquire, PENDING, "", False, NO_TIMER, False, False, -1))
            self._set(req=len(self.requests) - 1)
        elif code == "offer":
            assert request is not None
            if 0 < self.model.max_queue <= len(self.queue):
                self._req(regs.req, future=QUEUE_FULL)
                self.jump = ins.target
            else:
                self.queue.append(regs.req)
        elif code == "schedule timeout":
            self.timers.append((self.ticks, TIMEOUT, regs.req))
            self._req(regs.req, timer=TIMER_PENDING)
        elif code == "set timer field":
            self._req(regs.req, timer_field=True)
        elif code == "submit pass":
            self._submit(PASS, -1)
        elif code == "permit":
            self._set(permit=arg)
        elif code == "read old":
            self._set(old=self.permits[regs.permit])
        elif code == "unless grows":
            if arg - regs.old <= 0:
                self.jump = ins.target
        elif code == "unless shrinks":
            if arg - regs.old >= 0:
                self.jump = ins.target
        elif code == "swap permit":
            self._set(r=self.permits[regs.permit])
            self.permits[regs.permit] = 0
        elif code == "read permit":
            self._set(r=self.permits[regs.permit])
        elif code == "zero permit":
            self.permits[regs.permit] = 0
        elif code == "leftover":
            if regs.r - arg < 0:
                self.jump = ins.target
        elif code == "unless leftover":
            if regs.r - arg == 0:
                self.jump = ins.target
        elif code == "add leftover":
            self.available += regs.r - arg
        elif code == "add difference":
            self.available += regs.old - arg
        elif code == "immediate":
            name, permits = arg
            self.permits.append(permits)
            self.requests.append(Request(name, permits, -1, permits, GRANTED, "", False, NO_TIMER, False, False,
                                         len(self.permits) - 1))
            self._set(req=len(self.requests) - 1)
        elif code == "then apply":
            assert request is not None
            if request.future == PENDING:
                self._req(regs.req, then_apply=True, returned=PENDING)
                self.jump = ins.target
            elif request.future == GRANTED:
                self._req(regs.req, returned=PENDING)  # its thenApply runs now, on this thread
                self._set(permit=request.prev)
            else:
                self._req(regs.req, returned=request.future)
                self.jump = ins.target
        elif code == "deliver returned":
            assert request is not None
            if request.returned == PENDING:
                self._req(regs.req, returned=GRANTED)
        elif code == "unless released":
            if regs.r <= 0:
                self.jump = ins.target
        elif code == "add released":
            self.available += regs.r
        elif code == "find":
            self._set(req=next(i for i, r in enumerate(self.requests) if r.name == arg))
        elif code == "unless returned":
            assert request is not None
            if not request.returned:
                self.jump = ins.target
        elif code == "cancel returned":
            assert request is not None
            if request.returned != PENDING:
                self.jump = ins.target  # already done: no cancellation for whenComplete to pass on
            else:
                self._req(regs.req, returned=CANCELLED)
        elif code == "cancel future":
            assert request is not None
            if request.future == PENDING:
                self._req(regs.req, future=CANCELLED)
                if request.then_apply and request.returned == PENDING:
                    self._req(regs.req, returned=CANCELLED)
        elif code == "end op":
            if request is not None and request.name == arg:
                self._req(regs.req, visible=True)
        # -- the executor ---------------------------------------------------------------------------------------
        elif code == "exit if empty":
            if not self.queue:
                self.jump = ins.target
        elif code == "read available":
            self._set(cur=self.available)
            if self.available <= 0:
                self.jump = ins.target
        elif code == "peek":
            if not self.queue:
                self.jump = ins.target
            else:
                self._set(req=self.queue[0])
        elif code == "unless done":
            assert request is not None
            if request.future == PENDING:
                self.jump = ins.target
        elif code == "read timer field":
            assert request is not None
            self._set(timer=request.timer_field)
            if not request.timer_field:
                self.jump = ins.target
        elif code == "cancel timer":
            assert request is not None
            if request.timer == TIMER_PENDING:
                self.timers = [t for t in self.timers if not (t[1] == TIMEOUT and t[2] == regs.req)]
                self._req(regs.req, timer=TIMER_CANCELLED)
            elif request.timer == TIMER_QUEUED:
                self.exec_queue.remove((TIMEOUT, regs.req))
                self._req(regs.req, timer=TIMER_CANCELLED)
        elif code == "clear timer field":
            self._req(regs.req, timer_field=False)
        elif code == "remove head":
            self.queue.remove(regs.req)
        elif code == "fits pre25066":
            assert request is not None
            if request.acquire > regs.cur:
                self.jump = ins.target
            else:
                self._set(take=request.acquire, back=request.acquire)
        elif code == "unless previous":
            assert request is not None
            if request.prev == -1:
                self.jump = ins.target
            else:
                self._set(permit=request.prev)
        elif code == "read required":
            assert request is not None
            self._set(take=request.permits - self.permits[regs.permit])
        elif code == "fits":
            if regs.take > regs.cur:
                self.jump = ins.target
        elif code == "take reusing":
            assert request is not None
            take = request.permits - regs.r
            if self.order == "fixed" and take > regs.cur:
                self._req(regs.req, prev=-1)
                self.jump = ins.target
            else:
                self._set(take=take, back=take + regs.r if self.order == "fixed" else take)
        elif code == "fits plain":
            assert request is not None
            if request.permits > regs.cur:
                self.jump = ins.target
            else:
                self._set(take=request.permits, back=request.permits)
        elif code == "take":
            self.available -= regs.take
        elif code == "complete":
            assert request is not None
            self.permits.append(request.permits)
            ok = request.future == PENDING
            self._set(ok=ok)
            if ok:
                self._req(regs.req, future=GRANTED, permit=len(self.permits) - 1)
        elif code == "unless then apply":
            assert request is not None
            if not (regs.ok and request.then_apply):
                self.jump = ins.target
            else:
                self._set(permit=request.prev)
        elif code == "unless failed":
            if regs.ok:
                self.jump = ins.target
        elif code == "give back":
            self.available += regs.back
        elif code == "exit if done":
            assert request is not None
            if request.future != PENDING:
                self.jump = ins.target
        elif code == "remove or exit":
            if regs.req in self.queue:
                self.queue.remove(regs.req)
            else:
                self.jump = ins.target
        elif code == "time out":
            assert request is not None
            if request.future == PENDING:
                self._req(regs.req, future=TIMED_OUT)
                if request.then_apply and request.returned == PENDING:
                    self._req(regs.req, returned=TIMED_OUT)
        else:
            raise AssertionError(f"unknown instruction {code!r}")

    # -- invariants ---------------------------------------------------------------------------------------------
    def judge(self) -> None:
        model, state = self.model, self.result()
        if not 0 <= self.available <= model.max_permits:
            self.broken.add("SL-1")
        held = sum(value for _, value in model.held_values(state))
        if self.available + held > model.max_permits:
            self.broken.add("SL-2")
        if model.quiescent(state) and self.available + held != model.max_permits:
            self.broken.add("SL-3")
        idle = self.executor is None and not self.exec_queue
        if idle and self.queue and not {model.label(state, i) for i in (0, 1)} & SUBMITTING:
            head = self.requests[self.queue[0]]
            if head.future == PENDING and _needs(self.order, head, self.permits) <= self.available:
                self.broken.add("SL-4")


def _needs(order: str, head: Request, permits: list[int]) -> int:
    """What the queue's head needs before a pass grants it (its additional permits before #25066)."""
    if order == "pre25066":
        return head.acquire
    return head.permits - (permits[head.prev] if head.prev != -1 else 0)
