"""What the metadata store and its caches agree on (upstream: ``org.apache.pulsar.metadata.api``).

The store's errors and values, the serde and cache-result types, the cache's retry config, and
:class:`MetadataStoreApi`, the part of the store a :class:`~.cache.MetadataCache` uses. Upstream's
``MetadataCacheImpl`` is written against the ``MetadataStore`` interface while
``AbstractMetadataStore`` builds ``MetadataCacheImpl``; this module plays the interface's part, so
``store`` imports ``cache`` and ``cache`` imports only this module, with no import circle.
Everything here is re-exported from the module that used to define it (``store`` or ``cache``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from reference_impl.concurrent.executors import OrderedExecutor, ScheduledSimThread, SimFuture, World

T = TypeVar("T")

# --------------------------------------------------------------------------------------------------
# Errors (MetadataStoreException and its nested classes)
# --------------------------------------------------------------------------------------------------


class MetadataStoreError(Exception):
    """Base of the store's errors (MetadataStoreException)."""


class AlreadyClosedError(MetadataStoreError):
    pass


class InvalidPathError(MetadataStoreError):
    pass


class BadVersionError(MetadataStoreError):
    pass


class NotFoundError(MetadataStoreError):
    pass


class AlreadyExistsError(MetadataStoreError):
    pass


class ContentDeserializationError(MetadataStoreError):
    pass


class MetadataTimeoutError(MetadataStoreError):
    pass


# --------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------


class NotificationType(Enum):
    CREATED = "Created"
    MODIFIED = "Modified"
    DELETED = "Deleted"
    CHILDREN_CHANGED = "ChildrenChanged"


@dataclass(frozen=True)
class Notification:
    type: NotificationType
    path: str


@dataclass(frozen=True)
class Stat:
    path: str
    version: int
    first_version: bool


@dataclass(frozen=True)
class GetResult:
    value: bytes
    stat: Stat


@dataclass(frozen=True)
class Costs:
    """Virtual cost in ms of each kind of work (spec §4.5); all default to 0."""

    serde_ms: int = 0
    flush_batch_ms: int = 0
    backend_ms: int = 0
    completion_ms: int = 0
    notification_ms: int = 0


# --------------------------------------------------------------------------------------------------
# Cache-facing types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheGetResult(Generic[T]):
    value: T
    stat: Stat


class Serde(Protocol[T]):
    """MetadataSerde: how a cache turns values into bytes and back."""

    def serialize(self, path: str, value: T) -> bytes: ...

    def deserialize(self, path: str, data: bytes, stat: Stat) -> T: ...


@dataclass(frozen=True)
class BackoffConfig:
    """MetadataCache retry backoff (no jitter)."""

    initial_ms: int = 5
    max_ms: int = 3000
    mandatory_stop_ms: int = 30000


class MetadataStoreApi(Protocol):
    """The store as its caches see it: ops, plus the threads and costs the cache runs its serde with.

    Read-only, so the concrete :class:`~.store.MetadataStore` satisfies it with plain attributes.
    """

    @property
    def world(self) -> World: ...

    @property
    def name(self) -> str: ...

    @property
    def caches(self) -> Sequence[object]:
        """The caches made so far; a new cache is named after their count."""
        ...

    @property
    def worker(self) -> OrderedExecutor | None:
        """PIP-453's serde workers; None for legacy threading."""
        ...

    @property
    def scheduler(self) -> ScheduledSimThread: ...

    @property
    def costs(self) -> Costs: ...

    @property
    def op_completer(self) -> str: ...

    def get(self, path: str) -> SimFuture[GetResult | None]: ...

    def exists(self, path: str) -> SimFuture[bool]: ...

    def delete(self, path: str, expected_version: int | None = None) -> SimFuture[None]: ...

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> SimFuture[Stat]: ...
