"""Zeros written ahead of the log's end (issue 21): appends land in blocks that exist, and a zero
tail after a crash is the log's end, while a torn or corrupt record before it is still cut."""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from brokergroup.broker.errors import CorruptLogError
from brokergroup.broker.store.segments import PREWRITE_BLOCK, CommitLog, data_size

SEGMENT = 64 * 1024
PREWRITE = 16 * 1024
MakeRecord = Callable[[int], bytes]


def segment(directory: Path, start: int) -> Path:
    return directory / f"{start:020d}"


def open_log(directory: Path) -> CommitLog:
    return CommitLog(directory, segment_size=SEGMENT, prewrite=PREWRITE)


def crashed_copy(log: CommitLog, directory: Path) -> Path:
    """The files of a running log as a kill -9 leaves them (zeros ahead, nothing trimmed)."""
    copy = directory.with_name(directory.name + "-crashed")
    shutil.copytree(directory, copy)
    return copy


def test_zeros_stay_written_ahead_of_the_end_and_the_size_changes_once_per_half_prewrite(
    tmp_path: Path, rec: MakeRecord
) -> None:
    directory = tmp_path / "log"
    with open_log(directory) as log:
        log.append([rec(100)])
        sizes = set()
        for _ in range(200):  # 200 x 1058 bytes: about 13 half-prewrites
            log.append([rec(1000)])
            last = log.segment_starts[-1]
            size = segment(directory, last).stat().st_size
            assert size % PREWRITE_BLOCK == 0 and size <= SEGMENT
            assert size - (log.max_offset - last) >= PREWRITE // 2 or size == SEGMENT
            sizes.add((last, size))
        assert len(log.segment_starts) == 4
        assert len(sizes) <= 200 * 1058 // (PREWRITE // 2) + 2 * 4
        end = log.max_offset
        last = (end // SEGMENT) * SEGMENT
        assert not any(segment(directory, last).read_bytes()[end - last :])
    # A clean close trims the zeros: every file holds exactly its items.
    assert segment(directory, last).stat().st_size == end - last
    assert all(segment(directory, s).stat().st_size == SEGMENT for s in range(0, last, SEGMENT))


def test_a_zero_tail_after_a_crash_is_the_end_without_a_warning(
    tmp_path: Path, rec: MakeRecord, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    with open_log(directory) as log:
        records = [rec(200) for _ in range(5)]
        log.append(records)
        log.flush()
        end = log.max_offset
        copy = crashed_copy(log, directory)
    assert segment(copy, 0).stat().st_size > end
    with caplog.at_level(logging.WARNING), open_log(copy) as reopened:
        assert reopened.max_offset == end
        assert reopened.read(0, 10**6) == b"".join(records)
        assert segment(copy, 0).stat().st_size >= end  # written ahead again only on the next append
        assert reopened.append([rec(10)]) == [(end, 68)]
    assert caplog.text == ""


def test_a_record_ending_in_zero_bytes_is_kept_whole(tmp_path: Path, rec: MakeRecord) -> None:
    from brokergroup.broker.store.record import encode_record

    zero_body = encode_record(topic="t", queue_id=1, body=b"\0" * 300, born_timestamp_ms=1, store_timestamp_ms=2)
    directory = tmp_path / "log"
    with open_log(directory) as log:
        log.append([rec(10), zero_body])
        log.flush()
        end = log.max_offset
        copy = crashed_copy(log, directory)
    assert data_size(segment(copy, 0)) == end
    with open_log(copy) as reopened:
        assert reopened.max_offset == end
        assert reopened.read(68, 10**6) == zero_body


@pytest.mark.parametrize("damage", ["torn", "crc"])
def test_a_damaged_last_record_before_the_zeros_is_still_cut(
    tmp_path: Path, rec: MakeRecord, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    directory = tmp_path / "log"
    with open_log(directory) as log:
        log.append([rec(10), rec(10)])
        log.flush()
        copy = crashed_copy(log, directory)
    with segment(copy, 0).open("r+b") as file:
        if damage == "torn":  # the third record's first 30 bytes reached the disk, its rest did not
            file.seek(136)
            file.write(rec(10)[:30])
        else:  # the second record's last bytes were lost (zeros where they were)
            file.seek(130)
            file.write(b"\0" * 6)
    size = segment(copy, 0).stat().st_size
    with caplog.at_level(logging.WARNING), open_log(copy) as reopened:
        assert reopened.max_offset == (136 if damage == "torn" else 68)
    assert "damaged tail" in caplog.text
    assert size > 136


def test_damage_followed_by_a_valid_record_before_the_zeros_still_raises(tmp_path: Path, rec: MakeRecord) -> None:
    directory = tmp_path / "log"
    with open_log(directory) as log:
        log.append([rec(10), rec(10), rec(10)])
        log.flush()
        copy = crashed_copy(log, directory)
    with segment(copy, 0).open("r+b") as file:
        file.seek(68 + 60)
        file.write(b"\xff")
    with pytest.raises(CorruptLogError, match="a valid item follows at offset 136"):
        open_log(copy)


def test_truncation_removes_the_zeros_and_a_crash_after_it_recovers_the_cut(tmp_path: Path, rec: MakeRecord) -> None:
    directory = tmp_path / "log"
    with open_log(directory) as log:
        log.append([rec(10) for _ in range(10)])
        log.flush()
        log.truncate(68 * 4)
        assert segment(directory, 0).stat().st_size == 68 * 4
        new = rec(20)
        assert log.append([new]) == [(68 * 4, 78)]
        assert segment(directory, 0).stat().st_size > 68 * 4 + 78  # written ahead again
        log.flush()
        copy = crashed_copy(log, directory)
    with open_log(copy) as reopened:
        assert reopened.max_offset == 68 * 4 + 78
        assert reopened.read(68 * 4, 10**6) == new


def test_a_new_segment_is_written_ahead_and_the_sealed_one_is_exactly_full(tmp_path: Path, rec: MakeRecord) -> None:
    directory = tmp_path / "log"
    with open_log(directory) as log:
        while log.max_offset < SEGMENT + 100:
            log.append([rec(4000)])
        assert segment(directory, 0).stat().st_size == SEGMENT
        assert segment(directory, SEGMENT).stat().st_size >= PREWRITE
        log.flush()
        end = log.max_offset
        copy = crashed_copy(log, directory)
    with CommitLog(copy, segment_size=SEGMENT, prewrite=PREWRITE, verify_all=True) as reopened:
        assert reopened.max_offset == end


def test_a_failed_zero_write_is_undone_and_logged_and_the_records_stay(
    tmp_path: Path, rec: MakeRecord, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_pwrite = os.pwrite
    full = [True]

    def pwrite(fd: int, data: bytes | memoryview, position: int) -> int:
        if full[0] and len(data) >= PREWRITE_BLOCK and not any(bytes(data)):
            real_pwrite(fd, bytes(len(data) // 2), position)  # half written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, position)

    directory = tmp_path / "log"
    monkeypatch.setattr(os, "pwrite", pwrite)
    with caplog.at_level(logging.WARNING), open_log(directory) as log:
        first = rec(100)
        assert log.append([first]) == [(0, 158)]
        assert segment(directory, 0).stat().st_size == 158
        log.append([rec(100)])  # still full: logged once
        full[0] = False
        log.append([rec(100)])
        assert segment(directory, 0).stat().st_size > 3 * 158
        assert log.read(0, 158) == first
    assert caplog.text.count("cannot write zeros ahead") == 1


def test_prewrite_zero_writes_nothing_ahead(tmp_path: Path, rec: MakeRecord) -> None:
    with CommitLog(tmp_path, segment_size=SEGMENT, prewrite=0) as log:
        log.append([rec(100)])
        assert segment(tmp_path, 0).stat().st_size == 158
    with pytest.raises(ValueError, match="prewrite=-1"):
        CommitLog(tmp_path, segment_size=SEGMENT, prewrite=-1)
