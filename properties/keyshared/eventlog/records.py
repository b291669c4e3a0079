"""The Key_Shared event log: its records, the model actions they stand for, and the client record they imply.

One subscription is one partition (the independence key): its own dispatcher, consumers, cursor and
ring. A record is one broker event, in the order the broker made it:

- the driving operations, each one model action: `add`, `remove`, `publish`, `flow`, `ack`,
  `redeliver` (one negative ack), `redeliver_all` (one record per position it released, consecutive),
  `read` (one read) and `run` (read until quiescent);
- `dispatch`: one message handed to a consumer, logged right after the operation whose read made it.

Consumer ids are unique per subscription and connection (as Pulsar's are); the model numbers its
consumers by the lowest free id, so `partition` maps one to the other. Everything else (sticky hash,
position, permits) is the broker's own value, so a log written by any broker can be read back.

`client_verdict` is the fast path of the model replay: it derives the harness's client record (what
each consumer holds, what was negatively acked, what is acked at the cursor) from the records and
checks KS-I1 and KS-I4 on it exactly as `models.keyshared` does, plus that every record is one the
model could take (known consumer, held position, consistent hash). Those two invariants are defined
on the client record alone (spec §5), so this is the model's own check, without the dispatcher's
state; whether each dispatch is the one pip379 would make needs the dispatcher's state: the compiled
replay (`replay`) answers where a subscription leaves pip379, the full model (`full_verdict`)
says how.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from models.core import Action, ActionNotEnabled, Json, Param, violated
from models.keyshared import KeySharedModel, sticky_hash
from properties.engines.eventlog import LogSpec
from properties.engines.lockstep import DIVERGENCE, BaseImplementation
from properties.keyshared.dispatcher import HYPOTHESIS_CONFIGS

MECHANISM = "keyshared"
ADD, REMOVE, PUBLISH, FLOW, ACK = "add", "remove", "publish", "flow", "ack"
REDELIVER, REDELIVER_ALL, READ, RUN, DISPATCH = "redeliver", "redeliver_all", "read", "run", "dispatch"
EVENTS = (ADD, REMOVE, PUBLISH, FLOW, ACK, REDELIVER, REDELIVER_ALL, READ, RUN, DISPATCH)
RELEASES = (ACK, REDELIVER, REDELIVER_ALL)
"""Events that end a consumer's hold on one position (besides its own `remove`)."""
REQUIRED: dict[str, tuple[str, ...]] = {
    ADD: ("consumer", "name", "permits"),
    REMOVE: ("consumer",),
    PUBLISH: ("position", "hash", "key"),
    FLOW: ("consumer", "permits"),
    ACK: ("consumer", "position", "hash"),
    REDELIVER: ("consumer", "position", "hash"),
    REDELIVER_ALL: ("consumer", "position", "hash"),
    READ: (),
    RUN: (),
    DISPATCH: ("consumer", "position", "hash"),
}
"""The fields each event must carry (besides subscription, seq and event)."""
RANGE_MAX = 65535
NAMES = ("consumer1", "consumer2", "consumer3")
MAX_CONSUMERS = 3
POINTS = 100  # Pulsar's default replica points per consumer
ACTIONS = (ADD, REMOVE, PUBLISH, FLOW, ACK, REDELIVER, REDELIVER_ALL, READ, RUN)
INVARIANTS = ("KS-I1", "KS-I4")
"""What the client record can break, in the model's declaration order."""

LOG = LogSpec("subscription", "spec", fields=(
    ("seq", "long", False), ("event", "string", False), ("consumer", "long", True), ("position", "long", True),
    ("hash", "long", True), ("key", "string", True), ("name", "string", True), ("permits", "long", True),
), json_text=(), events_per_partition=1000)
"""A broker's event log: flat typed columns (no JSON inside a record), one record per consumer add/remove, publish,
permit grant, read, dispatch, ack and redelivery, keyed by subscription; replayed with the `spec` configuration."""

ARROW_SCHEMA = pa.schema([
    ("subscription", pa.int64()), ("seq", pa.int64()), ("event", pa.string()), ("consumer", pa.int64()),
    ("position", pa.int64()), ("hash", pa.int64()), ("key", pa.string()), ("name", pa.string()),
    ("permits", pa.int64()),
])
"""The log's columns as Arrow (and Parquet) types, in `LOG.columns` order."""
Record = tuple[int, int, str, int | None, int | None, int | None, str | None, str | None, int | None]
"""A row in `LOG.columns` order: subscription, seq, event, consumer, position, hash, key, name, permits."""


def base_config() -> dict[str, Param]:
    """The model configuration every subscription shares: the gate's `spec` one with Pulsar's 100 points."""
    config = dict(HYPOTHESIS_CONFIGS[LOG.config_name])
    config.update({"names": NAMES, "max_consumers": MAX_CONSUMERS, "points": POINTS, "actions": ACTIONS})
    return config


# --- the client record (the fast path) ------------------------------------------------------------


@dataclass(frozen=True)
class ClientVerdict:
    """The first failing action (1-based, as a trace counts steps; None if none), what failed, and where."""

    step: int | None
    failures: tuple[str, ...] = ()
    detail: str = ""
    seq: int | None = None


def client_verdict_columns(
    event: Sequence[str | None], consumer: Sequence[Any], position: Sequence[Any], hashes: Sequence[Any],
    key: Sequence[Any], seq: Sequence[int], lo: int, hi: int,
) -> ClientVerdict:
    """The client-record replay of rows lo..hi of one subscription's columns (sorted by seq).

    It stops at the end of the first action that fails, so the names are those the model reports
    after that action. Columns are plain lists (from Arrow): the hot loop of the pipeline's replay.
    """
    held: dict[int, set[int]] = {}  # consumer -> positions delivered and not since acked or released
    holder: dict[int, list[int]] = {}  # hash -> [consumer, positions of it that consumer holds]
    unacked: dict[int, dict[int, None]] = {}  # hash -> published positions not acked, ascending
    of: list[int] = []  # position -> hash
    nacked: set[int] = set()  # released by a negative ack since their last delivery
    key_hash: dict[str, int] = {}
    step = 0
    failed: dict[str, None] = {}
    detail, at = "", -1
    last_event: str | None = ""
    last_consumer = None

    def fail(name: str, why: str, row: int) -> None:
        nonlocal detail, at
        if not failed:
            detail, at = f"seq {seq[row]}: {why}", seq[row]
        failed[name] = None

    for i in range(lo, hi):
        e, c = event[i], consumer[i]
        if e != DISPATCH and not (e == REDELIVER_ALL and last_event == REDELIVER_ALL and last_consumer == c):
            if failed:
                break
            step += 1
        last_event, last_consumer = e, c
        if e == DISPATCH:
            p, h = position[i], hashes[i]
            mine = held.get(c) if c is not None else None
            if mine is None or p is None or not 0 <= p < len(of) or of[p] != h or p in mine or step == 0:
                fail(DIVERGENCE, f"dispatch of {p} to {c} cannot be the model's (unknown consumer or position, "
                                 f"a hash other than the published one, or held already)", i)
                continue
            owner = holder.get(h)
            if owner is None or owner[1] == 0:
                holder[h] = [c, 1]
            elif owner[0] == c:
                owner[1] += 1
            else:
                fail("KS-I1", f"hash {h} dispatched to consumer {c} while consumer {owner[0]} holds "
                              f"{owner[1]} message(s) of it", i)
            if p not in nacked:
                for q in unacked[h]:
                    if q >= p:
                        break
                    if q not in mine and q not in nacked:
                        fail("KS-I4", f"consumer {c} got {p} of hash {h} before the unacked {q}", i)
                        break
            nacked.discard(p)
            mine.add(p)
        elif e == PUBLISH:
            p, h, k = position[i], hashes[i], key[i]
            expected = key_hash.get(k) if k is not None else None
            if expected is None and k is not None:
                expected = key_hash[k] = sticky_hash(k, RANGE_MAX)
            if p != len(of) or h != expected or h is None:
                fail(DIVERGENCE, f"publish of {p} with hash {h}: expected position {len(of)}, hash {expected}", i)
                continue
            of.append(h)
            unacked.setdefault(h, {})[p] = None
        elif e in RELEASES:
            p = position[i]
            mine = held.get(c) if c is not None else None
            if mine is None or p not in mine or hashes[i] != of[p]:
                fail(DIVERGENCE, f"{e} of {p} by consumer {c}, which does not hold it", i)
                continue
            mine.discard(p)
            h = of[p]
            holder[h][1] -= 1
            if e == ACK:
                del unacked[h][p]
            else:
                nacked.add(p)
        elif e == ADD:
            if c is None or c in held:
                fail(DIVERGENCE, f"add of consumer {c}, which is connected already", i)
                continue
            held[c] = set()
        elif e == REMOVE:
            gone = held.pop(c, None) if c is not None else None
            if gone is None:
                fail(DIVERGENCE, f"remove of consumer {c}, which is not connected", i)
                continue
            for p in gone:
                holder[of[p]][1] -= 1
        elif e == FLOW and c not in held:
            fail(DIVERGENCE, f"flow to consumer {c}, which is not connected", i)
    if not failed:
        return ClientVerdict(None)
    names = tuple(n for n in (*INVARIANTS, DIVERGENCE) if n in failed)
    return ClientVerdict(step, names, detail, at)


def client_verdict(records: Sequence[Record]) -> ClientVerdict:
    """`client_verdict_columns` over one subscription's records."""
    event = [r[2] for r in records]
    return client_verdict_columns(event, [r[3] for r in records], [r[4] for r in records], [r[5] for r in records],
                                  [r[6] for r in records], [r[1] for r in records], 0, len(records))


# --- the log read back as model actions -----------------------------------------------------------


class LogError(ValueError):
    """A log that cannot be read as model actions, naming the record."""


@dataclass(frozen=True)
class Partition:
    """One subscription's log as the model sees it: actions, the deliveries logged after each, a configuration.

    `seqs[i]` is the seq of the record that starts action i + 1 (the first of a `redeliver_all` run).
    """

    actions: tuple[Action, ...]
    delivered: tuple[tuple[tuple[int, int], ...], ...]
    seqs: tuple[int, ...]
    config: dict[str, Param]


def _need(value: int | None, what: str, seq: int) -> int:
    if value is None:
        raise LogError(f"seq {seq}: missing {what}")
    return value


def partition(records: Sequence[Record]) -> Partition:
    """The model's view of one subscription's records (sorted by seq).

    The configuration is the shared one with the bounds this log needs: its consumer names and keys,
    the permits its adds and flows use, and as many consumers, messages and permits as it reaches.
    """
    acts: list[Action] = []
    delivered: list[list[tuple[int, int]]] = []
    seqs: list[int] = []
    model_id: dict[int, int] = {}  # log consumer id -> the model's (lowest free) id
    permits: dict[int, int] = {}
    keys: set[str] = set()
    names: set[str] = set()
    add_permits: set[int] = set()
    flows: set[int] = set()
    max_permits = messages = connected = 0
    last: Record | None = None
    for record in records:
        _, seq, event, consumer, position, _, key, name, n = record
        same_run = event == REDELIVER_ALL and last is not None and last[2] == REDELIVER_ALL and last[3] == consumer
        last = record
        if same_run:
            continue
        if event not in (ADD, PUBLISH, READ, RUN) and _need(consumer, "consumer", seq) not in model_id:
            raise LogError(f"seq {seq}: {event} for consumer {consumer}, which is not connected")
        if event == DISPATCH:
            if not acts:
                raise LogError(f"seq {seq}: a dispatch before any operation")
            delivered[-1].append((model_id[_need(consumer, "consumer", seq)], _need(position, "position", seq)))
            permits[_need(consumer, "consumer", seq)] -= 1
            continue
        params: dict[str, Param] = {}
        if event == ADD:
            cid = _need(consumer, "consumer", seq)
            if name is None or cid in model_id:
                raise LogError(f"seq {seq}: add needs a new consumer and a name")
            model_id[cid] = next(i for i in range(1, len(model_id) + 2) if i not in model_id.values())
            connected = max(connected, len(model_id))
            names.add(name)
            permits[cid] = _need(n, "permits", seq)
            add_permits.add(permits[cid])
            params = {"consumer": model_id[cid], "name": name, "permits": permits[cid]}
        elif event == PUBLISH:
            if key is None or position != messages:
                raise LogError(f"seq {seq}: publish of position {position} (key {key}), expected {messages}")
            keys.add(key)
            messages += 1
            params = {"key": key}
        elif event in (REMOVE, FLOW, ACK, REDELIVER, REDELIVER_ALL):
            cid = _need(consumer, "consumer", seq)
            params = {"consumer": model_id[cid]}
            if event == REMOVE:
                del model_id[cid]
            elif event == FLOW:
                flows.add(_need(n, "permits", seq))
                permits[cid] += _need(n, "permits", seq)
                max_permits = max(max_permits, permits[cid])
                params["n"] = _need(n, "permits", seq)
            elif event in (ACK, REDELIVER):
                params["position"] = _need(position, "position", seq)
        elif event not in (READ, RUN):
            raise LogError(f"seq {seq}: unknown event {event!r}")
        acts.append(Action(event, tuple(sorted(params.items()))))
        delivered.append([])
        seqs.append(seq)
    config = base_config()
    config.update({
        "names": tuple(sorted(names)) or NAMES,
        "max_consumers": max(connected, 1),
        "keys": tuple(sorted(keys)) or ("0",),
        "max_messages": messages,
        "add_permits": tuple(sorted(add_permits)) or (0,),
        "flow": tuple(sorted(flows)) or (1,),
        "max_permits": max_permits,
    })
    return Partition(tuple(acts), tuple(tuple(d) for d in delivered), tuple(seqs), config)


def observation(delivered: Sequence[tuple[int, int]]) -> dict[str, Json]:
    """The model's observation of an action whose reads made these deliveries (model consumer ids)."""
    return {"delivered": [[c, p] for c, p in delivered]}


STALL = ("KS-S1",)
"""The model's no-stall invariant asks what a read from the state would do; a log answers that itself (its next
records show whether the broker read again and delivered), so neither replay of a log judges it: a variant that
would stall where the broker went on diverges from the log at the delivery it would not make. The lockstep runs
of model and reference (a saved trace's replay, the conformance engine) judge it."""


@dataclass(frozen=True)
class FullVerdict:
    """The first action where `variant`'s model diverges from the log or breaks an invariant (None if none)."""

    step: int | None
    failures: tuple[str, ...] = ()
    detail: str = ""


def model(config: dict[str, Param], variant: str) -> KeySharedModel:
    return KeySharedModel(config, variant)


def full_verdict(part: Partition, variant: str) -> FullVerdict:
    """Replay the actions through the model of `variant`, comparing each action's deliveries with the log's
    (every invariant but `STALL`'s)."""
    model_ = model(part.config, variant)
    state = model_.initial()
    for index, action in enumerate(part.actions, start=1):
        try:
            state, predicted = model_.step(state, action)
        except ActionNotEnabled as exc:
            return FullVerdict(index, (DIVERGENCE,), f"seq {part.seqs[index - 1]}: not enabled: {exc.reason}")
        failures = [name for name in violated(model_, state) if name not in STALL]
        logged = observation(part.delivered[index - 1])
        detail = ""
        if predicted != logged:
            failures.append(DIVERGENCE)
            detail = (f"seq {part.seqs[index - 1]}: {action}: the model delivers {predicted}, the log {logged} "
                      "(consumers as the model numbers them)")
        if failures:
            return FullVerdict(index, tuple(failures), detail or f"seq {part.seqs[index - 1]}: {action}")
    return FullVerdict(None)


class LoggedKeyShared(BaseImplementation):
    """The log as the implementation `properties.engines.replay.record` runs next to the model: each action returns
    the logged deliveries, and the state is the model's except the client record (`held`), which the
    log determines. So a trace of a log no variant explains records where the log's client record
    leaves the model's, and `brokerspec replay` reports that divergence at that step."""

    def __init__(self, model_: KeySharedModel, part: Partition) -> None:
        self.model = model_
        self.part = part
        self.state = model_.initial()
        self.index = 0
        self.held: dict[int, set[int]] = {}

    def apply(self, action: Action) -> dict[str, Json]:
        self.state, _ = self.model.step(self.state, action)
        consumer = action.get("consumer")
        if action.name == ADD and isinstance(consumer, int):
            self.held[consumer] = set()
        elif action.name == REMOVE and isinstance(consumer, int):
            del self.held[consumer]
        elif action.name == REDELIVER_ALL and isinstance(consumer, int):
            self.held[consumer].clear()
        elif action.name in (ACK, REDELIVER) and isinstance(consumer, int):
            self.held[consumer].discard(int(str(action["position"])))
        delivered = self.part.delivered[self.index]
        self.index += 1
        for c, p in delivered:
            self.held[c].add(p)
        return observation(delivered)

    def vars(self) -> dict[str, Json]:
        projected = self.model.vars(self.state)
        held: list[Json] = []
        for c in self.state.consumers:
            positions: list[Json] = [*sorted(self.held[c.id])]
            held.append([c.id, positions])
        projected["held"] = held
        return projected

    def violations(self) -> list[str]:
        holders: dict[int, int] = {}
        for c, positions in self.held.items():
            for p in positions:
                if holders.setdefault(self.model.hash_of(self.state, p), c) != c:
                    return ["KS-I1"]
        return []
