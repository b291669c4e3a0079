"""The delayed-delivery tracker's event log: its layout, DD-I1's window check, and the model's compiled transition.

The log is one record per model action, keyed by tracker, written with the `default` Hypothesis configuration.
DD-I1 (non-strict: no message offered more than one tick before the deliver_at it was added with) is a window
query over the columns ingest extracts (`early_offers`), and the same rule in one process for the bench
(`python_early_offers`).

`models.delayed.DelayedModel` freezes a `DelayedState` after every step and projects it to a dict of
variables that the lockstep compares with the logged ones after parsing them: about 40 µs an event.
`DelayedReplay` keeps one tracker's state in place (no ghost it does not need: the liveness bitmask
`owed` never changes a step, a variable or an invariant), steps it exactly as the model's `step`
does (§4 line by line, same enabling rules, same transition properties), and renders the variables
and the observation as the canonical JSON text a log holds (`json.dumps(..., sort_keys=True)`), so a
record is checked by comparing strings; the parts of the text a step did not change are reused. A
record written some other way (other spacing or key order) is parsed and compared as values, as the
lockstep does, so the verdict never depends on the formatting, only the speed.

It answers one question: the first step at which a partition leaves the model (an action the model
does not enable, a variable or an observation that differs, an invariant broken), or None. The
pipeline replays a partition that fails through the full model for the verdict itself (names,
detail, the variant that explains it); `tests/pipeline/test_fast_replay.py` holds the two to the
same first failing step on simulated logs, faulty ones included.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from models.core import Model
from models.delayed import HYPOTHESIS_CONFIG, NO_DELAY, DelayedModel
from properties.engines.eventlog import EventLog, Extract, LogSpec
from properties.engines.records import runs, same_json, strings, unpredicted

_ARGS = {"add": ("ledger", "entry", "deliver_at"), "advance": ("now",), "get_scheduled": ("limit",)}
_NAMES = frozenset(("add", "advance", "get_scheduled", "fire", "run", "should_pause", "clear"))
_NOT_ENABLED = (None, 0, 0)
_CACHE_LIMIT = 1 << 16


class _Leaves(Exception):
    """The record is not one the model would log: the partition leaves the model at this step."""


class DelayedReplay:
    """One tracker at a time, stepped in place; built once per model (configuration and variant)."""

    __slots__ = (
        "bc_offset", "bits", "broken", "buckets_text", "c_offset", "choices", "chunk", "count", "deliver_at",
        "deliver_text", "delivered", "dirty", "fixed", "high", "highest", "horizon", "index", "last_tick_run",
        "ledger", "limits", "lookahead", "m", "memory", "now", "offered", "parsed", "pending", "position_text",
        "positions", "precision", "round_size", "round_up", "stale", "tick", "timer", "tracked",
    )

    def __init__(self, model: DelayedModel) -> None:
        self.m = model
        self.tick, self.bits, self.precision = model.tick, model.bits, model.precision
        self.c_offset, self.bc_offset, self.round_up = model.c_offset, model.bc_offset, model.round_up_keys
        self.horizon, self.limits, self.round_size = model.horizon, model.limits, model.round_size
        self.lookahead = model.lookahead
        self.positions, self.index = model.positions, model.index
        self.position_text = [f"{ledger}, {entry}" for ledger, entry in model.positions]
        self.ledger = [ledger for ledger, _ in model.positions]
        self.chunk = [entry >> 16 for _, entry in model.positions]  # a 16-bit container of the bitmap
        self.high = [entry >> 32 for _, entry in model.positions]  # a high half of the 64-bit bitmap
        self.choices: dict[int, frozenset[int]] = {}
        self.parsed: dict[tuple[str, str], tuple[int | None, int, int]] = {}
        self.offered: list[int] = []
        self.delivered: list[int] = []
        self.broken: set[str] = set()
        self.reset()

    def reset(self) -> None:
        """The model's initial state."""
        self.now = 0
        self.tracked: list[tuple[int, int]] = []
        self.count = 0
        self.highest = 0
        self.fixed = True
        self.timer: tuple[int, int] | None = None
        self.last_tick_run = 0
        self.deliver_at: list[int | None] = [None] * len(self.positions)
        self.pending = 0
        self.stale = False
        self.dirty = False
        self.buckets_text, self.memory, self.deliver_text = "[]", 0, "[]"

    # --- the partition -----------------------------------------------------------------------------

    def first_failure(self, action: Sequence[str], params: Sequence[str], observation: Sequence[str | None],
                      vars_: Sequence[str], lo: int, hi: int) -> int | None:
        """The first step (1-based) of rows lo..hi (one tracker, in seq order) that leaves the model, or None.

        After `advance` (only the clock moved) the invariants are not evaluated again: they held before,
        none of them can break by the clock moving forward, and `broken` is empty after it. DD-I3's
        state part and DD-I5 read only `tracked`, `pending` and `count`, so they are evaluated again
        only after a step that changed one of those.
        """
        self.reset()
        for i in range(lo, hi):
            name = action[i]
            try:
                predicted = self.step(name, params[i])
                if predicted is None:
                    if unpredicted(observation[i]):  # the log says more than the model
                        return i - lo + 1
                elif predicted != observation[i] and not same_json(predicted, observation[i]):
                    return i - lo + 1
                if name != "advance" and (self.broken or not self.timer_ok()
                                          or (self.dirty and not self.tracked_consistent())):
                    return i - lo + 1
                text = self.vars_text()
                if text != vars_[i] and not same_json(text, vars_[i]):
                    return i - lo + 1
            except Exception:  # _Leaves, or anything in the record the model would not take
                return i - lo + 1
        return None

    # --- one step, as DelayedModel.step ------------------------------------------------------------

    def parse(self, name: str, params: str) -> tuple[int | None, int, int]:
        """(position or the action's int argument, deliver_at, handle is foreign), or `_NOT_ENABLED`."""
        found = self.parsed.get((name, params))
        if found is not None:
            return found
        values = json.loads(params)
        args: list[int] = []
        for arg in _ARGS.get(name, ()):
            value = values.get(arg)
            if isinstance(value, bool) or not isinstance(value, int):
                return _NOT_ENABLED
            args.append(value)
        if name == "add":
            pos = self.index.get((args[0], args[1]))
            found = _NOT_ENABLED if pos is None else (pos, args[2], 0)
        elif name == "run":
            handle = values.get("handle")
            found = (0, 0, int(handle == "foreign")) if handle in ("foreign", "cancelled") else _NOT_ENABLED
        elif name in _NAMES:
            found = (args[0] if args else 0, 0, 0)
        else:
            found = _NOT_ENABLED
        if len(self.parsed) >= _CACHE_LIMIT:
            self.parsed.clear()
        self.parsed[name, params] = found
        return found

    def step(self, name: str, params: str) -> str | None:
        """Take the action; its observation's canonical text (None where the model predicts none)."""
        a, b, foreign = self.parse(name, params)
        if a is None:
            raise _Leaves
        self.broken.clear()
        self.dirty = False
        if name == "advance":
            if not self.now < a <= self.horizon or a not in self.advance_targets():
                raise _Leaves
            self.now = a
            return None
        if name == "run" and not foreign:  # a cancelled handle: run() returns at once
            self.offered.clear()
            self.delivered.clear()
            return '{"delivered": [], "offered": []}'
        if name == "should_pause" and not (self.lookahead and self.fixed and self.count >= self.lookahead):
            return '{"pause": false}'
        self.offered.clear()
        self.delivered.clear()
        if name == "add":
            known = self.deliver_at[a]
            if b != known and (known is not None or b not in self.deliver_at_choices()):
                raise _Leaves
            if known is None:
                self.deliver_at[a] = b
                self.deliver_text = "[" + ", ".join(f"[{self.position_text[p]}, {d}]"
                                                    for p, d in enumerate(self.deliver_at) if d is not None) + "]"
            held = self.add_message(a, b)
            if not held:
                self.deliver(a)
            return '{"delivered": false}' if held else '{"delivered": true}'
        if name == "get_scheduled":
            if a not in self.limits:
                raise _Leaves
            self.dispatch_round(a)
            return self.round_text()
        if name == "fire":
            if self.timer is None or self.now < self.timer[1]:
                raise _Leaves
            self.last_tick_run = self.now
            self.timer = None
            self.stale = False
            self.dispatch_round(self.round_size)
            return self.round_text()
        if name == "run":  # a foreign handle: throttle from now, then one round
            self.last_tick_run = self.now
            self.dispatch_round(self.round_size)
            return self.round_text()
        if name == "should_pause":
            return '{"pause": true}' if not self.available() else '{"pause": false}'
        self.stale = self.timer is not None  # clear
        if self.tracked:
            self.tracked = []
            self.tracked_changed()
        if self.count or self.pending:
            self.count, self.pending, self.dirty = 0, 0, True
        return None

    def bucket_key(self, d: int) -> int:
        if self.round_up:
            step = 1 << self.bits
            return (d + step - 1 if d + step - 1 <= 2**63 - 1 else 2**63 - 1) & -step
        return d & -(1 << self.bits)

    def deliver_at_choices(self) -> frozenset[int]:
        """`DelayedModel._deliver_at_choices(now)` as a set."""
        now = self.now
        found = self.choices.get(now)
        if found is None:
            cutoff = now + self.c_offset
            base = cutoff & -(1 << self.bits)
            edges = {NO_DELAY, cutoff, cutoff + 1, now + self.tick - 1, now + self.tick, now + self.tick + 1,
                     *self.m.extra_deliver_at}
            for k in range(3):
                edge = base + k * self.precision
                edges.update((edge - 1, edge, edge + 1))
            found = frozenset(d for d in edges if NO_DELAY <= d <= self.m.max_deliver_at)
            if len(self.choices) >= _CACHE_LIMIT:
                self.choices.clear()
            self.choices[now] = found
        return found

    def advance_targets(self) -> set[int]:
        """The clock targets `DelayedModel._advance_targets` offers (before the window filter)."""
        now = self.now
        edge = (now & -(1 << self.bits)) + self.precision
        targets = {now + 1, edge - 1, edge, edge + 1, *self.m.extra_now}
        if self.tracked:
            head = self.tracked[0][0]
            targets.update((head, head - self.bc_offset))
        if self.timer is not None:
            targets.add(self.timer[1])
        for _, pos in self.tracked:
            d = self.deliver_at[pos]
            if d is not None:
                targets.add(d - self.c_offset)
        return targets

    def early(self, pos: int) -> bool:
        d = self.deliver_at[pos]
        return d is not None and d > self.now + self.c_offset

    def add_message(self, pos: int, d: int) -> bool:
        """§4.1: True = held back, False = deliver now."""
        if d < 0 or d <= self.now + self.c_offset:
            self.fixed = False
            return False
        entry = (self.bucket_key(d), pos)
        at = bisect.bisect_left(self.tracked, entry)
        if at == len(self.tracked) or self.tracked[at] != entry:
            self.tracked.insert(at, entry)
            self.count += 1
            self.tracked_changed()
        if not self.pending >> pos & 1:
            self.pending |= 1 << pos
            self.dirty = True
        self.update_timer()
        if d < self.highest - self.tick:
            self.fixed = False
        if d > self.highest:
            self.highest = d
        return True

    def update_timer(self) -> None:
        self.stale = False
        if self.count == 0:
            self.timer = None
            return
        head = self.tracked[0][0]
        if self.timer is not None and self.timer[0] == head:
            return
        self.timer = None
        delay = head - self.now
        if delay <= 0:
            return
        delay = max(delay, self.last_tick_run + self.tick - self.now)
        self.timer = (head, self.now + delay)

    def available(self) -> bool:
        ok = bool(self.tracked) and self.tracked[0][0] <= self.now + self.bc_offset
        if not ok:
            self.update_timer()
        return ok

    def get_scheduled(self, n: int) -> list[int]:
        cut = self.now + self.bc_offset
        tracked = self.tracked
        taken = 0
        while taken < n and taken < len(tracked) and tracked[taken][0] <= cut:
            taken += 1
        drained = sorted(pos for _, pos in tracked[:taken])
        if taken:
            del tracked[:taken]
            self.tracked_changed()
            self.count -= taken
            for pos in drained:
                self.pending &= ~(1 << pos)
        if not tracked:
            self.highest = 0
            self.fixed = True
        self.update_timer()
        return drained

    def dispatch_round(self, limit: int) -> None:
        if not self.available():
            return
        before = self.tracked[:]
        drained = self.get_scheduled(limit)
        for pos in drained:
            self.offered.append(pos)
            if self.early(pos):
                self.broken.add("DD-I1")
            d = self.deliver_at[pos]
            assert d is not None
            if self.add_message(pos, d):
                self.broken.add("DD-I9")
            else:
                self.deliver(pos)
        cut = self.now + self.bc_offset
        offered = [t for t in before if t[1] in drained]
        left = [t for t in before if t[1] not in drained]
        due_left = [t for t in left if t[0] <= cut]
        if offered and due_left and min(due_left) < max(offered):
            self.broken.add("DD-I4")
        if len(drained) < limit:
            if due_left:
                self.broken.add("DD-I3")
            floor = self.now + self.c_offset - self.precision + 2
            if any(d is not None and d < floor for d in (self.deliver_at[pos] for _, pos in left)):
                self.broken.add("DD-I10")

    def deliver(self, pos: int) -> None:
        if self.early(pos):
            self.broken.add("DD-I2")
        self.delivered.append(pos)

    # --- invariants, variables, observations ------------------------------------------------------

    def tracked_consistent(self) -> bool:
        """DD-I3's state part (tracked iff pending, under the key of its D) and DD-I5 (count)."""
        mask = 0
        for key, pos in self.tracked:
            d = self.deliver_at[pos]
            if d is None or key != self.bucket_key(d):
                return False
            mask |= 1 << pos
        return mask == self.pending and self.count == len(self.tracked)

    def timer_ok(self) -> bool:
        """DD-I6: a handle for the head key unless the head is due; none when empty, except after clear."""
        if not self.tracked:
            return self.timer is None or self.stale
        head = self.tracked[0][0]
        return head <= self.now or (self.timer is not None and self.timer[0] == head and self.timer[1] >= head)

    def tracked_changed(self) -> None:
        """Re-render the buckets and their memory (the variables that follow `tracked`): per bucket key and
        ledger one bitmap, whose size is `models.delayed.bitmap_bytes` of its entries, summed here in one
        pass over `tracked` (sorted by key, ledger, entry, so a bitmap's containers are consecutive)."""
        self.dirty = True
        text = self.position_text
        self.buckets_text = "[" + ", ".join(f"[{key}, {text[pos]}]" for key, pos in self.tracked) + "]"
        memory = 0
        bitmap: tuple[int, int] | None = None
        container = high = -1
        count = 0
        for key, pos in self.tracked:
            if (key, self.ledger[pos]) != bitmap:  # a new bitmap: its header, the last one's last container
                memory += 8 + (8 + min(2 * count, 8192) if count else 0)
                bitmap, container, high, count = (key, self.ledger[pos]), -1, -1, 0
            if self.chunk[pos] != container:
                memory += 8 + min(2 * count, 8192) if count else 0
                container, count = self.chunk[pos], 0
            if self.high[pos] != high:
                memory += 12
                high = self.high[pos]
            count += 1
        self.memory = memory + (8 + min(2 * count, 8192) if count else 0)

    def vars_text(self) -> str:
        """`DelayedModel.vars` as `json.dumps(..., sort_keys=True)` writes it."""
        timer = "[]" if self.timer is None else f"[{self.timer[0]}, {self.timer[1]}]"
        return (f'{{"buckets": {self.buckets_text}, "count": {self.count}, "deliver_at": {self.deliver_text}, '
                f'"fixed": {"true" if self.fixed else "false"}, "highest": {self.highest}, '
                f'"last_tick_run": {self.last_tick_run}, "memory": {self.memory}, "now": {self.now}, '
                f'"timer": {timer}}}')

    def round_text(self) -> str:
        text = self.position_text
        offered = ", ".join(f"[{text[p]}]" for p in self.offered)
        delivered = ", ".join(f"[{text[p]}]" for p in self.delivered)
        return f'{{"delivered": [{delivered}], "offered": [{offered}]}}'


# --- DD-I1 as a window check ------------------------------------------------------------------------

LOG = LogSpec("tracker", "default", extracted=(
    Extract("add_ledger", "params", "$.ledger", "bigint"),
    Extract("add_entry", "params", "$.entry", "bigint"),
    Extract("add_deliver_at", "params", "$.deliver_at", "bigint"),
    Extract("now", "vars", "$.now", "bigint"),
    Extract("offered", "observation", "$.offered", "array<array<bigint>>"),
))
TICK = int(cast(int, HYPOTHESIS_CONFIG["tick"]))
"""The tick of the configuration the log is written with: DD-I1 allows an offer this early."""


def early_offers(valid: DataFrame) -> DataFrame:
    """DD-I1's offers against adds, from the columns ingest extracted: each add and each offered position is
    a mark on its (tracker, ledger, entry), and one window per position in seq order carries the
    deliver_at of the latest add to every later offer. An add is its mark as it stands (a projection) and
    only the records offering something are exploded (one generator over the adds' records as well, each
    building an array of one struct, made the check slower, most in its first run); the union keeps the
    Spark partitioning, and a position's marks share the tracker, so the window needs no shuffle, only a
    sort within each Spark partition. A value of another type was read as null, so a record whose JSON
    holds something else there is left to the replay (which reports it)."""
    key = LOG.key
    none = F.lit(None).cast("long")
    add = F.col("action") == "add"
    adds = valid.where(add).select(key, "seq", F.col("add_ledger").alias("ledger"), F.col("add_entry").alias("entry"),
                                   F.col("add_deliver_at").alias("due"), none.alias("now"))
    offers = valid.where(~add & (F.size("offered") > 0)).select(key, "seq", "now", F.explode("offered").alias("p"))
    marks = adds.unionByName(offers.select(
        key, "seq", F.try_element_at("p", F.lit(1)).alias("ledger"), F.try_element_at("p", F.lit(2)).alias("entry"),
        none.alias("due"), "now",
    )).where(F.col("ledger").isNotNull() & F.col("entry").isNotNull())
    earlier = Window.partitionBy(key, "ledger", "entry").orderBy("seq").rowsBetween(Window.unboundedPreceding, -1)
    return (
        marks.select(key, "seq", "ledger", "entry", "now", F.last("due", ignorenulls=True).over(earlier).alias("due"))
        .where(F.col("now") < F.col("due") - TICK)
        .select(key, "seq", F.format_string("(%d, %d) offered at %d, due at %d", "ledger", "entry", "now",
                                            "due").alias("detail"))
        .withColumn("check", F.lit("DD-I1"))
    )


def python_early_offers(ordered: pa.Table) -> set[int]:
    """DD-I1 in this process over a log sorted by tracker and seq, one sweep per tracker: the violating keys."""
    keys = np.asarray(ordered.column(LOG.key))
    action, params, observation, vars_ = (strings(ordered.column(c)) for c in ("action", "params", "observation",
                                                                               "vars"))
    bad: set[int] = set()
    for lo, hi in runs(keys):
        due: dict[tuple[int, int], int] = {}
        for i in range(lo, hi):
            if action[i] == "add":
                p = json.loads(params[i])
                due[int(p["ledger"]), int(p["entry"])] = int(p["deliver_at"])
            seen = observation[i]
            if seen is not None and '"offered"' in seen:
                now = int(json.loads(vars_[i])["now"])
                for ledger, entry in json.loads(seen)["offered"]:
                    if now < due.get((ledger, entry), now) - TICK:
                        bad.add(int(keys[lo]))
    return bad


def compiled(model: Model[Any]) -> DelayedReplay:
    return DelayedReplay(cast(DelayedModel, model))


EVENT_LOG = EventLog(LOG, window_checks=early_offers, python_window_checks=python_early_offers, compiled=compiled)
