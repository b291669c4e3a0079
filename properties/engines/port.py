"""Drive a port (a program in any language) over the JSON-lines protocol, as a lockstep `Implementation`.

A port is untrusted: it may crash, hang, print garbage, answer the wrong step or flood its output.
Every such misbehaviour becomes one `PortError` naming the step, so the harness reports it instead
of hanging or crashing; and the child is always killed and reaped (`close`, or the context
manager), so no process survives a run.

Protocol (version 1), one JSON object per line, UTF-8:

* harness -> port ``{"type": "hello", "protocol": 1, "mechanism", "variant", "config"}`` (the complete
  configuration: every key the model reads, defaults included),
  port -> harness ``{"type": "ready", "vars"}`` (its initial state);
* harness -> port ``{"type": "step", "seq": n, "action", "params"}`` (n = 1, 2, ...),
  port -> harness ``{"type": "reply", "seq": n, "observation", "vars"[, "violations"]}`` or
  ``{"type": "error", "seq": n, "message"}``.
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
from properties.engines.mechanism import Mechanism
from properties.engines.protocol import hello_config

PROTOCOL_VERSION = 1
DEFAULT_STEP_TIMEOUT_S = 5.0
DEFAULT_HELLO_TIMEOUT_S = 20.0
"""Starting a port may mean starting a JVM: the first reply gets more time than a step."""
MAX_REPLY_BYTES = 1 << 20
STDERR_TAIL_BYTES = 4096

KINDS = ("crash", "hang", "garbage", "wrong-step", "flood", "error")
MESSAGE_TYPES = ("ready", "reply", "error")
"""The message types a port may send."""


class PortError(Exception):
    """A port misbehaved at `step` (0 = the hello); `kind` is one of `KINDS`."""

    def __init__(self, kind: str, step: int, message: str) -> None:
        super().__init__(f"port {kind} at step {step}: {message}")
        self.kind = kind
        self.step = step
        self.message = message


def _jsonable(value: Param | Json) -> Any:
    """Tuples (the models' arrays) as lists, so `json` writes arrays."""
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


class PortProcess:
    """One running port for one run; `apply`, `vars` and `violations` as lockstep expects."""

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
    ) -> None:
        if not argv:
            raise ValueError("a port needs a command (argv list)")
        self.step_timeout_s = step_timeout_s
        self.max_reply_bytes = max_reply_bytes
        self.seq = 0
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
            raise PortError("crash", 0, f"cannot start {argv[0]!r}: {exc}") from None
        assert self.process.stdout is not None and self.process.stderr is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        try:
            complete = hello_config(mechanism, variant, config)  # defaults included: the port need guess none
            hello = {"type": "hello", "protocol": PROTOCOL_VERSION, "mechanism": mechanism.name, "variant": variant,
                     "config": {k: _jsonable(v) for k, v in complete.items()}}
            reply = self._exchange(hello, hello_timeout_s)
            if reply.get("type") == "error":
                raise PortError("error", 0, f"hello refused: {reply.get('message')!r}")
            if reply.get("type") != "ready":
                raise self._unexpected(reply, "ready")
            initial = reply.get("vars")
            if not isinstance(initial, dict):
                raise PortError("garbage", 0, f"'ready' needs the initial state as an object 'vars': {reply!r}"[:500])
            self._vars = initial
        except BaseException:
            self.close()
            raise

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.process.pid

    def __enter__(self) -> PortProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Kill the port's process group and reap the child; idempotent."""
        if self._closed:
            return
        self._closed = True
        process = self.process
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone, with its group
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):  # a broken pipe on flush: the port is dead anyway
                if stream is not None:
                    stream.close()
        self._stderr_thread.join(timeout=1.0)
        if process.stderr is not None:
            process.stderr.close()

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
    def apply(self, action: Action) -> Observation:
        self.seq += 1
        params = {k: _jsonable(v) for k, v in action.params}
        message = {"type": "step", "seq": self.seq, "action": action.name, "params": params}
        reply = self._exchange(message, self.step_timeout_s)
        kind = reply.get("type")
        if kind == "error":
            text = reply.get("message")
            raise PortError("error", self.seq, f"{action}: {text if isinstance(text, str) else reply!r}")
        if kind != "reply":
            raise self._unexpected(reply, "reply")
        observation, port_vars = reply.get("observation"), reply.get("vars")
        violations = reply.get("violations", [])
        if not isinstance(port_vars, dict) or not (observation is None or isinstance(observation, dict)):
            raise PortError("garbage", self.seq, f"a reply needs an object 'vars' and 'observation': {reply!r}"[:500])
        if not isinstance(violations, list) or not all(isinstance(v, str) for v in violations):
            raise PortError("garbage", self.seq, f"'violations' must be a list of strings: {violations!r}"[:500])
        self._vars = port_vars
        self._violations = violations
        return observation

    def vars(self) -> dict[str, Json]:
        return self._vars

    def violations(self) -> list[str]:
        return list(self._violations)

    # -- wire ----------------------------------------------------------------------------------------
    def _unexpected(self, reply: dict[str, Any], wanted: str) -> PortError:
        return PortError("garbage", self.seq, f"expected a {wanted!r} message, got {reply!r}"[:500])

    def _exchange(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one line, read one line; every way that can go wrong is a `PortError`."""
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crash("the port closed its input") from None
        line = self._read_line(timeout_s)
        try:
            reply = json.loads(line)
        except (UnicodeDecodeError, ValueError):
            raise PortError("garbage", self.seq, f"not a JSON line: {line[:200]!r}") from None
        if not isinstance(reply, dict):
            raise PortError("garbage", self.seq, f"not a JSON object: {line[:200]!r}")
        if reply.get("type") not in MESSAGE_TYPES:
            raise PortError("garbage", self.seq, f"not a message of this protocol: {line[:200]!r}")
        seq = reply.get("seq")
        if self.seq and (not isinstance(seq, int) or isinstance(seq, bool)):
            raise PortError("garbage", self.seq, f"'seq' must be the step's number, got {seq!r}")
        if self.seq and seq != self.seq:
            raise PortError("wrong-step", self.seq, f"expected seq {self.seq}, got {seq!r}")
        return reply

    def _read_line(self, timeout_s: float) -> bytes:
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while (newline := self._buffer.find(b"\n")) < 0:
                if len(self._buffer) > self.max_reply_bytes:
                    raise PortError("flood", self.seq, f"more than {self.max_reply_bytes} bytes without a newline")
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise PortError("hang", self.seq, f"no reply within {timeout_s:g}s")
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    raise self._crash("the port closed its output")
                self._buffer += chunk
        if newline > self.max_reply_bytes:
            raise PortError("flood", self.seq, f"a reply of {newline} bytes (limit {self.max_reply_bytes})")
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
        return PortError("crash", self.seq, f"{what} ({status})" + (f"; stderr: {tail}" if tail else ""))
