"""Forked workers that leave Ctrl-C to the process that started them.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group, so every forked worker would
raise `KeyboardInterrupt` wherever it is: each prints a traceback, and one may block writing a result
to a pipe that its parent no longer reads. Instead the workers ignore SIGINT, and the parent, which
alone turns Ctrl-C into `interrupted` and exit 130, stops them (`stop`) on its way out. SIGINT is
blocked around the fork, so no worker can receive it before it ignores it; the parent gets a Ctrl-C
that came in between as soon as the fork returns.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import Any


def ignoring_interrupts(target: Callable[..., Any]) -> Callable[..., Any]:
    """`target` run with SIGINT ignored (and unblocked again, see `start`): a worker's body."""

    def run(*args: Any) -> Any:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        return target(*args)

    return run


def start(process: BaseProcess) -> None:
    """Fork `process` (whose target is wrapped by `ignoring_interrupts`) with SIGINT blocked meanwhile."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def stop(processes: Sequence[BaseProcess]) -> None:
    """Kill the started workers that still run and reap them all: none is left once the parent returns."""
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join()
