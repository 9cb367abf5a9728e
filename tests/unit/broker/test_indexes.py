"""StoreIndexes: queue offsets at append, visibility at dispatch, producer table bounds, rebuild."""

from __future__ import annotations

import dataclasses

import pytest

from brokergroup.broker.store.indexes import ProducerTable, QueueEntry, StoreIndexes
from brokergroup.broker.store.record import (
    ConsumerOffset,
    DecodedRecord,
    RecordInfo,
    RecordKind,
    decode_record,
    encode_consumer_offset,
    encode_record,
)
from brokergroup.broker.store.types import Appended


class Feeder:
    """Lays records out back to back, like a log without segments."""

    def __init__(self, indexes: StoreIndexes) -> None:
        self.indexes = indexes
        self.offset = 0

    def message(
        self, topic: str = "t", queue_id: int = 0, *, pid: int = -1, seq: int = -1, size: int = 100
    ) -> Appended:
        info = RecordInfo(
            offset=self.offset,
            size=size,
            kind=RecordKind.MESSAGE,
            topic=topic,
            queue_id=queue_id,
            producer_id=pid,
            producer_seq=seq,
        )
        self.offset += size
        return self.indexes.append(info)

    def commit(self, group: str, topic: str, queue_id: int, offset: int, size: int = 80) -> Appended:
        co = ConsumerOffset(group=group, topic=topic, queue_id=queue_id, offset=offset)
        info = RecordInfo(
            offset=self.offset,
            size=size,
            kind=RecordKind.CONSUMER_OFFSET,
            topic=topic,
            queue_id=queue_id,
            consumer_offset=co,
        )
        self.offset += size
        return self.indexes.append(info)


@pytest.fixture
def feed() -> Feeder:
    return Feeder(StoreIndexes())


def test_queue_offsets_are_assigned_per_queue_at_append(feed: Feeder) -> None:
    got = [feed.message("a", 0), feed.message("a", 1), feed.message("a", 0), feed.message("b", 0)]
    assert [a.queue_offset for a in got] == [0, 0, 1, 0]
    assert [a.commit_offset for a in got] == [0, 100, 200, 300]
    assert not any(a.duplicate for a in got)
    assert feed.indexes.next_queue_offset("a", 0) == 2
    assert feed.indexes.next_queue_offset("zzz", 3) == 0


def test_nothing_is_visible_before_dispatch(feed: Feeder) -> None:
    feed.message("a", 0)
    assert feed.indexes.queue_max_offset("a", 0) == 0
    assert feed.indexes.entries("a", 0, 0, 10) == []
    assert feed.indexes.topics() == {}
    assert feed.indexes.pending_count == 1


def test_dispatch_exposes_records_that_end_at_or_before_the_watermark(feed: Feeder) -> None:
    for _ in range(3):
        feed.message("a", 0)
    assert feed.indexes.dispatch(250) == 2  # the third record ends at 300
    assert feed.indexes.dispatched_offset == 250
    assert feed.indexes.entries("a", 0, 0, 10) == [QueueEntry(0, 0, 100), QueueEntry(1, 100, 100)]
    assert feed.indexes.queue_max_offset("a", 0) == 2
    assert feed.indexes.dispatch(300) == 1
    assert feed.indexes.entries("a", 0, 1, 1) == [QueueEntry(1, 100, 100)]
    assert feed.indexes.entries("a", 0, 3, 10) == []
    assert feed.indexes.entries("a", 0, -1, 10) == []


def test_dispatch_never_lowers_the_watermark(feed: Feeder) -> None:
    feed.message()
    feed.indexes.dispatch(100)
    assert feed.indexes.dispatch(50) == 0
    assert feed.indexes.dispatched_offset == 100


def test_consumer_offsets_come_from_dispatched_records_only(feed: Feeder) -> None:
    first = feed.commit("g", "a", 0, 5)
    feed.commit("g", "a", 0, 9)
    assert first.queue_offset is None
    assert feed.indexes.consumer_offset("g", "a", 0) is None
    feed.indexes.dispatch(80)
    assert feed.indexes.consumer_offset("g", "a", 0) == 5
    feed.indexes.dispatch(160)
    assert feed.indexes.consumer_offset("g", "a", 0) == 9
    assert feed.indexes.consumer_offset("other", "a", 0) is None
    assert feed.indexes.next_queue_offset("a", 0) == 0  # offsets commits take no queue offset


def test_topics_lists_queues_with_visible_messages(feed: Feeder) -> None:
    feed.message("b", 2)
    feed.message("a", 1)
    feed.message("b", 0)
    feed.commit("g", "c", 0, 1)
    feed.message("a", 3)
    feed.indexes.dispatch(400)
    assert feed.indexes.topics() == {"a": [1], "b": [0, 2]}


def test_records_must_be_appended_in_log_order(feed: Feeder) -> None:
    feed.message()
    feed.offset = 50
    with pytest.raises(ValueError, match="appended after"):
        feed.message()


def test_producer_table_remembers_where_each_sequence_landed(feed: Feeder) -> None:
    feed.message(pid=7, seq=0)
    second = feed.message(pid=7, seq=1)
    table = feed.indexes.producers
    assert table.last_seq(7) == 1
    assert table.last_seq(8) == -1
    assert table.original(7, 1) == Appended(second.commit_offset, second.size, second.queue_offset, True)
    assert table.original(7, 5) is None
    assert table.original(8, 0) is None


def test_producer_table_keeps_only_the_last_window_of_sequences() -> None:
    table = ProducerTable(max_producers=4, window=3)
    for seq in range(5):
        table.record(1, seq, Appended(seq * 10, 10, seq, False))
    assert table.last_seq(1) == 4
    assert table.original(1, 1) is None
    assert [table.original(1, s) is not None for s in (2, 3, 4)] == [True, True, True]


def test_producer_table_evicts_the_least_recently_appended_producer() -> None:
    table = ProducerTable(max_producers=2, window=8)
    one = Appended(0, 10, 0, False)
    table.record(1, 0, one)
    table.record(2, 0, one)
    table.record(1, 1, one)  # producer 1 is now the most recent
    table.record(3, 0, one)  # evicts producer 2
    assert len(table) == 2
    assert (table.last_seq(1), table.last_seq(2), table.last_seq(3)) == (1, -1, 0)


def test_producer_table_rejects_empty_bounds() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ProducerTable(max_producers=0)


def decoded(data: bytes, offset: int) -> DecodedRecord:
    record = decode_record(data)
    assert isinstance(record, DecodedRecord)
    return dataclasses.replace(record, offset=offset)


def test_rebuild_equals_feeding_record_by_record() -> None:
    raw = [
        encode_record(
            topic="a", queue_id=0, body=b"x", born_timestamp_ms=1, store_timestamp_ms=2, producer_id=3, producer_seq=0
        ),
        encode_consumer_offset(group="g", topic="a", queue_id=0, offset=1, timestamp_ms=2),
        encode_record(
            topic="a", queue_id=0, body=b"y", born_timestamp_ms=1, store_timestamp_ms=2, producer_id=3, producer_seq=1
        ),
        encode_consumer_offset(group="g", topic="a", queue_id=0, offset=2, timestamp_ms=2),
    ]
    records, offset = [], 0
    for data in raw:
        records.append(decoded(data, offset))
        offset += len(data)
    confirmed = records[2].offset + records[2].size  # the last offset commit is not confirmed
    rebuilt = StoreIndexes.rebuild(records, dispatch_up_to=confirmed)
    fed = StoreIndexes()
    for record in records:
        fed.append(RecordInfo.from_decoded(record))
    fed.dispatch(confirmed)
    for indexes in (rebuilt, fed):
        assert indexes.entries("a", 0, 0, 10) == [
            QueueEntry(0, records[0].offset, records[0].size),
            QueueEntry(1, records[2].offset, records[2].size),
        ]
        assert indexes.consumer_offset("g", "a", 0) == 1
        assert indexes.producers.last_seq(3) == 1
        assert indexes.next_queue_offset("a", 0) == 2
        assert indexes.dispatched_offset == confirmed
        assert indexes.pending_count == 1
