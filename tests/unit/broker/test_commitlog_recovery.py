"""CommitLog recovery on open: damaged tails are cut, damage in the middle is refused."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from brokergroup.broker.errors import CorruptLogError, StoreError
from brokergroup.broker.store.record import encode_blank
from brokergroup.broker.store.segments import CommitLog

SEGMENT = 256
MakeRecord = Callable[[int], bytes]


def segment(directory: Path, start: int) -> Path:
    return directory / f"{start:020d}"


def write_log(directory: Path, records: list[bytes]) -> list[tuple[int, int]]:
    with CommitLog(directory, segment_size=SEGMENT) as log:
        placed = log.append(records)
        log.flush()
    return placed


def reopen(directory: Path, *, verify_all: bool = False) -> CommitLog:
    return CommitLog(directory, segment_size=SEGMENT, verify_all=verify_all)


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def test_torn_tail_is_cut_and_logged(tmp_path: Path, rec: MakeRecord, caplog: pytest.LogCaptureFixture) -> None:
    write_log(tmp_path, [rec(10), rec(10), rec(10)])  # 68 bytes each
    with segment(tmp_path, 0).open("r+b") as file:
        file.truncate(68 * 2 + 30)
    with caplog.at_level(logging.WARNING), reopen(tmp_path) as log:
        assert log.max_offset == 136
        assert log.append([rec(0)]) == [(136, 58)]
    assert "cutting 30 bytes of damaged tail" in caplog.text
    assert "offset=136" in caplog.text


@pytest.mark.parametrize("tail", [b"\0" * 100, b"BG", b"BGL1\0\0\0\x45", b"garbage that is not a record"])
def test_garbage_after_the_last_record_is_cut(tmp_path: Path, rec: MakeRecord, tail: bytes) -> None:
    write_log(tmp_path, [rec(10), rec(10)])
    with segment(tmp_path, 0).open("ab") as file:
        file.write(tail)
    with reopen(tmp_path) as log:
        assert log.max_offset == 136
    assert segment(tmp_path, 0).stat().st_size == 136  # physically cut, not just ignored


def test_a_corrupt_last_record_is_cut(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(10), rec(10)])
    flip(segment(tmp_path, 0), 68 + 60)
    with reopen(tmp_path) as log:
        assert log.max_offset == 68


def test_corruption_followed_by_valid_records_raises(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(10), rec(10), rec(10)])
    flip(segment(tmp_path, 0), 68 + 60)
    with pytest.raises(
        CorruptLogError,
        match=r"00000000000000000000: damaged item at offset 68 \(.*crc32 mismatch.*\); "
        r"a valid item follows at offset 136",
    ):
        reopen(tmp_path)
    assert segment(tmp_path, 0).stat().st_size == 204  # nothing was cut


def test_a_corrupt_length_followed_by_valid_records_raises(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(10), rec(10), rec(10)])
    flip(segment(tmp_path, 0), 7)  # the first record now claims to be longer than the file
    with pytest.raises(CorruptLogError, match="damaged item at offset 0"):
        reopen(tmp_path)


def test_damage_in_a_sealed_segment_is_found_by_verify_all(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(100), rec(100), rec(100)])
    flip(segment(tmp_path, 256), 200)  # inside the blank of segment 256
    with reopen(tmp_path) as log:  # by default only the last segment is scanned
        assert log.max_offset == 512 + 158
    with pytest.raises(CorruptLogError, match=r"00000000000000000256: damaged item at offset 414"):
        reopen(tmp_path, verify_all=True)


def test_a_torn_blank_at_the_tail_is_cut_and_the_next_append_rolls(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(100)])
    with segment(tmp_path, 0).open("ab") as file:
        file.write(encode_blank(98)[:40])  # crashed while sealing the segment
    with reopen(tmp_path) as log:
        assert log.max_offset == 158
        assert log.append([rec(100)]) == [(256, 158)]
    with reopen(tmp_path, verify_all=True) as log:
        assert log.max_offset == 414


def test_a_sealed_last_segment_is_whole(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(100)])
    with segment(tmp_path, 0).open("ab") as file:
        file.write(encode_blank(98))  # crashed after sealing, before the next segment existed
    with reopen(tmp_path, verify_all=True) as log:
        assert log.max_offset == 256
        assert log.append([rec(0)]) == [(256, 58)]


def test_a_missing_segment_is_corruption(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(100)] * 3)
    segment(tmp_path, 256).unlink()
    with pytest.raises(CorruptLogError, match="00000000000000000512: the segment before it is missing"):
        reopen(tmp_path)


def test_a_short_sealed_segment_is_corruption(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(100)] * 2)
    with segment(tmp_path, 0).open("r+b") as file:
        file.truncate(200)
    with pytest.raises(CorruptLogError, match="00000000000000000000: holds 200 bytes, segment_size is 256"):
        reopen(tmp_path)


def test_a_different_segment_size_is_refused(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(100)] * 2)
    with pytest.raises(StoreError, match="start is not a multiple of segment_size=512"):
        CommitLog(tmp_path, segment_size=512)


def test_files_that_are_not_segments_are_left_alone(tmp_path: Path, rec: MakeRecord) -> None:
    write_log(tmp_path, [rec(10)])
    (tmp_path / "README").write_text("hello")
    with reopen(tmp_path) as log:
        assert log.max_offset == 68
    assert (tmp_path / "README").exists()
