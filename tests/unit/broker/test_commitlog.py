"""CommitLog and MemoryLog: placement in segments, reads, replicated appends, truncation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from brokergroup.broker.errors import InvalidRecordError, StoreError
from brokergroup.broker.store.record import Blank, DecodedRecord, decode_record, encode_blank
from brokergroup.broker.store.segments import CommitLog, MemoryLog

SEGMENT = 256  # as the `log` fixture (conftest.py)
MakeRecord = Callable[[int], bytes]
Log = CommitLog | MemoryLog


def items(data: bytes) -> list[DecodedRecord | Blank]:
    found, position = [], 0
    while position < len(data):
        item = decode_record(data, position)
        assert isinstance(item, DecodedRecord | Blank), item
        found.append(item)
        position += item.size
    return found


def read_all(log: Log, start: int | None = None, max_bytes: int = 1000) -> bytes:
    offset, chunks = log.min_offset if start is None else start, []
    while offset < log.max_offset:
        chunk = log.read(offset, max_bytes)
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def test_empty_log(log: Log) -> None:
    assert (log.min_offset, log.max_offset, log.unflushed_bytes) == (0, 0, 0)
    assert log.read(0, 100) == b""
    assert log.append([]) == []


def test_append_returns_offsets_and_reads_back(log: Log, rec: MakeRecord) -> None:
    records = [rec(10), rec(20), rec(30)]
    assert log.append(records) == [(0, 68), (68, 78), (146, 88)]
    assert log.max_offset == 234
    assert log.read(0, 1000) == b"".join(records)
    assert log.read(68, 1000) == records[1] + records[2]


def test_records_never_span_segments(log: Log, rec: MakeRecord) -> None:
    records = [rec(100), rec(100), rec(100)]  # 158 bytes each: one per 256-byte segment
    assert log.append(records) == [(0, 158), (256, 158), (512, 158)]
    assert log.read(158, 1000) == encode_blank(98)
    assert [type(i) for i in items(read_all(log))] == [DecodedRecord, Blank] * 2 + [DecodedRecord]


def test_a_record_that_fills_a_segment_exactly_needs_no_blank(log: Log, rec: MakeRecord) -> None:
    assert log.append([rec(100), rec(40), rec(0)]) == [(0, 158), (158, 98), (256, 58)]


def test_a_record_leaving_less_than_a_blank_goes_to_the_next_segment(log: Log, rec: MakeRecord) -> None:
    # 158 + 90 = 248 would leave 8 bytes: too few for a 12-byte blank.
    assert log.append([rec(100), rec(32)]) == [(0, 158), (256, 90)]
    assert log.read(158, 1000) == encode_blank(98)


def test_segment_files_are_named_by_their_start_offset(tmp_path: Path, rec: MakeRecord) -> None:
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        log.append([rec(100)] * 3)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00000000000000000000", "00000000000000000256", "00000000000000000512"]
    assert [(tmp_path / n).stat().st_size for n in names] == [256, 256, 158]


def test_invalid_appends_write_nothing(log: Log, rec: MakeRecord) -> None:
    log.append([rec(1)])
    with pytest.raises(InvalidRecordError, match="exceeds segment_size=256"):
        log.append([rec(5), rec(250)])
    with pytest.raises(InvalidRecordError, match="not one whole record"):
        log.append([rec(5), rec(5)[:-1]])
    with pytest.raises(InvalidRecordError, match="not one whole record"):
        log.append([rec(5) + b"x"])
    with pytest.raises(InvalidRecordError, match="not one whole record"):
        log.append([encode_blank(20)])
    assert log.max_offset == 59


def test_read_returns_whole_items_within_max_bytes(log: Log, rec: MakeRecord) -> None:
    records = [rec(10), rec(10), rec(10)]  # 68 bytes each
    log.append(records)
    assert log.read(0, 140) == records[0] + records[1]
    assert log.read(0, 135) == records[0]
    assert log.read(0, 1) == records[0]  # at least one item, however small max_bytes is
    with pytest.raises(ValueError, match="max_bytes=0"):
        log.read(0, 0)


def test_read_refuses_offsets_outside_or_inside_records(log: Log, rec: MakeRecord) -> None:
    log.append([rec(10), rec(10)])
    with pytest.raises(StoreError, match=r"offset=137 outside the log \[0, 136\]"):
        log.read(137, 10)
    with pytest.raises(StoreError, match="offset=5 is not at a record boundary"):
        log.read(5, 100)


def test_unflushed_bytes(log: Log, rec: MakeRecord) -> None:
    log.append([rec(100)])
    assert log.unflushed_bytes == 158
    log.flush()
    assert log.unflushed_bytes == 0
    log.append([rec(100), rec(0)])  # sealing segment 0 on roll syncs it
    assert log.unflushed_bytes == 158 + 58


def test_replication_reproduces_the_masters_bytes_and_offsets(log: Log, rec: MakeRecord) -> None:
    log.append([rec(n) for n in (10, 120, 3, 90, 100, 0, 60)])
    slave = MemoryLog(segment_size=SEGMENT)
    offset = 0
    while offset < log.max_offset:
        chunk = log.read(offset, 100)
        slave.append_raw(offset, chunk)
        offset += len(chunk)
    assert slave.max_offset == log.max_offset
    assert read_all(slave) == read_all(log)


def test_append_raw_checks_the_offset(log: Log, rec: MakeRecord) -> None:
    log.append([rec(10)])
    with pytest.raises(StoreError, match="append_raw at offset=0, expected max_offset=68"):
        log.append_raw(0, rec(10))
    log.append_raw(68, b"")
    assert log.max_offset == 68


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda r: r(10) + r(10)[:30], "Torn"),
        (lambda r: r(10) + b"\0" * 20, "Corrupt"),
        (lambda r: r(10) + encode_blank(20), "breaks segment layout"),
        (lambda r: r(100) + r(32), "breaks segment layout"),
    ],
)
def test_append_raw_refuses_bad_data_and_writes_nothing(
    log: Log, rec: MakeRecord, make: Callable[[MakeRecord], bytes], message: str
) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        log.append_raw(0, make(rec))
    assert log.max_offset == 0


def test_an_empty_log_accepts_replication_from_a_segment_start(log: Log, rec: MakeRecord) -> None:
    with pytest.raises(StoreError, match="append_raw at offset=100"):
        log.append_raw(100, rec(1))
    log.append_raw(512, rec(1))
    assert (log.min_offset, log.max_offset) == (512, 571)
    assert log.read(512, 100) == log.read(512, 100)[:59]


def test_truncate_to_a_record_boundary(log: Log, rec: MakeRecord) -> None:
    log.append([rec(100)] * 4)  # at 0, 256, 512, 768
    log.truncate(256 + 158)
    assert log.max_offset == 414
    log.truncate(256)
    assert log.max_offset == 256
    assert log.append([rec(0)]) == [(256, 58)]
    with pytest.raises(StoreError, match="offset=257 is not at a record boundary"):
        log.truncate(257)
    with pytest.raises(StoreError, match="outside the log"):
        log.truncate(315)
    log.truncate(0)
    assert (log.min_offset, log.max_offset) == (0, 0)


def test_truncate_to_the_start_of_a_blank(log: Log, rec: MakeRecord) -> None:
    log.append([rec(100), rec(100)])
    log.truncate(158)
    assert log.max_offset == 158
    assert log.append([rec(40)]) == [(158, 98)]


def test_memory_and_file_logs_place_records_identically(tmp_path: Path, rec: MakeRecord) -> None:
    records = [rec(n) for n in (0, 198, 7, 100, 100, 41, 150, 3)]
    memory = MemoryLog(segment_size=SEGMENT)
    with CommitLog(tmp_path, segment_size=SEGMENT) as on_disk:
        assert memory.append(records) == on_disk.append(records)
        assert read_all(memory) == read_all(on_disk)


def test_reopen_finds_the_same_log(tmp_path: Path, rec: MakeRecord) -> None:
    records = [rec(n) for n in (100, 100, 100, 5)]
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        placed = log.append(records)
        log.flush()
        before = read_all(log)
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        assert (log.min_offset, log.max_offset) == (0, placed[-1][0] + placed[-1][1])
        assert read_all(log) == before
        assert log.unflushed_bytes == 0
        assert log.append([rec(5)])[0][0] == log.max_offset - 63


def test_segment_size_must_hold_a_record(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="segment_size=64"):
        CommitLog(tmp_path, segment_size=64)


def test_refused_replication_into_an_empty_log_keeps_its_offset(log: Log, rec: MakeRecord) -> None:
    log.append_raw(256, rec(1))
    log.truncate(256)
    with pytest.raises(InvalidRecordError):
        log.append_raw(768, rec(1)[:-1])
    assert (log.min_offset, log.max_offset) == (256, 256)
