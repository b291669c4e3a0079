"""Key_Shared's port vocabulary: the whole dispatcher, (scope tracker) its pending-acks maps and draining
tracker, or (scope locks) that tracker at lock granularity.

Meanings keyed by the model's own names; `brokerspec protocol` adds types and examples from the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Param
from properties.engines.mechanism import ActionDoc, Vocabulary

_PENDING_ACK = "[consumer, positions]"
KEYSHARED = Vocabulary(
    config={
        "names": "consumer names add may use",
        "keys": "message keys publish may use",
        "max_consumers": "consumers connected at once",
        "same_name": "a name may join while a consumer of that name is connected (it gets the next name index)",
        "max_messages": "how many messages may be published",
        "add_permits": "permits a consumer may join with",
        "flow": "permits one flow may grant",
        "max_permits": "flow is offered while it keeps the consumer's permits at most this",
        "points": "ring points per consumer",
        "range_max": "the hash range [1, range_max]",
        "read_batch_size": "the most entries one read asks for",
        "look_ahead_per_consumer": "look-ahead limit per consumer (replay queue size that stops normal reads)",
        "look_ahead_per_subscription": "look-ahead limit per subscription",
        "actions": "the kinds of steps the harness takes (read is always offered; begin_read brings complete_read)",
        "skip": "how many messages one skip may skip",
        "interleave": "interleaved_read runs its ack or flow at point 1..interleave of a pass",
        "disconnect_during_replay_read": "offer remove while a Replay read is in flight (a spec gap)",
        "exempt_nacked_p": "the replay filter also exempts a position released by a negative ack (a spec gap)",
        "async_flow": "a flow adds to the consumer at once and to the dispatcher's total in a later flow_update, as "
                      "upstream's executor hop does",
        "max_queued_flows": "async_flow: flow is offered while fewer flows than this are queued",
        "remove_counts_queued": "a leaver takes off the total only the permits it counted (the queued-flow "
                                "finding's fix)",
        "filter_acked_on_complete": "a read's completion drops the entries the cursor acknowledged while it "
                                    "was in flight (the jump-during-read finding's fix; upstream drops only "
                                    "individually deleted ones)",
    },
    vars={
        "messages": "the published log: message i is entry i of ledger 1 (its position)",
        "messages[]": "the message's key",
        "consumers": "connected consumers in join order",
        "consumers[]": "[id, name, name_index, permits] one consumer",
        "consumers[].id": "the consumer id (add's consumer: the smallest unused id from 1)",
        "consumers[].name": "its name",
        "consumers[].name_index": "the smallest index not used by a connected consumer of the same name",
        "consumers[].permits": "its available permits (flow adds, each delivery takes one)",
        "pending": "per consumer in join order, the dispatcher's pending acks: positions sent and not yet acked or "
                   "released",
        "pending[]": f"{_PENDING_ACK} in join order",
        "pending[].consumer": "the consumer id",
        "pending[].positions": "positions, ascending",
        "pending[].positions[]": "a position",
        "unacked": "per consumer in join order, the broker's unacked-message counter (Consumer.unackedMessages): "
                   "+1 per message sent, -1 per pending ack an ack, a mark-delete cleanup or a redelivery removed",
        "unacked[]": "[consumer, count] in join order",
        "unacked[].consumer": "the consumer id",
        "unacked[].count": "its counter",
        "total_permits": "the dispatcher's totalAvailablePermits: + each flow (a join's permits count as its first "
                         "flow), - each message sent, - a leaver's permits, 0 when the last consumer leaves",
        "queued_flows": "async_flow: flows whose dispatcher half (internalConsumerFlow) waits on the broker's "
                        "executor, oldest first",
        "queued_flows[]": "[consumer, n] one queued flow",
        "queued_flows[].consumer": "the consumer id, or 0 once that consumer left (the update is then ignored)",
        "queued_flows[].n": "the permits it adds to the total",
        "held": "per consumer in join order, the client's record: delivered and not acked, redelivered or lost by "
                "disconnecting (KS-I1 is checked on it)",
        "held[]": f"{_PENDING_ACK} in join order",
        "held[].consumer": "the consumer id",
        "held[].positions": "positions, ascending",
        "held[].positions[]": "a position",
        "ring": "the consistent-hash ring: ranges tiling [1, range_max] in ascending order, each point selected by its "
                "earliest-joined claimer",
        "ring[]": "[start, end, consumer] a range and the consumer selected for it",
        "ring[].start": "first hash",
        "ring[].end": "last hash",
        "ring[].consumer": "the consumer id",
        "read_position": "the next entry a Normal read reads: mark_delete + 1 when the first consumer joins (no read "
                         "in flight); past the last entry read; raised to mark_delete + 1 when mark-delete passes it; "
                         "reset to mark_delete + 1 by a rewind",
        "mark_delete": "every position <= mark_delete is acked (-1 initially); moves up over contiguous acks",
        "acked": "positions individually acked above mark_delete, ascending",
        "acked[]": "a position",
        "replay": "the replay queue, ascending by position (a set: a position is in it at most once)",
        "replay[]": "[position, hash] a position to redeliver; hash 0 when re-added by a redelivery request",
        "replay[].position": "the position",
        "replay[].hash": "its sticky-key hash, or 0 (unknown)",
        "draining": "pip379: hashes whose previous owner still has pending acks of them, sorted by hash",
        "draining[]": "[hash, consumer, ref_count, blocked] one draining hash",
        "draining[].hash": "the sticky-key hash",
        "draining[].consumer": "the consumer draining it (its previous owner)",
        "draining[].ref_count": "that consumer's pending acks of the hash; the entry goes at 0",
        "draining[].blocked": "a dispatch to the new owner was blocked by it",
        "recently_joined": "classic, pip282: consumers that joined while messages were outstanding, in join order (a "
                           "consumer that joins again keeps its place)",
        "recently_joined[]": "[consumer, position] the consumer and its join position",
        "recently_joined[].consumer": "the consumer id",
        "recently_joined[].position": "it may receive only positions below this",
        "last_sent": "pip282: [] or [the last sent position]: at most one element",
        "last_sent[]": "a position",
        "sent": "pip282: positions individually sent above last_sent, ascending",
        "sent[]": "a position",
        "scheduled_read": "a read is scheduled (fire performs it)",
        "skip_next_replay": "pip379, pip282: the next read skips the replay queue to trigger look-ahead",
        "stuck_on_replays": "classic: is_dispatcher_stuck_on_replays",
        "reads_in_flight": "storage reads begun and not completed (at most one per kind), Normal first",
        "reads_in_flight[]": "[kind, positions] one read",
        "reads_in_flight[].kind": "Normal or Replay",
        "reads_in_flight[].positions": "the positions read, ascending",
        "reads_in_flight[].positions[]": "a position",
        "rewind_pending": "the first consumer joined while a read was in flight: when the last read completes, "
                          "read_position goes back to mark_delete + 1",
        "nacked": "the client's record: positions released by a redelivery request since delivered, unacked, ascending",
        "nacked[]": "a position",
        "settled": "settle was taken: no more add, remove, publish, redeliver, interleaved_read or settle",
        "pinned": "positions the stubborn consumer never acks (ack is not offered for them), ascending",
        "pinned[]": "a position",
        "events": "what the step did that no variable shows, a sorted set of names (docs/ports.md says when each "
                  "fires); reset each step",
        "events[]": "an event name",
    },
    actions={
        "add": ActionDoc("a consumer connects (joins the ring; pip379 registers draining hashes for its new ranges)",
                         "not settled and fewer than max_consumers are connected (same_name: else only unused names)",
                         {"consumer": "its id: the smallest unused id from 1", "name": "its name",
                          "permits": "its initial permits"}),
        "remove": ActionDoc("a consumer disconnects: its pending acks go to the replay queue",
                            "not settled (and no Replay read in flight unless disconnect_during_replay_read)",
                            {"consumer": "the consumer id"}),
        "publish": ActionDoc("a producer appends a message", "not settled and fewer than max_messages published",
                             {"key": "the message key"}),
        "flow": ActionDoc("a consumer grants permits", "its permits + n <= max_permits",
                          {"consumer": "the consumer id", "n": "permits granted"}),
        "flow_update": ActionDoc("the broker's executor runs the oldest queued flow's dispatcher half: the total grows "
                                 "by its permits unless its consumer left", "async_flow and a flow is queued"),
        "ack": ActionDoc("a consumer acks a position it holds", "the consumer holds the position and it is not pinned",
                         {"consumer": "the consumer id", "position": "the position"}),
        "redeliver": ActionDoc("a negative ack of one held position: it goes to the replay queue with hash 0",
                               "not settled and the consumer holds the position",
                               {"consumer": "the consumer id", "position": "the position"}),
        "redeliver_all": ActionDoc("redeliver every message the consumer holds", "not settled and it holds some",
                                   {"consumer": "the consumer id"}),
        "read": ActionDoc("the dispatcher reads and dispatches once (begin_read then complete_read)", "always"),
        "fire": ActionDoc("the scheduled read runs", "scheduled_read"),
        "run": ActionDoc("the dispatcher reads until nothing changes (at most 1000 reads)", "always"),
        "begin_read": ActionDoc("the dispatcher begins a storage read (replay first, else normal); observes it",
                                "a read kind is not in flight"),
        "complete_read": ActionDoc("a storage read completes and is dispatched", "a read of that kind is in flight",
                                   {"kind": "Normal or Replay"}),
        "interleaved_read": ActionDoc("a read during which an ack or flow runs at a point of a dispatch pass",
                                      "not settled, some consumer connected, and the inner ack or flow is enabled",
                                      {"stage": "replay_filter or dispatch", "index": "the point of the pass (1..)",
                                       "inner": "[action, consumer, value] the inner ack or flow",
                                       "inner.action": "ack or flow", "inner.consumer": "the consumer id",
                                       "inner.value": "the ack's position or the flow's n"}),
        "skip": ActionDoc("the subscription skips n messages: mark-delete moves past the n-th entry after it that is "
                          "not individually acked (or the last entry), without a client ack; every consumer's pending "
                          "acks up to it and the replay queue's go, as an ack moving mark-delete there would do",
                          "skip is in actions and an entry above mark_delete is not acked", {"n": "messages skipped"}),
        "clear_backlog": ActionDoc("the subscription's backlog is cleared: mark-delete moves to the last entry, as "
                                   "skip does",
                                   "clear_backlog is in actions and an entry above mark_delete is not acked"),
        "expire": ActionDoc("message expiry: mark-delete moves to position, as skip does", "expire is in actions",
                            {"position": "the new mark-delete, an entry above mark_delete"}),
        "reset": ActionDoc("the cursor is reset: every consumer is disconnected (as remove, in join order), then "
                           "read_position is position, mark_delete position - 1 and acked empty",
                           "reset is in actions and no read is in flight",
                           {"position": "an entry, or the end of the log, forward or back"}),
        "settle": ActionDoc("commit the rest of the run: no more consumer changes, publishing or negative acks",
                            "not settled and some consumer connected (stubborn: one holding messages)",
                            {"stubborn": "0, or the consumer that never acks what it holds now (pinned)"}),
    },
    observation={
        "delivered": "messages dispatched during the step, in send order",
        "delivered[]": "[consumer, position] one delivery",
        "delivered[].consumer": "the consumer id",
        "delivered[].position": "the position",
        "read": '[kind, positions] begin_read: the read begun, or ["None", []] when nothing is read',
        "read.kind": "Normal, Replay or None",
        "read.positions": "the positions read, ascending",
        "read.positions[]": "a position",
    },
)

_TRACKER_POSITION = "[ledger, entry, hash] a position and its sticky-key hash"
KEYSHARED_TRACKER = Vocabulary(
    config={
        "scope": '"tracker": PendingAcksMap and DrainingHashesTracker only',
        "consumers": "consumers, numbered from 1 (named consumer1, ...)",
        "position_hashes": "position p's fixed sticky-key hash (0: no hash)",
        "position_ledgers": "position p's ledger (empty: all ledger 1); maps order positions by (ledger, entry)",
        "batch_sizes": "the remaining-unacked counts an add may carry",
        "max_batch_level": "how deep the harness nests start_batch",
    },
    vars={
        "consumers": "every consumer, by id",
        "consumers[]": "[id, name, closed] one consumer",
        "consumers[].id": "the consumer id",
        "consumers[].name": "consumer<id>",
        "consumers[].closed": "its pending-acks map was closed (for_each_and_close)",
        "owners": "the selector: per configured non-zero hash, ascending, the consumer owning it; initially hash i "
                  "(in ascending order) is owned by consumer i mod consumers + 1",
        "owners[]": "[hash, consumer] a hash and its owner",
        "owners[].hash": "a hash",
        "owners[].consumer": "its owner",
        "pending": "per consumer, its pending-acks map in (ledger, entry) order",
        "pending[]": "[consumer, acks] one consumer's map",
        "pending[].consumer": "the consumer id",
        "pending[].acks": "its pending acks, in (ledger, entry) order",
        "pending[].acks[]": "[ledger, entry, remaining, hash] one pending ack",
        "pending[].acks[].ledger": "ledger id",
        "pending[].acks[].entry": "entry id (the position)",
        "pending[].acks[].remaining": "the batch's remaining-unacked count",
        "pending[].acks[].hash": "its sticky-key hash",
        "draining": "the tracker's entries, sorted by hash: hashes whose previous owner still has pending acks of them",
        "draining[]": "[hash, consumer, ref_count, blocked] one entry",
        "draining[].hash": "the hash",
        "draining[].consumer": "the consumer draining it (not its owner)",
        "draining[].ref_count": "that consumer's pending acks of the hash; the entry goes at 0",
        "draining[].blocked": "should_block_sticky_key_hash returned true for it (blocked_count > 0)",
        "batch_level": "the tracker's batch nesting depth",
        "unblocked_while_batching": "an unblock happened inside the current batch (reported at its end as -1)",
        "replay": "positions the add handler refused (awaiting replay) until added again, in (ledger, entry) order; a "
                  "set: a position refused twice is in it once",
        "replay[]": _TRACKER_POSITION,
        "replay[].ledger": "ledger id",
        "replay[].entry": "entry id",
        "replay[].hash": "its hash",
        "events": "what the step did that no variable shows, a sorted set of names (overwrote, kept_mismatch, "
                  "hash_not_set, across_ledgers: docs/ports.md says when each fires); reset each step",
        "events[]": "an event name",
    },
    actions={
        "add_pending_ack_if_allowed": ActionDoc(
            "a send of a position to the hash's owner: the add handler may refuse it (draining elsewhere)",
            "consumer owns hash (hash 0: any open consumer) and no other consumer holds the position",
            {"consumer": "the consumer id", "position": "the entry id", "batch_size": "remaining-unacked count",
             "hash": "the position's hash"}),
        "remove": ActionDoc("an individual ack of a held position (the remove handler releases its hash)",
                            "the consumer holds the position; with batch_size and hash: the 4-argument form, "
                            "removing only if the stored value matches",
                            {"consumer": "the consumer id", "position": "the entry id",
                             "batch_size": "4-argument form: the expected remaining count",
                             "hash": "4-argument form: the expected hash"}),
        "remove_and_get_remaining_unacked": ActionDoc("remove a held position, observing its remaining count",
                                                      "the consumer holds the position",
                                                      {"consumer": "the consumer id", "position": "the entry id"}),
        "remove_all_up_to": ActionDoc("a mark-delete move: remove every position up to (ledger, entry) of `position`",
                                      "the consumer holds a position at or below it in map order",
                                      {"consumer": "the consumer id", "position": "the entry id"}),
        "for_each_and_clear": ActionDoc("redeliver everything the consumer holds (removals may unblock)",
                                        "the consumer is open", {"consumer": "the consumer id"}),
        "for_each_and_close": ActionDoc("the consumer disconnects: removals never unblock, the map closes",
                                        "the consumer is open", {"consumer": "the consumer id"}),
        "should_block_sticky_key_hash": ActionDoc(
            "the dispatcher asks whether a send of the hash to its owner must wait (draining elsewhere)",
            "consumer is the hash's owner and open (hash 0: any open consumer)",
            {"consumer": "the asking consumer", "hash": "the hash"}),
        "move_hash": ActionDoc("the selector moves a hash to another open consumer; register_draining_hashes runs",
                               "consumer is open and not the hash's owner",
                               {"hash": "the hash", "consumer": "the new owner"}),
        "start_batch": ActionDoc("the tracker's start_batch", "batch_level < max_batch_level"),
        "end_batch": ActionDoc("the tracker's end_batch (an outermost end reports one unblock, -1, if any happened)",
                               "batch_level > 0"),
    },
    observation={
        "unblocked": "the unblocking handler's arguments during the step, in call order",
        "unblocked[]": "a hash, or -1 for the one call at the end of an outermost batch",
        "added": "add_pending_ack_if_allowed: whether the add handler accepted it",
        "error": "the Java exception's simple name (IllegalArgumentException for hash 0)",
        "blocked": "should_block_sticky_key_hash's answer",
        "removed": "remove: a bool; remove_and_get_remaining_unacked: the remaining count or -1; batch removals: "
                   "the positions visited in order",
        "removed[]": _TRACKER_POSITION,
        "removed[].ledger": "ledger id",
        "removed[].entry": "entry id",
        "removed[].hash": "its hash",
    },
)

_STEP = ("the operation the thread is about to perform, as the Java method and the lock or atomic it touches "
         "(e.g. 'reduceRefCount: tracker.writeLock.lock'): one step runs it and the thread's code up to its next "
         "scheduling point (see models/keyshared/locks.py)")
_HOLDERS = "the threads holding it (the writer first), by name"
KEYSHARED_LOCKS = Vocabulary(
    config={
        "scope": '"locks": DrainingHashesTracker, PendingAcksMap and their callers at upstream\'s lock granularity',
        "order": "the tracker's code: current (upstream today), locked-block (the proposed fix), pre23854 (every "
                 "method synchronized, handler and stats inside), unserialized (callers without the PendingAcksMap "
                 "lock)",
        "pending": "consumer 1's pending acks at the start: a count (entries 0 .. pending-1, of hash 1) or one hash "
                   "per entry (entries 0, 1, ...); of hashes it owns",
        "pending2": "consumer 2's pending acks at the start, one hash per entry (entries 10, 11, ...); of hashes it "
                    "owns",
        "hashes": "per sticky hash (1, then 2), the consumers the selector gives it to, most preferred first: a hash "
                  "belongs to its most preferred connected consumer (as on the consistent-hash ring)",
        "present": "the consumers connected at the start",
        "dispatcher": "the dispatcher thread's script: 'join C' (consumer C joins and takes the hashes that prefer "
                      "it: the REMOVE part of registerDrainingHashes for each loser), 'leave C' (it leaves: its "
                      "hashes go to the next in line, its map is closed with its acks released with closing, then "
                      "the ADD part for each heir), 'block' or 'block H' (shouldBlockStickyKeyHash for the owner of "
                      "hash H, 1 by default)",
        "membership": "with consumers joining and leaving on a thread of their own (a connection's): its script of "
                      "'join C' and 'leave C'; the dispatcher thread then only dispatches ('block', 'block H'), and "
                      "every dispatcher-side operation runs inside the dispatcher's monitor (empty: one dispatcher "
                      "thread does both, the monitor never contended)",
        "acker": "consumer 1's connection thread's script: 'ack N' (PendingAcksMap.remove) and 'ack-up-to N' "
                 "(removeAllUpTo, a handler batch), N one of its pending acks",
        "acker2": "consumer 2's connection thread's script, as the acker's (empty: no such thread)",
        "unchecked": "invariants left out (a known finding that would end every Hypothesis run)",
    },
    vars={
        "owner": "with one hash: the consumer owning it",
        "owners": "with two hashes: each one's owner, hash 1 first",
        "owners[]": "[hash, consumer] one hash's",
        "owners[].hash": "the hash",
        "owners[].consumer": "the consumer owning it",
        "pending": "each consumer's pending acks, consumer 1 first",
        "pending[]": "[consumer, acks] one consumer's",
        "pending[].consumer": "the consumer id",
        "pending[].acks": "its pending acks, entry ids ascending",
        "pending[].acks[]": "an entry id",
        "closed": "each consumer's map was closed (forEachAndClose), consumer 1 first",
        "closed[]": "whether that consumer's map is closed",
        "draining": "the tracker's entries, one per draining hash, by hash",
        "draining[]": "[hash, consumer, ref_count, blocked_count] the entry",
        "draining[].hash": "the hash",
        "draining[].consumer": "the consumer draining it",
        "draining[].ref_count": "its ref count",
        "draining[].blocked_count": "its blocked count",
        "batch_level": "the tracker's batch nesting",
        "unblocked_while_batching": "a removal inside a batch decided to unblock",
        "stats": "each consumer the stats map holds, by consumer id",
        "stats[]": "[consumer, hashes] one consumer's stats",
        "stats[].consumer": "the consumer id",
        "stats[].hashes": "the hashes its stats hold, ascending",
        "stats[].hashes[]": "a hash",
        "locks": "who holds the tracker's lock (its write lock, or the monitor before #23854) and each map's",
        "locks.tracker": _HOLDERS,
        "locks.map[1]": _HOLDERS,
        "locks.map[2]": _HOLDERS,
        "locks.map[3]": "with a third consumer: " + _HOLDERS,
        "locks.tracker[]": "a thread's name",
        "locks.map[1][]": "a thread's name",
        "locks.map[2][]": "a thread's name",
        "locks.map[3][]": "a thread's name",
        "locks.dispatcher": "with a membership thread: " + _HOLDERS,
        "locks.dispatcher[]": "a thread's name",
        "unblocked": "the unblocking handler's calls in order (the hash, or -1 when a batch ends)",
        "unblocked[]": "a hash, or -1",
        "replay": "entry ids the closed maps handed to redelivery, in order",
        "replay[]": "an entry id",
        "blocks": "each finished dispatch's verdict (true: blocked), in order",
        "blocks[]": "a verdict",
        "threads": "the dispatcher thread first, then the acker, then acker2 and the membership thread if there are "
                   "such",
        "threads[]": "[name, next] one thread",
        "threads[].name": "the thread",
        "threads[].next": "its next operation, or done",
        "broken": "invariants a step broke (they stay broken), sorted",
        "broken[]": "an invariant name",
    },
    actions={
        "dispatcher": ActionDoc("the dispatcher thread runs to its next scheduling point",
                                "its script is not done and the lock its next operation takes is free to it",
                                {"step": _STEP}),
        "acker": ActionDoc("the acker thread runs to its next scheduling point",
                           "its script is not done and the lock its next operation takes is free to it",
                           {"step": _STEP}),
        "acker2": ActionDoc("consumer 2's acker thread runs to its next scheduling point",
                            "the configuration has one, its script is not done and the lock its next operation takes "
                            "is free to it", {"step": _STEP}),
        "membership": ActionDoc("the membership thread runs to its next scheduling point",
                                "the configuration has one, its script is not done and the lock its next operation "
                                "takes is free to it", {"step": _STEP}),
    },
    observation={},
)

VOCABULARIES: Mapping[str, Vocabulary] = {
    "keyshared": KEYSHARED, "keyshared/tracker": KEYSHARED_TRACKER, "keyshared/locks": KEYSHARED_LOCKS,
}
"""Every scope's meanings, by scope."""


def scope_of(config: Mapping[str, Param]) -> str:
    """The tracker and lock configurations drive the tracker alone, so they speak their own vocabularies."""
    scope = config.get("scope")
    return f"keyshared/{scope}" if scope in ("tracker", "locks") else "keyshared"
