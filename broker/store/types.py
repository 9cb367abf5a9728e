"""The broker store's public shapes: messages in and out, put results, and the narrow view of
the store that replication (`broker/ha`) works against.

`MessageStore` (broker/store/message_store.py) implements `ReplicatedLog`; replication code and
its tests depend only on this Protocol, so they can run against a store built on `MemoryLog`.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

from brokergroup.broker.store.epoch import EpochCache, EpochEntry

if TYPE_CHECKING:  # indexes imports this module
    from brokergroup.broker.store.indexes import HeadState


NO_PROPERTIES: Mapping[str, str] = types.MappingProxyType({})


class Message(NamedTuple):
    """A message a producer sends. `producer_id`/`producer_seq` make retries idempotent: a
    producer numbers its messages 0, 1, 2, ... and the master drops a sequence it already holds.
    A named tuple: a master builds one per message it decodes (issue 17)."""

    topic: str
    queue_id: int
    body: bytes
    born_timestamp_ms: int
    properties: Mapping[str, str] = NO_PROPERTIES
    producer_id: int = -1
    producer_seq: int = -1


@dataclasses.dataclass(frozen=True)
class StoredMessage:
    """A message as consumers see it."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_offset: int
    size: int
    body: bytes
    born_timestamp_ms: int
    store_timestamp_ms: int
    properties: Mapping[str, str]
    producer_id: int
    producer_seq: int


class Appended(NamedTuple):
    """Where one message of a put landed (or already was, for a duplicate). A named tuple: one is
    built per message a master or a slave appends (issue 17)."""

    commit_offset: int
    size: int
    queue_offset: int | None
    """The queue offset; None until the message is dispatched (visible) — known at once on a master."""
    duplicate: bool


@dataclasses.dataclass(frozen=True)
class PutResult:
    appended: tuple[Appended, ...]
    next_offset: int
    """Commit-log offset just past the last byte written by this put (acks wait for it)."""


class PutStatus(enum.Enum):
    """RocketMQ's PutMessageStatus values that brokergroup produces."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    """brokergroup (Kafka's name): written and acked by the set as it is now, but the set shrank
    below `min_in_sync_replicas` while the put waited: fewer copies than asked."""
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"


class ReplicatedLog(Protocol):
    """What replication needs from the store. Offsets are commit-log byte offsets."""

    @property
    def max_offset(self) -> int: ...

    @property
    def min_offset(self) -> int: ...

    @property
    def confirm_offset(self) -> int: ...

    @property
    def ackable_offset(self) -> int:
        """The end of what this replica may acknowledge: fsynced bytes under SYNC flush, appended
        bytes under ASYNC (never beyond max_offset)."""

    def set_confirm_offset(self, offset: int) -> None:
        """Record the commit point (clamped to [min_offset, max_offset]); newly confirmed
        messages become visible to consumers."""

    @property
    def epochs(self) -> EpochCache: ...

    def append_epoch(self, entry: EpochEntry) -> bool:
        """Record a new epoch (durably); see EpochCache.append_entry."""

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        """Whole records starting at `offset`, at most `max_bytes` (at least one record)."""

    def append_raw(self, offset: int, data: bytes) -> None:
        """A slave appends whole records replicated from the master, at exactly max_offset."""

    def truncate(self, offset: int) -> None:
        """Cut the log (crash-safely) and the epochs at `offset`, a record boundary."""

    def replica_start(self, *, from_last_segment: bool) -> int:
        """Where a replica starting from scratch copies from: `min_offset`, or with
        `from_last_segment` (RocketMQ's syncFromLastFile) the start of the last segment whose
        start is confirmed and dispatched."""

    def head_state_at(self, offset: int) -> HeadState:
        """What the records before `offset` (a `replica_start` result) leave behind."""

    def seed(self, head: HeadState) -> None:
        """An empty log restarts (crash-safely) at `head.min_offset` with its master's head state:
        queue offsets, group offsets and producer sequences continue from it; no epoch entry."""

    def add_append_listener(self, listener: Callable[[int], None]) -> None:
        """`listener(new_max_offset)` after every append (master put or slave append_raw)."""

    def add_flush_listener(self, listener: Callable[[int], None]) -> None:
        """`listener(flushed_offset)` after every flush that made more of the log durable."""

    def remove_flush_listener(self, listener: Callable[[int], None]) -> None:
        """Forget a flush listener."""
