"""Admission of a put, before anything is written (pure): validation, encoding, deduplication.

`encode_messages` checks every message of a batch and encodes it, or raises
`InvalidMessageError` naming the message and field; so a bad message anywhere stores nothing.
`plan_duplicates` decides, in batch order, which messages are new and which repeat an
idempotent producer's sequence (`seq <= last seq`, counting earlier messages of the same batch),
so that the store appends all new messages in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from brokergroup.broker.errors import InvalidMessageError, InvalidRecordError
from brokergroup.broker.store.indexes import ProducerTable
from brokergroup.broker.store.record import (
    BLANK_MIN_SIZE,
    MAX_GROUP_BYTES,
    MAX_TOPIC_BYTES,
    encode_consumer_offset,
    encode_record,
)
from brokergroup.broker.store.types import Appended, Message

MAX_QUEUES: Final = 1024
"""Queue ids are 0..1023."""
_INT64_MAX: Final = 2**63 - 1

FORGOTTEN: Final = Appended(commit_offset=-1, size=0, queue_offset=None, duplicate=True)
"""A duplicate whose original position is no longer remembered (producer table bounds)."""


@dataclass(frozen=True, slots=True)
class New:
    """Append this message."""


@dataclass(frozen=True, slots=True)
class SameAs:
    """A duplicate of message `index` of the same batch, which is new."""

    index: int


NEW: Final = New()
"""The one `New` verdict (one per message of a put: not built again each time)."""

Verdict = New | SameAs | Appended
"""New, a duplicate within the batch, or a duplicate of an earlier put (`Appended`, duplicate=True)."""


def _check_topic(topic: str, where: str) -> None:
    try:
        size = len(topic.encode())
    except UnicodeEncodeError:
        raise InvalidMessageError(f"{where}.topic is not valid unicode (lone surrogate)") from None
    if not 1 <= size <= MAX_TOPIC_BYTES:
        raise InvalidMessageError(f"{where}.topic of {size} bytes (utf-8), need 1..{MAX_TOPIC_BYTES}")


def _check_queue_id(queue_id: int, where: str) -> None:
    if not 0 <= queue_id < MAX_QUEUES:
        raise InvalidMessageError(f"{where}.queue_id={queue_id}, need 0..{MAX_QUEUES - 1}")


def _check_message(message: Message, where: str, max_body: int) -> None:
    _check_topic(message.topic, where)
    _check_queue_id(message.queue_id, where)
    if len(message.body) > max_body:
        raise InvalidMessageError(f"{where}.body of {len(message.body)} bytes exceeds max_message_size={max_body}")
    pid, seq = message.producer_id, message.producer_seq
    if not (pid == seq == -1 or (0 <= pid <= _INT64_MAX and 0 <= seq <= _INT64_MAX)):
        raise InvalidMessageError(
            f"{where}.producer_id={pid}, producer_seq={seq}: both -1 (no idempotence) or both in 0..2^63-1"
        )
    if not 0 <= message.born_timestamp_ms <= _INT64_MAX:
        raise InvalidMessageError(f"{where}.born_timestamp_ms={message.born_timestamp_ms} out of range")


def _fits_segment(size: int, segment_size: int) -> bool:
    return size == segment_size or size + BLANK_MIN_SIZE <= segment_size


def encode_messages(messages: Sequence[Message], *, now_ms: int, max_body: int, segment_size: int) -> list[bytes]:
    """Each message's record, stored at `now_ms`; raises `InvalidMessageError` for any bad one."""
    records = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        _check_message(message, where, max_body)
        try:
            record = encode_record(
                topic=message.topic,
                queue_id=message.queue_id,
                body=message.body,
                born_timestamp_ms=message.born_timestamp_ms,
                store_timestamp_ms=now_ms,
                properties=message.properties,
                producer_id=message.producer_id,
                producer_seq=message.producer_seq,
                max_body=max_body,
            )
        except (InvalidRecordError, UnicodeEncodeError, TypeError) as error:
            raise InvalidMessageError(f"{where}: {error}") from None
        if not _fits_segment(len(record), segment_size):
            raise InvalidMessageError(f"{where} is {len(record)} bytes stored, larger than segment_size={segment_size}")
        records.append(record)
    return records


def encode_offset_commit(*, group: str, topic: str, queue_id: int, offset: int, now_ms: int) -> bytes:
    """A CONSUMER_OFFSET record; raises `InvalidMessageError` naming the bad field."""
    where = "consumer offset"
    try:
        group_size = len(group.encode())
    except UnicodeEncodeError:
        raise InvalidMessageError(f"{where}.group is not valid unicode (lone surrogate)") from None
    if not 1 <= group_size <= MAX_GROUP_BYTES:
        raise InvalidMessageError(f"{where}.group of {group_size} bytes (utf-8), need 1..{MAX_GROUP_BYTES}")
    _check_topic(topic, where)
    _check_queue_id(queue_id, where)
    if not 0 <= offset <= _INT64_MAX:
        raise InvalidMessageError(f"{where}.offset={offset}, need 0..2^63-1")
    if not 0 <= now_ms <= _INT64_MAX:
        raise InvalidMessageError(f"{where}: now_ms={now_ms} out of range")
    return encode_consumer_offset(group=group, topic=topic, queue_id=queue_id, offset=offset, timestamp_ms=now_ms)


def plan_duplicates(messages: Sequence[Message], producers: ProducerTable) -> list[Verdict]:
    """One verdict per message, in order; `producers` is only read."""
    verdicts: list[Verdict] = []
    batch_last: dict[int, int] = {}
    batch_seen: dict[tuple[int, int], int] = {}
    for index, message in enumerate(messages):
        pid, seq = message.producer_id, message.producer_seq
        if pid < 0:
            verdicts.append(NEW)
            continue
        last = max(producers.last_seq(pid), batch_last.get(pid, -1))
        if seq > last:
            batch_last[pid] = seq
            batch_seen[(pid, seq)] = index
            verdicts.append(NEW)
        elif (pid, seq) in batch_seen:
            verdicts.append(SameAs(batch_seen[(pid, seq)]))
        else:
            verdicts.append(producers.original(pid, seq) or FORGOTTEN)
    return verdicts
