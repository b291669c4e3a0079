"""The metadata model on the spec's worked examples (§6b, §7) and its own semantics (segments, close)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import cast

import pytest

from models.core import Action, ActionNotEnabled, Json, violated
from models.metadata import (
    CLIENT_OPS,
    EXPLORE_CONFIG,
    EXPLORE_CONFIGS,
    MDState,
    MetadataModel,
    choose_thread_index,
    java_string_hash,
)

PQ = {**EXPLORE_CONFIG, "paths": ("/p", "/q"), "initial": ("/p",), "max_ops": 4, "ops": CLIENT_OPS}


def call(name: str, p: str, q: str | None = None, c: int = 0) -> Action:
    return Action(name, (("c", c), ("p", p))) if q is None else Action(name, (("c", c), ("p", p), ("q", q)))


def threads(model: MetadataModel, state: MDState) -> dict[str, dict[str, Json]]:
    return cast(dict[str, dict[str, Json]], model.vars(state)["threads"])


def fifo(
    model: MetadataModel, state: MDState, limit: int = 200, until: Callable[[MDState], bool] | None = None
) -> MDState:
    """The canonical policy (§2.0): run the earliest enabled thread, advance only when none is enabled."""
    for _ in range(limit):
        if until is not None and until(state):
            return state
        actions = model.enabled(state)
        runs = [a for a in actions if a.name == "run"]
        choice = runs[0] if runs else next((a for a in actions if a.name == "advance"), None)
        if choice is None or (not runs and (model.quiescent(state) or model.stuck(state))):
            assert until is None, "settled before the awaited state"
            return state
        state, _ = model.step(state, choice)
    raise AssertionError("fifo did not settle")


def play(model: MetadataModel, actions: Sequence[Action], state: MDState | None = None) -> MDState:
    state = model.initial() if state is None else state
    for action in actions:
        state, _ = model.step(state, action)
    return state


@pytest.mark.parametrize(
    ("path", "h", "idx4", "idx5"),
    [
        ("/test-local/0", 1200119296, 0, 3),
        ("/test-local/4", 1200119300, 2, 0),
        ("/a", 1554, 1, 2),
        ("/admin/policies/public/default", -1965123925, 1, 0),
    ],
)
def test_path_to_worker_table(path: str, h: int, idx4: int, idx5: int) -> None:
    assert java_string_hash(path) == h
    assert (choose_thread_index(path, 4), choose_thread_index(path, 5), choose_thread_index(path, 1)) == (idx4, idx5, 0)


def test_key1_maps_to_worker_2_of_5() -> None:
    assert java_string_hash("/key1") == 46693985 and choose_thread_index("/key1", 5) == 2


def test_thread_names_per_variant() -> None:
    pip = MetadataModel(EXPLORE_CONFIG, "pip453")
    assert pip.thread_names == (
        "N-event", "N-worker-OrderedExecutor-0-0", "N-worker-OrderedExecutor-1-0", "N-batch-flusher", "N-backend",
        "client-0", "client-1",
    )
    assert MetadataModel(EXPLORE_CONFIG, "legacy").thread_names == ("N", "N-backend", "client-0", "client-1")
    unbatched = MetadataModel(EXPLORE_CONFIGS["unbatched"], "pip453")
    assert "N-batch-flusher" not in unbatched.thread_names and unbatched.initial().timer == -1


@pytest.mark.parametrize(("variant", "thread"), [("blocking_callback", "N-event"), ("legacy", "N")])
def test_blocking_callback_on_a_pending_store_get_deadlocks(variant: str, thread: str) -> None:
    """§6b: the callback runs on the completing thread and joins get(/q), whose completion queues behind it."""
    model = MetadataModel(PQ, variant)
    name = "store_callback" if variant == "blocking_callback" else "callback"
    state = fifo(model, play(model, [call(name, "/p", "/q")]))
    assert model.cycle(state) == [(thread, thread, "get(/q)")]
    assert model.stuck(state) and violated(model, state) == ["MD-I5"]
    assert model.vars(state)["deadlock"] == [[thread, thread, "get(/q)"]]
    if variant == "blocking_callback":
        assert threads(model, state)["N-event"] == {
            "queue": ["complete[1]"], "task": "complete[0]", "at": "", "wait": "get(/q)",
        }


def test_store_callback_is_only_offered_by_the_blocking_callback_variant() -> None:
    model = MetadataModel(PQ, "pip453")
    assert not any(a.name == "store_callback" for a in model.enabled(model.initial()))
    with pytest.raises(ActionNotEnabled):
        model.step(model.initial(), call("store_callback", "/p", "/q"))


@pytest.mark.parametrize("variant", ["pip453", "legacy"])
def test_callback_registered_after_completion_runs_on_the_client_and_only_waits(variant: str) -> None:
    model = MetadataModel(PQ, variant)
    state = fifo(model, play(model, [call("cache_get", "/p")]))
    assert model.vars(state)["cache"] == {"/p": [0, 0]}
    state = play(model, [call("callback", "/p", "/q")], state)
    client = threads(model, state)["client-0"]
    assert client == {"queue": [], "task": "callback(/p,/q)", "at": "", "wait": "get(/q)"}
    assert model.cycle(state) == [] and not model.stuck(state)
    state = fifo(model, state)
    assert model.quiescent(state) and violated(model, state) == []
    assert model.vars(state)["ops"] == [["get(/p)", [0, 0]], ["get(/q)", "absent"]]


def test_pip453_runs_a_cache_callback_on_the_paths_worker_where_blocking_is_harmless() -> None:
    model = MetadataModel(PQ, "pip453")
    state = play(model, [call("callback", "/p", "/q")])
    worker = model.thread_names[model.workers[0]]
    state = fifo(model, state, until=lambda s: threads(model, s).get(worker, {}).get("wait", "") != "")
    assert threads(model, state)[worker]["wait"] == "get(/q)"
    assert model.cycle(state) == [] and not model.stuck(state)
    state = fifo(model, state)
    assert model.quiescent(state) and violated(model, state) == []


def test_close_fails_queued_ops_cancels_the_flush_and_later_calls_fail_at_once() -> None:
    model = MetadataModel(PQ, "pip453")
    state = play(model, [call("put", "/p"), call("cache_get", "/q"), Action("close")])
    v = model.vars(state)
    assert v["closed"] and v["flush_timer"] == -1 and v["read_q"] == [] and v["write_q"] == []
    assert v["ops"] == [["put(/p)", "AlreadyClosedError"], ["get(/q)", "AlreadyClosedError"]]
    assert v["cache"] == {}  # the failed entry was dropped
    state = play(model, [call("get", "/q")], state)
    assert len(state.ops) == 2  # no op: a closed store fails the call at once
    assert model.quiescent(state) and violated(model, state) == []


def test_close_is_idempotent_and_the_idle_step_once_nothing_else_can_happen() -> None:
    model = MetadataModel({**PQ, "batching": False, "max_ops": 1}, "pip453")
    state = fifo(model, play(model, [call("get", "/p")]))
    assert model.enabled(state) == [Action("close")]
    closed, _ = model.step(state, Action("close"))
    again, _ = model.step(closed, Action("close"))
    assert again == closed and model.enabled(closed) == [Action("close")]


def test_put_notifies_and_refreshes_the_cached_entry() -> None:
    model = MetadataModel(PQ, "pip453")
    state = fifo(model, play(model, [call("cache_get", "/p")]))
    state = fifo(model, play(model, [call("put", "/p")], state))
    v = model.vars(state)
    assert v["tree"] == {"/p": [2, 1]} and v["cache"] == {"/p": [2, 1]}
    assert v["ops"] == [["get(/p)", [0, 0]], ["put(/p)", 1], ["get(/p)", [2, 1]]]  # the refresh's read


def test_refresh_holds_the_key_lock_across_its_yield() -> None:
    model = MetadataModel(PQ, "pip453")
    state = fifo(model, play(model, [call("cache_get", "/p")]))
    state = play(model, [call("refresh", "/p")], state)
    v = model.vars(state)
    assert v["key_locks"] == {"/p": "client-0"}
    assert threads(model, state)["client-0"] == {"queue": [], "task": "refresh(/p)", "at": "refresh(/p)", "wait": ""}
    state = fifo(model, state)
    assert model.vars(state)["key_locks"] == {} and violated(model, state) == []


def test_a_cache_miss_is_published_before_an_inline_flush() -> None:
    """Regression: the read of a miss could flush inline before its entry was published, so a Created
    notification delivered meanwhile skipped the refresh and the stale read stayed cached (MD-I7)."""
    config = {**EXPLORE_CONFIG, "ops": ("get", "put", "cache_get"), "max_operations": 1, "max_ops": 3}
    model = MetadataModel(config, "pip453")
    runs = ["client-0", "N-backend", "N-event", "client-0", "client-0", "N-backend", "N-event", "client-0",
            "client-0", "N-backend", "N-event", "N-event", "client-0", "N-worker-OrderedExecutor-1-0"]
    state = play(model, [call("get", "/a"), call("put", "/a"), call("cache_get", "/a")])
    assert model.vars(state)["cache"] == {"/a": "pending"}  # published although the client is mid-flush
    state = fifo(model, play(model, [Action("run", (("thread", t),)) for t in runs], state))
    v = model.vars(state)
    assert model.quiescent(state) and v["cache"] == {"/a": [2, 1]} == v["tree"]
    assert violated(model, state) == []


def test_config_and_variant_are_validated() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        MetadataModel(None, "pip999")
    with pytest.raises(ValueError, match="unknown config key"):
        MetadataModel({"nope": 1})
    with pytest.raises(ValueError, match="max_delay_ms"):
        MetadataModel({"max_delay_ms": 0})
    with pytest.raises(ValueError, match="invalid path"):
        MetadataModel({"paths": ("/a/",), "initial": ()})


def test_key_ignores_the_clock_and_which_client_did_what() -> None:
    model = MetadataModel(EXPLORE_CONFIG, "pip453")
    a = play(model, [call("put", "/a", c=0)])
    b = play(model, [call("put", "/a", c=1)])
    assert model.key(a) == model.key(b)
    later = play(model, [Action("advance"), Action("run", (("thread", "N-batch-flusher"),))])
    later = fifo(model, later)
    assert later.now == 5 and model.key(later) == model.key(model.initial())


_KEYS_OF_SMALL = """
from properties import registry
from properties.engines.explorer import explore
model = registry.get("metadata").make_model(registry.get("metadata").explore_configs["small"], "pip453")
print(sorted(repr(model.key(state)) for state in explore(model).states))
"""


def test_a_states_key_is_the_same_in_every_process() -> None:
    """The interchangeable client threads are put in an order that does not depend on the process: ordered by
    their `hash`, a string's differs from one interpreter to the next (PYTHONHASHSEED), so the same state had
    another key in another process (and two clients whose hashes collide could be left unordered)."""

    def keys(seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        return subprocess.run([sys.executable, "-c", _KEYS_OF_SMALL], env=env, capture_output=True, text=True,
                              check=True).stdout

    first = keys("1")
    assert "Th(" in first and first == keys("2")
