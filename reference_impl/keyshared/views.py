"""Identity-free snapshots of a dispatcher (consumers by id) that a harness compares and checks."""

from __future__ import annotations

from dataclasses import dataclass

from .common import Position


@dataclass(frozen=True)
class ConsumerView:
    name: str
    consumer_id: int
    connected: bool
    permits: int
    available_permits: int
    received: tuple[Position, ...]
    pending_acks: tuple[tuple[Position, int], ...]  # (position, hash), ascending


@dataclass(frozen=True)
class DrainingView:
    hash: int
    consumer_id: int
    ref_count: int
    blocked_count: int


@dataclass(frozen=True)
class DispatcherView:
    """Identity-free snapshot of everything a harness compares or checks (consumers by id)."""

    variant: str
    consumers: tuple[ConsumerView, ...]
    read_position: Position
    mark_delete_position: Position
    individually_acked: tuple[Position, ...]
    replay_queue: tuple[tuple[Position, int | None], ...]
    draining_hashes: tuple[DrainingView, ...]
    ring_ranges: tuple[tuple[int, int, int], ...]  # (start, end, consumer_id)
    recently_joined: tuple[tuple[int, Position], ...]
    last_sent_position: Position | None
    individually_sent_positions: tuple[Position, ...]
    scheduled_read: bool
    skip_next_replay_to_trigger_look_ahead: bool
    is_dispatcher_stuck_on_replays: bool
    min_replayed_position: Position | None
    have_pending_read: bool
    have_pending_replay_read: bool
    should_rewind_before_reading_or_replaying: bool
    unblock_calls: tuple[int, ...]
    delivery_count: int
