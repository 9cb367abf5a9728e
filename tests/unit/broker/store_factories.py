"""Builders shared by the message-store tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.broker.store.types import Message, StoredMessage

SETTINGS = StoreSettings(segment_size=4096, max_message_size=1024)
"""Small segments, so that a few hundred-byte messages already roll segments (blanks appear)."""


class FakeClock:
    """Monotonic seconds, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def msg(
    body: bytes = b"hello",
    *,
    topic: str = "orders",
    queue_id: int = 0,
    pid: int = -1,
    seq: int = -1,
    properties: dict[str, str] | None = None,
) -> Message:
    return Message(
        topic=topic,
        queue_id=queue_id,
        body=body,
        born_timestamp_ms=1000,
        properties=properties or {},
        producer_id=pid,
        producer_seq=seq,
    )


def open_store(
    directory: Path, *, memory: bool = False, clock: Callable[[], float] | None = None, **kwargs: Any
) -> MessageStore:
    return MessageStore.open(directory, SETTINGS, memory=memory, clock=clock or FakeClock(), **kwargs)


def read_all_raw(store: MessageStore, max_bytes: int = 1500) -> bytes:
    chunks, offset = [], store.min_offset
    while offset < store.max_offset:
        chunk = store.read_raw(offset, max_bytes)
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def visible(store: MessageStore) -> dict[tuple[str, int], list[StoredMessage]]:
    """Every visible message, by queue."""
    return {
        (topic, queue_id): store.get_messages(topic, queue_id, 0, max_count=10_000, max_bytes=10**9)
        for topic, queues in store.topics().items()
        for queue_id in queues
    }


def view(store: MessageStore, groups: tuple[str, ...] = ("g1", "g2")) -> dict[str, object]:
    """What consumers and replication can observe of a store (flushed offset aside)."""
    status = store.status()
    del status["flushedOffset"]
    offsets = {
        (g, t, q): store.consumer_offset(g, t, q)
        for g in groups
        for t in ("orders", "audit")
        for q in range(4)
        if store.consumer_offset(g, t, q) is not None
    }
    return {"status": status, "messages": visible(store), "offsets": offsets, "raw": read_all_raw(store)}
