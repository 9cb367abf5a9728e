"""MessageStore as a replica: append_raw reproduces the master; memory and file stores agree."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_factories import SETTINGS, msg, open_store, read_all_raw, view

from brokergroup.broker.errors import InvalidRecordError, SeedRequiredError
from brokergroup.broker.store.epoch import EpochEntry
from brokergroup.broker.store.message_store import MessageStore


def fill_master(master: MessageStore) -> None:
    master.append_epoch(EpochEntry(1, 0))
    for round_ in range(30):
        batch = [msg(bytes(100 * (round_ % 9)), queue_id=round_ % 3, pid=round_ % 2, seq=round_ // 2)]
        batch.append(msg(b"anon %d" % round_, topic="audit", queue_id=1))
        master.put_messages(batch, now_ms=10 + round_)
        if round_ == 6:
            master.append_epoch(EpochEntry(2, master.max_offset))
        if round_ % 4 == 3:
            master.put_consumer_offset(group="g1", topic="orders", queue_id=0, offset=round_, now_ms=10)
    master.set_confirm_offset(master.max_offset)


def replicate(master: MessageStore, slave: MessageStore, *, chunk: int = 1000) -> int:
    frames = 0
    for entry in master.epochs.entries():
        slave.append_epoch(entry)
    while slave.max_offset < master.max_offset:
        data = master.read_raw(slave.max_offset, chunk)
        slave.append_raw(slave.max_offset, data)
        frames += 1
    return frames


@pytest.fixture(params=["file", "memory"])
def slave(request: pytest.FixtureRequest, tmp_path: Path) -> MessageStore:
    opened = open_store(tmp_path / "slave", memory=request.param == "memory")
    request.addfinalizer(opened.close)
    return opened


@pytest.fixture
def master(tmp_path: Path) -> Iterator[MessageStore]:
    opened = open_store(tmp_path / "master")
    fill_master(opened)
    yield opened
    opened.close()


def test_append_raw_reproduces_the_masters_bytes_and_indexes(master: MessageStore, slave: MessageStore) -> None:
    heard: list[int] = []
    slave.add_append_listener(heard.append)
    frames = replicate(master, slave)
    assert master.max_offset > 2 * SETTINGS.segment_size  # blanks were replicated too
    assert read_all_raw(slave) == read_all_raw(master)
    assert heard[-1] == master.max_offset and len(heard) == frames
    assert slave.topics() == {}  # nothing confirmed on the slave yet
    slave.set_confirm_offset(master.confirm_offset)
    assert view(slave) == view(master)


def test_a_promoted_slave_deduplicates_and_numbers_like_the_master(master: MessageStore, slave: MessageStore) -> None:
    replicate(master, slave)
    retry = [msg(bytes(200), queue_id=2, pid=1, seq=5)]  # round 11 sent it; retried after a failover
    on_slave = slave.put_messages(retry, now_ms=99)
    on_master = master.put_messages(retry, now_ms=99)
    assert on_slave == on_master
    assert on_slave.appended[0].duplicate and on_slave.appended[0].commit_offset > 0
    fresh = [msg(b"after failover", queue_id=0, pid=1, seq=15)]
    assert slave.put_messages(fresh, now_ms=99) == master.put_messages(fresh, now_ms=99)


def test_an_empty_slave_refuses_to_start_at_a_later_segment(master: MessageStore, slave: MessageStore) -> None:
    """Its queues would count from 0 where the master's count on: refused, nothing written."""
    start = SETTINGS.segment_size
    with pytest.raises(SeedRequiredError, match=f"starts at offset {start}"):
        slave.append_raw(start, master.read_raw(start, 10**6))
    assert (slave.min_offset, slave.max_offset, slave.topics()) == (0, 0, {})
    replicate(master, slave)
    slave.set_confirm_offset(slave.max_offset)
    assert view(slave) == view(master)


def test_bad_replicated_data_changes_nothing(master: MessageStore, slave: MessageStore) -> None:
    data = bytearray(master.read_raw(0, 1000))
    data[-1] ^= 0xFF
    with pytest.raises(InvalidRecordError):
        slave.append_raw(0, bytes(data))
    assert (slave.max_offset, slave.status()["maxOffset"]) == (0, 0)
    replicate(master, slave)
    slave.set_confirm_offset(slave.max_offset)
    assert view(slave) == view(master)


# -- memory and file stores agree, operation by operation -----------------------------------

messages = st.builds(
    lambda q, size, pid, seq: msg(bytes(size), queue_id=q, pid=pid, seq=seq if pid >= 0 else -1),
    st.integers(0, 2),
    st.sampled_from([0, 1, 60, 400, 900]),
    st.sampled_from([-1, 0, 1]),
    st.integers(0, 6),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(messages, min_size=1, max_size=4)),
        st.tuples(st.just("commit"), st.sampled_from(["g1", "g2"]), st.integers(0, 2), st.integers(0, 50)),
        st.tuples(st.just("confirm"), st.integers(0, 1000)),
        st.tuples(st.just("truncate"), st.integers(0, 1000)),
    ),
    max_size=14,
)


def apply(store: MessageStore, op: tuple[object, ...], boundaries: list[int]) -> object:
    match op:
        case ("put", list() as batch):
            return store.put_messages(batch, now_ms=7)
        case ("commit", str() as group, int() as queue_id, int() as offset):
            return store.put_consumer_offset(group=group, topic="orders", queue_id=queue_id, offset=offset, now_ms=7)
        case ("confirm", int() as pick):
            return store.set_confirm_offset(boundaries[pick % len(boundaries)])
        case ("truncate", int() as pick):
            return store.truncate(boundaries[pick % len(boundaries)])
    raise AssertionError(op)


@settings(max_examples=40, deadline=None)
@given(operations)
def test_memory_and_file_stores_agree(ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        on_disk = open_store(Path(directory))
        in_memory = open_store(Path(directory), memory=True)
        boundaries = [0]
        try:
            for op in ops:
                assert apply(on_disk, op, boundaries) == apply(in_memory, op, boundaries)
                if op[0] == "truncate":
                    boundaries = [b for b in boundaries if b <= on_disk.max_offset]
                else:
                    boundaries.append(on_disk.max_offset)
                assert view(on_disk) == view(in_memory)
        finally:
            on_disk.close()
        reopened = open_store(Path(directory))
        try:
            assert view(reopened) == view(in_memory)
        finally:
            reopened.close()
