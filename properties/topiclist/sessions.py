"""Bind the topic-list sessions scope (`models/topiclist/sessions.py`) to its reference
(`reference_impl/topiclist/sessions.py`).

The harness owns the namespace: `toggle` creates or deletes a topic in its own record and, while the metadata session
is up, hands the watcher the notification; `lose` and `reconnect` are the session events; `step` runs the
connection's next task; `complete_listing` answers the listing in flight with the namespace's topics as the harness
knows them, `fail_listing` fails it. TL-S1 is judged on the harness's own records: its namespace and the client's
list, rebuilt from the updates the watcher wrote, never on the watcher's fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import Action, Json, Observation, Param
from models.topiclist.sessions import SessionsModel
from properties.engines.lockstep import BaseImplementation
from reference_impl.topiclist.dual_limiter import topics_hash
from reference_impl.topiclist.sessions import PendingListing, TopicListWatcher, WatcherConnection


class SessionsReference(BaseImplementation):
    """One watcher of one namespace, driven by the sessions scope's actions."""

    def __init__(self, config: Mapping[str, Param] | None, variant: str) -> None:
        self.model = SessionsModel(config, variant)  # parses and completes the configuration
        self.namespace = sorted(self.model.initial_topics)
        """The harness's own record of the namespace's topics."""
        self.connected = True
        self.listings: list[PendingListing] = []
        self.conn = WatcherConnection()
        self.watcher = TopicListWatcher(1, list(self.namespace), self.conn, self.listings.append)
        self.view = set(self.namespace)
        self.client_hash = topics_hash(self.namespace)
        self._applied = 0

    def apply(self, action: Action) -> Observation:
        name = action.name
        if name == "toggle":
            topic = str(action["topic"])
            created = topic not in self.namespace
            self.namespace = sorted({*self.namespace, topic} if created else set(self.namespace) - {topic})
            if self.connected:
                self.watcher.on_topic_event(topic, created)
        elif name in ("lose", "reconnect"):
            self.connected = name == "reconnect"
            self.watcher.on_session_event(self.connected)
        elif name == "step":
            self.conn.run_next()
        elif name in ("complete_listing", "fail_listing"):
            listing = self.listings.pop(0)
            if name == "complete_listing":
                listing.then(list(self.namespace), None)
            else:
                listing.then(None, ConnectionError("the metadata session is lost"))
        else:
            raise ValueError(f"the topiclist sessions reference has no action {name!r}")
        for update in self.conn.written[self._applied:]:  # the client applies what reached it, in order
            self.view = (self.view - set(update.deleted_topics)) | set(update.new_topics)
            self.client_hash = update.topics_hash
        self._applied = len(self.conn.written)
        return None

    def vars(self) -> dict[str, Json]:
        namespace: list[Json] = list(self.namespace)
        client: list[Json] = [*sorted(self.view)]
        return {
            "namespace": namespace,
            "connected": self.connected,
            "executor": [label for label, _ in self.conn.executor],
            "listing": bool(self.listings),
            "client": {"topics": client, "hash": self.client_hash},
        }

    def violations(self) -> list[str]:
        settled = self.connected and not self.conn.executor and not self.listings
        return ["TL-S1"] if settled and sorted(self.view) != self.namespace else []
