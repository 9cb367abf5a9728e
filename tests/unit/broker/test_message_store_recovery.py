"""MessageStore across restarts and truncations: only what was confirmed is ever exposed (#6609,
#7689), queue offsets are not reused, dedup survives, epochs follow the log."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from store_factories import FakeClock, msg, open_store, visible

from brokergroup.broker.store.checkpoint import ConfirmCheckpoint
from brokergroup.broker.store.epoch import OPEN, EpochEntry
from brokergroup.broker.store.message_store import COMMITLOG_DIR, CONFIRM_FILE, MessageStore


def crash_image(store_dir: Path, into: Path) -> Path:
    """The store's files as a kill -9 would leave them now (the page cache survives)."""
    shutil.copytree(store_dir, into)
    return into


def bodies(store: MessageStore, queue_id: int = 0) -> list[bytes]:
    return [m.body for m in store.get_messages("orders", queue_id, 0, max_count=100, max_bytes=10**6)]


def test_reopen_restores_exactly_the_confirmed_view(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    ends = [store.put_messages([msg(b"m%d" % i)], now_ms=1).next_offset for i in range(5)]
    store.put_consumer_offset(group="g1", topic="orders", queue_id=0, offset=2, now_ms=1)
    store.set_confirm_offset(ends[2])
    store.close()
    again = open_store(tmp_path / "s")
    try:
        assert again.confirm_offset == ends[2]
        assert bodies(again) == [b"m0", b"m1", b"m2"]
        assert again.consumer_offset("g1", "orders", 0) is None
        assert again.put_messages([msg(b"m5")], now_ms=2).appended[0].queue_offset == 5  # not reused (#7689)
        again.set_confirm_offset(again.max_offset)
        assert bodies(again) == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"]
        assert again.consumer_offset("g1", "orders", 0) == 2
    finally:
        again.close()


def test_checkpoint_writes_are_throttled_and_may_lag_after_a_crash(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path / "s", clock=clock)
    ends = [store.put_messages([msg(b"m%d" % i)], now_ms=1).next_offset for i in range(3)]
    store.set_confirm_offset(ends[0])  # within 200 ms of opening: not written yet
    lagging = open_store(crash_image(tmp_path / "s", tmp_path / "c1"))
    clock.now = 0.25
    store.set_confirm_offset(ends[1])
    current = open_store(crash_image(tmp_path / "s", tmp_path / "c2"))
    store.set_confirm_offset(ends[2])
    store.flush_checkpoint()
    forced = open_store(crash_image(tmp_path / "s", tmp_path / "c3"))
    try:
        assert (lagging.confirm_offset, bodies(lagging)) == (0, [])
        assert (current.confirm_offset, bodies(current)) == (ends[1], [b"m0", b"m1"])
        assert forced.confirm_offset == ends[2]
    finally:
        for opened in (store, lagging, current, forced):
            opened.close()


def test_a_checkpoint_past_the_recovered_log_is_lowered_and_rewritten_on_open(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    ends = [store.put_messages([msg(b"m%d" % i)], now_ms=1).next_offset for i in range(3)]
    store.set_confirm_offset(ends[2])
    store.close()
    os.truncate(tmp_path / "s" / COMMITLOG_DIR / f"{0:020d}", ends[1])  # the unflushed tail was lost
    reopened = open_store(tmp_path / "s")
    assert reopened.confirm_offset == ends[1]
    assert ConfirmCheckpoint(tmp_path / "s" / CONFIRM_FILE).read() == ends[1]
    reopened.put_messages([msg(b"new")], now_ms=2)  # lands where m2 was, unconfirmed
    image = open_store(crash_image(tmp_path / "s", tmp_path / "c"))
    try:
        assert bodies(image) == [b"m0", b"m1"]  # never exposed (#6609)
        assert image.put_messages([msg(b"next")], now_ms=3).appended[0].queue_offset == 3
    finally:
        reopened.close()
        image.close()


def test_a_damaged_checkpoint_exposes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(tmp_path / "s")
    store.put_messages([msg()], now_ms=1)
    store.set_confirm_offset(store.max_offset)
    store.close()
    (tmp_path / "s" / CONFIRM_FILE).write_bytes(b"999\n12\n")
    with caplog.at_level(logging.WARNING):
        reopened = open_store(tmp_path / "s")
    try:
        assert (reopened.confirm_offset, bodies(reopened)) == (0, [])
        assert "damaged" in caplog.text
    finally:
        reopened.close()


def test_dedup_survives_a_restart(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    original = store.put_messages([msg(pid=5, seq=0), msg(pid=5, seq=1)], now_ms=1)
    store.close()
    reopened = open_store(tmp_path / "s")
    try:
        retry = reopened.put_messages([msg(pid=5, seq=1), msg(pid=5, seq=2)], now_ms=2)
        assert retry.appended[0].duplicate
        assert retry.appended[0].commit_offset == original.appended[1].commit_offset
        assert not retry.appended[1].duplicate
    finally:
        reopened.close()


def test_epochs_past_the_log_end_are_dropped_on_open(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    store.append_epoch(EpochEntry(1, 0))
    store.put_messages([msg()], now_ms=1)
    end = store.max_offset
    store.append_epoch(EpochEntry(2, end))  # a new epoch with nothing written yet: kept
    store.append_epoch(EpochEntry(3, end + 500))  # written before a log truncation that crashed
    store.close()
    reopened = open_store(tmp_path / "s")
    try:
        assert reopened.epochs.entries() == (EpochEntry(1, 0, end), EpochEntry(2, end, OPEN))
    finally:
        reopened.close()


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MessageStore:
    opened = open_store(tmp_path / "store", memory=request.param == "memory")
    request.addfinalizer(opened.close)
    return opened


def test_truncate_rebuilds_indexes_and_epochs(store: MessageStore) -> None:
    store.append_epoch(EpochEntry(1, 0))
    ends = [store.put_messages([msg(b"m0", pid=1, seq=0)], now_ms=1).next_offset]
    ends.append(store.put_messages([msg(b"m1", pid=1, seq=1)], now_ms=1).next_offset)
    store.append_epoch(EpochEntry(2, ends[-1]))
    ends.append(store.put_messages([msg(b"m2", pid=1, seq=2)], now_ms=1).next_offset)
    ends.append(store.put_consumer_offset(group="g1", topic="orders", queue_id=0, offset=3, now_ms=1).next_offset)
    store.set_confirm_offset(store.max_offset)
    assert (bodies(store), store.consumer_offset("g1", "orders", 0)) == ([b"m0", b"m1", b"m2"], 3)

    store.truncate(ends[1])

    assert (store.max_offset, store.confirm_offset, store.dispatched_offset) == (ends[1], ends[1], ends[1])
    assert store.epochs.entries() == (EpochEntry(1, 0, OPEN),)
    assert bodies(store) == [b"m0", b"m1"]
    assert store.consumer_offset("g1", "orders", 0) is None
    redo = store.put_messages([msg(b"m2 again", pid=1, seq=2)], now_ms=2)  # seq 2 was cut: not a duplicate
    assert (redo.appended[0].duplicate, redo.appended[0].queue_offset) == (False, 2)


def test_truncate_at_the_end_only_drops_epochs_starting_there(store: MessageStore) -> None:
    store.append_epoch(EpochEntry(1, 0))
    store.put_messages([msg()], now_ms=1)
    store.append_epoch(EpochEntry(2, store.max_offset))
    store.set_confirm_offset(store.max_offset)
    store.truncate(store.max_offset)
    assert [e.epoch for e in store.epochs.entries()] == [1]
    assert bodies(store) == [b"hello"]


def test_a_truncation_below_the_confirm_offset_is_persisted_at_once(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    ends = [store.put_messages([msg(b"m%d" % i)], now_ms=1).next_offset for i in range(3)]
    store.set_confirm_offset(ends[2])
    store.flush_checkpoint()
    store.truncate(ends[0])
    store.put_messages([msg(b"x1"), msg(b"x2")], now_ms=2)  # from a new master, not confirmed yet
    image = open_store(crash_image(tmp_path / "s", tmp_path / "c"))
    try:
        assert image.confirm_offset == ends[0]
        assert bodies(image) == [b"m0"]
        assert visible(image).keys() == {("orders", 0)}
    finally:
        store.close()
        image.close()
