"""The dispatcher scope's state, actions and configuration keys (see `models/keyshared/dispatcher.py`).

The state is one subscription on one ledger: the published log (a key per entry), the connected
consumers in join order (name, name index, permits, pending acks, unacked-message counter, and the
client-side record of what each one holds), the dispatcher's permit total, the cursor (read position,
mark-delete, individual acks), the replay queue, the draining tracker (pip379), the recently-joined map
(classic, pip282), pip282's last-sent bookkeeping, the read flags, and the storage reads in flight.
Positions are entry ids of ledger 1.
"""

from __future__ import annotations

from typing import NamedTuple

from models.core import Param

VARIANTS = ("pip379", "classic", "pip282")
ACTION_NAMES = (
    "add",
    "remove",
    "publish",
    "flow",
    "flow_update",
    "ack",
    "redeliver",
    "redeliver_all",
    "read",
    "fire",
    "run",
    "begin_read",
    "complete_read",
    "interleaved_read",
    "settle",
    "skip",
    "clear_backlog",
    "expire",
    "reset",
)
# Offered with `async_flow` (as complete_read with begin_read), never listed in `actions`.
QUEUED = ("complete_read", "flow_update")
# The cursor jumps: mark-delete (or, for reset, the whole cursor) moves without a client ack. Only
# configurations that list them take them; see `Dispatch.jump` and `Dispatch.reset` for upstream's calls.
JUMPS = ("skip", "clear_backlog", "expire", "reset")
NORMAL, REPLAY = "Normal", "Replay"
STAGES = ("replay_filter", "dispatch")
# What a step did that the variables do not show, named in the state's `events` for coverage: a
# leaver's ring point passed to the consumer that collided there; an ack or flow run inside a pass
# released a blocking draining entry; a draining entry went away because its hash came back to the
# consumer draining it (the ADD pass of §4.5, or the lazy removal of §4.3).
PROMOTED, UNBLOCKED_IN_PASS, CAME_BACK = "promoted", "unblocked_in_pass", "came_back"
# A cursor jump's pending-ack cleanup released a draining entry; a reset moved the cursor back over
# messages that were acknowledged (they are unacknowledged again).
JUMP_RELEASED, RESET_BACK = "jump_released", "reset_back"
UNKNOWN_HASH = 0  # a replay entry re-added by a redelivery request carries no hash (STICKY_KEY_HASH_NOT_SET)

DEFAULT_CONFIG: dict[str, Param] = {
    "names": ("consumer1", "consumer2", "consumer3"),
    "keys": ("4", "0", "5"),
    "max_consumers": 3,  # connected at once
    "same_name": True,  # whether a name may join while a consumer of that name is connected
    "max_messages": 6,
    "add_permits": (0, 1, 2),  # permits a consumer may join with
    "flow": (1,),  # permits one flow may grant
    "max_permits": 3,  # flow is enabled while it keeps permits at most this
    "points": 3,
    "range_max": 65535,
    "read_batch_size": 100,
    "look_ahead_per_consumer": 4000,
    "look_ahead_per_subscription": 40000,
    # The kinds of steps the harness takes (read is always possible); begin_read brings complete_read, async_flow
    # brings flow_update.
    "actions": tuple(a for a in ACTION_NAMES if a not in QUEUED and a not in JUMPS),
    "skip": (1,),  # how many messages one `skip` may skip
    "interleave": 2,  # interleaved_read runs its ack or flow at point 1..interleave of a pass (§4.6)
    # Two spec gaps where pip379 breaks KS-I4 as written; the defaults are the spec, the gate's
    # configurations (properties/keyshared/binding.py) turn both off, and the corpus keeps both counterexamples.
    # (A) §4.4 lets the harness run anything between begin_read and complete_read. A disconnect while a
    # Replay read is in flight queues the leaver's messages, yet the read still delivers later messages
    # of their hashes: the #12885 retry only compares the first queued position with the one seen when
    # a read began, so a position queued above it passes, and a Normal read begun in the gap resets it.
    "disconnect_during_replay_read": True,
    # (B) A negative ack queues its positions without a hash (upstream's TODO in
    # redeliverUnacknowledgedMessages), so the replay filter lets such a p through while an earlier q
    # of its hash stays queued (e.g. q released by the disconnect of the consumer that nacked p). The
    # spec exempts only a q released by a negative ack; this also exempts a p released by one.
    "exempt_nacked_p": False,
    # The fix docs/findings/keyshared-jump-during-read.md proposes: a read's completion drops the entries the cursor
    # acknowledged since the read began (at or below mark-delete as well as individually acked); upstream filters
    # when a read is issued, and a Normal read's completion drops only the individually deleted entries.
    "filter_acked_on_complete": False,
    # Upstream's order for a flow (Consumer.flowPermits, then PersistentDispatcherMultipleConsumers.consumerFlow):
    # the consumer's permits grow at once, the dispatcher's total when the broker's executor runs the queued
    # internalConsumerFlow (`flow_update`), which ignores a consumer no longer connected. Off: one step does both.
    "async_flow": False,
    "max_queued_flows": 1,  # with async_flow, flow is offered while fewer are queued (a harness bound)
    # The fix docs/findings/keyshared-permits-queued-flow.md proposes: removeConsumer takes off the total only the
    # leaver's permits the total already counted (its permits less its queued flows).
    "remove_counts_queued": False,
}


class Consumer(NamedTuple):
    id: int
    name: str
    name_index: int
    permits: int
    pending: tuple[int, ...]  # broker side: positions with a pending ack (their hash is the entry's)
    held: tuple[int, ...]  # client side: delivered and not since acked or released
    # Consumer.unackedMessages: moved by dispatch (+ the entries sent), an individual ack, the mark-delete hook's
    # removeAllUpTo and both redeliveries (- what each removed from the pending acks); KS-U1 holds it to `pending`.
    unacked: int


class Draining(NamedTuple):
    hash: int
    owner: int
    ref_count: int
    blocked: bool  # blocked_count > 0: only whether it blocked matters (§4.3)


class KSState(NamedTuple):
    messages: tuple[int, ...]  # key index of each entry
    consumers: tuple[Consumer, ...]  # join order
    read_position: int
    mark_delete: int
    acked: tuple[int, ...]  # individually acked above mark-delete
    replay: tuple[tuple[int, int], ...]  # (position, hash or UNKNOWN_HASH), ascending
    draining: tuple[Draining, ...]
    scheduled_read: bool
    skip_next_replay: bool  # skip_next_replay_to_trigger_look_ahead (pip379, pip282)
    stuck_on_replays: bool  # is_dispatcher_stuck_on_replays (classic)
    recently_joined: tuple[tuple[int, int], ...]  # (consumer id, join position) in map order
    last_sent: int | None  # pip282
    sent: tuple[int, ...]  # pip282 individually_sent_positions
    normal_read: tuple[int, ...] | None  # in flight
    replay_read: tuple[int, ...] | None
    min_replayed: int | None  # only meaningful while a read is in flight
    rewind: bool  # should_rewind_before_reading_or_replaying
    nacked: tuple[int, ...]  # client: released by a redelivery request since their last delivery, unacked
    settled: bool
    pinned: tuple[int, ...]
    # With async_flow, the flows whose dispatcher half is queued on the executor, oldest first: (consumer id, n), the
    # id 0 once that consumer left (internalConsumerFlow then ignores it).
    queued_flows: tuple[tuple[int, int], ...]
    # PersistentDispatcherMultipleConsumers.totalAvailablePermits: + a flow (a join's permits are its first flow),
    # - the messages each dispatch sends, - a leaver's permits, 0 when the last consumer leaves (KS-P1).
    total_permits: int
    broken: tuple[str, ...]
    events: tuple[str, ...]  # what the last step did that no variable shows (EVENTS), for coverage
