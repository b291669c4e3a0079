"""Drive a port (a program in any language) over the JSON-lines protocol, as a lockstep `Implementation`.

A port is untrusted: it may crash, hang, print garbage, answer the wrong step or flood its output.
Every such misbehaviour becomes one `PortError` naming the step, so the harness reports it instead
of hanging or crashing; and the child is always killed and reaped (`close`, or the context
manager), so no process survives a run.

Protocol (version 2; docs/ports.md is the port author's guide and keeps the changelog), one JSON
object per line, UTF-8:

* harness -> port ``{"type": "hello", "protocol": 2, "mechanism", "variant", "config"}`` (the complete
  configuration: every key the model reads, defaults included),
  port -> harness ``{"type": "ready", "vars"[, "capabilities"]}`` (its initial state, and what more it
  can do: ``"reset"``, ``"pipeline"``);
* harness -> port ``{"type": "step", "seq": n, "action", "params"}`` (n = 1, 2, ...),
  port -> harness ``{"type": "reply", "seq": n, "observation", "vars"[, "violations"]}`` or
  ``{"type": "error", "seq": n, "message"}``;
* (capability ``reset``) harness -> port ``{"type": "reset"}``, port -> harness ``{"type": "ready", "vars"}``:
  back to the configuration's initial state, and the next step is seq 1 again, so one process serves
  many walks;
* (capability ``pipeline``) the harness may send several steps before it reads their replies; the port
  still answers each in order.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from models.core import Action, Json, Observation, Param
from properties.engines.lockstep import BaseImplementation
from properties.engines.mechanism import Mechanism
from properties.engines.protocol import hello_config

PROTOCOL_VERSION = 2
"""The version the hello carries; docs/ports.md's changelog says what each one changed."""
DEFAULT_STEP_TIMEOUT_S = 5.0
DEFAULT_HELLO_TIMEOUT_S = 20.0
"""Starting a port may mean starting a JVM: the first reply gets more time than a step."""
MAX_REPLY_BYTES = 1 << 20
STDERR_TAIL_BYTES = 4096
PIPELINE_WINDOW = 64
"""Steps a pipelining port may have unanswered: their lines (about 100 bytes each) always fit in a pipe's
buffer, so a write never blocks while the port waits for its own output to be read."""
RESET = b'{"type": "reset"}\n'


KINDS = ("crash", "hang", "garbage", "wrong-step", "flood", "error")
MESSAGE_TYPES = ("ready", "reply", "error")
"""The message types a port may send."""
CAPABILITIES = ("reset", "pipeline")
"""What a port may announce in its `ready`; it is driven as a version-1 port without them."""


class PortError(Exception):
    """A port misbehaved at `step` (0 = the hello), or at the reset after it (`at_reset`); `kind` is one of
    `KINDS`."""

    def __init__(self, kind: str, step: int, message: str, at_reset: bool = False, steps: int | None = None) -> None:
        where = f"the reset after step {step}" if at_reset else f"step {step}"
        super().__init__(f"port {kind} at {where}: {message}")
        self.kind = kind
        self.step = step
        self.message = message
        self.at_reset = at_reset
        self.steps = step if steps is None else steps
        """The steps a run needs to show the failure again: beyond `step` for a skipped reply that the next
        step's reply gave away (a run that ends at `step` shows the skip another way)."""


class OutOfTime(Exception):
    """The caller's deadline passed while the port was being waited for: no verdict on the port, only on
    the time (a budget that ends during a reply is not the port's failure); `at_reset`: during a reset."""

    def __init__(self, message: str, at_reset: bool = False) -> None:
        super().__init__(message)
        self.at_reset = at_reset


def jsonable(value: Param | Json) -> Any:
    """Tuples (the models' arrays) as lists, so `json` writes arrays."""
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def sent_ahead(index: int, sent: int, total: int, window: int) -> int:
    """How many of a walk's `total` steps must have been sent before the reply to step `index` is read, `sent`
    of them being sent already: at least `index`, and for a pipelining port (`window` > 1) refilled to `window`
    unanswered steps whenever fewer than half of it are. A planned run (`PortProcess.plan`) sends as the tour
    does (`properties.engines.verify._tour_walk`), so a port that skips a reply shows it alike in `verify`,
    `replay` and the shrinker: the next step's reply, or the reset's `ready` after the last step (the reset
    goes out with the last batch)."""
    if sent < index or (window > 1 and sent - index < window // 2 and sent < total):
        return min(total, index - 1 + window)
    return sent


def step_line(seq: int, action: Action) -> bytes:
    """The step message for `action` as the port reads it."""
    params = {k: jsonable(v) for k, v in action.params}
    return json.dumps({"type": "step", "seq": seq, "action": action.name, "params": params}).encode("utf-8") + b"\n"


class PortProcess(BaseImplementation):
    """One running port; `apply`, `vars` and `violations` as lockstep expects, `reset` for the next walk."""

    strict_json = True
    """Its values arrived as JSON: lockstep compares them strictly (a port's `1` is not `true`)."""

    def __init__(
        self,
        argv: Sequence[str],
        mechanism: Mechanism,
        variant: str,
        config: Mapping[str, Param],
        *,
        step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
        hello_timeout_s: float = DEFAULT_HELLO_TIMEOUT_S,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        deadline: float | None = None,
    ) -> None:
        if not argv:
            raise ValueError("a port needs a command (argv list)")
        self.step_timeout_s = step_timeout_s
        self.max_reply_bytes = max_reply_bytes
        self.deadline = deadline
        """A `time.monotonic()` past which no reply is waited for (`OutOfTime`): the caller's budget."""
        self.seq = 0
        self.healthy = True
        """False once the port misbehaved or a wait was cut short: it must not serve another walk."""
        self.capabilities: frozenset[str] = frozenset()
        self._plan: tuple[Action, ...] = ()
        self._sent = 0
        self._reset_sent = False
        self._vars: dict[str, Json] = {}
        self._violations: list[str] = []
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._closed = False
        try:
            # A session of its own, so close() can kill whatever the port itself started.
            self.process = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise PortError("crash", 0, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        assert self.process.stdout is not None and self.process.stderr is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        try:
            complete = hello_config(mechanism, variant, config)  # defaults included: the port need guess none
            hello = {"type": "hello", "protocol": PROTOCOL_VERSION, "mechanism": mechanism.name, "variant": variant,
                     "config": {k: jsonable(v) for k, v in complete.items()}}
            self._write(json.dumps(hello).encode("utf-8") + b"\n")
            reply = self._receive(("ready",), hello_timeout_s, "hello refused")
            self._vars = self._ready_vars(reply)
            self.capabilities = self._announced(reply)
        except BaseException:
            self.close()
            raise

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def resets(self) -> bool:
        return "reset" in self.capabilities

    @property
    def pipelines(self) -> bool:
        return "pipeline" in self.capabilities

    def __enter__(self) -> PortProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Kill the port's process group and reap the child; idempotent."""
        if self._closed:
            return
        self._closed = True
        self.healthy = False
        process = self.process
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone, with its group
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        self._selector.close()
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):  # a broken pipe on flush: the port is dead anyway
                if stream is not None:
                    stream.close()
        self._stderr_thread.join(timeout=1.0)
        if process.stderr is not None:
            process.stderr.close()

    def reset(self, sent: bool = False) -> dict[str, Json]:
        """Back to the initial state (capability `reset`): the `ready`'s vars; the next step is seq 1. `sent`:
        the `RESET` line went out already, behind a pipelining port's steps (a planned run's say so themselves).

        A failure here is the reset's (`PortError.at_reset`, or `OutOfTime` naming it), not the last step's;
        only an answer that is a step's reply is blamed on that step (it answered a step twice)."""
        if not (sent or self._reset_sent):
            self._write(RESET)
        self._plan, self._sent, self._reset_sent = (), 0, False
        try:
            reply = self._receive(("ready",), self.step_timeout_s, "reset refused")
            self._vars = self._ready_vars(reply)
        except PortError as error:
            if error.kind == "wrong-step":
                raise
            raise PortError(error.kind, error.step, error.message, at_reset=True) from None
        except OutOfTime:
            raise OutOfTime(f"the deadline passed while the reset after step {self.seq} waited for its 'ready'",
                            at_reset=True) from None
        self._violations = []
        self.seq = 0
        return self._vars

    def _drain_stderr(self) -> None:
        """Keep the last `STDERR_TAIL_BYTES` of stderr (a full pipe would block the port)."""
        stream = self.process.stderr
        assert stream is not None
        try:
            while chunk := os.read(stream.fileno(), 65536):
                with self._stderr_lock:
                    self._stderr += chunk
                    del self._stderr[:-STDERR_TAIL_BYTES]
        except (OSError, ValueError):
            return

    def stderr_tail(self) -> str:
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace").strip()

    # -- Implementation ----------------------------------------------------------------------------
    def plan(self, actions: Sequence[Action]) -> None:
        """The run's actions, known in advance: `apply` then sends a pipelining port's steps ahead, and the reset
        with the last of them, as the tour does (`sent_ahead`); a port without `pipeline` is sent each step
        when it is applied, as before."""
        self._plan = tuple(actions) if self.pipelines else ()
        self._sent = self.seq

    def apply(self, action: Action) -> Observation:
        self.seq += 1
        planned = self.seq <= len(self._plan) and self._plan[self.seq - 1] == action
        if not planned:
            if self._sent >= self.seq:
                raise ValueError(f"step {self.seq}: {action} is not the planned step, which was sent already")
            self._plan = ()
            self._write(step_line(self.seq, action))
        elif (end := sent_ahead(self.seq, self._sent, len(self._plan), PIPELINE_WINDOW)) > self._sent:
            lines = b"".join(step_line(seq, self._plan[seq - 1]) for seq in range(self._sent + 1, end + 1))
            self.send(lines + RESET if end == len(self._plan) and self.resets else lines)
            self._sent = end
        return self.take_reply(self.seq, action)

    def send(self, lines: bytes) -> None:
        """Write step lines (`step_line`), and perhaps the `RESET` after the last, without waiting for their replies:
        a pipelining port's walk."""
        self._reset_sent = lines.endswith(RESET)
        self._write(lines)

    def take_reply(self, seq: int, action: Action) -> Observation:
        """Read the reply to step `seq` (sent already) and take its vars; the observation."""
        self.seq = seq
        reply = self._receive(("reply",), self.step_timeout_s)
        observation, port_vars = reply.get("observation"), reply.get("vars")
        violations = reply.get("violations", [])
        if not isinstance(port_vars, dict) or not (observation is None or isinstance(observation, dict)):
            raise self._fault("garbage", f"a reply needs an object 'vars' and 'observation': {reply!r}"[:500])
        if not isinstance(violations, list) or not all(isinstance(v, str) for v in violations):
            raise self._fault("garbage", f"'violations' must be a list of strings: {violations!r}"[:500])
        self._vars = port_vars
        self._violations = violations
        return observation

    def vars(self) -> dict[str, Json]:
        return self._vars

    def violations(self) -> list[str]:
        return list(self._violations)

    # -- wire ----------------------------------------------------------------------------------------
    def _fault(self, kind: str, message: str, step: int | None = None) -> PortError:
        self.healthy = False
        return PortError(kind, self.seq if step is None else step, message)

    def _ready_vars(self, reply: dict[str, Any]) -> dict[str, Json]:
        initial = reply.get("vars")
        if not isinstance(initial, dict):
            raise self._fault("garbage", f"'ready' needs the initial state as an object 'vars': {reply!r}"[:500])
        return initial

    def _announced(self, reply: dict[str, Any]) -> frozenset[str]:
        """The capabilities a `ready` names (unknown names are ignored: a newer port may offer more)."""
        announced = reply.get("capabilities", [])
        if not isinstance(announced, list) or not all(isinstance(c, str) for c in announced):
            raise self._fault("garbage", f"'capabilities' must be a list of strings: {announced!r}"[:500])
        return frozenset(announced) & frozenset(CAPABILITIES)

    def _write(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crash("the port closed its input") from None

    def _receive(self, wanted: tuple[str, ...], timeout_s: float, context: str = "error reply") -> dict[str, Any]:
        """Read one message of a type in `wanted` (for step `self.seq`, if a reply); every way that can go
        wrong is a `PortError` (or `OutOfTime` when the deadline, not the port, ends the wait)."""
        line = self._read_line(timeout_s)
        try:
            reply = json.loads(line)
        except (UnicodeDecodeError, ValueError):
            raise self._fault("garbage", f"not a JSON line: {line[:200]!r}") from None
        if not isinstance(reply, dict):
            raise self._fault("garbage", f"not a JSON object: {line[:200]!r}")
        kind = reply.get("type")
        if kind not in MESSAGE_TYPES:
            raise self._fault("garbage", f"'type' must be one of {', '.join(MESSAGE_TYPES)}: {line[:200]!r}")
        seq = reply.get("seq")
        numbered = isinstance(seq, int) and not isinstance(seq, bool)
        answered = self.seq if "ready" in wanted else self.seq - 1  # the steps already answered
        if kind == "reply" and isinstance(seq, int) and numbered and 1 <= seq <= answered:  # answered twice
            raise self._fault("wrong-step", f"an extra reply to step {seq} (one step, two replies): {line[:200]!r}",
                              step=seq)
        if kind == "error":
            text = reply.get("message")
            raise self._fault("error", f"{context}: {text if isinstance(text, str) else line[:200]!r}")
        if kind == "ready" and "reply" in wanted and self._reset_sent:  # the reset sent ahead was answered first
            raise self._fault("wrong-step", f"no reply to step {self.seq}: the reset's 'ready' came first")
        if kind not in wanted:
            expected = " or ".join(repr(w) for w in wanted)
            raise self._fault("garbage", f"'type' must be {expected} here, got {kind!r}: {line[:200]!r}")
        if kind == "reply" and not numbered:
            raise self._fault("garbage", f"'seq' must be the step's number, got {seq!r}")
        if kind == "reply" and seq != self.seq:
            error = self._fault("wrong-step", f"expected seq {self.seq}, got {seq!r}")
            if isinstance(seq, int) and seq > self.seq:  # a later step's reply: the step was skipped, as that one shows
                error.steps = seq
            raise error
        return reply

    def _read_line(self, timeout_s: float) -> bytes:
        """The next line, within `timeout_s` and the caller's deadline; past the deadline not even a line read
        already is taken (a pipelining port's replies pile up ahead: the budget is a hard limit on them too)."""
        stdout = self.process.stdout
        assert stdout is not None
        now = time.monotonic()
        deadline = now + timeout_s
        cut = self.deadline is not None and self.deadline < deadline
        if cut:
            deadline = self.deadline  # type: ignore[assignment]
            if deadline <= now:
                self.healthy = False
                raise OutOfTime(f"the deadline passed before step {self.seq}'s reply was read")
        while (newline := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > self.max_reply_bytes:
                raise self._fault("flood", f"more than {self.max_reply_bytes} bytes without a newline")
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                if cut:
                    self.healthy = False
                    raise OutOfTime(f"the deadline passed while step {self.seq} waited for its reply")
                raise self._fault("hang", f"no reply within {timeout_s:g}s")
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                raise self._crash("the port closed its output")
            self._buffer += chunk
        if newline > self.max_reply_bytes:
            raise self._fault("flood", f"a reply of {newline} bytes (limit {self.max_reply_bytes})")
        line = bytes(self._buffer[:newline])
        del self._buffer[: newline + 1]
        return line

    def _crash(self, what: str) -> PortError:
        try:
            code: int | None = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        self._stderr_thread.join(timeout=1.0)
        status = "still running" if code is None else f"exit code {code}"
        tail = self.stderr_tail()
        return self._fault("crash", f"{what} ({status})" + (f"; stderr: {tail}" if tail else ""))
