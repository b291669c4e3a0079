"""A simulated log made a chunk of partitions at a time: in this process for a small log, else in spawned workers.

Each partition is seeded by its key, so the bytes do not depend on how many workers made them; chunks come
back in partition order, one Parquet row group each.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, TypeVar

T = TypeVar("T")


def in_chunks(
    make: Callable[..., list[T]],
    args: Sequence[Any],
    events: int,
    partitions: int,
    *,
    chunk: int,
    pool_threshold: int,
    label: str,
    unit: str,
    progress: Callable[[str], None] | None = None,
) -> Iterator[list[T]]:
    """`make(keys, lengths, *args)` for each chunk of `chunk` partitions in order (events spread evenly), in one
    spawned worker per core once the log has `pool_threshold` events; `label` and `unit` word the progress line."""
    lengths = [events // partitions + (1 if key < events % partitions else 0) for key in range(partitions)]
    tasks = [(range(start, min(start + chunk, partitions)), lengths[start:start + chunk])
             for start in range(0, partitions, chunk)]
    workers = min(os.cpu_count() or 1, len(tasks))

    def report(done: int) -> None:
        if progress is not None and (done % max(1, len(tasks) // 10) == 0 or done == len(tasks)):
            progress(f"{label}: {min(done * chunk, partitions)}/{partitions} {unit}")

    if events < pool_threshold or workers < 2:
        for done, (keys, lens) in enumerate(tasks, start=1):
            yield make(keys, lens, *args)
            report(done)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:  # spawn: no forked JVM threads
        futures = [pool.submit(make, keys, lens, *args) for keys, lens in tasks]
        for done, future in enumerate(futures, start=1):
            yield future.result()
            report(done)
