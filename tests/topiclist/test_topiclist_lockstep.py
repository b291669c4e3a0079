"""The topic-list model and the reference implementation in lockstep (`properties.engines.lockstep`).

Seeded random action sequences drawn from `model.enabled()` (every other seed "swarm" style: a
random subset of action kinds is switched off for the whole run, so runs without disconnects or
closes go deep) are applied to both; after every step the projections must be equal, the
observations must be equal, and no invariant may fail, neither on the model state nor on the
reference internals (`TopicListReference.violations`). For `no_exceptional_release`, the
shortest TL-I7 trace the model has is replayed on the reference, which must report TL-I7 too.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from typing import Any

import pytest

from models.core import Action, Param, violated
from models.topiclist import (
    EXPLORE_CONFIG,
    EXPLORE_FLOWS_CONFIG,
    HYPOTHESIS_CONFIG,
    HYPOTHESIS_FLOWS_CONFIG,
    TLState,
    TopicListModel,
)
from properties.engines.lockstep import DIVERGENCE, Lockstep
from properties.topiclist.binding import TopicListReference, make_reference

NS = "public/default"
TA = "persistent://public/default/a"
TB = "persistent://public/default/b"


def _with(base: Mapping[str, Param], **changes: Param) -> dict[str, Param]:
    cfg = dict(base)
    cfg.update(changes)
    return cfg


SEMAPHORE_CONFIGS: dict[str, tuple[dict[str, Param], int, int]] = {  # config, sequences, steps
    "explore": (dict(EXPLORE_CONFIG), 700, 60),
    "hypothesis": (dict(HYPOTHESIS_CONFIG), 700, 120),
    "unbounded": (_with(HYPOTHESIS_CONFIG, max_permits=0), 150, 60),
    "unbounded_queue": (_with(HYPOTHESIS_CONFIG, max_queue_size=0, max_requests=8), 150, 100),
}

FLOWS_CONFIGS: dict[str, tuple[dict[str, Param], int, int]] = {
    "explore": (dict(EXPLORE_FLOWS_CONFIG), 500, 60),
    "hypothesis": (dict(HYPOTHESIS_FLOWS_CONFIG), 700, 150),
    "tight_pools": (
        _with(HYPOTHESIS_FLOWS_CONFIG, heap_max=120, direct_max=90, heap_queue=1, direct_queue=1),
        400,
        150,
    ),
    "shared_limiter": (
        _with(HYPOTHESIS_FLOWS_CONFIG, proxy_limiter="shared", connections=1, namespaces=(NS,), modes=("PERSISTENT",)),
        400,
        150,
    ),
    "oversized": (_with(HYPOTHESIS_FLOWS_CONFIG, heap_max=100, direct_max=60, lookup_max=1), 300, 150),
    "unbounded_heap": (_with(HYPOTHESIS_FLOWS_CONFIG, heap_max=0), 150, 150),
    "unbounded_direct": (_with(HYPOTHESIS_FLOWS_CONFIG, direct_max=0, proxy_lookup_max=0), 150, 150),
}


def random_run(config: Mapping[str, Param], variant: str, seed: int, steps: int) -> tuple[list[Action], str]:
    """Run one seeded sequence in lockstep; returns the actions and the first failure ("" if none)."""
    model = TopicListModel(config, variant)
    lock: Lockstep[TLState] = Lockstep(model, make_reference(config, variant))
    rnd = random.Random(seed)
    actions: list[Action] = []
    first = lock.initial_outcome()
    if first.failures:
        return actions, f"initial state: {first.failures} {first.detail}"
    names = sorted({a.name for a in model.enabled(model.initial())} | {"step", "advance"})
    off = {n for n in names if rnd.random() < 0.3} if seed % 2 else set()
    for _ in range(steps):
        enabled = model.enabled(lock.state)
        if not enabled:
            break
        by_name: dict[str, list[Action]] = {}
        for a in enabled:
            if a.name not in off:
                by_name.setdefault(a.name, []).append(a)
        if not by_name:
            for a in enabled:
                by_name.setdefault(a.name, []).append(a)
        action = rnd.choice(by_name[rnd.choice(sorted(by_name))])
        actions.append(action)
        outcome = lock.apply(action)
        failures = [f for f in outcome.failures if variant == "current" or f == DIVERGENCE]
        if failures:
            return actions, f"{failures} {outcome.detail}"
    return actions, ""


def _check_many(config: Mapping[str, Param], variant: str, sequences: int, steps: int) -> int:
    total = 0
    for seed in range(sequences):
        actions, failure = random_run(config, variant, seed, steps)
        total += len(actions)
        assert not failure, f"seed {seed}: {failure}\n  after: " + "\n         ".join(map(str, actions[-12:]))
    return total


@pytest.mark.parametrize("name", sorted(SEMAPHORE_CONFIGS))
def test_semaphore_lockstep_current(name: str) -> None:
    config, sequences, steps = SEMAPHORE_CONFIGS[name]
    total = _check_many(config, "current", sequences, steps)
    assert total > sequences * 5  # the runs are not trivially short


@pytest.mark.parametrize("name", sorted(FLOWS_CONFIGS))
def test_flows_lockstep_current(name: str) -> None:
    config, sequences, steps = FLOWS_CONFIGS[name]
    total = _check_many(config, "current", sequences, steps)
    assert total > sequences * 5


def test_variant_lockstep_agrees_where_listings_fit_the_heap() -> None:
    # Every topic list here fits heap_max (see test_variant_oversized_listing_... for why it matters).
    _check_many(HYPOTHESIS_FLOWS_CONFIG, "no_exceptional_release", 400, 150)


def _shortest_tl_i7_trace(model: TopicListModel) -> list[Action]:
    s0 = model.initial()
    parent: dict[Any, tuple[Any, Action] | None] = {model.key(s0): None}
    queue = deque([s0])
    while queue:
        s = queue.popleft()
        for a in model.enabled(s):
            t, _ = model.step(s, a)
            k = model.key(t)
            if k in parent:
                continue
            parent[k] = (model.key(s), a)
            if "TL-I7" in violated(model, t):
                trace: list[Action] = []
                node = parent[k]
                while node is not None:
                    trace.append(node[1])
                    node = parent[node[0]]
                return trace[::-1]
            queue.append(t)
    raise AssertionError("no TL-I7 violation is reachable")


RUN = Action.of("step")
"""In a replayed trace: `executor.run()`, i.e. `step` while an entry is due."""


def _replay(config: Mapping[str, Param], variant: str, trace: list[Action]) -> tuple[TopicListReference, set[str]]:
    reference = TopicListReference(config, variant)
    model = TopicListModel(config, variant)
    lock: Lockstep[TLState] = Lockstep(model, reference)
    failures: set[str] = set()
    for action in trace:
        while True:
            outcome = lock.apply(action)
            assert DIVERGENCE not in outcome.failures, f"{action}: {outcome.detail}"
            failures.update(outcome.failures)
            if action is not RUN or RUN not in model.enabled(lock.state):
                break
    return reference, failures


def test_variant_shortest_tl_i7_trace_fails_in_both() -> None:
    model = TopicListModel(EXPLORE_FLOWS_CONFIG, "no_exceptional_release")
    trace = _shortest_tl_i7_trace(model)
    assert len(trace) <= 4
    reference, failures = _replay(EXPLORE_FLOWS_CONFIG, "no_exceptional_release", trace)
    assert "TL-I7" in reference.violations()  # checked on the reference's own internals
    assert failures == {"TL-I7"}
    # and the same actions leave nothing behind in "current"
    _, failures = _replay(EXPLORE_FLOWS_CONFIG, "current", trace)
    assert failures == set()


def _get(rid: int = 0) -> Action:
    return Action.of("get_topics", conn=0, request_id=rid, namespace=NS, mode="PERSISTENT", topics_hash="")


LEAKS = {
    "i_listing_error": [_get(), RUN, Action.of("complete_listing", id=0, error="listing failed")],
    "ii_serialization_fault": [
        _get(),
        Action.of("arm_serialization_fault", request_id=0),
        RUN,
        Action.of("complete_listing", id=0, topics=(TA,)),
        RUN,
    ],
    "iii_failed_write": [
        _get(),
        RUN,
        Action.of("complete_listing", id=0, topics=(TA,)),
        RUN,
        Action.of("complete_write", id=0, ok=False),
    ],
}


@pytest.mark.parametrize("leak", sorted(LEAKS))
@pytest.mark.parametrize("variant", ["current", "no_exceptional_release"])
def test_variant_leak_traces_in_both(leak: str, variant: str) -> None:
    trace = [*LEAKS[leak], Action.of("advance", dt=50)]  # the deferred passes: the executor is idle
    reference, failures = _replay(EXPLORE_FLOWS_CONFIG, variant, trace)
    expected = set() if variant == "current" else {"TL-I7"}
    assert failures == expected
    assert set(reference.violations()) == expected


def test_variant_oversized_listing_keeps_releasing_the_initial_permit() -> None:
    """§6(a)1 keeps the initial heap permit only when the listing fails, not when a later stage does."""
    config = _with(EXPLORE_FLOWS_CONFIG, topic_lists=((TA, TB),))  # heap_size 122 > heap_max 100
    trace = [_get(), RUN, Action.of("complete_listing", id=0, topics=(TA, TB))]
    _replay(config, "no_exceptional_release", trace)


def test_reference_checks_see_corrupted_internals() -> None:
    """The adapter's own invariant checks are not vacuous."""
    ref = TopicListReference(EXPLORE_CONFIG, "current")
    ref.apply(Action.of("acquire", permits=2))
    ref.apply(Action.of("step"))
    assert ref.violations() == []
    world: Any = ref.world
    world.sem.available += 1
    assert {"TL-I2"} <= set(ref.violations())
    world.sem.available = 99
    assert {"TL-I1", "TL-I2"} <= set(ref.violations())

    fifo = TopicListReference(EXPLORE_CONFIG, "current")
    for action in (Action.of("acquire", permits=4), Action.of("step")):
        fifo.apply(action)
    fifo.apply(Action.of("acquire", permits=1))
    fifo.apply(Action.of("acquire", permits=2))
    sem: Any = fifo.world
    sem.sem.queue.rotate()  # a FIFO bug: the later request moves to the head
    fifo.apply(Action.of("release", permit=0))
    fifo.apply(Action.of("step"))
    assert "TL-I3" in fifo.violations()

    flows = TopicListReference(EXPLORE_FLOWS_CONFIG, "current")
    flows.apply(_get())
    flows.apply(Action.of("step"))
    assert flows.violations() == []
    fw: Any = flows.world
    fw.metrics[0].timeouts[next(iter(fw.metrics[0].timeouts))] += 1
    assert "TL-I9" in flows.violations()
