"""keyshared tracker scope, widened vocabulary: two ledgers, batches, overwrites, the 4-argument remove,
`remove_and_get_remaining_unacked` and hash 0, pinned on the model and the reference at once.

The upstream Java classes, driven through the port protocol, showed the first vocabulary coarser than
upstream (issue 20, item 3); each case here is one the first configuration could not express.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.core import Action, Json, Observation
from models.keyshared.tracker import (
    ACROSS_LEDGERS,
    HASH_NOT_SET,
    KEPT_MISMATCH,
    OVERWROTE,
    WIDE_EXPLORE_CONFIG,
    KeySharedTrackerModel,
)
from properties.engines.coverage import from_exploration
from properties.engines.explorer import explore
from properties.keyshared.binding import MECHANISM
from tests.keyshared.test_keyshared_tracker import run as run_on

A = 11707  # key "4": entry 0 (ledger 2) and entry 1 (ledger 1); entry 2 (ledger 1) has no sticky hash
# Hash A starts with consumer 1.


def add(consumer: int, position: int, h: int = A, batch_size: int = 1) -> Action:
    return Action.of("add_pending_ack_if_allowed", consumer=consumer, position=position, batch_size=batch_size, hash=h)


def run(actions: Sequence[Action]) -> tuple[list[Observation], dict[str, Json]]:
    """The actions on the model and the reference in lockstep, on the wide configuration (see the tracker tests)."""
    return run_on(actions, WIDE_EXPLORE_CONFIG)


def test_maps_order_positions_by_ledger_then_entry_and_mark_delete_follows_that_order() -> None:
    up_to_1 = Action.of("remove_all_up_to", consumer=1, position=1)  # (ledger 1, entry 1)
    observations, state = run([add(1, 0), add(1, 1), up_to_1])
    assert state["pending"] == [[1, [[2, 0, 1, A]]], [2, []]]  # entry 0 of ledger 2 stays
    assert observations[2] == {"removed": [[1, 1, A]], "unblocked": []}
    assert state["events"] == [ACROSS_LEDGERS]


def test_an_overwrite_replaces_the_batch_size_and_keeps_one_pending_ack() -> None:
    observations, state = run([add(1, 1, batch_size=2), add(1, 1, batch_size=1)])
    assert observations[1] == {"added": True, "unblocked": []}
    assert state["pending"] == [[1, [[1, 1, 1, A]]], [2, []]] and state["events"] == [OVERWROTE]


def test_the_4_argument_remove_removes_only_an_exact_match() -> None:
    kept = Action.of("remove", consumer=1, position=1, batch_size=1, hash=A)
    gone = Action.of("remove", consumer=1, position=1, batch_size=2, hash=A)
    observations, state = run([add(1, 1, batch_size=2), kept])
    assert observations[1] == {"removed": False, "unblocked": []} and state["events"] == [KEPT_MISMATCH]
    observations, state = run([add(1, 1, batch_size=2), kept, gone])
    assert observations[2] == {"removed": True, "unblocked": []} and state["pending"] == [[1, []], [2, []]]


def test_remove_and_get_returns_the_batch_size_and_releases_a_draining_ref() -> None:
    move = Action.of("move_hash", hash=A, consumer=2)
    block = Action.of("should_block_sticky_key_hash", consumer=2, hash=A)
    get = Action.of("remove_and_get_remaining_unacked", consumer=1, position=0)
    observations, state = run([add(1, 0, batch_size=2), move, block, get])
    assert observations[3] == {"removed": 2, "unblocked": [A]}
    assert state["draining"] == []


def test_hash_0_is_rejected_by_the_add_handler_and_never_blocks() -> None:
    block = Action.of("should_block_sticky_key_hash", consumer=2, hash=0)
    observations, state = run([add(2, 2, h=0), block])
    assert observations == [{"error": "IllegalArgumentException", "unblocked": []},
                            {"blocked": False, "unblocked": []}]
    assert state["pending"] == [[1, []], [2, []]] and state["owners"] == [[A, 1]]


def test_the_wide_configuration_is_small_complete_and_reaches_each_new_mark() -> None:
    model = KeySharedTrackerModel(WIDE_EXPLORE_CONFIG)
    result = explore(model, terminal_ok=model.terminal_ok)
    assert result.ok and result.complete and len(result.states) == 552
    reached = from_exploration(MECHANISM, model, result).reached
    assert {"a consumer holds pending acks of two ledgers", "a pending ack counts a batch of several messages",
            "a pending ack was overwritten", "a 4-argument remove kept a pending ack of another value",
            "the add handler rejected hash 0", "remove_all_up_to ran over a map of two ledgers"} <= reached
    assert {e for s in result.states for e in s.events} == {OVERWROTE, KEPT_MISMATCH, HASH_NOT_SET, ACROSS_LEDGERS}
