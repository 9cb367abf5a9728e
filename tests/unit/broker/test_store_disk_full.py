"""A full disk (#18): puts refused before the disk is exhausted, nothing half-written when a write fails."""

from __future__ import annotations

import errno
import os
from contextlib import closing
from pathlib import Path

import pytest

from brokergroup.broker.errors import DiskFullError
from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.checkpoint import ConfirmCheckpoint
from brokergroup.broker.store.diskspace import DiskSpace, disk_full_reason, free_bytes
from brokergroup.broker.store.epoch import EpochCache
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.broker.store.segments import CommitLog
from tests.unit.broker.store_factories import FakeClock, msg, read_all_raw

SETTINGS = StoreSettings(segment_size=4096, max_message_size=1024)


def test_the_reason_names_free_and_needed_space() -> None:
    assert disk_full_reason(100, 100, "/data") is None
    reason = disk_full_reason(99, 100, "/data")
    assert reason is not None
    assert "99 bytes free" in reason and "min_free_disk_bytes=100" in reason and "/data" in reason


def test_free_bytes_measures_the_file_system(tmp_path: Path) -> None:
    stat = os.statvfs(tmp_path)
    assert free_bytes(tmp_path) == stat.f_bavail * stat.f_frsize


def test_puts_are_refused_below_the_threshold_and_resume_once_space_is_free(tmp_path: Path) -> None:
    free = [10_000]
    store = MessageStore(
        log=CommitLog(tmp_path / "commitlog", segment_size=4096),
        epochs=EpochCache(),
        checkpoint=ConfirmCheckpoint(None),
        settings=SETTINGS,
        clock=FakeClock(),
        disk=DiskSpace(tmp_path, 5_000, measure=lambda _path: free[0]),
    )
    with closing(store):
        store.put_messages([msg(b"before")], now_ms=1)
        store.set_confirm_offset(store.max_offset)
        end = store.max_offset
        free[0] = 4_999
        assert store.disk_full() is not None
        with pytest.raises(DiskFullError, match="4999 bytes free"):
            store.put_messages([msg(b"refused")], now_ms=1)
        with pytest.raises(DiskFullError):
            store.put_consumer_offset(group="g", topic="orders", queue_id=0, offset=1, now_ms=1)
        assert store.max_offset == end
        assert [m.body for m in store.get_messages("orders", 0, 0, max_count=9, max_bytes=9999)] == [b"before"]
        assert store.status()["diskFull"] is not None
        free[0] = 5_000
        store.put_messages([msg(b"after")], now_ms=1)
        assert store.queue_max_offset("orders", 0) == 1 and store.max_offset > end


class FailingLog(CommitLog):
    """pwrite fails (ENOSPC) after `budget` more bytes: a disk filling up mid-write."""

    budget = 10**9

    def _pwrite(self, index: int, position: int, data: bytes) -> None:
        if len(data) > self.budget:
            super()._pwrite(index, position, data[: self.budget])
            self.budget = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.budget -= len(data)
        super()._pwrite(index, position, data)


@pytest.mark.parametrize("budget", [0, 100, 1000, 4096 + 300], ids=["nothing", "torn", "one-record", "next-segment"])
def test_a_write_failing_midway_is_undone_and_the_log_opens_unchanged(tmp_path: Path, budget: int) -> None:
    directory = tmp_path / "store"
    with closing(MessageStore.open(directory, SETTINGS, clock=FakeClock())) as store:
        store.put_messages([msg(b"a" * 900) for _ in range(3)], now_ms=1)  # 3 records, < 1 segment
        store.flush()
        before = read_all_raw(store)
        files = sorted(p.name for p in (directory / "commitlog").iterdir())
    log = FailingLog(directory / "commitlog", segment_size=4096)
    log.budget = budget
    store = MessageStore(log=log, epochs=EpochCache(), checkpoint=ConfirmCheckpoint(None), settings=SETTINGS)
    with pytest.raises(DiskFullError, match=r"undone.*No space left"):
        store.put_messages([msg(b"b" * 900) for _ in range(6)], now_ms=1)
    assert read_all_raw(store) == before
    assert sorted(p.name for p in (directory / "commitlog").iterdir()) == files
    assert store.max_offset == len(before)
    log.budget = 10**9
    assert store.put_messages([msg(b"c")], now_ms=1).appended[0].commit_offset == len(before)
    store.close()
    with closing(MessageStore.open(directory, SETTINGS, clock=FakeClock())) as reopened:
        assert read_all_raw(reopened)[: len(before)] == before
        assert reopened.max_offset == store.max_offset


def test_puts_far_above_the_threshold_skip_statvfs_until_their_bytes_or_the_age_use_the_headroom() -> None:
    free = [10_000]
    now = [0.0]
    disk = DiskSpace(
        "/data", 1_000, measure=lambda _path: free[0], clock=lambda: now[0], headroom_bytes=5_000, max_age_s=0.1
    )
    assert disk.refusal(100) is None and disk.measurements == 1  # 10_000 - 1_000 - 5_000: 4_000 spare
    free[0] = 0  # another process fills the disk: unnoticed while within the headroom and the age
    for _ in range(38):
        assert disk.refusal(100) is None
    assert disk.measurements == 1
    assert disk.refusal(200) is not None and disk.measurements == 2  # 3_900 written would pass the headroom
    free[0] = 10_000
    assert disk.refusal(100) is None and disk.measurements == 3
    assert disk.refusal(100) is None and disk.measurements == 3
    now[0] = 0.1  # the measurement is too old
    assert disk.refusal(100) is None and disk.measurements == 4
    free[0] = 0
    now[0] = 0.25
    assert disk.refusal(1) is not None and disk.measurements == 5
    assert disk.refusal(1) is not None and disk.measurements == 6  # refused: measured again each time


def test_near_the_threshold_every_put_measures() -> None:
    free = [1_000_000]
    disk = DiskSpace("/data", 1_000, measure=lambda _path: free[0], clock=lambda: 0.0, headroom_bytes=2_000_000)
    for n in range(1, 4):
        assert disk.refusal(10) is None and disk.measurements == n
    free[0] = 999
    assert disk.refusal(10) is not None and disk.measurements == 4


def test_a_status_check_always_measures() -> None:
    free = [10**12]
    disk = DiskSpace("/data", 1_000, measure=lambda _path: free[0], clock=lambda: 0.0)
    assert disk.refusal(10) is None
    free[0] = 10
    assert disk.full() is not None and disk.measurements == 2
    assert disk.refusal(10) is not None  # the refusal measured by full() is not skipped
