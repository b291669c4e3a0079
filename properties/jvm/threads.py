"""A client of the lock-level protocol (docs/ports.md, "Lock-level ports"): a port's threads and their next points.

The port (the JVM controller's `brokerspec.jvm.Driver`, or any program that speaks the protocol) answers a
`hello` with every thread's next scheduling point, runs exactly the thread a `run` names to its next point, and
goes back to its initial state on `reset`. `LockLevelPort` starts it directly (argv, never a shell), reads its
lines on a thread of its own so that every wait has a timeout, and turns every misbehaviour into one
`LockLevelError` naming the step.
"""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any

from models.core import Json

VERSION = 1
"""The lock-level protocol version the hello carries (`threads`)."""
STATES = ("enabled", "blocked", "done")


class LockLevelError(Exception):
    """The port failed at `step` (0: the hello or a reset): an error answer, a crash, a hang or garbage."""

    def __init__(self, step: int, message: str) -> None:
        super().__init__(f"lock-level port at step {step}: {message}")
        self.step = step
        self.message = message


@dataclass(frozen=True)
class Point:
    """Where a thread is parked: before `op` on `object`, at `class_name.method`, source line `line`."""

    class_name: str
    method: str
    line: int
    op: str
    object: str | None

    def __str__(self) -> str:
        return f"{self.class_name}.{self.method}:{self.line} {self.op} {self.object}"


@dataclass(frozen=True)
class ThreadReport:
    """One thread between steps: `enabled` (may run), `blocked` (its point waits for a lock) or `done`."""

    name: str
    state: str
    point: Point | None
    holds: tuple[str, ...]
    uncaught: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """Every thread, in the port's order, and the scenario's state (`vars`) between two steps."""

    threads: tuple[ThreadReport, ...]
    vars: dict[str, Json]

    def thread(self, name: str) -> ThreadReport:
        return next(t for t in self.threads if t.name == name)

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.threads if t.state == "enabled")

    @property
    def finished(self) -> bool:
        return all(t.state == "done" for t in self.threads)


def _report(step: int, raw: Any) -> ThreadReport:
    if not isinstance(raw, dict) or raw.get("state") not in STATES or not isinstance(raw.get("name"), str):
        raise LockLevelError(step, f"a thread must be {{name, state (one of {', '.join(STATES)}), point, holds}}: "
                                   f"{raw!r}")
    point = raw.get("point")
    if (point is None) != (raw["state"] == "done"):
        raise LockLevelError(step, f"thread {raw['name']}: a point exactly when it is not done")
    parsed = None if point is None else Point(str(point["class"]), str(point["method"]), int(point["line"]),
                                              str(point["op"]), point.get("object"))
    return ThreadReport(raw["name"], raw["state"], parsed, tuple(raw.get("holds", ())), raw.get("uncaught"))


def snapshot(step: int, message: dict[str, Any]) -> Snapshot:
    """A `ready` or `ran` message as a Snapshot, or a LockLevelError saying what is malformed."""
    threads = message.get("threads")
    if not isinstance(threads, list):
        raise LockLevelError(step, f"{message.get('type')} without a threads array")
    variables = message.get("vars", {})
    if not isinstance(variables, dict):
        raise LockLevelError(step, "vars must be an object")
    return Snapshot(tuple(_report(step, t) for t in threads), variables)


class LockLevelPort:
    """A running lock-level port, greeted with `config`; `snapshot` is its state after the last answer."""

    def __init__(self, argv: list[str], config: dict[str, Json], timeout_s: float = 20.0) -> None:
        self.timeout_s = timeout_s
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (the process's; closed by close)
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                            start_new_session=True)
        except OSError as error:
            self.stderr.close()
            raise LockLevelError(0, f"cannot start {argv[0]}: {error}") from error
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.seq = 0
        self.snapshot = self._ask({"type": "hello", "threads": VERSION, "config": config}, "ready")

    def __enter__(self) -> LockLevelPort:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-4096:].decode("utf-8", "replace")

    def _ask(self, message: dict[str, Json], wanted: str) -> Snapshot:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except OSError as error:
            raise LockLevelError(self.seq, f"the port closed its input ({error}); stderr: {self.stderr_tail()}") \
                from error
        try:
            line = self.lines.get(timeout=self.timeout_s)
        except queue.Empty:
            raise LockLevelError(self.seq, f"no answer within {self.timeout_s} s") from None
        if not line:
            self.process.wait(timeout=5)
            raise LockLevelError(self.seq, f"the port exited ({self.process.returncode}); stderr: "
                                           f"{self.stderr_tail()}")
        try:
            answer = json.loads(line)
        except ValueError:
            raise LockLevelError(self.seq, f"not JSON: {line[:200]!r}") from None
        if not isinstance(answer, dict):
            raise LockLevelError(self.seq, f"not a JSON object: {line[:200]!r}")
        if answer.get("type") == "error":
            raise LockLevelError(self.seq, str(answer.get("message")))
        if answer.get("type") != wanted or (wanted == "ran" and answer.get("seq") != self.seq):
            raise LockLevelError(self.seq, f"expected {wanted} (seq {self.seq}), got {line[:200]!r}")
        return snapshot(self.seq, answer)

    def run(self, thread: str) -> Snapshot:
        """Runs `thread` from its point to its next point (or its end); the new snapshot."""
        self.seq += 1
        self.snapshot = self._ask({"type": "run", "seq": self.seq, "thread": thread}, "ran")
        return self.snapshot

    def reset(self) -> Snapshot:
        """Back to the initial state of the hello's configuration; the next run is seq 1 again."""
        self.seq = 0
        self.snapshot = self._ask({"type": "reset"}, "ready")
        return self.snapshot

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self.stderr.close()
