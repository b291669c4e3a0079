"""Delayed delivery (PR #23611) bound to its reference implementation, Z3 proof and memory benchmark.

`DelayedReference` drives ``reference_impl.delayed`` (tracker, virtual timer, dispatcher) with the
model's actions and projects it onto exactly the model's variables; offers and deliveries are the
dispatcher's log entries of the step.

Its ``violations()`` judge every invariant the model declares, each against an **independent
oracle**: the harness's own record of what it asked and what the reference answered, or a
function of those inputs written here from the spec, never the tracker's own idea of the right
answer. The adapter wraps the tracker's ``add_message``, ``has_message_available`` and
``get_scheduled_messages`` to keep a ledger of the triples ``(key(D), ledger, entry)`` the tracker
accepted (``key`` and the cutoffs computed here from T, the mode and the variant, §3): DD-I3
compares the tracker's snapshot with the ledger and checks that due messages are found; DD-I4
compares every drain with the first due triples of the ledger in ``(key, ledger, entry)`` order;
DD-I10 bounds how long a message stays after the legacy tracker would have offered it (§5: legacy
offers at ``D - T``, or ``D`` strict). Offers and deliveries are judged on their ``D`` and the
clock (DD-I1, DD-I2, DD-I9); the bitmap layout and counters (DD-I5), the virtual timer's pending
handles (DD-I6) and the serialized memory (DD-I7) against the closed forms of §4.4-§4.6.

The mode is a config key (``strict``), not a variant: ``pr23611`` is one twin, caught in both modes
by the two explorer configurations (``small`` and ``small_strict``); the Hypothesis configuration is
non-strict, and the tests run the machine in both modes.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import cast

from models.core import Action, Json, Observation, Param
from models.delayed import EXPLORE_CONFIG, HYPOTHESIS_CONFIG, MAX_LONG, NO_DELAY, DelayedModel
from properties.delayed import coverage as delayed_coverage
from properties.delayed import proofs as delayed_z3
from properties.delayed import protocol as delayed_protocol
from properties.delayed.guards import GUARDS
from properties.engines.eventlog import EventLog
from properties.engines.lockstep import BaseImplementation
from properties.engines.mechanism import Lanes, Mechanism, Property
from reference_impl.delayed import (
    DispatcherModel,
    InMemoryDelayedDeliveryTracker,
    Position,
    TimeoutHandle,
    Variant,
    closed_form_size,
)
from reference_impl.delayed.bench import (
    MIB,
    SEED_CONFIGS,
    SEED_ENTRIES_PER_LEDGER,
    SEED_N,
    MemoryResult,
    measure_memory,
)
from traces.limits import INT32, INT64, NON_NEGATIVE_LONG

__all__ = ["MECHANISM", "DelayedReference", "bench", "plot_memory", "seed_theory_aes"]

SPEC = "docs/spec/delayed.md"

# The seed's figures (spec §8), in its "MB" (MiB).
SEED_THEORY_MB = {(1, 10): 19.1, (4, 10): 19.1, (8, 10): 9.53, (8, 15): 1.55}
SEED_JAVA_MB = {(1, 10): 25.0, (4, 10): 20.48, (8, 10): 11.0, (8, 15): 2.25}
SEED_BUCKETS = {(1, 10): 9767, (4, 10): 2443}

PLOT_XS = (1, 4, 8)
PLOT_YS = tuple(range(4, 17, 2))
PLOT_N = 1_000_000  # the sweep runs at 10^6 messages so that the whole bench stays under 3 minutes


def _int(action: Action, name: str) -> int:
    value = action[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{action}: {name} must be an int")
    return value


class DelayedReference(BaseImplementation):
    """The reference tracker, virtual timer and dispatcher, stepped by model actions."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        model = DelayedModel(config, variant)  # validates and completes the config
        self.now = 0
        self.strict = model.strict
        self.tick = model.tick
        self.tracker = InMemoryDelayedDeliveryTracker(
            model.tick,
            self._clock,
            model.strict,
            model.lookahead,
            cast(Variant, variant),  # checked by the model
        )
        self.round_size = model.round_size
        self.dispatcher = DispatcherModel(self.tracker, max_messages_per_round=model.round_size)
        self.small_ids = all(entry < 2**16 for _, entry in model.positions)
        self.after_clear = False
        self._mark = (0, 0, 0)
        bits = model.tick.bit_length() - 1
        self.precision = 1 << bits
        self.round_up = variant == "current" and model.strict
        self.c_offset = 0 if model.strict else model.tick  # C(now) = now + c_offset
        # BC(now) = now + bc_offset (§3)
        self.bc_offset = model.tick - self.precision + 1 if variant == "current" and not model.strict else self.c_offset
        self.ledger: dict[tuple[int, int, int], int] = {}  # accepted (key, ledger, entry) -> D
        # DD-I8's oracle: the fixed-delay detection rule run on the harness's own adds and drains.
        self.highest, self.fixed = 0, True
        self.last_tick_run = 0  # DD-I11's oracle: when the harness last ran the timer task live
        self.failed: set[str] = set()
        self._wrap()

    def _key(self, d: int) -> int:
        """The bucket key of §3, written here from the spec: the oracle for the tracker's keys."""
        p = self.precision
        if not self.round_up:
            return d & -p
        return (d + p - 1 if d + p - 1 <= MAX_LONG else MAX_LONG) & -p

    def _due(self) -> list[tuple[int, int, int]]:
        """The ledger's triples with key <= BC(now), in (key, ledger, entry) order."""
        cut = self.now + self.bc_offset
        return sorted(t for t in self.ledger if t[0] <= cut)

    def _judge_lateness(self) -> None:
        """DD-I10, at a round that offered all it would: nothing may stay that legacy offered P - 1
        ms ago or earlier (legacy offers at D - T, or at D strict: ``D <= C(now)``)."""
        floor = self.now + self.c_offset - self.precision + 2
        if any(d < floor for d in self.ledger.values()):
            self.failed.add("DD-I10")

    def _wrap(self) -> None:
        """Keep the ledger from the tracker's calls and judge its answers on the way out."""
        t = self.tracker
        add, available, drain = t.add_message, t.has_message_available, t.get_scheduled_messages

        def add_message(ledger_id: int, entry_id: int, deliver_at: int) -> bool:
            held = add(ledger_id, entry_id, deliver_at)
            if held:
                self.ledger[(self._key(deliver_at), ledger_id, entry_id)] = deliver_at
            if deliver_at < 0 or deliver_at <= self.now + self.c_offset:  # delivered at once: not fixed
                self.fixed = False
            else:
                if deliver_at < self.highest - self.tick:
                    self.fixed = False
                self.highest = max(self.highest, deliver_at)
            return held

        def has_message_available() -> bool:
            answer = available()
            if not answer and self._due():
                self.failed.add("DD-I3")  # a due message is not found: the round offers nothing
                self._judge_lateness()
            return answer

        def get_scheduled_messages(max_messages: int) -> list[Position]:
            due = self._due()
            got = drain(max_messages)
            expected = due[: max(max_messages, 0)]
            if got != sorted((ledger, entry) for _, ledger, entry in expected):
                lost = set(got) < {(ledger, entry) for _, ledger, entry in expected}
                self.failed.add("DD-I3" if lost and max_messages >= len(self.ledger) else "DD-I4")
            for position in got:  # offered: no longer tracked (under the smallest key it was held at)
                held = [t for t in self.ledger if (t[1], t[2]) == position]
                if held:
                    del self.ledger[min(held)]
            if len(got) < max_messages:
                self._judge_lateness()
            if not self.ledger:  # a drain that leaves nothing tracked starts the detection afresh
                self.highest, self.fixed = 0, True
            return got

        t.add_message = add_message  # type: ignore[method-assign]
        t.has_message_available = has_message_available  # type: ignore[method-assign]
        t.get_scheduled_messages = get_scheduled_messages  # type: ignore[method-assign]

    def _clock(self) -> int:
        return self.now

    def _round(self) -> Observation:
        offers, deliveries, _ = self._mark
        return {
            "offered": [list(o.position) for o in self.dispatcher.offers[offers:]],
            "delivered": [list(d.position) for d in self.dispatcher.deliveries[deliveries:]],
        }

    def apply(self, action: Action) -> Observation:
        d = self.dispatcher
        self._mark = (len(d.offers), len(d.deliveries), d.wasted_replays)
        observation = self._apply(action)
        # DD-I6's exception: a handle left armed by clear, until the tracker holds messages or drops it.
        pending = bool(self.tracker.timer.pending())
        empty = self.tracker.get_number_of_delayed_messages() == 0
        self.after_clear = pending and empty and (self.after_clear or action.name == "clear")
        return observation

    def _apply(self, action: Action) -> Observation:
        d = self.dispatcher
        if action.name == "add":
            return {"delivered": d.read(_int(action, "ledger"), _int(action, "entry"), _int(action, "deliver_at"))}
        if action.name == "advance":
            self.now = _int(action, "now")
            return None
        if action.name == "get_scheduled":
            d.max_messages_per_round = _int(action, "limit")
            try:
                d.dispatch_round()
            finally:
                d.max_messages_per_round = self.round_size
            return self._round()
        if action.name == "fire":
            self.last_tick_run = self.now
            self.tracker.timer.fire(self.tracker.timer.pending()[0])
            return self._round()
        if action.name == "run":
            handle = TimeoutHandle(deadline=self.now, seq=-1, task=self.tracker)
            if action["handle"] == "cancelled":
                handle.cancel()
            else:
                self.last_tick_run = self.now
            self.tracker.run(handle)
            return self._round()
        if action.name == "should_pause":
            return {"pause": self.tracker.should_pause_all_deliveries()}
        if action.name == "clear":
            self.tracker.clear()
            self.ledger.clear()
            return None
        raise ValueError(f"unknown action {action}")

    def vars(self) -> dict[str, Json]:
        t = self.tracker
        handle, target, last_tick_run = t.timer_state()
        return {
            "now": self.now,
            "buckets": [list(triple) for triple in t.snapshot()],
            "count": t.get_number_of_delayed_messages(),
            "memory": t.get_buffer_memory_usage(),
            "highest": t.highest_delivery_time_tracked,
            "fixed": t.messages_have_fixed_delay,
            "timer": [target, handle.deadline] if handle is not None and target is not None else [],
            "last_tick_run": last_tick_run,
            "deliver_at": [[ledger, entry, d] for (ledger, entry), d in sorted(self.dispatcher.deliver_at_of.items())],
        }

    def violations(self) -> list[str]:
        """DD-I1/I2/I9 on the step's log entries, DD-I3/I4/I10 against the ledger, DD-I5/I6/I7 on
        the tracker's storage and timer, DD-I8 against the detection rule run on the harness's adds and drains,
        DD-I11 against the harness's own record of the timer task's live runs."""
        out: list[str] = sorted(self.failed)
        d, t = self.dispatcher, self.tracker
        if set(t.snapshot()) != set(self.ledger) and "DD-I3" not in out:
            out.append("DD-I3")  # conservation: tracked iff accepted and neither offered nor cleared
        offers, deliveries, wasted = self._mark
        slack = 0 if self.strict else self.tick
        if any(o.deliver_at - o.now > slack for o in d.offers[offers:]):
            out.append("DD-I1")
        if any(x.deliver_at - x.now > slack for x in d.deliveries[deliveries:]):
            out.append("DD-I2")
        index = t.buckets
        count = t.get_number_of_delayed_messages()
        bitmaps = index.bitmaps()
        if not (
            count == len(t.snapshot()) == index.count()
            and all(bitmaps)
            and index.keys() == sorted({key for key, _, _ in index.items()})
        ):
            out.append("DD-I5")
        if not self._timer_ok(count):
            out.append("DD-I6")
        sizes = [len(b.serialize()) for b in bitmaps]
        memory = t.get_buffer_memory_usage()
        if (
            memory != sum(sizes)
            or sizes != [closed_form_size(b) for b in bitmaps]
            or (self.small_ids and memory > 2 * count + 28 * len(bitmaps))
        ):
            out.append("DD-I7")
        if d.wasted_replays != wasted:
            out.append("DD-I9")
        if (t.highest_delivery_time_tracked, t.messages_have_fixed_delay) != (self.highest, self.fixed):
            out.append("DD-I8")
        if t.timer_state()[2] != self.last_tick_run:
            out.append("DD-I11")
        return sorted(set(out))

    def _timer_ok(self, count: int) -> bool:
        t = self.tracker
        pending = t.timer.pending()
        handle, target, _ = t.timer_state()
        if pending != ([handle] if handle is not None else []):
            return False
        if count == 0:
            return not pending or self.after_clear
        head = t.next_delivery_time()
        return head <= self.now or (handle is not None and target == head and handle.deadline >= head)


def seed_theory_aes(messages_per_bucket: int) -> float:
    """The seed's theory (§8): 2 B up to 4096 per bucket, then 8192/M, floored at 8192/E."""
    if messages_per_bucket <= 4096:
        return 2.0
    return 8192 / min(messages_per_bucket, SEED_ENTRIES_PER_LEDGER)


def plot_memory(
    sweep: Mapping[tuple[int, int], MemoryResult], seed: Mapping[tuple[int, int], MemoryResult], path: Path
) -> Path:
    """Bytes per message against y, one line per x: measured, the seed's theory, and the two baselines."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 5), dpi=120)
    axes = figure.add_subplot()
    for x in PLOT_XS:
        ys = [y for (px, y) in sorted(sweep) if px == x]
        n = sweep[(x, ys[0])].n
        line = axes.plot(ys, [sweep[(x, y)].aes for y in ys], marker="o", label=f"x={x} measured (N={n:,})")
        colour = line[0].get_color()
        axes.plot(ys, [seed_theory_aes(x << y) for y in ys], linestyle="--", color=colour, label=f"x={x} seed theory")
        points = [(y, r.aes) for (px, y), r in sorted(seed.items()) if px == x]
        if points:
            n = next(r.n for (px, _), r in seed.items() if px == x)
            axes.plot(
                *zip(*points, strict=True),
                linestyle="none",
                marker="*",
                markersize=12,
                color=colour,
                label=f"x={x} seed configuration (N={n:,})",
            )
    axes.axhline(24, color="grey", label="legacy heap, 24 B")
    axes.axhline(0.125, color="grey", linestyle=":", label="lower limit, 1 bit")
    axes.set_yscale("log")
    axes.set_xlabel("y (bucket width 2^y ms)")
    axes.set_ylabel("bytes per message (AES), ids added one by one")
    axes.set_title("TimeBucket memory per message (E = 50,000 entries per ledger)")
    axes.legend(fontsize="small", bbox_to_anchor=(1.02, 1), loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, bbox_inches="tight")
    return path


def _measure(xy: tuple[int, int, int]) -> MemoryResult:
    x, y, n = xy
    return measure_memory(x, y, n)


def bench(folder: Path) -> dict[str, object]:
    """The seed's memory experiment (§8) at N = 10^7, and the per-message plot in the bench's `folder`.

    The measurements run in a few processes in parallel.
    """
    started = time.perf_counter()
    jobs = [(x, y, SEED_N) for x, y in SEED_CONFIGS] + [(x, y, PLOT_N) for x in PLOT_XS for y in PLOT_YS]
    # spawn, not fork: the caller (brokerspec bench) may already run threads (Z3, Hypothesis).
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_measure, jobs))
    seed = {(r.x, r.y): r for r in results if r.n == SEED_N}
    sweep = {(r.x, r.y): r for r in results if r.n == PLOT_N}
    row: dict[str, object] = {"memory_n": SEED_N, "memory_entries_per_ledger": SEED_ENTRIES_PER_LEDGER}
    for (x, y), r in seed.items():
        at = f"memory[x={x},y={y}]"
        row.update(
            {
                f"{at}_buckets": r.buckets,
                f"{at}_bitmaps": r.bitmaps,
                f"{at}_bytes": r.bytes_one_by_one,
                f"{at}_MiB": round(r.mib, 2),
                f"{at}_AES_B": round(r.aes, 3),
                f"{at}_vs_24B_heap": round(r.ratio_to_legacy, 4),
                f"{at}_run_optimized_bytes": r.bytes_run_optimized,
                f"{at}_run_optimized_AES_B": round(r.bytes_run_optimized / r.n, 4),
                f"{at}_seed_theory_MB": SEED_THEORY_MB[(x, y)],
                f"{at}_seed_java_MB": SEED_JAVA_MB[(x, y)],
                f"{at}_vs_seed_theory": round(r.mib / SEED_THEORY_MB[(x, y)] - 1, 3),
            }
        )
    legacy = next(iter(seed.values())).legacy_bytes
    row["memory_legacy_heap_MiB"] = round(legacy / MIB, 1)
    row["memory_seed_bucket_counts_match"] = all(abs(seed[xy].buckets - n) <= 1 for xy, n in SEED_BUCKETS.items())
    problems = [p for r in seed.values() for p in r.mismatches()]
    row["memory_matches_spec"] = not problems
    if problems:
        row["memory_mismatches"] = "; ".join(problems)
    row["memory_plot"] = str(plot_memory(sweep, seed, folder / "delayed-memory-per-message.png"))
    row["memory_bench_s"] = round(time.perf_counter() - started, 1)
    return row


def event_log() -> EventLog:
    """The event log the Spark pipeline checks (imported when asked for: it brings Spark and Arrow)."""
    from properties.delayed.eventlog import EVENT_LOG

    return EVENT_LOG


MECHANISM = Mechanism(
    name="delayed",
    spec=SPEC,
    log=event_log,
    lanes=Lanes(tuple_id={"buckets": 1, "deliver_at": 2}),  # a bucket by its start, a message by ledger and entry
    limits={"lookahead": (0, 10_000), "round_size": (1, 10_000), "tick": (1, INT64[1]),
            "max_deliver_at": NON_NEGATIVE_LONG, "ledgers": NON_NEGATIVE_LONG, "entries": NON_NEGATIVE_LONG,
            "limits": (1, INT32[1]), "extra_deliver_at": (NO_DELAY, INT64[1]), "extra_now": (1, INT64[1])},
    make_model=lambda config, variant: DelayedModel(config, variant),
    make_reference=lambda config, variant: DelayedReference(config, variant),
    current="current",
    twins={"pr23611": "DD-I1"},
    guards=GUARDS,
    reference_judges={
        "delayed": ("DD-I1", "DD-I2", "DD-I3", "DD-I4", "DD-I5", "DD-I6", "DD-I7", "DD-I8", "DD-I9", "DD-I10",
                    "DD-I11"),
    },
    beyond_model={
        "DD-I7": Property("memory equals the bitmaps' serialized size, by the closed form of roaring's containers",
                          ("reference",)),
        "DD-I8": Property("fixed and highest follow the fixed-delay detection rule, and should_pause answers by it",
                          ("reference", "lockstep")),
        "DD-I11": Property("the tick gate's last run is when the harness last ran the timer task live (a fired "
                           "handle, or a run of a handle not cancelled)", ("reference",)),
    },
    quick_configs=("small",),
    explore_configs={"small": EXPLORE_CONFIG, "small_strict": {**EXPLORE_CONFIG, "strict": True}},
    hypothesis_configs={"default": HYPOTHESIS_CONFIG, "strict": {**HYPOTHESIS_CONFIG, "strict": True}},
    proofs=delayed_z3.proofs,
    bench=bench,
    interesting=delayed_coverage.INTERESTING,
    vocabularies=delayed_protocol.VOCABULARIES,
    scope_of=delayed_protocol.scope_of,
)
