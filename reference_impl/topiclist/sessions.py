"""`TopicListService.TopicListWatcher` across metadata session events, as apache/pulsar#25188 (2e06cc0357) made it
(TopicListService.java at 90cba329a1: the watcher lines 71-299, `updateTopicListWatcher` lines 576-619).

`TopicListWatcher` keeps upstream's fields and methods (snake_case); `WatcherConnection` is the rest of the world it
needs: the connection's executor (a FIFO of labelled tasks the harness runs one at a time), the namespace listing
(`getTopics`, left pending until the harness completes or fails it) and the client end, which applies each
WatchTopicListUpdate it is sent to its own list. Sends are written at once: the memory limiter is the flows scope's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from reference_impl.topiclist.dual_limiter import WatchUpdate, topics_hash


@dataclass
class PendingListing:
    """One `getTopics` of the namespace in flight: its continuation takes the topics or the error."""

    then: Callable[[list[str] | None, BaseException | None], None]


@dataclass
class WatcherConnection:
    """The connection's executor, the listings in flight and the client end of one watcher."""

    executor: deque[tuple[str, Callable[[], None]]] = field(default_factory=deque)
    listings: list[PendingListing] = field(default_factory=list)
    written: list[WatchUpdate] = field(default_factory=list)

    def execute(self, label: str, task: Callable[[], None]) -> None:
        self.executor.append((label, task))

    def run_next(self) -> None:
        _, task = self.executor.popleft()
        task()


class TopicListWatcher:
    """One namespace's watcher (every topic matches: no pattern, no partitions)."""

    def __init__(self, watcher_id: int, topics: list[str], conn: WatcherConnection,
                 list_namespace: Callable[[PendingListing], None]) -> None:
        self.id = watcher_id
        self.conn = conn
        self.list_namespace = list_namespace
        self.matching_topics: dict[str, None] = dict.fromkeys(topics)  # a LinkedHashSet
        self.closed = False
        self.sending_in_progress = False  # the WatchSuccess was sent and completed
        self.send_topic_list_update_tasks: deque[tuple[str, Callable[[], None]]] = deque()
        self.updating_topics = False
        self.matching_topics_before_disconnected: list[str] | None = None
        self.disconnected = False
        self.updating_while_disconnected = False

    def on_topic_event(self, topic: str, created: bool) -> None:
        if self.closed:
            return
        new: list[str] = []
        deleted: list[str] = []
        if not created:
            if topic in self.matching_topics:
                del self.matching_topics[topic]
                deleted = [topic]
        elif topic not in self.matching_topics:
            self.matching_topics[topic] = None
            new = [topic]
        if new or deleted:
            self.send_topic_list_update(topics_hash(list(self.matching_topics)), deleted, new)

    def send_topic_list_update(self, digest: str, deleted: list[str], new: list[str]) -> None:
        if self.closed:
            return
        update = WatchUpdate(self.id, tuple(new), tuple(deleted), digest)

        def task() -> None:
            self.conn.written.append(update)
            self.sending_completed()

        label = f"send(-{','.join(deleted)} +{','.join(new)})"
        if not self.sending_in_progress:
            self.sending_in_progress = True
            self.conn.execute(label, task)
        else:
            self.send_topic_list_update_tasks.append((label, task))

    def sending_completed(self) -> None:
        if self.closed:
            self.send_topic_list_update_tasks.clear()
            return
        if self.send_topic_list_update_tasks:
            self.conn.execute(*self.send_topic_list_update_tasks.popleft())
        else:
            self.sending_in_progress = False

    def prepare_update_topics(self) -> bool:
        if not self.updating_topics:
            self.updating_topics = True
            self.sending_in_progress = True
            self.send_topic_list_update_tasks.clear()
            self.matching_topics.clear()
            return True
        return False

    def update_topics(self, topics: list[str]) -> None:
        if self.closed:
            return
        self.matching_topics = dict.fromkeys(topics)
        self.updating_topics = False
        if self.disconnected:
            self.handle_new_and_deleted_topics_while_disconnected()
            self.matching_topics_before_disconnected = None
            self.disconnected = False
        self.sending_completed()

    def handle_new_and_deleted_topics_while_disconnected(self) -> None:
        before = self.matching_topics_before_disconnected
        if before is None:
            return
        remaining = set(self.matching_topics)
        deleted: list[str] = []
        for topic in before:
            if topic in remaining:
                remaining.discard(topic)
            else:
                deleted.append(topic)
        new = sorted(remaining)  # upstream iterates a HashSet: the order carries no meaning
        if new or deleted:
            self.send_topic_list_update(topics_hash(list(self.matching_topics)), sorted(deleted), new)

    def on_session_event(self, connected: bool) -> None:
        """Reconnected and SessionReestablished (`connected`), SessionLost and ConnectionLost (not)."""
        if connected:
            def update() -> None:
                if not self.updating_while_disconnected:
                    self.updating_while_disconnected = True
                    self.update_topic_list_watcher(self._updated)
            self.conn.execute("reconnect", update)
        elif not self.disconnected:
            self.disconnected = True
            self.matching_topics_before_disconnected = list(self.matching_topics)
            self.prepare_update_topics()

    def _updated(self) -> None:
        self.updating_while_disconnected = False

    def update_topic_list_watcher(self, when_complete: Callable[[], None]) -> None:
        """`internalUpdateTopicListWatcher` without the permit retries: list, then `updateTopics` or fail."""
        def listed(topics: list[str] | None, error: BaseException | None) -> None:
            if error is None and topics is not None:
                self.update_topics(topics)
            when_complete()

        self.list_namespace(PendingListing(listed))
