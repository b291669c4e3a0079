"""Bind the KIP-936 producer-id quota model to its reference implementation, proofs and benchmark.

The reference (`reference_impl/pidquota/`) is driven through `ProducerIdQuotaManager.on_produce` with
one default quota for every principal (`rate_permissive`), so the manager's cleanup schedule and
PID dedup are exercised, and projected onto exactly the model's variables: each layer's set bits.

The model's `hasher` picks the reference's PID hasher. ``exact`` gives PID x the single bit x
(`IncrementingHasher(x, 0)`, all k indices equal, which the spec allows), a perfect cache that keeps
the explored state spaces small. ``murmur`` runs the REAL `default_pid_hasher`, `EnhancedDoubleHasher`
and per-layer `contains`/`find`; the model computes the same bits from the spec, so false positives
are predicted exactly and any hasher or containment bug parts the two sides.

**Rule for `violations`: every invariant is judged from an independent oracle, never by asking the
code under test what the right answer is.** The oracles are the harness's own record of its inputs
and of what the reference answered (a ghost history of every (principal, PID, time) tracked, seen by
wrapping `track` in `_WitnessedCache` without changing it), the spec's constants (the §4.2 and C24
hasher vectors) and independent functions of the inputs (the model's `pid_indices`, a per-layer
containment test on the layer bits, the manager schedule W, W + ΔT, ...). So: PQ-I1/PQ-I2 on the
answers in the ghost history; PQ-I4a on whether a `track` changed the entry when the PID sat in a
recent layer, and on the ghost merge times; PQ-I4b on the ghost "calm" rate condition; PQ-I5 on the
ghost last-track time at each cleanup the schedule says has run; PQ-I6 on the sensor against the
harness's count of `False` answers (not the manager's `new_pids`); PQ-I8 on the other principals'
entries and sensors across a produce; PQ-I9 on the vectors and on each tracked PID's indices against
`murmur_indices`; PQ-I10 on the layer order and on probes leaving the entry untouched; PQ-I11 on
`track`'s answer, `contains` and `find` against the per-layer test on oracle indices; PQ-I12 on the
count-based advance: the entry's `advance_on_count` count against the harness's own count of the merges
its per-layer test says were due since the entry was created (modulo n_layer); PQ-I13 on the rotation
timer: every `next_rotation` a produce made or moved must be the produce's time plus ΔT. Every name
found in a step is reported with that step (a failing hasher vector with the first one, so that a
trace names it). A history invariant the model also judges (PQ-I1, PQ-I2, PQ-I4a, PQ-I5's idle clause)
is judged at the same step as the model, on an actual `track` or cleanup, never predicted from the
state: a name given earlier than the model gives it would make traces the model cannot replay.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from models.core import Action, Json, Observation, Param
from models.pidquota import EXPLORE_CONFIG, FPP, HYPOTHESIS_CONFIG, PidQuotaModel
from properties.engines.lockstep import BaseImplementation
from properties.engines.mechanism import Mechanism, Property
from properties.pidquota import coverage as pidquota_coverage
from properties.pidquota import proofs as pidquota_z3
from properties.pidquota import protocol as pidquota_protocol
from properties.pidquota.guards import GUARDS
from reference_impl.pidquota import (
    EnhancedDoubleHasher,
    IncrementingHasher,
    PidHasher,
    ProducerIdQuotaManager,
    ProducerIdQuotaManagerCache,
    Rate,
    Shape,
    SimpleBloomFilter,
    Variant,
    default_pid_hasher,
)
from reference_impl.pidquota.cache import CacheEntry

_MS_PER_HOUR = 3_600_000

Snapshot = tuple[int, int, tuple[tuple[int, int, int], ...]]
"""An entry as the harness sees it: (count, next_rotation, ((created, expires, bits), ...))."""

HASHER_VECTORS: tuple[tuple[str, int, int, int, int, tuple[int, ...]], ...] = (
    ("pid", 0, 0, 7, 959, (203, 663, 165, 628, 135, 605, 121)),
    ("pid", 1000, 0, 7, 959, (280, 415, 551, 689, 830, 16, 166)),
    ("pair", 0x28DF63B7CC57C3CB, 0xF2557DFCC4E8FE52, 7, 959, (203, 663, 165, 628, 135, 605, 121)),
    ("pair", 1, 1, 17, 72, (1, 0, 0, 2, 7, 16, 30, 50, 5, 40, 12, 66, 59, 64, 10, 42, 17)),
)
"""The spec's hasher vectors (§4.2 default PID hasher, C24): (kind, pid or h1, h2, k, m, indices)."""

FROM_BYTES_VECTORS: tuple[tuple[bytes, int, int], ...] = (
    (b"\x01", 0, 0x0100000000000000),
    (b"\x00\x01\x00\x02", 1 << 48, 2 << 48),
    (bytes(7) + b"\x01" + bytes(7) + b"\x02", 1, 2),
)
"""§4.2's `from_bytes` examples: (buffer, initial, increment)."""


@functools.cache
def hasher_vectors_hold() -> bool:
    """PQ-I9 on the reference's hashers: every spec vector reproduced (computed once per process)."""
    for kind, a, b, k, m, expected in HASHER_VECTORS:
        hasher = default_pid_hasher(a) if kind == "pid" else EnhancedDoubleHasher(a, b)
        if tuple(hasher.indices(Shape.from_km(k, m))) != expected:
            return False
    for buf, initial, increment in FROM_BYTES_VECTORS:
        hasher = EnhancedDoubleHasher.from_bytes(buf)
        if (hasher.initial, hasher.increment) != (initial, increment):
            return False
    return True


def exact_hasher(pid: int) -> IncrementingHasher:
    """PID x as the single bit x: collision-free while every PID is below the filter's m."""
    return IncrementingHasher(pid, 0)


def snapshot(entry: CacheEntry | None) -> Snapshot | None:
    """What a merge or rotation would change in `entry`, read without side effects."""
    if entry is None:
        return None
    layers = tuple((layer.created, layer.expires, layer.bits) for layer in entry.filter.layers)
    return entry.count_check.count, entry.next_rotation, layers


@dataclass(frozen=True)
class Sighting:
    """One `track` call as the harness saw it: its inputs, the entry around it, and the answer."""

    principal: str
    pid: int
    now: int
    before: Snapshot | None
    seen: bool
    after: Snapshot | None


class _WitnessedCache(ProducerIdQuotaManagerCache):
    """The reference cache, unchanged, with every `track` the manager makes logged for the harness."""

    sightings: list[Sighting]

    def track(self, principal: str, producer_id_rate: float, pid: int, now: int) -> bool:
        before = snapshot(self.entry_of(principal))
        seen = super().track(principal, producer_id_rate, pid, now)
        self.sightings.append(Sighting(principal, pid, now, before, seen, snapshot(self.entry_of(principal))))
        return seen


class PidQuotaReference(BaseImplementation):
    """The manager and cache of `variant`, stepped by model actions at the harness's virtual clock."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        self.model = model = PidQuotaModel(config, variant)
        murmur = model.hasher == "murmur"
        pid_hasher: PidHasher = default_pid_hasher if murmur else exact_hasher
        self.cache = _WitnessedCache(
            model.window, model.layer_count, FPP, variant=cast(Variant, model.variant), pid_hasher=pid_hasher
        )
        self.cache.sightings = []
        rate = model.n_layer * model.layer_count * _MS_PER_HOUR / model.window
        if self.cache.layer_size(rate) != model.n_layer:
            raise ValueError(f"no PID rate gives n_layer {model.n_layer} with W {model.window}")
        if not murmur and max(model.pids) >= model.m:
            raise ValueError(f"pids must be below the filter's {model.m} bits for the exact hasher: {model.pids}")
        self.manager = ProducerIdQuotaManager(self.cache, default_quota=rate)
        self.now = 0
        self.masks = dict(zip(model.pids, model.bits, strict=True))
        self.indices = {pid: list(model.pid_indices(pid)) for pid in model.pids}
        self.multibit = murmur  # one bit per PID makes the union and per-layer tests agree: probes add nothing
        self.probes = {pid: SimpleBloomFilter(Shape.from_km(model.k, model.m)) for pid in model.pids}
        for pid, probe in self.probes.items():
            probe.merge(self.indices[pid])
        self.hashed_right = {
            pid: not murmur or tuple(pid_hasher(pid).indices(Shape.from_km(model.k, model.m))) == tuple(idx)
            for pid, idx in self.indices.items()
        }
        # Ghosts: the harness's own record of what it asked and what the reference answered.
        self.last: dict[tuple[str, int], int] = {}  # (principal, pid) -> time of its last track
        self.merges: dict[tuple[str, int], list[int]] = {}  # times a track changed the entry
        self.counted: dict[str, int] = {}  # tracks answered False, per principal
        self.calm: dict[str, bool] = {}  # PQ-I4b's rate condition since the entry was created
        self.merges_due: dict[str, int] = {}  # PQ-I12: merges the per-layer test called for since the entry was made
        self.cleaned_at: int | None = None  # the latest clean_map the schedule or the harness ran
        self._violations: list[str] = []

    def apply(self, action: Action) -> Observation:
        self._violations = [] if hasher_vectors_hold() else ["PQ-I9"]
        dropped = False
        if action.name == "produce":
            principal, pids = str(action["principal"]), action["pids"]
            assert isinstance(pids, tuple)
            others = self._others(principal)
            armed = self._timers()
            outcome = self.manager.on_produce(principal, [int(str(p)) for p in pids], self.now)
            if any(due != self.now + self.model.delta_t for p, due in self._timers().items() if armed.get(p) != due):
                self._flag("PQ-I13")
            for sighting in self.cache.sightings:
                self._judge(sighting)
            self.cache.sightings.clear()
            if self._recorded(principal) != (self.counted.get(principal, 0),) * 2:
                self._flag("PQ-I6")
            if self._others(principal) != others:
                self._flag("PQ-I8")
            observed: Observation = {"new": list(outcome.new_pids)}
        elif action.name == "advance":
            before, start = self._live(), self.now
            self.now += int(str(action["dt"]))
            self.manager.maybe_clean(self.now)
            removed = sorted(set(before) - set(self.cache.principals()))
            window, delta_t = self.model.window, self.model.delta_t
            scheduled = window + (self.now - window) // delta_t * delta_t  # the schedule: W, then every ΔT
            if start < scheduled <= self.now:
                self.cleaned_at = max(scheduled, self.cleaned_at or 0)
                dropped = self._dropped_live(before, removed, scheduled)
            observed = {"removed": list[Json](removed)}
        elif action.name == "cleanup":
            self.cleaned_at, before = self.now, self._live()
            removed = sorted(self.cache.clean_map(self.now))
            dropped = self._dropped_live(before, removed, self.now)
            observed = {"removed": list[Json](removed)}
        else:
            raise ValueError(f"pidquota reference: unknown action {action}")
        if dropped:
            self._flag("PQ-I5")
        self._judge_state()
        return observed

    def vars(self) -> dict[str, Json]:
        entries: dict[str, Json] = {}
        for principal in self.cache.principals():
            entry = self.cache.entry_of(principal)
            assert entry is not None
            layers: list[Json] = [
                [layer.created, layer.expires, list(layer.as_index_array())] for layer in entry.filter.layers
            ]
            entries[principal] = {
                "count": entry.count_check.count,
                "next_rotation": max(entry.next_rotation, self.now),
                "layers": layers,
            }
        return {"now": self.now, "next_cleanup": self.manager.next_cleanup_ms, "entries": entries}

    def violations(self) -> list[str]:
        return list(self._violations)

    # --- the oracles ---------------------------------------------------------------------------------

    def _flag(self, name: str) -> None:
        if name not in self._violations:
            self._violations.append(name)

    def _judge(self, s: Sighting) -> None:
        """One `track` against the ghost history and the per-layer containment of the entry before it."""
        model, key = self.model, (s.principal, s.pid)
        mask = self.masks[s.pid]
        if not self.hashed_right[s.pid]:
            self._flag("PQ-I9")
        layers = s.before[2] if s.before is not None else ()
        holding = [i for i, (_, _, bits) in enumerate(layers) if bits & mask == mask]
        if s.seen != bool(holding):
            self._flag("PQ-I11")
        recent = bool(holding) and (not model.readd or layers[holding[-1]][0] >= s.now - model.delta_t)
        if s.before is None:
            self.merges_due[s.principal] = 0
        if not recent:  # new, or a re-add of a PID whose newest layer is no longer recent: a merge
            self.merges_due[s.principal] += 1
        merged = s.after != s.before
        if merged:
            times = [t for t in self.merges.get(key, []) if t >= s.now - model.delta_t]
            if recent or len(times) >= 2:
                self._flag("PQ-I4a")
            self.merges[key] = [*times, s.now]
        last = self.last.get(key)
        if not s.seen:
            self.counted[s.principal] = self.counted.get(s.principal, 0) + 1
            if last is not None and s.now <= last + model.horizon:
                self._flag("PQ-I1")
            if last is not None and s.now <= last + model.delta_t:
                self._flag("PQ-I2")
        self.last[key] = s.now
        if s.before is None:
            self.calm[s.principal] = True
        recently = sum(1 for (p, _), t in self.last.items() if p == s.principal and t >= s.now - model.delta_t)
        if 2 * recently > model.n_layer:
            self.calm[s.principal] = False

    def _judge_state(self) -> None:
        """The invariants on the state after a step: layers, probes, depth and idle principals."""
        model = self.model
        for principal in self.cache.principals():
            entry = self.cache.entry_of(principal)
            assert entry is not None
            layered, before = entry.filter, snapshot(entry)
            assert before is not None
            layers = before[2]
            if not layers or any(a[0] > b[0] for a, b in itertools.pairwise(layers)):
                self._flag("PQ-I10")
            for pid, mask in self.masks.items() if self.multibit else ():
                holding = [i for i, (_, _, bits) in enumerate(layers) if bits & mask == mask]
                probe = self.probes[pid]
                if layered.contains(probe) != bool(holding) or layered.find(probe) != holding:
                    self._flag("PQ-I11")
            if snapshot(entry) != before:  # contains and find never evaluate the extend check nor clean
                self._flag("PQ-I10")
            if self.calm.get(principal, True) and len(layers) > model.max_depth:
                self._flag("PQ-I4b")
            if entry.count_check.count != self.merges_due.get(principal, 0) % model.n_layer:
                self._flag("PQ-I12")
            last = max((t for (p, _), t in self.last.items() if p == principal), default=None)
            if self.cleaned_at is not None and last is not None and last < self.cleaned_at - model.window:
                self._flag("PQ-I5")

    def _timers(self) -> dict[str, int]:
        """Per principal, when its rotation timer is due (PQ-I13: a timer that moved was armed by this produce)."""
        out: dict[str, int] = {}
        for principal in self.cache.principals():
            entry = self.cache.entry_of(principal)
            assert entry is not None
            out[principal] = entry.next_rotation
        return out

    def _live(self) -> dict[str, int]:
        """Per principal, the latest `expires` of its non-empty layers (-1 if none), before a cleanup."""
        out: dict[str, int] = {}
        for principal in self.cache.principals():
            entry = self.cache.entry_of(principal)
            assert entry is not None
            out[principal] = max((layer.expires for layer in entry.filter.layers if layer.bits), default=-1)
        return out

    @staticmethod
    def _dropped_live(before: dict[str, int], removed: list[str], cleaned: int) -> bool:
        """PQ-I5's "a principal with a non-empty layer is never removed": cleanups only drop expired layers
        (expires < c), so one holding a layer with expires >= `cleaned`, the step's last cleanup, must stay."""
        return any(before[p] >= cleaned for p in removed)

    def _others(self, principal: str) -> list[tuple[str, Snapshot | None, tuple[int, float]]]:
        """Every other principal's entry and sensor totals (PQ-I8: a produce for `principal` leaves them)."""
        return [(p, snapshot(self.cache.entry_of(p)), self._recorded(p)) for p in self.model.principals
                if p != principal]

    def _recorded(self, principal: str) -> tuple[int, float]:
        """The sensor's record count and recorded total (its samples span 1 h: none rolls over here)."""
        sensor = self.manager.sensor_of(principal)
        if sensor is None:
            return 0, 0
        [(stat, _)] = sensor.stats
        assert isinstance(stat, Rate)
        return sum(s.event_count for s in stat.stat.slots), sum(s.value for s in stat.stat.slots)


# --- benchmark ---------------------------------------------------------------------------------------

BENCH_LAYERS = 4  # the KIP's example L
BENCH_PIDS_PER_WINDOW = (1_000, 10_000, 100_000, 1_000_000)
BENCH_FP_SHAPES = ((100, 0.01), (1_000, 0.01), (1_000, 0.001))


def _exact_set_bytes(n: int) -> int:
    """A Python set of n distinct 63-bit PIDs, the container and the int objects."""
    pids = set(range(2**62, 2**62 + n))
    return sys.getsizeof(pids) + sum(sys.getsizeof(p) for p in pids)


def memory_per_principal(
    depth: float, pids_per_window: tuple[int, ...] = BENCH_PIDS_PER_WINDOW
) -> dict[str, object]:
    """Bytes per principal at its quota (L = 4, fpp 0.01): `depth` Bloom layers as Java long[] words, and
    the PQ-I4b bound of 2L + 3 layers, against an exact set (a sorted long[] and a Python set)."""
    out: dict[str, object] = {}
    for n in pids_per_window:
        shape = Shape.from_np(math.ceil(n / BENCH_LAYERS), FPP)
        layer = (shape.m + 63) // 64 * 8
        key = f"mem[{n}_pids/window]"
        out[f"{key}_bloom_bytes_at_mean_depth"] = round(depth * layer)
        out[f"{key}_bloom_bytes_at_2L+3"] = (2 * BENCH_LAYERS + 3) * layer
        out[f"{key}_exact_long_array_bytes"] = 8 * n
        out[f"{key}_exact_python_set_bytes"] = _exact_set_bytes(n)
        out[f"{key}_bloom_over_long_array"] = round(depth * layer / (8 * n), 4)
    return out


def false_positive_rates(
    shapes: Sequence[tuple[int, float]] = BENCH_FP_SHAPES, seeds: int = 4, probes: int = 25_000
) -> dict[str, object]:
    """PQ-I3's sampling with fewer seeds: one and two layers at design load n, against p_n and p_L.

    Per seed, n (then 2n) random PIDs go into `from_np(n, p)` layers and `probes` other random PIDs are
    probed; a hit on any layer is a false positive. The PQ-I3 bound is `1.15·N·p + 3·sqrt(N·p)`.
    """
    out: dict[str, object] = {}
    for n, p in shapes:
        shape = Shape.from_np(n, p)
        hits = [0, 0]
        for seed in range(seeds):
            rnd = random.Random(seed)
            inserted: set[int] = set()
            layers = [SimpleBloomFilter(shape), SimpleBloomFilter(shape)]
            for depth, layer in enumerate(layers, start=1):
                while len(inserted) < depth * n:
                    pid = rnd.getrandbits(63)
                    if pid not in inserted:
                        inserted.add(pid)
                        layer.merge(default_pid_hasher(pid))
            done = 0
            while done < probes:
                pid = rnd.getrandbits(63)
                if pid in inserted:
                    continue
                done += 1
                probe = SimpleBloomFilter(shape)
                probe.merge(default_pid_hasher(pid))
                first, second = layers[0].contains(probe), layers[1].contains(probe)
                hits[0] += first
                hits[1] += first or second
        total = seeds * probes
        for depth in (1, 2):
            expected = 1 - (1 - shape.probability(n)) ** depth
            key = f"fp[n={n},p={p},layers={depth}]"
            out[f"{key}_measured"] = round(hits[depth - 1] / total, 5)
            out[f"{key}_expected"] = round(expected, 5)
            bound = 1.15 * total * expected + 3 * math.sqrt(total * expected)
            out[f"{key}_within_pq_i3_bound"] = hits[depth - 1] <= bound
    return out


def track_throughput(principals: int = 10, windows: float = 1.5) -> dict[str, object]:
    """`track` calls per second with the default hasher, and the false-positive rate the cache shows.

    Each principal runs at its quota (4,000 PIDs/h, so n_layer = 1,000 with W = 1 h and L = 4): one fresh
    PID per tick plus one of 100 long-running PIDs, with `clean_map` every ΔT. A fresh PID is random,
    so every `True` for it is a false positive of the layered filter.
    """
    rate, per_hour = 4_000.0, 4_000
    cache = ProducerIdQuotaManagerCache(_MS_PER_HOUR, BENCH_LAYERS, FPP)
    rnd = random.Random(0)
    long_running = [rnd.getrandbits(63) for _ in range(100)]
    users = [f"user{i}" for i in range(principals)]
    fresh_hits = depth_sum = 0
    ticks = int(windows * per_hour)
    started = time.perf_counter()
    for tick in range(ticks):
        now = tick * _MS_PER_HOUR // per_hour
        if tick and tick % (per_hour // BENCH_LAYERS) == 0:
            cache.clean_map(now)
        for user in users:
            fresh_hits += cache.track(user, rate, rnd.getrandbits(63), now)
            cache.track(user, rate, long_running[tick % 100], now)
        depth_sum += len(cache.layers_of(users[0]))
    elapsed = time.perf_counter() - started
    calls = 2 * ticks * principals
    depth = round(depth_sum / ticks, 2)
    return {
        "track_calls": calls,
        "track_per_s": round(calls / elapsed),
        "cache_fpp": FPP,
        "cache_mean_depth": depth,
        "cache_fresh_pid_fp_rate": round(fresh_hits / (ticks * principals), 5),
        "cache_fp_bound_all_layers_full": round(1 - (1 - FPP) ** depth, 5),
    }


def bench(_folder: Path) -> dict[str, object]:
    """`track` throughput, memory per principal against an exact set, false-positive rates against p."""
    throughput = track_throughput()
    depth = throughput["cache_mean_depth"]
    assert isinstance(depth, float)
    return {**throughput, **memory_per_principal(depth), **false_positive_rates()}


HORIZON_CONFIG: dict[str, Param] = {
    **EXPLORE_CONFIG, "pids": (1,), "max_batch": 1, "dts": (2,), "boundaries": False, "cleanup": False,
}
"""PQ-I1's boundary, cheap and first: one PID sighted on the ΔT grid (W = 4, ΔT = 2), so it is last seen
exactly ΔT after its layer's creation and the scheduled cleanup at W falls exactly on s + H."""

MURMUR_CONFIG: dict[str, Param] = {
    **EXPLORE_CONFIG, "window_ms": 2, "hasher": "murmur", "pids": (1, 3, 7), "max_batch": 1,
}
"""The real hashers and per-layer containment: with n_layer 2 (k = 7, m = 20) PID 7's bits lie in the union
of PID 1's and PID 3's but in neither alone, so a filter that tests the union instead of each layer answers
"seen" for 7 once 1 and 3 sit in different layers (as the count check puts them after two merges). W = 2
keeps the three PIDs' states few (2,031; W = 4 gives 90,844)."""

HYPOTHESIS_MURMUR_CONFIG: dict[str, Param] = {**HYPOTHESIS_CONFIG, "hasher": "murmur", "pids": (1, 3, 7, 9)}
"""Hypothesis on the real hashers: two principals, four PIDs (7 in the union of 1 and 3), W = 60."""

MECHANISM = Mechanism(
    name="pidquota",
    spec="docs/spec/pidquota.md",
    limits={"layer_count": (2, 64), "n_layer": (1, 100_000), "max_batch": (0, 100), "window_ms": (1, 10**9),
            "dts": (1, 10**9), "pids": (0, 2**20), "len(pids)": (1, 6)},
    make_model=lambda config, variant: PidQuotaModel(config, variant),
    make_reference=lambda config, variant: PidQuotaReference(config, variant),
    current="current",
    twins={"no_readd": "PQ-I1"},
    guards=GUARDS,
    reference_judges={
        "pidquota": ("PQ-I1", "PQ-I2", "PQ-I4a", "PQ-I4b", "PQ-I5", "PQ-I6", "PQ-I8", "PQ-I9", "PQ-I10", "PQ-I11",
                     "PQ-I12", "PQ-I13"),
    },
    beyond_model={
        "PQ-I3": Property("false positives stay within 1.15·N·p + 3·sqrt(N·p) of N probes: per layer at the shape's "
                          "p, across L layers at 1 - (1 - p)^L", ("tests", "bench")),
        "PQ-I6": Property("the sensor records exactly one event per track that answered not seen, and nothing for "
                          "hits and re-adds", ("reference",)),
        "PQ-I7": Property("the throttle time follows Kafka's quota formulas, (value - bound) / bound · window for a "
                          "rate and -tokens / bound · 1000 for a token bucket, rounded half up", ("tests",)),
        "PQ-I8": Property("a produce for one principal changes no other principal's entry or sensor",
                          ("reference", "lockstep")),
        "PQ-I9": Property("the hashers reproduce the spec's vectors, and every tracked PID's indices equal the model's",
                          ("reference",)),
        "PQ-I11": Property("contains is per layer: a PID is found iff one single layer holds all its bits, and find "
                           "lists exactly those layers", ("reference",)),
        "PQ-I12": Property("the count-based advance: an entry's count is the number of merges due since it was "
                           "created, modulo n_layer, so a new layer starts on every n_layer-th merge", ("reference",)),
        "PQ-I13": Property("the rotation timer is armed for exactly ΔT ahead whenever it is armed (an entry's "
                           "creation, a firing), so layers rotate every ΔT of activity", ("reference",)),
        "PQ-W": Property("after a sighting at s the PID sits in a layer created at or after s - ΔT, so it cannot "
                         "expire before s + H", ("z3",)),
    },
    quick_configs=("horizon", "murmur"),  # the bounded horizon and the real hasher
    explore_configs={
        "horizon": HORIZON_CONFIG,
        "murmur": MURMUR_CONFIG,
        "small": EXPLORE_CONFIG,
        "two_principals": {**EXPLORE_CONFIG, "principals": ("A", "B"), "pids": (1,), "max_batch": 1},
        "three_layers": {**EXPLORE_CONFIG, "window_ms": 6, "layer_count": 3, "n_layer": 3},
    },
    hypothesis_configs={"default": HYPOTHESIS_CONFIG, "murmur": HYPOTHESIS_MURMUR_CONFIG},
    proofs=pidquota_z3.proofs,
    bench=bench,
    interesting=pidquota_coverage.INTERESTING,
    vocabularies=pidquota_protocol.VOCABULARIES,
    scope_of=pidquota_protocol.scope_of,
)
