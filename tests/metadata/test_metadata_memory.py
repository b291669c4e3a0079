"""The memory backend in `check`: its model semantics against the reference, its own coverage marks (reached by
its configurations, never by zk), and the harness's independent oracles catching bugs the reference would bless."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest
from hypothesis import settings

from models.core import Action, Json, Param
from models.metadata import EXPLORE_CONFIGS, HYPOTHESIS_MEMORY_CONFIG
from properties.engines.coverage import from_exploration, from_hypothesis
from properties.engines.explorer import explore
from properties.engines.lockstep import DIVERGENCE, Lockstep
from properties.metadata.binding import MECHANISM, MetadataReference, make_model
from reference_impl.metadata import MetadataCache, MetadataStore, yield_point
from reference_impl.metadata.store import MemoryBackend, MetadataOp, OpType

MEMORY = EXPLORE_CONFIGS["memory"]
MARKS = {i.name for i in MECHANISM.interesting if i.name.startswith("memory:")}


def call(name: str, p: str, c: int = 0) -> Action:
    return Action(name, (("c", c), ("p", p)))


def run(thread: str) -> Action:
    return Action("run", (("thread", thread),))


def lockstep(config: Mapping[str, Param], actions: Sequence[Action], variant: str = "pip453") -> list[list[str]]:
    """The failures of each step of `actions` played on model and reference in lockstep."""
    reference = MetadataReference(config, variant)
    try:
        steps = Lockstep(make_model(config, variant), reference)
        return [list(steps.apply(a).failures) for a in actions]
    finally:
        reference.close()


def test_the_memory_marks_are_three_and_the_memory_configuration_reaches_them_all() -> None:
    assert len(MARKS) == 3
    for variant in ("pip453", "legacy"):
        model = make_model(MEMORY, variant)
        reached = from_exploration(MECHANISM, model, explore(model, check_liveness=False)).reached
        assert reached >= MARKS, (variant, MARKS - reached)


@pytest.mark.parametrize("zk", [{"batching": False}, {"max_ops": 2}], ids=["unbatched", "batched"])
def test_the_same_load_on_zk_reaches_no_memory_mark(zk: dict[str, Param]) -> None:
    """Same paths and calls on the zk backend: a write's notification precedes its completion on the event thread,
    an event-thread refresh's read waits for that thread, and only a parent hears ChildrenChanged."""
    model = make_model({**MEMORY, **zk, "backend": "zk"}, "pip453")
    result = explore(model, check_liveness=False)
    assert result.complete and result.ok
    assert from_exploration(MECHANISM, model, result).reached & MARKS == set()


def test_the_memory_hypothesis_configuration_reaches_the_memory_marks() -> None:
    quick = settings(settings.get_profile("ci"), max_examples=60)
    assert from_hypothesis(MECHANISM, "pip453", HYPOTHESIS_MEMORY_CONFIG, quick).reached >= MARKS


def test_check_runs_the_memory_configurations() -> None:
    assert MECHANISM.explore_configs["memory"]["backend"] == "memory"
    assert MECHANISM.hypothesis_configs["memory"]["backend"] == "memory"


def test_a_memory_put_is_applied_on_the_caller_and_notifies_every_ancestor() -> None:
    """§4.2 MemoryBackend, model and reference alike: done at once, notifications queued on the event thread
    (Created, then ChildrenChanged for the parent and the grandparent), no backend or flusher thread."""
    model = make_model(MEMORY, "pip453")
    reference = MetadataReference(MEMORY, "pip453")
    try:
        steps = Lockstep(model, reference)
        outcome = steps.apply(call("put", "/a/b/c"))
        assert outcome.failures == ()
        threads = cast(dict[str, dict[str, Json]], outcome.vars["threads"])
        assert threads == {"N-event": {"queue": ["notify:Created(/a/b/c)", "notify:ChildrenChanged(/a/b)",
                                                  "notify:ChildrenChanged(/a)"], "task": "", "at": "", "wait": ""}}
        assert outcome.vars["ops"] == [["put(/a/b/c)", 0]] and outcome.vars["flush_timer"] == -1
        assert "N-backend" not in model.thread_names and "N-batch-flusher" not in model.thread_names
        assert [t.name for t in reference.world.threads if t.name.endswith(("-backend", "-flusher"))] == []
    finally:
        reference.close()


def test_a_memory_callback_joins_on_its_worker_without_blocking() -> None:
    """A cache callback runs on the path's worker and its store.get is answered there, synchronously: no wait."""
    config = {**HYPOTHESIS_MEMORY_CONFIG, "max_ops": 2}
    callback = Action("callback", (("c", 0), ("p", "/a"), ("q", "/a/b")))
    failures = lockstep(config, [callback, run("N-worker-OrderedExecutor-1-0")])
    assert failures == [[], []]
    reference = MetadataReference(config, "pip453")
    try:
        for action in (callback, run("N-worker-OrderedExecutor-1-0")):
            reference.apply(action)
        ops = {op.future.label: op for op in reference.store.ops}
        assert set(ops) == {"get(/a)", "get(/a/b)"} and all(op.future.done() for op in ops.values())
        assert reference.ledger[0].done() and reference.world.quiescent()
    finally:
        reference.close()


# --- bugs the reference's own books would bless, named by the harness's independent oracles -------------------


def _missing_delete_unanswered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant the wrong-but-consistent memory store of tests/mutants/metadata-memory-missing-delete-unanswered.patch."""
    submit = MetadataStore._submit

    def planted(self: MetadataStore, kind: OpType, path: str, data: bytes | None = None,
                expected: int | None = None) -> Any:
        if isinstance(self.backend, MemoryBackend) and kind is OpType.DELETE and path not in self.backend.tree.data:
            return self.world.future(f"delete({path})")  # no op, no registration, never completed
        return submit(self, kind, path, data, expected)

    monkeypatch.setattr(MetadataStore, "_submit", planted)


def test_a_consistent_but_unanswered_memory_delete_is_named_md_i4_from_the_ledger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _missing_delete_unanswered(monkeypatch)
    reference = MetadataReference(MEMORY, "pip453")
    try:
        reference.apply(call("delete", "/a/b/c"))
        w = reference.world
        # The World's books bless it: no op future is registered, nothing is pending, nothing is stuck.
        assert w.quiescent() and not w.stuck() and all(f.done() for f in w.op_futures)
        assert reference.violations() == ["MD-I4", "MD-I5"] and not reference.ledger[0].done()
    finally:
        reference.close()
    assert "MD-I4" in lockstep(MEMORY, [call("delete", "/a/b/c")])[0]


def test_the_memory_configuration_names_the_planted_delete_bug_within_the_conformance_walks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As `check` would: the shallowest walks of the memory configuration reach it, by name, not as a bare
    divergence; every zk configuration passes the same walks (the bug is memory-only)."""
    _missing_delete_unanswered(monkeypatch)
    named: dict[str, set[str]] = {}
    for name, config in EXPLORE_CONFIGS.items():
        model = make_model(config, "pip453")
        found: set[str] = set()
        for action in model.enabled(model.initial()):
            if action.name in ("delete", "put", "cache_get"):
                found.update(*lockstep(config, [action]))
        named[name] = found
    assert named["memory"] == {DIVERGENCE, "MD-I4", "MD-I5"}  # the unanswered future also leaves the world stuck
    assert all(found == set() for name, found in named.items() if name != "memory")


def test_a_store_that_names_no_completer_hides_the_cycle_from_the_world_but_not_from_md_i5(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """§6b before get(/q) is answered: the World's graph follows each future's `completer`, which this store leaves
    empty, so it sees no cycle and nothing stuck; the harness's `wait_for` follows the spec (ops complete on
    `<N>-event`) and names MD-I5."""
    monkeypatch.setattr(MetadataStore, "op_completer", property(lambda self: None))
    config = {**EXPLORE_CONFIGS["small"], "paths": ("/p", "/q"), "initial": ("/p",)}
    reference = MetadataReference(config, "blocking_callback")
    try:
        flush = [Action("advance")] + [run("N-batch-flusher")] * 3
        for action in [Action("store_callback", (("c", 0), ("p", "/p"), ("q", "/q"))), *flush, run("N-backend"),
                       run("N-event")]:
            reference.apply(action)
        w = reference.world
        assert w.deadlock() is None and not w.stuck()
        assert "MD-I5" in reference.violations()
    finally:
        reference.close()


def test_a_refresh_that_drops_a_reload_already_done_is_named_md_i7_on_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh that takes a reload already done when it comes to publish as applied keeps the old entry. On memory a
    notification's reload is answered inside the refresh's first step and decoded before its second, so the value
    from before the write stays cached, and MD-I7 names it the step the world settles."""

    def refresh(self: MetadataCache[Any], path: str) -> None:
        if path not in self.entries:
            return
        lock = self.key_lock(path)
        lock.acquire()
        if path in self.entries:
            fresh = self._read(path)
            yield_point(f"refresh({path})")
            if path in self.entries and not fresh.done():  # planted: a reload already done "was applied"
                self._publish(path, fresh)
        lock.release()

    monkeypatch.setattr(MetadataCache, "refresh", refresh)
    worker, event = run("N-worker-OrderedExecutor-1-0"), run("N-event")
    failures = lockstep(MEMORY, [call("cache_get", "/a"), worker, call("put", "/a", 1), event, worker, event])
    assert failures[:5] == [[]] * 5 and "MD-I7" in failures[5]


def test_a_memory_store_that_calls_listeners_inline_is_named_md_i2_by_the_harness_listener(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bug of tests/mutants/metadata-memory-listeners-called-inline.patch: no delivery task is queued and the
    World's notification log stays empty, so only the harness's own listener, called on the client, tells."""

    def apply_now(self: MemoryBackend, op: MetadataOp) -> None:
        (value, error), notes = self.tree.apply(op, every_ancestor=True)
        for store in self.tree.stores:
            for n in notes:
                for listener in store.listeners:
                    listener(n)
        if error is not None:
            op.future.fail(error)
        else:
            op.future.complete(value)

    monkeypatch.setattr(MemoryBackend, "apply_now", apply_now)
    reference = MetadataReference(MEMORY, "pip453")
    try:
        reference.apply(call("put", "/a"))
        assert reference.world.notification_log == [] and reference.heard == ["client-0"]
        assert reference.violations() == ["MD-I2"]
    finally:
        reference.close()
