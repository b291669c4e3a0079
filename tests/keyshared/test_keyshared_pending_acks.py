"""PendingAcksMap (§4.2, worked example S8)."""

from __future__ import annotations

import pytest

from reference_impl.keyshared import PENDING_ACK_NOT_FOUND, Consumer, PendingAcksMap


class RecordingRemoveHandler:
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def handle_removing(self, consumer: Consumer, ledger_id: int, entry_id: int, h: int, closing: bool) -> None:
        self.calls.append(("remove", consumer.name, ledger_id, entry_id, h, closing))

    def start_batch(self) -> None:
        self.calls.append(("start",))

    def end_batch(self) -> None:
        self.calls.append(("end",))


class FixedAddHandler:
    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.calls: list[tuple[str, int, int, int]] = []

    def handle_adding(self, consumer: Consumer, ledger_id: int, entry_id: int, h: int) -> bool:
        self.calls.append((consumer.name, ledger_id, entry_id, h))
        return self.allow


def noop(_l: int, _e: int, _r: int, _h: int) -> None:
    pass


def test_s8_without_handlers() -> None:
    m = PendingAcksMap(Consumer("c", 1))
    assert m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert m.contains(1, 1)
    assert m.size() == 1


def test_s8_add_handler_can_refuse() -> None:
    handler = FixedAddHandler(False)
    m = PendingAcksMap(Consumer("c", 1), lambda: handler)
    assert not m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert m.size() == 0 and not m.contains(1, 1)
    assert handler.calls == [("c", 1, 1, 123)]


def test_s8_close_refuses_later_adds() -> None:
    m = PendingAcksMap(Consumer("c", 1))
    m.for_each_and_close(noop)
    assert m.closed
    assert not m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert m.size() == 0


def test_s8_clear_keeps_the_map_open() -> None:
    m = PendingAcksMap(Consumer("c", 1))
    assert m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.for_each_and_clear(noop)
    assert not m.closed and m.size() == 0
    assert m.add_pending_ack_if_allowed(1, 2, 1, 124)
    assert m.size() == 1


def test_overwrite_does_not_grow_size_and_hashes_are_stored_as_is() -> None:
    m = PendingAcksMap(Consumer("c", 1))
    assert m.add_pending_ack_if_allowed(1, 1, 1, 0)
    assert m.add_pending_ack_if_allowed(1, 1, 3, -7)
    assert m.size() == 1
    assert m.items() == [(1, 1, 3, -7)]


@pytest.mark.parametrize("remaining", [-1, 2**31])
def test_remaining_unacked_out_of_range_raises(remaining: int) -> None:
    m = PendingAcksMap(Consumer("c", 1))
    with pytest.raises(ValueError):
        m.add_pending_ack_if_allowed(1, 1, remaining, 5)
    assert m.add_pending_ack_if_allowed(1, 1, 2**31 - 1, 5)
    assert m.add_pending_ack_if_allowed(1, 2, 0, 5)


def test_remove_calls_the_handler_with_the_stored_hash() -> None:
    handler = RecordingRemoveHandler()
    m = PendingAcksMap(Consumer("c", 1), remove_handler_supplier=lambda: handler)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert not m.remove(1, 2)
    assert m.remove(1, 1)
    assert not m.remove(1, 1)
    assert handler.calls == [("remove", "c", 1, 1, 123, False)]
    assert m.size() == 0 and m.items() == []


def test_remove_with_value_requires_an_exact_match() -> None:
    m = PendingAcksMap(Consumer("c", 1))
    m.add_pending_ack_if_allowed(1, 1, 2, 123)
    assert not m.remove(1, 1, -1, 123)
    assert not m.remove(1, 1, 1, 123)
    assert not m.remove(1, 1, 2, 124)
    assert m.remove(1, 1, 2, 123)
    assert m.size() == 0


def test_remove_and_get_remaining_unacked() -> None:
    handler = RecordingRemoveHandler()
    m = PendingAcksMap(Consumer("c", 1), remove_handler_supplier=lambda: handler)
    m.add_pending_ack_if_allowed(2, 5, 4, 9)
    assert m.remove_and_get_remaining_unacked(2, 6) == PENDING_ACK_NOT_FOUND == -1
    assert m.remove_and_get_remaining_unacked(2, 5) == 4
    assert handler.calls == [("remove", "c", 2, 5, 9, False)]


def test_update_remaining_unacked() -> None:
    m = PendingAcksMap(Consumer("c", 1))
    assert not m.update_remaining_unacked(1, 1, 1)
    m.add_pending_ack_if_allowed(1, 1, 3, 77)
    assert not m.update_remaining_unacked(1, 1, 4)
    assert m.update_remaining_unacked(1, 1, 2)
    assert m.get_remaining_unacked(1, 1) == 1
    assert m.update_remaining_unacked(1, 1, 1)
    assert m.get_remaining_unacked(1, 1) == 0
    assert m.items() == [(1, 1, 0, 77)]  # reaching 0 keeps the entry and its hash
    assert m.get_remaining_unacked(9, 9) == PENDING_ACK_NOT_FOUND


def test_iteration_is_ascending_across_ledgers() -> None:
    m = PendingAcksMap(Consumer("c", 1))
    for ledger_id, entry_id in [(2, 1), (1, 9), (2, 0), (1, 10)]:
        m.add_pending_ack_if_allowed(ledger_id, entry_id, 1, entry_id + 1)
    seen: list[tuple[int, int]] = []
    m.for_each(lambda led, ent, _r, _h: seen.append((led, ent)))
    assert seen == [(1, 9), (1, 10), (2, 0), (2, 1)]
    assert m.size() == 4


def test_remove_all_up_to_is_one_batch_with_handler_then_callback() -> None:
    handler = RecordingRemoveHandler()
    m = PendingAcksMap(Consumer("c", 1), remove_handler_supplier=lambda: handler)
    for entry_id in (3, 1, 2, 5):
        m.add_pending_ack_if_allowed(1, entry_id, 1, 100 + entry_id)
    m.remove_all_up_to(1, 0)
    assert handler.calls == []  # nothing removed: no batch
    m.remove_all_up_to(1, 3, lambda led, ent, _r, h: handler.calls.append(("cb", led, ent, h)))
    assert handler.calls == [
        ("start",),
        ("remove", "c", 1, 1, 101, False),
        ("cb", 1, 1, 101),
        ("remove", "c", 1, 2, 102, False),
        ("cb", 1, 2, 102),
        ("remove", "c", 1, 3, 103, False),
        ("cb", 1, 3, 103),
        ("end",),
    ]
    assert m.items() == [(1, 5, 1, 105)] and m.size() == 1


def test_for_each_and_close_passes_closing_true_in_one_batch() -> None:
    handler = RecordingRemoveHandler()
    m = PendingAcksMap(Consumer("c", 1), remove_handler_supplier=lambda: handler)
    m.add_pending_ack_if_allowed(1, 2, 1, 12)
    m.add_pending_ack_if_allowed(1, 1, 1, 11)
    visited: list[tuple[int, int, int, int]] = []
    m.for_each_and_close(lambda *item: visited.append(item))
    assert visited == [(1, 1, 1, 11), (1, 2, 1, 12)]
    assert handler.calls == [("start",), ("remove", "c", 1, 1, 11, True), ("remove", "c", 1, 2, 12, True), ("end",)]
    assert m.size() == 0 and m.closed


def test_for_each_and_clear_passes_closing_false() -> None:
    handler = RecordingRemoveHandler()
    m = PendingAcksMap(Consumer("c", 1), remove_handler_supplier=lambda: handler)
    m.add_pending_ack_if_allowed(1, 1, 1, 11)
    m.for_each_and_clear(noop)
    assert handler.calls == [("start",), ("remove", "c", 1, 1, 11, False), ("end",)]


def test_end_batch_runs_even_if_the_processor_fails() -> None:
    handler = RecordingRemoveHandler()
    m = PendingAcksMap(Consumer("c", 1), remove_handler_supplier=lambda: handler)
    m.add_pending_ack_if_allowed(1, 1, 1, 11)

    def boom(_l: int, _e: int, _r: int, _h: int) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        m.for_each_and_clear(boom)
    assert handler.calls == [("start",), ("end",)]


def test_handler_suppliers_are_read_at_every_call() -> None:
    current: list[FixedAddHandler | None] = [None]
    m = PendingAcksMap(Consumer("c", 1), lambda: current[0])
    assert m.add_pending_ack_if_allowed(1, 1, 1, 1)
    current[0] = FixedAddHandler(False)
    assert not m.add_pending_ack_if_allowed(1, 2, 1, 1)
    current[0] = None
    assert m.add_pending_ack_if_allowed(1, 3, 1, 1)
    assert m.size() == 2


def test_consumer_owns_a_map_wired_to_its_handlers() -> None:
    c = Consumer("c", 1)
    handler = RecordingRemoveHandler()
    c.set_pending_acks_remove_handler(handler)
    c.set_pending_acks_add_handler(FixedAddHandler(True))
    assert c.get_pending_acks() is c.pending_acks
    assert c.pending_acks.add_pending_ack_if_allowed(1, 1, 1, 5)
    c.pending_acks.remove(1, 1)
    assert handler.calls == [("remove", "c", 1, 1, 5, False)]
    c.set_pending_acks_add_handler(FixedAddHandler(False))
    assert not c.pending_acks.add_pending_ack_if_allowed(1, 2, 1, 5)
