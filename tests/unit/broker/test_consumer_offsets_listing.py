"""Listing every committed consumer offset (`StoreIndexes.consumer_offsets`, `MessageStore.consumer_offsets`),
what `GET /v1/consumer-lag` is built from: only dispatched commits, the last one per queue, sorted, and moved
up to the queue's min offset after retention."""

from __future__ import annotations

from pathlib import Path

from brokergroup.broker.store.epoch import EpochEntry
from brokergroup.broker.store.indexes import HeadState, StoreIndexes
from tests.unit.broker.store_factories import msg, open_store
from tests.unit.broker.test_indexes import Feeder
from tests.unit.broker.test_store_retention import fill
from tests.unit.broker.test_store_retention import open_store as open_retained


def test_lists_dispatched_commits_sorted_last_value_wins() -> None:
    feed = Feeder(StoreIndexes())
    assert feed.indexes.consumer_offsets() == []
    feed.commit("g2", "b", 1, 4)
    feed.commit("g1", "b", 0, 3)
    feed.commit("g1", "a", 2, 7)
    feed.commit("g1", "a", 2, 9)
    feed.message("a", 2)
    assert feed.indexes.consumer_offsets() == []  # nothing dispatched yet
    feed.indexes.dispatch(80 * 3)
    assert feed.indexes.consumer_offsets() == [("g1", "a", 2, 7), ("g1", "b", 0, 3), ("g2", "b", 1, 4)]
    feed.indexes.dispatch(feed.offset)
    assert feed.indexes.consumer_offsets() == [("g1", "a", 2, 9), ("g1", "b", 0, 3), ("g2", "b", 1, 4)]
    listed = feed.indexes.consumer_offsets()
    listed.clear()  # a copy: the caller cannot change the indexes
    assert len(feed.indexes.consumer_offsets()) == 3


def test_offsets_carried_by_the_head_state_are_listed() -> None:
    head = HeadState(4096, {("a", 0): 10}, {("g", "a", 0): 8, ("f", "a", 0): 2}, {})
    assert StoreIndexes(head=head).consumer_offsets() == [("f", "a", 0, 2), ("g", "a", 0, 8)]


def test_the_store_lists_confirmed_commits_only(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append_epoch(EpochEntry(1, 0))
    store.put_messages([msg(b"a"), msg(b"b"), msg(b"c", queue_id=1)], now_ms=1)
    store.put_consumer_offset(group="g", topic="orders", queue_id=0, offset=1, now_ms=1)
    store.put_consumer_offset(group="f", topic="orders", queue_id=1, offset=0, now_ms=1)
    assert store.consumer_offsets() == []  # visible once confirmed, like the messages
    store.set_confirm_offset(store.max_offset)
    assert store.consumer_offsets() == [("f", "orders", 1, 0), ("g", "orders", 0, 1)]
    assert all(store.consumer_offset(g, t, q) == o for g, t, q, o in store.consumer_offsets())
    store.close()
    reopened = open_store(tmp_path)
    assert reopened.consumer_offsets() == [("f", "orders", 1, 0), ("g", "orders", 0, 1)]
    reopened.close()


def test_after_retention_offsets_read_as_the_queue_start(tmp_path: Path) -> None:
    store = open_retained(tmp_path)
    fill(store)
    assert store.apply_retention() > 0
    low = store.queue_min_offset("orders", 0)
    assert store.consumer_offsets() == [("g", "orders", 0, max(56, low))]
    assert store.consumer_offsets()[0][3] == store.consumer_offset("g", "orders", 0)
    store.close()
