"""Simulate Key_Shared event logs: the reference dispatcher of each subscription under a random workload.

Every subscription runs `reference_impl.keyshared.KeySharedDispatcher` (pip379) under its own seeded
workload: consumers joining and leaving with colliding names (so hash ranges move while messages of
them are unacked), hot and cold keys, scarce permits, acks, negative acks, single reads and reads
until quiescent. The workload only takes steps the model enables (it acks and nacks only what the
consumer holds), so any subscription can be replayed through the model.

Faults, injected into exactly the chosen subscriptions: `classic` and `pip282` run that historical
variant there, re-seeded until its bug shows in the client record (KS-I1 or KS-I4); `second_consumer`
is a log-level fault: one extra dispatch of a message that a consumer holds to a second connected
consumer, which no variant of the model makes.

Speed: the reference makes about 30,000 events/s per core, so logs above 200,000 events are made in
one worker process per core (spawned, chunks of 250 subscriptions, merged in order: the bytes do not
depend on the number of workers). Nothing is replicated: every subscription is its own run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from properties.engines.chunks import in_chunks
from properties.keyshared.eventlog.records import (
    ACK,
    ADD,
    ARROW_SCHEMA,
    DISPATCH,
    FLOW,
    LOG,
    MAX_CONSUMERS,
    NAMES,
    POINTS,
    PUBLISH,
    RANGE_MAX,
    READ,
    REDELIVER,
    REDELIVER_ALL,
    REMOVE,
    RUN,
    Record,
    client_verdict,
)
from reference_impl.keyshared import LEDGER_ID, Consumer, KeySharedDispatcher

VARIANT_FAULTS = ("classic", "pip282")
LOG_FAULTS = ("second_consumer",)
FAULTS = VARIANT_FAULTS + LOG_FAULTS
KEY_POOL = tuple(f"key-{i}" for i in range(24))
ADD_PERMITS = (0, 1, 2, 4, 8)
FLOWS = (1, 2, 4, 8)
_FAULT_ATTEMPTS = 2000
_POOL_THRESHOLD = 200_000  # events; below this, one process beats starting workers
_CHUNK = 250  # subscriptions per worker task and per Parquet row group

class _Workload:
    """One subscription on the reference dispatcher; `records` is its log so far."""

    def __init__(self, variant: str, subscription: int, rng: random.Random) -> None:
        self.d = KeySharedDispatcher(variant, replica_points=POINTS, hash_range_max=RANGE_MAX)
        self.rng = rng
        self.subscription = subscription
        self.keys = rng.sample(KEY_POOL, rng.randint(2, 8))
        self.weights = [rng.random() + 0.1 for _ in self.keys]  # hot and cold keys
        self.consumers: dict[int, Consumer] = {}
        self.held: list[tuple[int, int]] = []  # (consumer, entry id): a list, so a uniform choice is O(1)
        self.where: dict[tuple[int, int], int] = {}
        self.next_id = 1
        self.seen = 0
        self.records: list[Record] = []

    def log(self, event: str, consumer: int | None = None, position: int | None = None, key: str | None = None,
            name: str | None = None, permits: int | None = None) -> None:
        h = None if position is None else self.d.hash_of((LEDGER_ID, position))
        self.records.append((self.subscription, len(self.records), event, consumer, position, h, key, name, permits))

    def _hold(self, item: tuple[int, int]) -> None:
        self.where[item] = len(self.held)
        self.held.append(item)

    def _release(self, item: tuple[int, int]) -> None:
        index = self.where.pop(item)
        last = self.held.pop()
        if index < len(self.held):
            self.held[index] = last
            self.where[last] = index

    def publish(self, key: str) -> None:
        self.log(PUBLISH, position=self.d.publish(key)[1], key=key)

    def step(self) -> None:
        """One operation, chosen among those the model enables, then the dispatches it made."""
        rng, d = self.rng, self.d
        kinds, weights = [PUBLISH, READ, RUN], [30.0, 10.0, 8.0]
        if len(self.consumers) < MAX_CONSUMERS:
            kinds.append(ADD)
            weights.append(40.0 if not self.consumers else 4.0)
        if self.consumers:
            kinds += [FLOW, REMOVE]
            weights += [10.0, 3.0]
        if self.held:
            kinds += [ACK, REDELIVER, REDELIVER_ALL]
            weights += [25.0, 3.0, 1.0]
        kind = rng.choices(kinds, weights)[0]
        if kind == ADD:
            cid, self.next_id = self.next_id, self.next_id + 1
            name, permits = rng.choice(NAMES), rng.choice(ADD_PERMITS)
            self.consumers[cid] = Consumer(name, cid, permits)
            self.log(ADD, cid, name=name, permits=permits)
            d.add_consumer(self.consumers[cid])
        elif kind == REMOVE:
            cid = rng.choice(sorted(self.consumers))
            for item in [item for item in self.held if item[0] == cid]:
                self._release(item)
            self.log(REMOVE, cid)
            d.remove_consumer(self.consumers.pop(cid))
        elif kind == PUBLISH:
            self.publish(rng.choices(self.keys, self.weights)[0])
        elif kind == FLOW:
            cid, n = rng.choice(sorted(self.consumers)), rng.choice(FLOWS)
            self.log(FLOW, cid, permits=n)
            d.flow(self.consumers[cid], n)
        elif kind in (ACK, REDELIVER):
            cid, entry = item = rng.choice(self.held)
            self._release(item)
            self.log(kind, cid, entry)
            if kind == ACK:
                d.ack(self.consumers[cid], (LEDGER_ID, entry))
            else:
                d.redeliver_unacknowledged(self.consumers[cid], [(LEDGER_ID, entry)])
        elif kind == REDELIVER_ALL:
            cid = rng.choice(self.held)[0]
            for item in sorted(item for item in self.held if item[0] == cid):
                self._release(item)
                self.log(REDELIVER_ALL, cid, item[1])
            d.redeliver_unacknowledged(self.consumers[cid])
        else:
            self.log(kind)
            if kind == READ:
                d.read_more_entries()
            else:
                d.run_until_quiescent()
        for delivery in d.deliveries[self.seen:]:
            cid, entry = delivery.consumer.consumer_id, delivery.position[1]
            self._hold((cid, entry))
            self.log(DISPATCH, cid, entry)
        self.seen = len(d.deliveries)


def walk(variant: str, subscription: int, length: int, rng: random.Random) -> list[Record]:
    """Exactly `length` records: whole operations (a read is never cut off from its dispatches), then
    publishes, one record each, to fill up."""
    workload = _Workload(variant, subscription, rng)
    while len(workload.records) < length:
        before = len(workload.records)
        workload.step()
        if len(workload.records) > length:
            del workload.records[before:]
            while len(workload.records) < length:
                workload.publish(workload.keys[0])
    return workload.records


def _renumber(records: Sequence[Record]) -> list[Record]:
    return [(r[0], seq, r[2], r[3], r[4], r[5], r[6], r[7], r[8]) for seq, r in enumerate(records)]


def inject_second_consumer(records: Sequence[Record]) -> list[Record] | None:
    """After the first dispatch made while another consumer is connected, dispatch the same message to
    that consumer too; None if the walk has no such moment."""
    connected: list[int | None] = []
    for index, r in enumerate(records):
        if r[2] == ADD:
            connected.append(r[3])
        elif r[2] == REMOVE:
            connected.remove(r[3])
        elif r[2] == DISPATCH:
            others = [c for c in connected if c != r[3]]
            if others:
                extra: Record = (r[0], r[1], DISPATCH, others[0], r[4], r[5], None, None, None)
                return _renumber([*records[: index + 1], extra, *records[index + 1:]])
    return None


def partition_records(subscription: int, length: int, seed: int, fault: str | None) -> list[Record]:
    """The records of one subscription; with `fault`, the first re-seeded walk that shows it."""
    if fault is None:
        return walk("pip379", subscription, length, random.Random(f"keyshared:{seed}:{subscription}"))
    for attempt in range(_FAULT_ATTEMPTS):
        rng = random.Random(f"keyshared:{seed}:{subscription}:{fault}:{attempt}")
        if fault in LOG_FAULTS:
            injected = inject_second_consumer(walk("pip379", subscription, length - 1, rng))
            if injected is not None:
                return injected
        else:
            records = walk(fault, subscription, length, rng)
            if client_verdict(records).step is not None:
                return records
    raise ValueError(f"{fault} did not show in {length} events of a subscription after {_FAULT_ATTEMPTS} walks")


def _chunk(keys: Sequence[int], lengths: Sequence[int], seed: int, fault: str | None,
           faulted: Sequence[int]) -> list[Record]:
    return [r for key, length in zip(keys, lengths, strict=True)
            for r in partition_records(key, length, seed, fault if key in faulted else None)]


def to_table(records: Sequence[Record]) -> pa.Table:
    """Records as an Arrow table with the log's column names and types."""
    return pa.table([pa.array([r[i] for r in records], type=f.type) for i, f in enumerate(ARROW_SCHEMA)],
                    schema=ARROW_SCHEMA)


def to_line(record: Record) -> str:
    """One JSON line; absent fields are left out rather than written as null."""
    return json.dumps({n: v for n, v in zip(LOG.columns, record, strict=True) if v is not None})


def write(out: Path, events: int, partitions: int, seed: int, fault: str | None, faulted: Sequence[int],
          progress: Callable[[str], None] | None = None) -> list[str]:
    """Write a Parquet log (one row group per chunk of subscriptions) and return [], or return the
    JSON lines (for the caller to add malformed ones and write)."""
    parts = in_chunks(_chunk, (seed, fault, faulted), events, partitions, chunk=_CHUNK,
                      pool_threshold=_POOL_THRESHOLD, label="simulate keyshared", unit="subscriptions",
                      progress=progress)
    if out.suffix != ".parquet":
        return [to_line(r) for chunk in parts for r in chunk]
    with pq.ParquetWriter(out, ARROW_SCHEMA) as writer:
        for chunk in parts:
            writer.write_table(to_table(chunk))
    return []
