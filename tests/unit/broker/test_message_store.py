"""MessageStore: puts, visibility up to the confirm offset, consumer offsets, deduplication."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_factories import msg, open_store

from brokergroup.broker.errors import InvalidMessageError
from brokergroup.broker.store.epoch import EpochEntry
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.broker.store.types import Appended, Message


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MessageStore:
    opened = open_store(tmp_path / "store", memory=request.param == "memory")
    request.addfinalizer(opened.close)
    return opened


def test_put_then_get_round_trip(store: MessageStore) -> None:
    result = store.put_messages(
        [msg(b"a", properties={"k": "v"}), msg(b"bb", pid=4, seq=0), msg(b"c", queue_id=1)], now_ms=5000
    )
    assert result.next_offset == store.max_offset > 0
    store.set_confirm_offset(store.max_offset)
    got = store.get_messages("orders", 0, 0, max_count=10, max_bytes=10**6)
    assert [(m.body, m.queue_offset) for m in got] == [(b"a", 0), (b"bb", 1)]
    first = got[0]
    assert first.properties == {"k": "v"}
    assert (first.born_timestamp_ms, first.store_timestamp_ms) == (1000, 5000)
    assert (first.commit_offset, first.size) == (result.appended[0].commit_offset, result.appended[0].size)
    assert (got[1].producer_id, got[1].producer_seq, first.producer_id) == (4, 0, -1)
    assert store.get_messages("orders", 1, 0, max_count=10, max_bytes=10**6)[0].body == b"c"
    assert store.topics() == {"orders": [0, 1]}


def test_queue_offsets_are_answered_at_put_time(store: MessageStore) -> None:
    first = store.put_messages([msg(queue_id=0), msg(queue_id=1), msg(queue_id=0)], now_ms=1)
    second = store.put_messages([msg(queue_id=0)], now_ms=1)
    assert [a.queue_offset for a in first.appended] == [0, 0, 1]
    assert [a.queue_offset for a in second.appended] == [2]
    assert second.appended[0].commit_offset == first.next_offset


def test_messages_beyond_the_confirm_offset_are_invisible(store: MessageStore) -> None:
    result = store.put_messages([msg(b"1"), msg(b"2"), msg(b"3")], now_ms=1)
    assert store.get_messages("orders", 0, 0, max_count=10, max_bytes=10**6) == []
    assert (store.queue_max_offset("orders", 0), store.topics()) == (0, {})
    first = result.appended[0]
    store.set_confirm_offset(first.commit_offset + first.size)
    assert [m.body for m in store.get_messages("orders", 0, 0, max_count=10, max_bytes=10**6)] == [b"1"]
    assert (store.queue_min_offset("orders", 0), store.queue_max_offset("orders", 0)) == (0, 1)
    assert store.dispatched_offset == store.confirm_offset


def test_confirm_offset_is_clamped_and_never_lowered(store: MessageStore) -> None:
    store.put_messages([msg(), msg()], now_ms=1)
    store.set_confirm_offset(10**12)
    assert store.confirm_offset == store.max_offset
    store.set_confirm_offset(0)
    assert store.confirm_offset == store.max_offset
    assert store.queue_max_offset("orders", 0) == 2


def test_consumer_offsets_are_visible_only_once_confirmed(store: MessageStore) -> None:
    store.put_messages([msg()], now_ms=1)
    result = store.put_consumer_offset(group="g1", topic="orders", queue_id=0, offset=1, now_ms=2)
    assert result.appended[0].queue_offset is None
    assert result.next_offset == store.max_offset
    assert store.consumer_offset("g1", "orders", 0) is None
    store.set_confirm_offset(result.next_offset)
    assert store.consumer_offset("g1", "orders", 0) == 1
    assert store.queue_max_offset("orders", 0) == 1  # offset commits are not messages
    store.put_consumer_offset(group="g1", topic="orders", queue_id=0, offset=7, now_ms=3)
    assert store.consumer_offset("g1", "orders", 0) == 1


def test_get_messages_honours_max_count_and_max_bytes(store: MessageStore) -> None:
    result = store.put_messages([msg(bytes(100)) for _ in range(5)], now_ms=1)
    store.set_confirm_offset(store.max_offset)
    size = result.appended[0].size
    assert len(store.get_messages("orders", 0, 1, max_count=2, max_bytes=10**6)) == 2
    assert [m.queue_offset for m in store.get_messages("orders", 0, 1, max_count=9, max_bytes=2 * size + 1)] == [1, 2]
    assert len(store.get_messages("orders", 0, 0, max_count=9, max_bytes=1)) == 1  # at least one
    assert store.get_messages("orders", 0, 5, max_count=9, max_bytes=10**6) == []
    assert store.get_messages("nope", 0, 0, max_count=9, max_bytes=10**6) == []
    with pytest.raises(ValueError, match="must be positive"):
        store.get_messages("orders", 0, 0, max_count=0, max_bytes=1)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (msg(topic=""), r"messages\[1\]\.topic of 0 bytes"),
        (msg(topic="é" * 64), r"messages\[1\]\.topic of 128 bytes"),
        (msg(topic="\udc80"), r"messages\[1\]\.topic is not valid unicode"),
        (msg(queue_id=1024), r"messages\[1\]\.queue_id=1024"),
        (msg(queue_id=-1), r"messages\[1\]\.queue_id=-1"),
        (msg(bytes(1025)), r"messages\[1\]\.body of 1025 bytes exceeds max_message_size=1024"),
        (msg(pid=3), r"messages\[1\]\.producer_id=3, producer_seq=-1"),
        (msg(properties={"k": "x" * 40_000}), r"messages\[1\]: properties of"),
    ],
)
def test_invalid_messages_are_refused_and_nothing_is_stored(store: MessageStore, bad: Message, field: str) -> None:
    with pytest.raises(InvalidMessageError, match=field):
        store.put_messages([msg(), bad], now_ms=1)
    assert store.max_offset == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"group": ""}, r"group of 0 bytes"),
        ({"topic": "x" * 128}, r"topic of 128 bytes"),
        ({"queue_id": 5000}, r"queue_id=5000"),
        ({"offset": -1}, r"offset=-1"),
    ],
)
def test_invalid_offset_commits_are_refused(store: MessageStore, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"group": "g", "topic": "t", "queue_id": 0, "offset": 0, "now_ms": 1, **kwargs}
    with pytest.raises(InvalidMessageError, match=field):
        store.put_consumer_offset(**args)
    assert store.max_offset == 0


def test_a_retried_sequence_returns_the_original_position(store: MessageStore) -> None:
    original = store.put_messages([msg(b"x", pid=9, seq=0)], now_ms=1)
    before = store.max_offset
    retry = store.put_messages([msg(b"x", pid=9, seq=0)], now_ms=2)
    assert store.max_offset == before
    assert retry.appended == (Appended(original.appended[0].commit_offset, original.appended[0].size, 0, True),)
    assert retry.next_offset == original.next_offset  # an ack waits for the original


def test_a_batch_with_partial_duplicates_appends_only_new_messages(store: MessageStore) -> None:
    first = store.put_messages([msg(b"s0", pid=1, seq=0), msg(b"s1", pid=1, seq=1)], now_ms=1)
    batch = [
        msg(b"s1", pid=1, seq=1),  # an earlier put
        msg(b"s2", pid=1, seq=2),  # new
        msg(b"s2", pid=1, seq=2),  # repeats the message just before it
        msg(b"anon"),  # no producer id: never a duplicate
        msg(b"other", pid=2, seq=0),  # another producer
    ]
    result = store.put_messages(batch, now_ms=2)
    dup_flags = [a.duplicate for a in result.appended]
    assert dup_flags == [True, False, True, False, False]
    assert result.appended[0].commit_offset == first.appended[1].commit_offset
    assert result.appended[2].commit_offset == result.appended[1].commit_offset
    store.set_confirm_offset(store.max_offset)
    bodies = [m.body for m in store.get_messages("orders", 0, 0, max_count=10, max_bytes=10**6)]
    assert bodies == [b"s0", b"s1", b"s2", b"anon", b"other"]


def test_a_sequence_below_the_last_is_a_duplicate_even_when_forgotten(store: MessageStore) -> None:
    store.put_messages([msg(b"", pid=1, seq=s) for s in range(1030)], now_ms=1)  # > 1024 remembered
    result = store.put_messages([msg(b"", pid=1, seq=0), msg(b"", pid=1, seq=1029)], now_ms=2)
    assert result.appended[0] == Appended(-1, 0, None, True)
    assert result.appended[1].duplicate and result.appended[1].queue_offset == 1029
    assert result.next_offset == store.max_offset


def test_an_empty_put_changes_nothing(store: MessageStore) -> None:
    calls: list[int] = []
    store.add_append_listener(calls.append)
    assert store.put_messages([], now_ms=1).next_offset == 0
    assert (store.max_offset, calls) == (0, [])


def test_listeners_hear_every_append_but_not_pure_duplicates(store: MessageStore) -> None:
    calls: list[int] = []
    store.add_append_listener(calls.append)
    store.put_messages([msg(pid=1, seq=0)], now_ms=1)
    store.put_messages([msg(pid=1, seq=0)], now_ms=1)
    store.put_consumer_offset(group="g", topic="orders", queue_id=0, offset=1, now_ms=1)
    assert len(calls) == 2
    assert calls[-1] == store.max_offset


def test_status_reports_offsets_and_epochs(store: MessageStore) -> None:
    assert store.append_epoch(EpochEntry(1, 0))
    store.put_messages([msg(), msg(queue_id=2)], now_ms=1)
    store.set_confirm_offset(store.max_offset)
    store.flush()
    assert store.status() == {
        "maxOffset": store.max_offset,
        "minOffset": 0,
        "confirmOffset": store.max_offset,
        "dispatchedOffset": store.max_offset,
        "flushedOffset": store.max_offset,
        "diskFull": None,
        "topics": 1,
        "epochs": [{"epoch": 1, "startOffset": 0, "endOffset": 2**63 - 1}],
    }
