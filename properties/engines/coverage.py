"""Coverage and vacuity: which actions ran and which named interesting states were reached.

An invariant checked only on states where nothing happens is vacuously true. So each mechanism
names the situations its invariants exist for ("a request timed out", "a Bloom layer rotated"),
as predicates over the model's variables (the same projection traces and ports use, so they read
alike for every engine); the explorer and the Hypothesis runs report which ones they reached, and
the tests fail when a change silently stops reaching one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings

from models.core import Action, Json, Model, ModelWrapper, Param
from models.keyshared import CAME_BACK as KS_CAME_BACK
from models.keyshared import DEFAULT_CONFIG as KS_DEFAULTS
from models.keyshared import PROMOTED as KS_PROMOTED
from models.keyshared import UNBLOCKED_IN_PASS as KS_UNBLOCKED_IN_PASS
from models.keyshared import claims as ks_claims
from models.keyshared import sticky_hash as ks_sticky_hash
from models.keyshared_tracker import ACROSS_LEDGERS as KS_ACROSS_LEDGERS
from models.keyshared_tracker import HASH_NOT_SET as KS_HASH_NOT_SET
from models.keyshared_tracker import KEPT_MISMATCH as KS_KEPT_MISMATCH
from models.keyshared_tracker import OVERWROTE as KS_OVERWROTE
from properties.engines.explorer import Exploration
from properties.engines.mechanism import Mechanism
from properties.engines.stateful import build_state_machine, find_failure

Vars = Mapping[str, Json]
Predicate = Callable[[Mapping[str, Param], Vars], bool]


@dataclass(frozen=True)
class Interesting:
    """A named situation a check must reach for its invariants to mean something."""

    name: str
    holds: Predicate


def _list(value: Json | None) -> list[Json]:
    return list(value) if isinstance(value, list | tuple) else []


def _dicts(value: Json | None) -> list[dict[str, Json]]:
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, dict)]
    return [v for v in _list(value) if isinstance(v, dict)]


def _int(value: Json | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- topiclist: the semaphore scope has flat variables, the flows scope one record per pool -----------


def _tl_timed_out(_: Mapping[str, Param], v: Vars) -> bool:
    return _int(v.get("timeouts")) > 0 or any(_int(p.get("timeouts")) > 0 for p in _dicts(v.get("pools")))


def _tl_queue_full(c: Mapping[str, Param], v: Vars) -> bool:
    if "queue_size" in v:
        return _int(v["queue_size"]) >= _int(c.get("max_queue_size"))
    return any(
        len(_list(p.get("queue"))) >= _int(c.get(f"{str(p.get('name')).removeprefix('proxy_')}_queue"))
        for p in _dicts(v.get("pools"))
    )


def _tl_contended(_: Mapping[str, Param], v: Vars) -> bool:
    """Memory is held while another request waits for it: the situation the limiter exists for."""
    if "queue_size" in v:
        return _int(v["acquired_permits"]) > 0 and bool(_list(v["queue"]))
    return any(_int(p.get("acquired")) > 0 and _list(p.get("queue")) for p in _dicts(v.get("pools")))


def _tl_quiet_after_failure(c: Mapping[str, Param], v: Vars) -> bool:
    """Nothing held or queued, lookups all back, after a request failed (timeout or error reply)."""
    if "queue_size" in v:
        return _int(v["acquired_permits"]) == 0 and not _list(v["queue"]) and _int(v["timeouts"]) > 0
    failed = any(r.get("type") == "Error" for conn in _dicts(v.get("connections")) for r in _dicts(conn.get("replies")))
    pools = _dicts(v.get("pools"))
    idle = all(_int(p.get("acquired")) == 0 and not _list(p.get("queue")) for p in pools)
    return failed and idle and _int(v.get("lookup_available")) == _int(c.get("lookup_max")) and not _list(v["executor"])


# --- delayed: buckets are [key, ledger, entry], deliver_at [ledger, entry, time] ---------------------


def _dd_due(_: Mapping[str, Param], v: Vars) -> bool:
    return any(_int(_list(m)[-1]) <= _int(v["now"]) for m in _list(v["deliver_at"]))


def _dd_two_buckets(_: Mapping[str, Param], v: Vars) -> bool:
    return len({_int(_list(b)[0]) for b in _list(v["buckets"])}) >= 2


def _dd_drained(_: Mapping[str, Param], v: Vars) -> bool:
    """Every tracked message gone again after some were added: the tracker emptied, not just started empty."""
    return _int(v["count"]) == 0 and _int(v["highest"]) > 0


# --- pidquota: entries[principal] = {count, next_rotation, layers: [[start, end, pids]]} -------------


def _pq_rotated(_: Mapping[str, Param], v: Vars) -> bool:
    return any(len(_list(e.get("layers"))) >= 2 for e in _dicts(v["entries"]))


def _pq_expired(_: Mapping[str, Param], v: Vars) -> bool:
    """A layer past its window that cleanup has not dropped yet."""
    now = _int(v["now"])
    return any(_int(_list(layer)[1]) <= now for e in _dicts(v["entries"]) for layer in _list(e.get("layers")))


def _pq_cleaned(_: Mapping[str, Param], v: Vars) -> bool:
    """Time has passed a cleanup and no principal is tracked any more."""
    return not _dicts(v["entries"]) and _int(v["now"]) > 0


# --- metadata ------------------------------------------------------------------------------------------


def _md_flushing(_: Mapping[str, Param], v: Vars) -> bool:
    """Legacy marks a flush with a flag, PIP-453 with the flush lock its batch flusher holds."""
    return v["flush_in_progress"] is True or v["flush_lock"] not in ("", None)


def _md_blocked(_: Mapping[str, Param], v: Vars) -> bool:
    return any(t.get("wait") not in ("", None) for t in _dicts(v["threads"]))


def _md_batched(_: Mapping[str, Param], v: Vars) -> bool:
    return bool(_list(v["read_q"]) or _list(v["write_q"]))


def _md_cached(_: Mapping[str, Param], v: Vars) -> bool:
    return bool(v["cache"])


# --- keyshared ---------------------------------------------------------------------------------------


def _ks_blocked(_: Mapping[str, Param], v: Vars) -> bool:
    """A draining hash held a dispatch back (the entry's blocked flag is its fourth field)."""
    return any(_list(d)[3:4] == [True] for d in _list(v["draining"]))


def _ks_same_name(_: Mapping[str, Param], v: Vars) -> bool:
    names = [_list(c)[1] for c in _list(v["consumers"])]
    return len(names) != len(set(names))


def _ks_ring(c: Mapping[str, Param]) -> tuple[int, int]:
    """(points, range_max) of a keyshared configuration, defaults filled in."""
    return _int(c.get("points", KS_DEFAULTS["points"])), _int(c.get("range_max", KS_DEFAULTS["range_max"]))


def _ks_collided(c: Mapping[str, Param], v: Vars) -> bool:
    """Two connected consumers claim one ring point: the second waits in the point's colliding list."""
    if "ring" not in v:  # the tracker scope has no ring
        return False
    join = [(str(_list(x)[1]), _int(_list(x)[2])) for x in _list(v["consumers"])]
    return any(len(set(slots)) > 1 for slots in ks_claims(join, *_ks_ring(c)).values())


def _ks_past_draining(c: Mapping[str, Param], v: Vars) -> bool:
    """Mark-delete passed a message of a hash that is still draining (the drainer holds a later one)."""
    if "mark_delete" not in v:  # the tracker scope has no cursor
        return False
    range_max = _ks_ring(c)[1]
    draining = {_int(_list(d)[0]) for d in _list(v["draining"])}
    passed = _list(v["messages"])[: _int(v["mark_delete"]) + 1]
    return any(ks_sticky_hash(str(key), range_max) in draining for key in passed)


def _ks_event(name: str) -> Predicate:
    return lambda _, v: name in _list(v.get("events"))


def _ks_stubborn(_: Mapping[str, Param], v: Vars) -> bool:
    """Settled with a consumer that never acks again while a hash drains towards it: the liveness case."""
    return v.get("settled") is True and bool(_list(v.get("pinned"))) and bool(_list(v["draining"]))


def _ks_tracker_pending(v: Vars) -> list[list[Json]]:
    """The tracker scope's pending acks, `[ledger, entry, remaining, hash]` (the dispatcher's hold entry ids)."""
    if "owners" not in v:
        return []
    return [_list(p) for held in _list(v["pending"]) for p in _list(_list(held)[1])]


def _ks_two_ledgers(_: Mapping[str, Param], v: Vars) -> bool:
    """One consumer holds pending acks of two ledgers (tracker scope)."""
    if "owners" not in v:
        return False
    return any(len({_int(_list(p)[0]) for p in _list(_list(held)[1])}) > 1 for held in _list(v["pending"]))


INTERESTING: Mapping[str, tuple[Interesting, ...]] = {
    "keyshared": (
        Interesting("a hash is draining", lambda _, v: bool(_list(v["draining"]))),
        Interesting("a draining hash blocked a dispatch", _ks_blocked),
        Interesting("a message awaits replay", lambda _, v: bool(_list(v["replay"]))),
        Interesting("a read is in flight", lambda _, v: bool(_list(v.get("reads_in_flight")))),
        Interesting("two consumers share a name", _ks_same_name),
        Interesting("a stubborn consumer pins a draining hash", _ks_stubborn),
        Interesting("two consumers collided on a ring point", _ks_collided),
        Interesting("a collided consumer was promoted", _ks_event(KS_PROMOTED)),
        Interesting("mark-delete moved past a draining entry", _ks_past_draining),
        Interesting("a hash was unblocked during a pass", _ks_event(KS_UNBLOCKED_IN_PASS)),
        Interesting("a draining hash came back to its draining consumer", _ks_event(KS_CAME_BACK)),
        Interesting("a consumer holds pending acks of two ledgers", _ks_two_ledgers),
        Interesting("a pending ack counts a batch of several messages",
                    lambda _, v: any(_int(p[2]) > 1 for p in _ks_tracker_pending(v))),
        Interesting("a pending ack was overwritten", _ks_event(KS_OVERWROTE)),
        Interesting("a 4-argument remove kept a pending ack of another value", _ks_event(KS_KEPT_MISMATCH)),
        Interesting("the add handler rejected hash 0", _ks_event(KS_HASH_NOT_SET)),
        Interesting("remove_all_up_to ran over a map of two ledgers", _ks_event(KS_ACROSS_LEDGERS)),
    ),
    "topiclist": (
        Interesting("a request timed out", _tl_timed_out),
        Interesting("the queue is full", _tl_queue_full),
        Interesting("memory held while a request waits", _tl_contended),
        Interesting("a leak-free quiescent state after a failure", _tl_quiet_after_failure),
    ),
    "delayed": (
        Interesting("timer armed", lambda _, v: bool(_list(v["timer"]))),
        Interesting("a message is due", _dd_due),
        Interesting("two buckets tracked", _dd_two_buckets),
        Interesting("the tracker drained", _dd_drained),
    ),
    "pidquota": (
        Interesting("a Bloom layer rotated", _pq_rotated),
        Interesting("a layer expired", _pq_expired),
        Interesting("all entries cleaned up", _pq_cleaned),
    ),
    "metadata": (
        Interesting("a flush is in progress", _md_flushing),
        Interesting("a thread blocked", _md_blocked),
        Interesting("an operation waits in a batch queue", _md_batched),
        Interesting("a value is cached", _md_cached),
        Interesting("the store closed", lambda _, v: v["closed"] is True),
    ),
}
"""Interesting states by mechanism; a mechanism without an entry reports action coverage only."""

NOT_OFFERED: Mapping[tuple[str, str], Mapping[str, str]] = {
    ("metadata", "pip453"): {"store_callback": "only the blocking_callback variant offers it (the PIP's bad example)"},
}
"""Actions a variant never enables by design, with the reason; they are exempt from action coverage."""


@dataclass
class Coverage:
    """Actions taken (by name, with counts) and interesting states reached, for one mechanism."""

    mechanism: str
    variant: str
    action_names: tuple[str, ...]
    actions: dict[str, int] = field(default_factory=dict)
    reached: set[str] = field(default_factory=set)

    @property
    def interesting(self) -> tuple[str, ...]:
        return tuple(i.name for i in INTERESTING.get(self.mechanism, ()))

    @property
    def exempt(self) -> Mapping[str, str]:
        return NOT_OFFERED.get((self.mechanism, self.variant), {})

    @property
    def missing_actions(self) -> list[str]:
        return [a for a in self.action_names if not self.actions.get(a) and a not in self.exempt]

    @property
    def missing_states(self) -> list[str]:
        return [s for s in self.interesting if s not in self.reached]

    def observe(self, config: Mapping[str, Param], states: Iterable[Vars]) -> None:
        """Mark the interesting states among `states`; stops once every one is reached."""
        todo = [i for i in INTERESTING.get(self.mechanism, ()) if i.name not in self.reached]
        for state in states:
            if not todo:
                return
            hit = [i for i in todo if i.holds(config, state)]
            self.reached.update(i.name for i in hit)
            todo = [i for i in todo if i not in hit]

    def merge(self, other: Coverage) -> None:
        self.action_names = tuple(dict.fromkeys([*self.action_names, *other.action_names]))
        for name, count in other.actions.items():
            self.actions[name] = self.actions.get(name, 0) + count
        self.reached |= other.reached

    def summary(self) -> str:
        """One line: `actions 7/7, interesting states 4/4` plus what is missing."""
        expected = len(self.action_names) - len([a for a in self.action_names if a in self.exempt])
        ran = expected - len(self.missing_actions)
        line = f"actions {ran}/{expected}, interesting states {len(self.reached)}/{len(self.interesting)}"
        missing = [*self.missing_actions, *(f'"{s}"' for s in self.missing_states)]
        return line + (f"; never reached: {', '.join(missing)}" if missing else "")


def from_exploration(model: Model[Any], exploration: Exploration[Any]) -> Coverage:
    """Coverage of one explorer run: its per-action counts and the interesting states among its states."""
    coverage = Coverage(model.mechanism, model.variant, tuple(model.action_names), dict(exploration.coverage))
    coverage.observe(model.config, (model.vars(s) for s in exploration.states))
    return coverage


class _Observed(ModelWrapper[Any]):
    """A model that records every state the harness projects (the lockstep projects each one once)."""

    def __init__(self, model: Model[Any], seen: list[Vars]) -> None:
        super().__init__(model)
        self.seen = seen

    def vars(self, state: Any) -> dict[str, Json]:
        projected = self.inner.vars(state)
        self.seen.append(projected)
        return projected


class Recorder:
    """Feeds `coverage` from Hypothesis runs as they go, so a check's own runs report what they reached.

    `wrap` each model the machine builds (its projected states are kept) and pass `step` as the
    machine's `on_step`; `flush` after the last run. States are observed in chunks: a long run must
    not hold every state.
    """

    def __init__(self, coverage: Coverage, config: Mapping[str, Param]) -> None:
        self.coverage, self.config = coverage, config
        self.seen: list[Vars] = []

    def wrap(self, model: Model[Any]) -> Model[Any]:
        return _Observed(model, self.seen)

    def step(self, action: Action) -> None:
        self.coverage.actions[action.name] = self.coverage.actions.get(action.name, 0) + 1
        if len(self.seen) > 10_000:
            self.flush()

    def flush(self) -> None:
        self.coverage.observe(self.config, self.seen)
        self.seen.clear()


def from_hypothesis(
    mechanism: Mechanism,
    variant: str,
    config: Mapping[str, Param],
    settings: Settings,
    seed: int = 0,
    action_names: Sequence[str] | None = None,
) -> Coverage:
    """Coverage of one Hypothesis run of the model alone (rules = `action_names`, default all).

    The model runs without the reference: coverage is about what the model's rules reach.
    """
    model = mechanism.make_model(config, variant)
    names = tuple(model.action_names if action_names is None else action_names)
    coverage = Coverage(mechanism.name, variant, tuple(model.action_names))
    recorder = Recorder(coverage, config)
    machine = build_state_machine(lambda: recorder.wrap(mechanism.make_model(config, variant)), names, None,
                                  on_step=recorder.step)
    error = find_failure(hypothesis_seed(seed)(machine), settings)
    if error is not None:
        raise AssertionError(f"{mechanism.name}/{variant} failed while measuring coverage: {error}")
    recorder.flush()
    return coverage
