"""Bind the KIP-936 producer-id quota model to its reference implementation, proofs and benchmark.

The reference (`reference_impl/pidquota/`) is driven through `ProducerIdQuotaManager.on_produce` with
one default quota for every principal (`rate_permissive`), so the manager's cleanup schedule and
PID dedup are exercised, and projected onto exactly the model's variables.

Why an exact hasher: the model is a perfect cache (exact sets per layer). A real Bloom filter may
only err toward "seen" (a false positive, never a false negative), but one such answer skips a merge
and the two states part for good. So the adapter gives the cache a collision-free hasher: PID x sets
the single bit x of its layer (`IncrementingHasher(x, 0)`, all k indices equal, which the spec
allows), and `contains` becomes exact membership. The default murmur hasher is measured where
statistics belong: PQ-I3's false-positive rates against p in `bench`, next to memory and throughput;
and the tests drive it (`pid_hasher=default_pid_hasher`) next to the model to check that its first
disagreement is always a false positive and that PQ-I1 holds on its answers all the same.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

from models.core import Action, Json, Observation, Param
from models.pidquota import EXPLORE_CONFIG, HYPOTHESIS_CONFIG, PidQuotaModel
from properties import pidquota_z3
from properties.registry import Mechanism
from reference_impl.pidquota import (
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

FPP = 0.01
_MS_PER_HOUR = 3_600_000


def exact_hasher(pid: int) -> IncrementingHasher:
    """PID x as the single bit x: collision-free while every PID is below the filter's m."""
    return IncrementingHasher(pid, 0)


class PidQuotaReference:
    """The manager and cache of `variant`, stepped by model actions at the harness's virtual clock.

    `vars` reads a layer's set bits as its PIDs, which only holds for the exact hasher; with another
    `pid_hasher` only the observations of `apply` are comparable with the model (up to false positives).

    `violations` reports PQ-I6 when a principal's sensor holds a different number of `record(1)`
    events than PIDs reported new (the sensor's samples span `window_size_ms` = 1 h, far beyond the
    clock of any lockstep run, so no sample rolls over).
    """

    def __init__(
        self, config: Mapping[str, Param] | None, variant: str, pid_hasher: PidHasher = exact_hasher
    ) -> None:
        model = PidQuotaModel(config, variant)
        self.cache = ProducerIdQuotaManagerCache(
            model.window, model.layer_count, FPP, variant=cast(Variant, model.variant), pid_hasher=pid_hasher
        )
        rate = model.n_layer * model.layer_count * _MS_PER_HOUR / model.window
        if self.cache.layer_size(rate) != model.n_layer:
            raise ValueError(f"no PID rate gives n_layer {model.n_layer} with W {model.window}")
        bits = Shape.from_np(model.n_layer, FPP).m
        if pid_hasher is exact_hasher and max(model.pids) >= bits:
            raise ValueError(f"pids must be below the filter's {bits} bits for the exact hasher: {model.pids}")
        self.manager = ProducerIdQuotaManager(self.cache, default_quota=rate)
        self.now = 0
        self.counted: dict[str, int] = {}
        self._violations: list[str] = []

    def apply(self, action: Action) -> Observation:
        self._violations = []
        if action.name == "produce":
            principal, pids = str(action["principal"]), action["pids"]
            assert isinstance(pids, tuple)
            outcome = self.manager.on_produce(principal, [int(str(p)) for p in pids], self.now)
            self.counted[principal] = self.counted.get(principal, 0) + len(outcome.new_pids)
            if self._recorded(principal) != self.counted[principal]:
                self._violations.append("PQ-I6")
            return {"new": list(outcome.new_pids)}
        if action.name == "advance":
            before = set(self.cache.principals())
            self.now += int(str(action["dt"]))
            self.manager.maybe_clean(self.now)
            removed: list[Json] = [p for p in sorted(before - set(self.cache.principals()))]
            return {"removed": removed}
        if action.name == "cleanup":
            cleaned: list[Json] = [p for p in sorted(self.cache.clean_map(self.now))]
            return {"removed": cleaned}
        raise ValueError(f"pidquota reference: unknown action {action}")

    def vars(self) -> dict[str, Json]:
        entries: dict[str, Json] = {}
        for principal in self.cache.principals():
            entry = self.cache.entry_of(principal)
            assert entry is not None
            # The exact hasher puts PID x at bit x, so a layer's set bits are its PIDs (and nothing else).
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

    def _recorded(self, principal: str) -> int:
        sensor = self.manager.sensor_of(principal)  # every principal has a quota, so a sensor
        assert sensor is not None
        [(stat, _)] = sensor.stats
        assert isinstance(stat, Rate)
        return sum(sample.event_count for sample in stat.stat.slots)


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


MECHANISM = Mechanism(
    name="pidquota",
    spec="shared/spec/pid_quota.md",
    make_model=lambda config, variant: PidQuotaModel(config, variant),
    make_reference=lambda config, variant: PidQuotaReference(config, variant),
    current="current",
    twins={"no_readd": "PQ-I1"},
    explore_configs={
        "small": EXPLORE_CONFIG,
        "two_principals": {**EXPLORE_CONFIG, "principals": ("A", "B"), "pids": (1,), "max_batch": 1},
        "three_layers": {**EXPLORE_CONFIG, "window_ms": 6, "layer_count": 3, "n_layer": 3},
    },
    hypothesis_configs={"default": HYPOTHESIS_CONFIG},
    proofs=pidquota_z3.proofs,
    bench=bench,
)
