"""The topic-list watcher across metadata sessions (`scope: sessions`): `TopicListService.TopicListWatcher` as
apache/pulsar#25188 (2e06cc0357) made it, read at 90cba329a1 (TopicListService.java lines 71-299, 576-619).

One watcher of one namespace, already created and answered (its WatchSuccess sent), on a broker whose metadata
session the harness breaks and restores. The harness also creates and deletes the namespace's topics
(`toggle`): while the session is up each change reaches the watcher as a metadata notification (`onTopicEvent`);
while it is lost the notification is lost with it. The watcher's updates go through the connection's executor one
at a time, in order (`sendTopicListUpdate`, `sendingCompleted`); the client applies each to its view.

Session events, as `onSessionEvent` handles them (SessionLost and ConnectionLost alike, Reconnected and
SessionReestablished alike):

- `lose`: unless already disconnected, remember the matching topics (`matchingTopicsBeforeDisconnected`) and
  `prepareUpdateTopics`: mark the list as being updated, hold the sends (`sendingInProgress`), drop the queued
  updates and clear the matching topics.
- `reconnect`: submit a task to the executor that, unless an update started by an earlier reconnect is still
  running (`updatingWhileDisconnected`), lists the namespace again (`updateTopicListWatcher`).
- the listing's end (`complete_listing`, the namespace's topics when it completes; `fail_listing`, a read that
  meets the lost session): `updateTopics` takes the listed topics, and when the watcher was disconnected sends one
  update with what was created and deleted meanwhile (`handleNewAndDeletedTopicsWhileDisconnected`), then releases
  the held sends. A failed listing leaves the watcher disconnected; the next reconnect lists again.

Not modelled: the memory limiter (each send is written at once), the bounded update queue and its full refresh,
the client's periodic reconcile (#25188's client half), listing retries on permit timeouts, pattern filtering and
partitions (every topic of the namespace matches), the watcher's close.

TL-S1: once nothing is in flight (no executor task, no listing) and the session is up, the client's view equals
the namespace's topics: no create or delete is lost across a session loss.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
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
)
from models.topiclist.common import topics_hash
from models.topiclist.configs import VARIANTS

DEFAULT_CONFIG: dict[str, Param] = {
    "scope": "sessions",
    "topics": ("persistent://public/default/a", "persistent://public/default/b"),
    "initial": ("persistent://public/default/a",),
    "max_changes": 2,
    "max_losses": 2,
}
"""Two topics, one present at the start, two creates or deletes and two session losses."""

ACTION_NAMES = ("toggle", "lose", "reconnect", "step", "complete_listing", "fail_listing")
SEND, RECONNECT = "send", "reconnect"
"""The executor's tasks: one update's send, and a reconnect's update of the watcher."""

Update = tuple[tuple[str, ...], tuple[str, ...], str]
"""(deleted, new, hash) of one WatchTopicListUpdate."""


class SessionState(NamedTuple):
    namespace: tuple[str, ...]  # the namespace's topics, sorted (the harness's truth)
    connected: bool  # the broker's metadata session
    matching: tuple[str, ...]  # the watcher's matchingTopics, in insertion order
    sending: bool  # sendingInProgress
    queued: tuple[Update, ...]  # sendTopicListUpdateTasks
    updating: bool  # updatingTopics
    before: tuple[str, ...] | None  # matchingTopicsBeforeDisconnected
    disconnected: bool
    updating_while_disconnected: bool
    executor: tuple[tuple[str, Update | None], ...]  # the connection executor's tasks, FIFO
    listing: bool  # a listing of the namespace is in flight
    view: tuple[str, ...]  # the client's topics, sorted
    client_hash: str  # the hash of the last update the client received
    changes: int  # toggles left
    losses: int  # session losses left


class _Watcher:
    """A mutable copy of a state while one action runs: the watcher's methods, named as upstream's."""

    def __init__(self, s: SessionState) -> None:
        self.namespace = list(s.namespace)
        self.connected = s.connected
        self.matching = list(s.matching)
        self.sending = s.sending
        self.queued = list(s.queued)
        self.updating = s.updating
        self.before = None if s.before is None else list(s.before)
        self.disconnected = s.disconnected
        self.uwd = s.updating_while_disconnected
        self.executor = list(s.executor)
        self.listing = s.listing
        self.view = set(s.view)
        self.client_hash = s.client_hash
        self.changes = s.changes
        self.losses = s.losses

    def freeze(self) -> SessionState:
        return SessionState(
            tuple(sorted(self.namespace)), self.connected, tuple(self.matching), self.sending, tuple(self.queued),
            self.updating, None if self.before is None else tuple(self.before), self.disconnected, self.uwd,
            tuple(self.executor), self.listing, tuple(sorted(self.view)), self.client_hash, self.changes, self.losses,
        )

    def on_topic_event(self, topic: str, created: bool) -> None:
        """A Created or Deleted notification (lines 116-138): change the matching topics, send the change."""
        if not created and topic in self.matching:
            self.matching.remove(topic)
            self.send_update((topic,), ())
        elif created and topic not in self.matching:
            self.matching.append(topic)
            self.send_update((), (topic,))

    def send_update(self, deleted: tuple[str, ...], new: tuple[str, ...]) -> None:
        """`sendTopicListUpdate` (lines 141-161): one send at a time; the rest wait in order."""
        update = (deleted, new, topics_hash(tuple(self.matching)))
        if not self.sending:
            self.sending = True
            self.executor.append((SEND, update))
        else:
            self.queued.append(update)

    def sending_completed(self) -> None:
        """Lines 165-177: the next queued update's send, or nothing in progress."""
        if self.queued:
            self.executor.append((SEND, self.queued.pop(0)))
        else:
            self.sending = False

    def prepare_update_topics(self) -> None:
        """Lines 193-211, without a callback."""
        if not self.updating:
            self.updating = True
            self.sending = True
            self.queued.clear()
            self.matching.clear()

    def update_topics(self, topics: Sequence[str]) -> None:
        """Lines 213-235: take the listing; after a disconnect, send what changed meanwhile."""
        self.matching = list(topics)
        self.updating = False
        if self.disconnected:
            self.handle_new_and_deleted_while_disconnected()
            self.before = None
            self.disconnected = False
        self.sending_completed()

    def handle_new_and_deleted_while_disconnected(self) -> None:
        """Lines 237-254 (the names in an update are a set: sorted here)."""
        if self.before is None:
            return
        remaining = set(self.matching)
        deleted = tuple(sorted(t for t in self.before if t not in remaining))
        new = tuple(sorted(remaining - set(self.before)))
        if new or deleted:
            self.send_update(deleted, new)

    def on_session_lost(self) -> None:
        """Lines 283-290."""
        if not self.disconnected:
            self.disconnected = True
            self.before = list(self.matching)
            self.prepare_update_topics()


class SessionsModel:
    """One topic-list watcher across metadata session losses; see the module docstring."""

    mechanism = "topiclist"
    symmetric_key = threaded = None
    """No values are alike and the actions are no threads' steps."""
    action_names: Sequence[str] = ACTION_NAMES

    def __init__(self, config: Mapping[str, Param] | None = None, variant: str = "current") -> None:
        cfg = configured("topiclist (sessions scope)", variant, VARIANTS, config, DEFAULT_CONFIG)
        read = ConfigReader("topiclist", cfg)
        self.config: Mapping[str, Param] = cfg
        self.variant = variant
        self.topics = read.strings("topics", nonempty=True, distinct=True)
        self.initial_topics = read.strings("initial", default=())
        if not set(self.initial_topics) <= set(self.topics):
            raise ValueError("topiclist sessions config initial must be among topics")
        self.max_changes = read.integer("max_changes", least=0)
        self.max_losses = read.integer("max_losses", least=0)
        self._toggles = tuple(Action.of("toggle", topic=t) for t in self.topics)
        self.invariants: Sequence[Invariant[SessionState]] = [
            Invariant("TL-S1", self._view_is_namespace,
                      "once nothing is in flight and the session is up, the client's view of a watched namespace "
                      "equals its topics: no create or delete is lost across a metadata session loss",
                      self._explain),
        ]
        self.liveness: Sequence[Liveness[SessionState]] = []

    @property
    def terminal_ok(self) -> Callable[[SessionState], bool]:
        """An end with the budgets spent: the session up and nothing in flight."""
        return self.settled

    def initial(self) -> SessionState:
        topics = tuple(sorted(self.initial_topics))
        return SessionState(topics, True, topics, False, (), False, None, False, False, (), False, topics,
                            topics_hash(topics), self.max_changes, self.max_losses)

    def key(self, state: SessionState) -> Hashable:
        return state

    def enabled(self, state: SessionState) -> Sequence[Action]:
        out: list[Action] = list(self._toggles) if state.changes > 0 else []
        if state.connected and state.losses > 0:
            out.append(Action("lose"))
        if not state.connected:
            out.append(Action("reconnect"))
        if state.executor:
            out.append(Action("step"))
        if state.listing:
            out.append(Action("complete_listing" if state.connected else "fail_listing"))
        return out

    def step(self, state: SessionState, action: Action) -> tuple[SessionState, Observation]:
        if action not in self.enabled(state):
            raise ActionNotEnabled(action, "not offered in this state")
        w = _Watcher(state)
        name = action.name
        if name == "toggle":
            topic = str(action["topic"])
            created = topic not in w.namespace
            w.namespace = [*w.namespace, topic] if created else [t for t in w.namespace if t != topic]
            w.changes -= 1
            if w.connected:  # a lost session loses the notification with it
                w.on_topic_event(topic, created)
        elif name == "lose":
            w.connected = False
            w.losses -= 1
            w.on_session_lost()
        elif name == "reconnect":
            w.connected = True
            w.executor.append((RECONNECT, None))
        elif name == "step":
            task, update = w.executor.pop(0)
            if task == SEND:
                assert update is not None
                deleted, new, digest = update
                w.view = (w.view - set(deleted)) | set(new)
                w.client_hash = digest
                w.sending_completed()
            elif not w.uwd:
                w.uwd = True
                w.listing = True
        else:
            w.listing = False
            if name == "complete_listing":
                w.update_topics(sorted(w.namespace))
            w.uwd = False  # the update's future completed, either way
        return w.freeze(), None

    def vars(self, state: SessionState) -> dict[str, Json]:
        return {
            "namespace": list(state.namespace),
            "connected": state.connected,
            "executor": [task if update is None else f"{task}(-{','.join(update[0])} +{','.join(update[1])})"
                         for task, update in state.executor],
            "listing": state.listing,
            "client": {"topics": list(state.view), "hash": state.client_hash},
        }

    def quiescent(self, state: SessionState) -> bool:
        """Nothing in flight: no executor task and no listing."""
        return not state.executor and not state.listing

    def settled(self, state: SessionState) -> bool:
        return self.quiescent(state) and state.connected

    def _view_is_namespace(self, state: SessionState) -> bool:
        return not self.settled(state) or state.view == state.namespace

    @staticmethod
    def _explain(state: SessionState) -> str:
        return f"the client sees {list(state.view)}, the namespace holds {list(state.namespace)}"
