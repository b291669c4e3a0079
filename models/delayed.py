"""The executable spec of delayed delivery on time buckets (PR #23611; ``docs/spec/delayed.md``).

A pure transition system over one subscription: an ``InMemoryDelayedDeliveryTracker`` (§3-§4), its
timer (§4.6) and the dispatcher that re-checks the exact ``D`` of every offer (§2, §4.5). It is
written from the spec, independently of ``reference_impl/delayed/``, so the two run in lockstep.
The bitmaps are abstracted to a sorted tuple of ``(key, position)``; the storage invariants only the
bitmaps can break (DD-I5's "no empty map", DD-I7) are checked on the reference by ``properties.delayed.binding``.

Actions (each one complete harness step, §5):

* ``add(ledger, entry, deliver_at)``: a cursor read through the dispatcher (``DispatcherModel.read``).
  A position keeps the ``D`` of its first read (``D`` is a message property); later reads of it are
  re-reads with that ``D``. New ``D`` values are drawn around the bucket edges ``k*P - 1, k*P, k*P + 1``
  next to the cutoff, around the tick (``now + T - 1, now + T, now + T + 1``), and ``-1`` (no delay).
* ``advance(now)``: move the clock to the next ms, the next bucket edges, the time the head bucket
  falls due, the head key, the armed timer's deadline, or the time a tracked message becomes deliverable.
* ``get_scheduled(limit)``: one dispatcher round with a small or large ``limit`` (config ``limits``):
  ``get_scheduled_messages(limit)``, then each offer is re-added with its exact ``D``.
* ``fire``: the armed handle fires, at or after its deadline; its ``run`` triggers a round of ``round_size``.
* ``run(handle)``: ``run`` called with a ``"foreign"`` (stale, uncancelled) or a ``"cancelled"`` handle.
* ``should_pause``, ``clear``.

Offers and deliveries are events, so they are observations (``{"offered", "delivered"}``), not
variables: the properties about them (DD-I1, DD-I2, DD-I3's progress, DD-I4, DD-I9, DD-I10) are judged
on the transition and recorded in the state's ``broken`` field, which stays empty in a correct run
and so does not multiply the explored states. DD-I8 is a definition the model implements; the
reference must agree with it on the ``fixed``/``highest`` variables and the ``should_pause`` answers.

Config keys: ``tick`` (T), ``strict``, ``lookahead`` (fixed-delay detection), ``ledgers`` and
``entries`` (positions are their product), ``max_deliver_at`` (the clock stops at
``max_deliver_at + P - 1``, where every bucket is due), ``limits``, ``round_size``, and
``extra_deliver_at``/``extra_now``: values always offered to ``add``/``advance`` (the worked examples).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from functools import lru_cache
from itertools import groupby
from typing import NamedTuple

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
    int_param,
)

__all__ = [
    "ACTION_NAMES",
    "EXPLORE_CONFIG",
    "HYPOTHESIS_CONFIG",
    "MAX_LONG",
    "VARIANTS",
    "DelayedModel",
    "DelayedState",
    "bitmap_bytes",
]

MAX_LONG = 2**63 - 1
VARIANTS = ("current", "pr23611")
ACTION_NAMES = ("add", "advance", "get_scheduled", "fire", "run", "should_pause", "clear")
NO_DELAY = -1
_ARGUMENTS = {"add": ("ledger", "entry", "deliver_at"), "advance": ("now",), "get_scheduled": ("limit",)}
_NOTHING: frozenset[str] = frozenset()

# Small enough to enumerate in seconds; T = 3 gives P = 2, so T != P and BC(now) = now + 2 (current).
EXPLORE_CONFIG: dict[str, Param] = {
    "tick": 3,
    "strict": False,
    "lookahead": 2,
    "ledgers": (1, 2),
    "entries": (0,),
    "max_deliver_at": 6,
    "limits": (1, 2),
    "round_size": 1,
    "extra_deliver_at": (),
    "extra_now": (),
}

# Pulsar's default tick (P = 512); entries across containers and high halves for the memory accounting.
HYPOTHESIS_CONFIG: dict[str, Param] = {
    "tick": 1000,
    "strict": False,
    "lookahead": 3,
    "ledgers": (1, 2, 3),
    "entries": (0, 1, 65536, 2**32),
    "max_deliver_at": 100_000,
    "limits": (1, 2, 100),
    "round_size": 2,
    "extra_deliver_at": (),
    "extra_now": (),
}


class DelayedState(NamedTuple):
    """Tracker, timer and dispatcher of one subscription; positions are indices into the sorted positions.

    ``pending`` (accepted, neither offered nor cleared since: DD-I3), ``owed`` (read and not delivered
    since its latest read: DD-L1) and ``stale`` (a handle left armed by ``clear``: DD-I6) are ghost
    bitmasks/flags; ``broken`` names the transition properties the step into this state broke.
    """

    now: int
    tracked: tuple[tuple[int, int], ...]  # sorted (bucket key, position): (key, ledger, entry) order
    tracked_count: int  # the tracker's incrementally kept count (DD-I5)
    highest: int
    fixed: bool
    timer: tuple[int, int] | None  # (target, deadline) of the armed handle
    last_tick_run: int
    deliver_at: tuple[int | None, ...]  # the dispatcher's exact D per position; None before the first read
    pending: int
    owed: int
    stale: bool
    broken: frozenset[str]


def _trim(x: int, bits: int) -> int:
    return x & -(1 << bits)


def _round_up(x: int, bits: int) -> int:
    """Round up to a multiple of ``2**bits``, saturating at ``trim(Long.MAX_VALUE)`` (§3)."""
    step = 1 << bits
    return _trim(x + step - 1 if x + step - 1 <= MAX_LONG else MAX_LONG, bits)


def bitmap_bytes(entries: Sequence[int]) -> int:
    """Serialized size of a non-run ``BitMap64`` holding the sorted ``entries``: the closed form of §4.4."""
    size = 8
    highs: set[int] = set()
    for chunk, values in groupby(entries, key=lambda v: v >> 16):
        highs.add(chunk >> 16)
        size += 8 + min(2 * sum(1 for _ in values), 8192)
    return size + 12 * len(highs)


@lru_cache(maxsize=1 << 16)
def _reads(ledger: int, entry: int, choices: tuple[int, ...]) -> tuple[Action, ...]:
    """The ``add`` actions of one position, shared by every model instance (Hypothesis builds one per run)."""
    return tuple(Action.of("add", ledger=ledger, entry=entry, deliver_at=d) for d in choices)


@lru_cache(maxsize=1 << 12)
def _advance(now: int) -> Action:
    return Action.of("advance", now=now)


class _Step:
    """A mutable copy of a state for one step; the operations follow §4 line by line."""

    __slots__ = (
        "broken",
        "count",
        "deliver_at",
        "delivered",
        "fixed",
        "highest",
        "last_tick_run",
        "m",
        "now",
        "offered",
        "owed",
        "pending",
        "stale",
        "timer",
        "tracked",
    )

    def __init__(self, m: DelayedModel, s: DelayedState) -> None:
        self.m = m
        self.now = s.now
        self.tracked = list(s.tracked)
        self.count = s.tracked_count
        self.highest = s.highest
        self.fixed = s.fixed
        self.timer = s.timer
        self.last_tick_run = s.last_tick_run
        self.deliver_at = s.deliver_at
        self.pending = s.pending
        self.owed = s.owed
        self.stale = s.stale
        self.broken: set[str] = set()
        self.offered: list[int] = []
        self.delivered: list[int] = []

    def freeze(self) -> DelayedState:
        return DelayedState(
            self.now,
            tuple(self.tracked),
            self.count,
            self.highest,
            self.fixed,
            self.timer,
            self.last_tick_run,
            self.deliver_at,
            self.pending,
            self.owed,
            self.stale,
            frozenset(self.broken) if self.broken else _NOTHING,
        )

    def early(self, pos: int) -> bool:
        """Before ``D`` (strict) or more than ``T`` before it: what DD-I1 and DD-I2 forbid."""
        d = self.deliver_at[pos]
        return d is not None and d > self.now + self.m.c_offset

    def add_message(self, pos: int, d: int) -> bool:
        """§4.1: True = held back, False = deliver now."""
        m = self.m
        if d < 0 or d <= self.now + m.c_offset:
            self.fixed = False
            return False
        entry = (m.bucket_key(d), pos)
        if entry not in self.tracked:
            self.tracked.append(entry)
            self.tracked.sort()
            self.count += 1
        self.pending |= 1 << pos
        self.update_timer()
        if d < self.highest - m.tick:
            self.fixed = False
        self.highest = max(self.highest, d)
        return True

    def update_timer(self) -> None:
        """§4.6: one handle for the head key, at most one trigger per tick."""
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
        delay = max(delay, self.last_tick_run + self.m.tick - self.now)
        self.timer = (head, self.now + delay)

    def available(self) -> bool:
        """§4.2, with its side effect."""
        ok = bool(self.tracked) and self.tracked[0][0] <= self.now + self.m.bc_offset
        if not ok:
            self.update_timer()
        return ok

    def get_scheduled(self, n: int) -> list[int]:
        """§4.3: drain the due prefix in (key, ledger, entry) order; positions sorted by (ledger, entry)."""
        cut = self.now + self.m.bc_offset
        taken = 0
        while taken < n and taken < len(self.tracked) and self.tracked[taken][0] <= cut:
            taken += 1
        drained = sorted(pos for _, pos in self.tracked[:taken])
        del self.tracked[:taken]
        self.count -= taken
        for pos in drained:
            self.pending &= ~(1 << pos)
        if not self.tracked:
            self.highest = 0
            self.fixed = True
        self.update_timer()
        return drained

    def dispatch_round(self, limit: int) -> None:
        """``DispatcherModel.dispatch_round``: offer, re-add with the exact D, deliver what is not withheld."""
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
        self.judge_round(before, drained, limit)

    def judge_round(self, before: list[tuple[int, int]], drained: list[int], limit: int) -> None:
        """DD-I3 progress, DD-I4 and DD-I10 on what the round left behind, from the state before it."""
        m = self.m
        cut = self.now + m.bc_offset
        offered = [t for t in before if t[1] in drained]
        left = [t for t in before if t[1] not in drained]
        due_left = [t for t in left if t[0] <= cut]
        if offered and due_left and min(due_left) < max(offered):
            self.broken.add("DD-I4")
        if len(drained) < limit:
            if due_left:
                self.broken.add("DD-I3")
            floor = self.now + m.c_offset - m.precision + 2
            if any(d is not None and d < floor for d in (self.deliver_at[pos] for _, pos in left)):
                self.broken.add("DD-I10")

    def deliver(self, pos: int) -> None:
        if self.early(pos):
            self.broken.add("DD-I2")
        self.delivered.append(pos)
        self.owed &= ~(1 << pos)


class DelayedModel:
    """The tracker, timer and dispatcher of one subscription, for one variant; the mode is ``config["strict"]``.

    Missing config keys take their ``EXPLORE_CONFIG`` values, so ``DelayedModel()`` is the explorer's model.
    """

    mechanism = "delayed"
    terminal_ok = symmetric_key = threaded = None
    """No optional member of `Model`: a state without an enabled action is a deadlock, no values are alike, and
    the actions are no threads' steps."""
    action_names: Sequence[str] = ACTION_NAMES

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "current") -> None:
        merged = configured(self.mechanism, variant, VARIANTS, config, EXPLORE_CONFIG)
        read = ConfigReader(self.mechanism, merged)
        strict = read.flag("strict")
        self.variant = variant
        self.tick = read.integer("tick", least=1)
        self.strict = strict
        self.lookahead = read.integer("lookahead", least=0)
        self.max_deliver_at = read.integer("max_deliver_at", least=0)
        self.round_size = read.integer("round_size", least=1)
        # Each list of values is kept as a set, in ascending order.
        ledgers = tuple(sorted(set(read.integers("ledgers", least=0, nonempty=True))))
        entries = tuple(sorted(set(read.integers("entries", least=0, nonempty=True))))
        self.limits = tuple(sorted(set(read.integers("limits", least=1, nonempty=True))))
        self.extra_deliver_at = tuple(sorted(set(read.integers("extra_deliver_at", least=NO_DELAY))))
        self.extra_now = tuple(sorted(set(read.integers("extra_now", least=1))))
        self.config: Mapping[str, Param] = {
            **merged,
            "ledgers": ledgers,
            "entries": entries,
            "limits": self.limits,
            "extra_deliver_at": self.extra_deliver_at,
            "extra_now": self.extra_now,
        }
        self.bits = self.tick.bit_length() - 1
        self.precision = 1 << self.bits
        self.horizon = self.max_deliver_at + self.precision - 1
        self.positions = tuple((ledger, entry) for ledger in ledgers for entry in entries)
        self.index = {p: i for i, p in enumerate(self.positions)}
        self.round_up_keys = variant == "current" and strict
        # C(now) = now + c_offset and BC(now) = now + bc_offset (§3).
        self.c_offset = 0 if strict else self.tick
        self.bc_offset = self.tick - self.precision + 1 if variant == "current" and not strict else self.c_offset
        self._always = (
            *(Action.of("get_scheduled", limit=n) for n in self.limits),
            Action.of("run", handle="foreign"),
            Action.of("run", handle="cancelled"),
            Action.of("should_pause"),
            Action.of("clear"),
        )
        self._fire = Action.of("fire")
        self._choices: dict[int, tuple[int, ...]] = {}
        self._parsed: dict[Action, tuple[Action, tuple[int, int]]] = {}

        def unbroken(name: str) -> Invariant[DelayedState]:
            return Invariant(name, lambda s: name not in s.broken, DESCRIPTIONS[name])

        self.invariants: Sequence[Invariant[DelayedState]] = [
            unbroken("DD-I1"),
            unbroken("DD-I2"),
            Invariant("DD-I3", self._no_lost_message, DESCRIPTIONS["DD-I3"]),
            unbroken("DD-I4"),
            Invariant("DD-I5", lambda s: s.tracked_count == len(s.tracked), DESCRIPTIONS["DD-I5"]),
            Invariant("DD-I6", self._timer_ok, DESCRIPTIONS["DD-I6"]),
            unbroken("DD-I9"),
            unbroken("DD-I10"),
        ]
        self.liveness: Sequence[Liveness[DelayedState]] = [
            Liveness("DD-L1", lambda s: s.owed == 0, "every message read is eventually delivered as time advances"),
        ]

    def bucket_key(self, d: int) -> int:
        """The bucket a message with exact time ``d`` goes to (§3)."""
        return _round_up(d, self.bits) if self.round_up_keys else _trim(d, self.bits)

    # ----- state properties -----

    def _no_lost_message(self, s: DelayedState) -> bool:
        """DD-I3: tracked iff accepted and neither offered nor cleared since, under the key of its D."""
        if "DD-I3" in s.broken:
            return False
        mask = 0
        for key, pos in s.tracked:
            d = s.deliver_at[pos]
            if d is None or key != self.bucket_key(d):
                return False
            mask |= 1 << pos
        return mask == s.pending

    def _timer_ok(self, s: DelayedState) -> bool:
        """DD-I6: a handle for the head key unless the head is due; none when empty, except after clear."""
        if not s.tracked:
            return s.timer is None or s.stale
        head = s.tracked[0][0]
        return head <= s.now or (s.timer is not None and s.timer[0] == head and s.timer[1] >= head)

    # ----- transition system -----

    def initial(self) -> DelayedState:
        return DelayedState(0, (), 0, 0, True, None, 0, (None,) * len(self.positions), 0, 0, False, _NOTHING)

    def _deliver_at_choices(self, now: int) -> tuple[int, ...]:
        """New D values: bucket edges next to the cutoff, tick edges, and no delay (§9 'small')."""
        found = self._choices.get(now)
        if found is None:
            cutoff = now + self.c_offset
            base = _trim(cutoff, self.bits)
            edges = {
                NO_DELAY,
                cutoff,
                cutoff + 1,
                now + self.tick - 1,
                now + self.tick,
                now + self.tick + 1,
                *self.extra_deliver_at,
            }
            for k in range(3):
                edge = base + k * self.precision
                edges.update((edge - 1, edge, edge + 1))
            found = tuple(sorted(d for d in edges if NO_DELAY <= d <= self.max_deliver_at))
            self._choices[now] = found
        return found

    def _advance_targets(self, s: DelayedState) -> list[int]:
        now = s.now
        edge = _trim(now, self.bits) + self.precision
        targets = {now + 1, edge - 1, edge, edge + 1, *self.extra_now}
        if s.tracked:
            head = s.tracked[0][0]
            targets.update((head, head - self.bc_offset))
        if s.timer is not None:
            targets.add(s.timer[1])
        for _, pos in s.tracked:
            d = s.deliver_at[pos]
            if d is not None:
                targets.add(d - self.c_offset)
        return sorted(t for t in targets if now < t <= self.horizon)

    def enabled(self, state: DelayedState) -> Sequence[Action]:
        out: list[Action] = []
        choices = self._deliver_at_choices(state.now)
        for (ledger, entry), d in zip(self.positions, state.deliver_at, strict=True):
            if d is None:
                out.extend(_reads(ledger, entry, choices))
            else:
                out.extend(_reads(ledger, entry, (d,)))
        out.extend(_advance(t) for t in self._advance_targets(state))
        if state.timer is not None and state.now >= state.timer[1]:
            out.append(self._fire)
        out.extend(self._always)
        return out

    def _parse(self, action: Action) -> tuple[int, int]:
        """The action's two int arguments (cached per action): validated once, then looked up. Since
        `1 == True == 1.0`, an action equal to one already parsed may still carry a bool or a float, which must
        be refused whatever came before: a hit counts only for the very object parsed (the explorer steps the
        actions `enabled` returned) or one whose parameters have the same types."""
        hit = self._parsed.get(action)
        if hit is not None:
            known, found = hit
            if known is action or [type(v) for _, v in known.params] == [type(v) for _, v in action.params]:
                return found
        values = [int_param(action, name) for name in _ARGUMENTS.get(action.name, ())]
        if action.name == "add":
            pos = self.index.get((values[0], values[1]))
            if pos is None:
                raise ActionNotEnabled(action, "unknown position")
            found = (pos, values[2])
        elif action.name == "run":
            if action.get("handle") not in ("foreign", "cancelled"):
                raise ActionNotEnabled(action, "handle must be 'foreign' or 'cancelled'")
            found = (int(action.get("handle") == "foreign"), 0)
        elif action.name in ACTION_NAMES:
            found = (values[0] if values else 0, 0)
        else:
            raise ActionNotEnabled(action, "unknown action")
        self._parsed[action] = (action, found)
        return found

    def _round(self, w: _Step) -> Observation:
        return {
            "offered": [list(self.positions[p]) for p in w.offered],
            "delivered": [list(self.positions[p]) for p in w.delivered],
        }

    def step(self, state: DelayedState, action: Action) -> tuple[DelayedState, Observation]:
        name = action.name
        a, b = self._parse(action)
        if name == "advance":
            if a not in self._advance_targets(state):
                raise ActionNotEnabled(action, f"now={state.now}: not a clock target")
            return state._replace(now=a, broken=_NOTHING), None
        if name == "run" and not a:  # a cancelled handle: run() returns at once
            return state._replace(broken=_NOTHING), {"offered": [], "delivered": []}
        if name == "should_pause" and not (self.lookahead and state.fixed and state.tracked_count >= self.lookahead):
            return state._replace(broken=_NOTHING), {"pause": False}  # short-circuits before availability
        w = _Step(self, state)
        observation: Observation = None
        if name == "add":
            known = state.deliver_at[a]
            if b != known and (known is not None or b not in self._deliver_at_choices(state.now)):
                raise ActionNotEnabled(action, f"now={state.now}: D must be one of the choices or the message's own")
            w.deliver_at = (*state.deliver_at[:a], b, *state.deliver_at[a + 1 :])
            held = w.add_message(a, b)
            if held:
                w.owed |= 1 << a
            else:
                w.deliver(a)
            observation = {"delivered": not held}
        elif name == "get_scheduled":
            if a not in self.limits:
                raise ActionNotEnabled(action, f"limit must be one of {self.limits}")
            w.dispatch_round(a)
            observation = self._round(w)
        elif name == "fire":
            if state.timer is None or state.now < state.timer[1]:
                raise ActionNotEnabled(action, f"now={state.now}: no armed handle is due ({state.timer})")
            w.last_tick_run = state.now
            w.timer = None
            w.stale = False
            w.dispatch_round(self.round_size)
            observation = self._round(w)
        elif name == "run":  # a foreign handle: throttle from now, then one round
            w.last_tick_run = state.now
            w.dispatch_round(self.round_size)
            observation = self._round(w)
        elif name == "should_pause":
            observation = {"pause": not w.available()}
        else:  # clear
            w.stale = w.timer is not None
            w.tracked, w.count, w.pending = [], 0, 0
        return w.freeze(), observation

    def key(self, state: DelayedState) -> Hashable:
        return state

    def vars(self, state: DelayedState) -> dict[str, Json]:
        layout = [(key, *self.positions[pos]) for key, pos in state.tracked]
        memory = sum(
            bitmap_bytes([entry for _, _, entry in group]) for _, group in groupby(layout, key=lambda t: t[:2])
        )
        return {
            "now": state.now,
            "buckets": [list(t) for t in layout],
            "count": state.tracked_count,
            "memory": memory,
            "highest": state.highest,
            "fixed": state.fixed,
            "timer": list(state.timer) if state.timer is not None else [],
            "last_tick_run": state.last_tick_run,
            "deliver_at": [[*self.positions[i], d] for i, d in enumerate(state.deliver_at) if d is not None],
        }


DESCRIPTIONS = {
    "DD-I1": "no offer before D (strict) or more than T before it (non-strict)",
    "DD-I2": "no delivery before D (strict) or more than T before it (non-strict)",
    "DD-I3": "tracked iff accepted and neither offered nor cleared since; a round with room left offers "
    "every due message",
    "DD-I4": "a round offers the (key, ledger, entry)-smallest due messages",
    "DD-I5": "count == number of tracked (key, ledger, entry) triples",
    "DD-I6": "one armed handle, for the head key, unless the head is due; none when empty except after clear",
    "DD-I9": "every offer is delivered in the same round (no wasted replay)",
    "DD-I10": "after a round with room left, no message is more than P - 1 ms later than legacy would offer it",
}
