"""The executable spec of the KIP-936 producer-id quota cache (`docs/spec/pidquota.md`): a perfect cache.

One `ProducerIdQuotaManagerCache` (§4.5) behind the manager's produce path and cleanup schedule (§4.6,
`rate_permissive`, one quota for every principal), written from the spec independently of
`reference_impl/pidquota/` so that the two can run in lockstep.

**A layer is a bit mask, and `hasher` says which bits a PID sets.** With ``hasher="exact"`` PID x sets
the single bit x (a perfect cache: `contains` and `find` are exact membership). With ``hasher="murmur"``
PID x sets the k bits of the spec's default PID hasher (§4.2: murmur3 x64 of the PID, enhanced double
hashing, closed form) in a layer of `from_np(n_layer, FPP)`'s m bits (§4.1), computed here from the
spec, so the model's false positives (§5 PQ-I3) are the real filter's, bit for bit, and a hasher,
double-hashing or containment bug in the reference parts the two. `contains` is per layer (§4.3, PQ-I11):
a PID is found iff one single layer holds all its bits. Quota sensors and throttle times (PQ-I7) are not
modelled: produce observes which PIDs were counted new, nothing else.

**Time is relative.** Every stored time is an offset from `now` (layer ages, the time until the rotation
timer and the next scheduled cleanup are due), and `key` leaves `now` out, so two states that differ by a
shift of the clock are one state and a small configuration has finitely many states for runs of any
length. The rotation timer's offset is clamped at 0 ("due"): how overdue it is changes nothing, and `vars`
reports `next_rotation` as `max(next_rotation, now)` on both sides for that reason.

**Invariants.** PQ-I1, PQ-I2, PQ-I4a and PQ-I5 are about histories: the step that could break one judges
it and records it in `broken`. The ghost variables they need (the age of each (principal, PID)'s last
sighting and of its last two merges, and whether a principal stayed within PQ-I4b's rate condition) are
forgotten (-1) once too old to matter; they are in the key but not in `vars`, since no implementation
reports them. PQ-I4b and PQ-I10 are judged on the state. PQ-I6 is judged on the reference's sensor by
`properties.pidquota.binding`; PQ-I8 (isolation) follows from lockstep, as the model keeps one slot per principal
and every variable is compared; PQ-I3, PQ-I7, PQ-I9 and PQ-I11 concern the filter, sensors and hashers
abstracted here and are tested on the reference. The spec states no liveness property (PQ-I5 is bounded).

Variables: ``now``, ``next_cleanup`` and ``entries``, which maps each present principal to its ``count``
(`advance_on_count` evaluations since it last fired), ``next_rotation`` and ``layers``, oldest first, as
``[created, expires, [set bits, ascending]]`` (with the exact hasher, the layer's PIDs).

Config keys (all optional; see `EXPLORE_CONFIG` and `HYPOTHESIS_CONFIG`):

``window_ms``    W, the cache window (ms)
``layer_count``  L >= 2, with W a multiple of L (ΔT = W / L, the horizon H = W - ΔT)
``n_layer``      the per-layer design load, i.e. `advance_on_count`'s break point
``hasher``       ``"exact"`` (PID x is bit x; the default) or ``"murmur"`` (the spec's default PID hasher)
``principals``   principal names
``pids``         producer ids (distinct, >= 0)
``max_batch``    produce requests carry every ordered tuple of 1..max_batch distinct PIDs
``dts``          clock advances offered as ``advance(dt)`` (non-empty, so time can always pass)
``boundaries``   also offer advances to the next boundary: a rotation or scheduled cleanup falling due,
                 a layer ceasing to be recent (age ΔT + 1) or expiring (age W + 1)
``cleanup``      offer ``cleanup``, a `clean_map` at the current time besides the manager's schedule

Actions: ``produce(principal, pids)`` (the manager's `on_produce`: track each PID, observe the ones
counted new), ``advance(dt)`` (the clock moves; the scheduled cleanups at W, W + ΔT, ... run at their own
times; observes the principals removed) and ``cleanup()`` (observes the principals removed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import lru_cache, partial
from itertools import pairwise, permutations
from typing import NamedTuple

import mmh3

from models.core import (
    Action,
    ActionNotEnabled,
    ConfigReader,
    Invariant,
    Json,
    Liveness,
    Observation,
    Param,
    configured,
)

__all__ = [
    "ACTION_NAMES",
    "EXPLORE_CONFIG",
    "FPP",
    "HASHERS",
    "HYPOTHESIS_CONFIG",
    "VARIANTS",
    "Entry",
    "PQState",
    "PidQuotaModel",
    "Slot",
    "bloom_shape",
    "murmur_indices",
]

VARIANTS = ("current", "no_readd")
ACTION_NAMES = ("produce", "advance", "cleanup")
HASHERS = ("exact", "murmur")
FPP = 0.01
"""The cache's false-positive rate: the spec's default (§2 `cache.py`), which sizes every layer."""

EXPLORE_CONFIG: dict[str, Param] = {
    "window_ms": 4,
    "layer_count": 2,
    "n_layer": 2,
    "principals": ("A",),
    "pids": (1, 2),
    "max_batch": 2,
    "dts": (1,),
    "boundaries": True,
    "cleanup": True,
    "hasher": "exact",
}

HYPOTHESIS_CONFIG: dict[str, Param] = {
    "window_ms": 60,
    "layer_count": 2,
    "n_layer": 2,
    "principals": ("A", "B"),
    "pids": (1, 2, 3, 4),
    "max_batch": 2,
    "dts": (1, 7),
    "boundaries": True,
    "cleanup": True,
    "hasher": "exact",
}

_DEFAULTS: dict[str, Param] = {**EXPLORE_CONFIG}

# Bits of `PQState.broken`, one per history invariant.
_I1, _I2, _I4A, _I5 = 1, 2, 4, 8
_NEVER = -1
_CLEANUP = Action.of("cleanup")
_MEMO = 1 << 16  # entries per memo table: a principal's aging and cleanup repeat across many states


class Entry(NamedTuple):
    """One principal's filter: layers oldest first as (age = now - created, PID mask), and its strategies."""

    layers: tuple[tuple[int, int], ...]
    checks: int  # advance_on_count evaluations since it last fired
    rot: int  # ms until the rotation timer is due; 0 once due


class Slot(NamedTuple):
    """Everything about one principal: its cache entry (None if absent) and its ghosts."""

    entry: Entry | None
    seen: tuple[int, ...]  # per pid: age of the last sighting, -1 if none within W
    merged: tuple[int, ...]  # per pid, two slots: ages of the last two merges, -1 if none within ΔT
    calm: bool  # every track since the entry was created kept 2·(distinct PIDs in the last ΔT) <= n_layer


class PQState(NamedTuple):
    """The cache and the manager's schedule, relative to `now`, plus the ghosts of the history invariants."""

    now: int
    clean_in: int  # ms until the next scheduled clean_map
    slots: tuple[Slot, ...]  # per principal index
    broken: int  # history invariants the last step broke


def _set_bits(mask: int) -> list[Json]:
    """The set bits of `mask`, ascending: one step per set bit (an exact-hasher mask of PID 424242 is a
    424,243-bit int, and a shift per bit position made the projection quadratic in its width)."""
    out: list[Json] = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def bloom_shape(n: int, p: float) -> tuple[int, int]:
    """(k, m) of `Shape.from_np(n, p)` (§4.1): m = ceil(n·ln p / −(ln 2)²), k = round_half_up(ln 2·m/n)."""
    m = math.ceil(n * math.log(p) / -(math.log(2) ** 2))
    return math.floor(math.log(2) * m / n + 0.5), m


def murmur_indices(pid: int, k: int, m: int) -> tuple[int, ...]:
    """The spec's default PID hasher (§4.2): murmur3 x64 128 (seed 0) of the 8-byte big-endian signed PID
    gives (h1, h2); index i is (h1 − i·h2 + (i³ − i)/6) mod m for k < m, else the tetrahedral loop."""
    h1, h2 = mmh3.hash64(pid.to_bytes(8, "big", signed=True), seed=0, x64arch=True, signed=False)
    if k < m:
        return tuple((h1 - i * h2 + (i**3 - i) // 6) % m for i in range(k))
    idx, inc, tet = h1 % m, h2 % m, 1
    out = [idx]
    for _ in range(1, k):
        idx = (idx - inc) % m
        out.append(idx)
        inc = (inc - tet) % m
        tet = 0 if tet + 1 == m else tet + 1
    return tuple(out)


class PidQuotaModel:
    """The perfect cache for one variant: `current` re-adds PIDs not seen recently, `no_readd` never does."""

    mechanism = "pidquota"
    terminal_ok = None
    """A state without an enabled action is a deadlock (`Model.terminal_ok`)."""
    symmetric_key: Callable[[PQState], Hashable] | None = None
    """Set where the principals are alike (see `__init__`)."""
    threaded = None
    """The actions are no threads' steps (`Model.threaded`)."""
    action_names: Sequence[str] = ACTION_NAMES
    liveness: Sequence[Liveness[PQState]] = ()

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "current") -> None:
        cfg = configured(self.mechanism, variant, VARIANTS, config, _DEFAULTS)
        read = ConfigReader(self.mechanism, cfg)
        self.config: Mapping[str, Param] = cfg
        self.variant = variant
        self.window = read.integer("window_ms", least=1)
        self.layer_count = read.integer("layer_count", least=2)
        if self.window % self.layer_count:
            raise ValueError(f"pidquota window_ms ({self.window}) must be a multiple of layer_count")
        self.delta_t = self.window // self.layer_count
        self.horizon = self.window - self.delta_t
        self.n_layer = read.integer("n_layer", least=1)
        self.max_depth = 2 * self.layer_count + 3
        self.principals = read.strings("principals", nonempty=True, distinct=True)
        self.pids = read.integers("pids", least=0, nonempty=True, distinct=True)
        max_batch = read.integer("max_batch", least=1)
        if max_batch > len(self.pids):
            raise ValueError(f"pidquota max_batch ({max_batch}) exceeds the number of pids ({len(self.pids)})")
        self.dts = frozenset(read.integers("dts", least=1, nonempty=True, distinct=True))
        self.boundaries = read.flag("boundaries")
        self.cleanup_on = read.flag("cleanup")
        self.readd = variant == "current"
        self.hasher = cfg["hasher"]
        if self.hasher not in HASHERS:
            raise ValueError(f"pidquota config 'hasher' must be one of {HASHERS}, got {self.hasher!r}")
        self.k, self.m = bloom_shape(self.n_layer, FPP)
        self.bits: tuple[int, ...] = tuple(self.pid_mask(pid) for pid in self.pids)
        """Per configured PID (by index), the layer bits it sets."""
        self._produce: dict[Action, tuple[int, tuple[int, ...]]] = {}
        for p, name in enumerate(self.principals):
            for size in range(1, max_batch + 1):
                for idxs in permutations(range(len(self.pids)), size):
                    batch = tuple(self.pids[i] for i in idxs)
                    self._produce[Action.of("produce", principal=name, pids=batch)] = (p, idxs)
        self._static: tuple[Action, ...] = (*self._produce, *((_CLEANUP,) if self.cleanup_on else ()))
        self._advances: dict[int, Action] = {}
        self._shift = lru_cache(_MEMO)(self._shift_slot)
        self._clean = lru_cache(_MEMO)(self._clean_slot)
        renamings = tuple(permutations(range(len(self.pids)))) if self.hasher == "exact" else ()
        if len(self.principals) > 1 or len(renamings) > 1:
            self._forms = tuple(lru_cache(_MEMO)(partial(self._slot_form, r)) for r in renamings or (None,))
            self.symmetric_key = self._symmetric_key
        self.invariants: Sequence[Invariant[PQState]] = (
            Invariant("PQ-I1", lambda s: not s.broken & _I1,
                      "a PID tracked at s is never counted new at t <= s + H (no false negative in the horizon)"),
            Invariant("PQ-I2", lambda s: not s.broken & _I2,
                      "a PID sighted at most ΔT apart is counted new only at its first sighting"),
            Invariant("PQ-I4a", lambda s: not s.broken & _I4A,
                      "a PID is merged (new or re-add) at most twice in any interval of length ΔT"),
            Invariant("PQ-I4b", self._depth_bounded,
                      "a principal tracking at most n_layer/2 distinct PIDs per ΔT keeps depth <= 2L + 3"),
            Invariant("PQ-I5", lambda s: not s.broken & _I5,
                      "a clean_map at c leaves no principal whose last track is before c - W"),
            Invariant("PQ-I10", self._layers_ordered, "depth >= 1 and created is non-decreasing from index 0"),
        )

    def pid_indices(self, pid: int) -> tuple[int, ...]:
        """The k layer indices PID `pid` sets (the exact hasher repeats bit `pid`)."""
        return (pid,) * self.k if self.hasher == "exact" else murmur_indices(pid, self.k, self.m)

    def pid_mask(self, pid: int) -> int:
        return sum(1 << i for i in set(self.pid_indices(pid)))

    # --- the protocol --------------------------------------------------------------------------------

    def initial(self) -> PQState:
        npids = len(self.pids)
        empty = Slot(None, (_NEVER,) * npids, (_NEVER,) * (2 * npids), True)
        return PQState(0, self.window, (empty,) * len(self.principals), 0)

    def enabled(self, state: PQState) -> Sequence[Action]:
        dts = self._boundary_dts(state) | self.dts if self.boundaries else self.dts
        return [*self._static, *(self._advance_action(dt) for dt in sorted(dts))]

    def step(self, state: PQState, action: Action) -> tuple[PQState, Observation]:
        name = action.name
        if name == "produce":
            target = self._produce.get(action)
            if target is None:
                raise ActionNotEnabled(action, "not a configured principal with a batch of distinct pids")
            p, idxs = target
            slot, new, broken = self._track(state.slots[p], idxs)
            slots = (*state.slots[:p], slot, *state.slots[p + 1 :])
            return PQState(state.now, state.clean_in, slots, broken), {"new": list(new)}
        if name == "advance":
            dt = action.get("dt")
            if not isinstance(dt, int) or action != self._advance_action(dt) or not (
                dt in self.dts or (self.boundaries and dt in self._boundary_dts(state))
            ):
                raise ActionNotEnabled(action, f"dt is neither in {sorted(self.dts)} nor a boundary")
            return self._advance_step(state, dt)
        if action == _CLEANUP and self.cleanup_on:
            removed: list[Json] = []
            slots, broken = self._clean_all(state.slots, removed)
            return state._replace(slots=slots, broken=broken), {"removed": removed}
        raise ActionNotEnabled(action, "unknown action, or cleanup is not configured")

    def key(self, state: PQState) -> Hashable:
        return state[1:]

    def _symmetric_key(self, state: PQState) -> Hashable:
        """`key` up to renaming principals and (with the exact hasher) PIDs: the smallest of the keys of
        the state's images, slots sorted (which takes every renaming of principals) for each renaming of PIDs.

        Both are symmetries: the actions offered are the same for every principal and every PID (every
        ordered batch of distinct PIDs), a step and every invariant treat each slot, and with the exact
        hasher each PID's bit, alike, and neither name is ordered or hashed (only observations and `vars`
        show them). The murmur hasher gives PIDs overlapping bits, so they are not renamed there.
        """
        return state.clean_in, min(tuple(sorted(map(form, state.slots))) for form in self._forms), state.broken

    def _slot_form(self, renaming: tuple[int, ...] | None, slot: Slot) -> tuple[object, ...]:
        """`slot` with PID i renamed to PID `renaming[i]` (None: as it is), as a tuple that sorts (no None)."""
        entry = slot.entry
        if renaming is None:
            return (() if entry is None else entry), slot.seen, slot.merged, slot.calm
        bits = self.bits
        seen = [0] * len(slot.seen)
        merged = [0] * len(slot.merged)
        for i, j in enumerate(renaming):
            seen[j] = slot.seen[i]
            merged[2 * j], merged[2 * j + 1] = slot.merged[2 * i], slot.merged[2 * i + 1]
        layers: tuple[object, ...] = ()
        if entry is not None:
            renamed = tuple((age, sum(bits[j] for i, j in enumerate(renaming) if mask & bits[i])) for age, mask in
                            entry.layers)
            layers = (renamed, entry.checks, entry.rot)
        return layers, tuple(seen), tuple(merged), slot.calm

    def vars(self, state: PQState) -> dict[str, Json]:
        now, window = state.now, self.window
        entries: dict[str, Json] = {}
        for name, slot in zip(self.principals, state.slots, strict=True):
            entry = slot.entry
            if entry is None:
                continue
            layers: list[Json] = [
                [now - age, now - age + window, _set_bits(mask)]
                for age, mask in entry.layers
            ]
            entries[name] = {"count": entry.checks, "next_rotation": now + entry.rot, "layers": layers}
        return {"now": now, "next_cleanup": now + state.clean_in, "entries": entries}

    # --- invariants over the state -------------------------------------------------------------------

    def _depth_bounded(self, state: PQState) -> bool:
        return all(s.entry is None or not s.calm or len(s.entry.layers) <= self.max_depth for s in state.slots)

    def _layers_ordered(self, state: PQState) -> bool:
        for slot in state.slots:
            if slot.entry is None:
                continue
            layers = slot.entry.layers
            if not layers or any(a[0] < b[0] for a, b in pairwise(layers)):
                return False
        return True

    # --- transitions ---------------------------------------------------------------------------------

    def _advance_action(self, dt: int) -> Action:
        action = self._advances.get(dt)
        if action is None:
            action = self._advances[dt] = Action.of("advance", dt=dt)
        return action

    def _boundary_dts(self, state: PQState) -> set[int]:
        """The advances that land exactly on the next moment something can change (§4.5 timing)."""
        expiring, unrecent = self.window + 1, self.delta_t + 1
        out = {state.clean_in}
        for slot in state.slots:
            entry = slot.entry
            if entry is None:
                continue
            if entry.rot:
                out.add(entry.rot)
            for age, _ in entry.layers:
                if age < expiring:
                    out.add(expiring - age)
                if age < unrecent:
                    out.add(unrecent - age)
        return out

    def _advance_step(self, state: PQState, dt: int) -> tuple[PQState, Observation]:
        """Move the clock, running each scheduled clean_map at its own time on the way (§4.6)."""
        slots, shift = state.slots, self._shift
        removed: list[Json] = []
        broken = 0
        clean_in, left = state.clean_in, dt
        while clean_in <= left:
            slots = tuple(shift(s, clean_in) for s in slots)
            left -= clean_in
            slots, cleaned = self._clean_all(slots, removed)
            broken |= cleaned
            clean_in = self.delta_t
        if left:
            slots = tuple(shift(s, left) for s in slots)
        return PQState(state.now + dt, clean_in - left, slots, broken), {"removed": removed}

    def _clean_all(self, slots: tuple[Slot, ...], removed: list[Json]) -> tuple[tuple[Slot, ...], int]:
        """`clean_map` at the current time; appends the removed principals (in name order)."""
        out: list[Slot] = []
        broken = 0
        for name, slot in zip(self.principals, slots, strict=True):
            cleaned, gone, bits = self._clean(slot)
            out.append(cleaned)
            broken |= bits
            if gone:
                removed.append(name)
        removed.sort(key=str)
        return tuple(out), broken

    # --- per-principal transitions (aging and cleanup are memoized) ---------------------------------

    def _shift_slot(self, slot: Slot, d: int) -> Slot:
        """`slot` d ms later: layers and ghosts age; ghosts too old to matter are forgotten."""
        entry = slot.entry
        if entry is not None:
            entry = Entry(tuple((a + d, m) for a, m in entry.layers), entry.checks, max(0, entry.rot - d))
        window, delta_t = self.window, self.delta_t
        seen = tuple(a + d if a >= 0 and a + d <= window else _NEVER for a in slot.seen)
        merged = tuple(a + d if a >= 0 and a + d <= delta_t else _NEVER for a in slot.merged)
        return Slot(entry, seen, merged, slot.calm)

    def _clean_slot(self, slot: Slot) -> tuple[Slot, bool, int]:
        """The entry's `cleanup()`, then removal if empty: (slot, removed, PQ-I5 bit if broken)."""
        entry = slot.entry
        if entry is None:
            return slot, False, 0
        layers = list(entry.layers)
        if layers[-1][1] == 0:  # remove_empty_target
            layers.pop()
        while layers and layers[0][0] > self.window:  # expire_head: expires < now
            del layers[0]
        if not layers:
            layers.append((0, 0))  # LayerManager.cleanup refills an emptied list
        if not any(m for _, m in layers):
            return slot._replace(entry=None, calm=True), True, 0
        kept_idle = all(age < 0 for age in slot.seen)  # last track more than W ago
        return slot._replace(entry=entry._replace(layers=tuple(layers))), False, _I5 if kept_idle else 0

    def _track(self, slot: Slot, idxs: tuple[int, ...]) -> tuple[Slot, tuple[int, ...], int]:
        """`on_produce`: `track` each PID in order (§4.5); returns the slot, the PIDs counted new, broken bits."""
        window, delta_t, horizon, n_layer = self.window, self.delta_t, self.horizon, self.n_layer
        seen, merged = list(slot.seen), list(slot.merged)
        entry, calm = slot.entry, slot.calm
        if entry is None:  # a new entry: layer 0 created now, the timer due in ΔT
            layers: list[tuple[int, int]] = [(0, 0)]
            count, rot, calm = 0, delta_t, True
        else:
            layers, count, rot = list(entry.layers), entry.checks, entry.rot
        new: list[int] = []
        broken = 0
        for i in idxs:
            bit = self.bits[i]
            newest = len(layers) - 1  # contains is per layer (§4.3): one layer must hold every bit
            while newest >= 0 and layers[newest][1] & bit != bit:
                newest -= 1
            found = newest >= 0
            if not found or (self.readd and layers[newest][0] > delta_t):
                # a merge: new, or a re-add of a PID whose newest layer is no longer recent
                if merged[2 * i + 1] >= 0:
                    broken |= _I4A
                merged[2 * i + 1], merged[2 * i] = merged[2 * i], 0
                count += 1
                if count == n_layer:
                    count, rotate = 0, True
                elif rot == 0:
                    rot, rotate = delta_t, True
                else:
                    rotate = False
                if rotate:  # LayerManager.next(): cleanup, then a fresh target created now
                    if layers and layers[-1][1] == 0:
                        layers.pop()
                    while layers and layers[0][0] > window:
                        del layers[0]
                    layers.append((0, 0))
                age, mask = layers[-1]
                layers[-1] = (age, mask | bit)
            if not found:
                new.append(self.pids[i])
                last = seen[i]
                if 0 <= last <= horizon:
                    broken |= _I1
                if 0 <= last <= delta_t:
                    broken |= _I2
            seen[i] = 0
            if calm and 2 * sum(1 for a in seen if 0 <= a <= delta_t) > n_layer:
                calm = False
        return Slot(Entry(tuple(layers), count, rot), tuple(seen), tuple(merged), calm), tuple(new), broken
