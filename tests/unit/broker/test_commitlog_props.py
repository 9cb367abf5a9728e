"""Property tests: the file log and the memory log agree, and replication copies a log exactly."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokergroup.broker.store import segments
from brokergroup.broker.store.record import encode_record
from brokergroup.broker.store.segments import CommitLog, MemoryLog, SegmentedLog

SEGMENT = 256
body_sizes = st.one_of(st.integers(0, 186), st.just(198))  # 198: a record that fills a segment
operations = st.lists(
    st.one_of(st.lists(body_sizes, min_size=1, max_size=4), st.integers(0, 10**6)),  # append | truncate
    max_size=12,
)


def record(size: int, tag: int) -> bytes:
    return encode_record(topic="t", queue_id=tag, body=b"x" * size, born_timestamp_ms=0, store_timestamp_ms=0)


def whole(log: SegmentedLog) -> bytes:
    return log.read(log.min_offset, 10**9) + b"".join(
        log.read(start, 10**9) for start in range(log.min_offset + SEGMENT, log.max_offset, SEGMENT)
    )


def apply(log: SegmentedLog, ops: list[list[int] | int], boundaries: list[int]) -> list[list[tuple[int, int]]]:
    results = []
    for tag, op in enumerate(ops):
        if isinstance(op, list):
            placed = log.append([record(size, tag) for size in op])
            boundaries.extend(offset + size for offset, size in placed)
            results.append(placed)
        else:
            target = boundaries[op % len(boundaries)]
            log.truncate(target)
            boundaries[:] = [b for b in boundaries if b <= target]
    return results


@settings(max_examples=40, deadline=None)
@given(ops=operations)
def test_file_and_memory_logs_agree_across_reopen(ops: list[list[int] | int]) -> None:
    memory = MemoryLog(segment_size=SEGMENT)
    with tempfile.TemporaryDirectory() as directory:
        with CommitLog(directory, segment_size=SEGMENT) as on_disk:
            assert apply(on_disk, ops, [0]) == apply(memory, ops, [0])
            assert on_disk.max_offset == memory.max_offset
        with CommitLog(directory, segment_size=SEGMENT, verify_all=True) as reopened:
            assert reopened.max_offset == memory.max_offset
            assert whole(reopened) == whole(memory)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(body_sizes, min_size=1, max_size=20), max_bytes=st.integers(1, 600))
def test_replication_in_reads_of_any_size_copies_the_log(sizes: list[int], max_bytes: int) -> None:
    master = MemoryLog(segment_size=SEGMENT)
    master.append([record(size, tag) for tag, size in enumerate(sizes)])
    slave, in_one_go = MemoryLog(segment_size=SEGMENT), MemoryLog(segment_size=SEGMENT)
    offset, chunks = 0, []
    while offset < master.max_offset:
        chunk = master.read(offset, max_bytes)
        slave.append_raw(offset, chunk)
        chunks.append(chunk)
        offset += len(chunk)
    in_one_go.append_raw(0, b"".join(chunks))  # data may also cross segment boundaries
    assert whole(slave) == whole(in_one_go) == whole(master)
    assert slave.max_offset == in_one_go.max_offset == master.max_offset


@settings(max_examples=60, deadline=None)
@given(ops=operations, max_bytes=st.integers(1, 600), data=st.data())
def test_the_tail_kept_in_memory_reads_as_the_file_does(
    ops: list[list[int] | int], max_bytes: int, data: st.DataObject
) -> None:
    """`read_recent` (a master's tail for its slaves, issue 17) answers only whole writes it still
    holds, byte for byte what `read` gives, across truncations; a slave copying the log with it,
    falling back to `read`, gets the master's log exactly."""
    with tempfile.TemporaryDirectory() as directory, CommitLog(directory, segment_size=SEGMENT) as log:
        boundaries = [0]
        apply(log, ops, boundaries)
        for offset in data.draw(st.lists(st.sampled_from(boundaries), max_size=8)):
            recent = log.read_recent(offset, max_bytes)
            if recent is not None:
                assert 0 < len(recent) <= max_bytes
                assert recent == log.read(offset, len(recent))
        slave, offset = MemoryLog(segment_size=SEGMENT), 0
        while offset < log.max_offset:
            chunk = log.read_recent(offset, max_bytes) or log.read(offset, max_bytes)
            slave.append_raw(offset, chunk)
            offset += len(chunk)
        assert whole(slave) == whole(log)


def test_the_tail_in_memory_serves_the_last_writes_and_forgets_on_truncation() -> None:
    log = MemoryLog(segment_size=4096)
    placed = [log.append([record(100, tag)])[0] for tag in range(5)]
    two = sum(size for _, size in placed[3:])
    assert log.read_recent(placed[3][0], 10**6) == log.read(placed[3][0], two)  # the last two writes, joined
    assert log.read_recent(placed[3][0], placed[3][1]) == log.read(placed[3][0], placed[3][1])  # one fits
    assert log.read_recent(placed[3][0], placed[3][1] - 1) is None  # `read` splits what does not fit
    assert log.read_recent(placed[3][0] + 1, 10**6) is None  # not where a write starts
    assert log.read_recent(log.max_offset, 10**6) is None
    log.truncate(placed[2][0])
    assert log.read_recent(placed[1][0], 10**6) is None  # forgotten: the file answers
    log.append([record(50, 9)])
    assert log.read_recent(placed[2][0], 10**6) == log.read(placed[2][0], 10**6)


def test_the_tail_in_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "RECENT_BYTES", 1000)
    log = MemoryLog(segment_size=64 * 1024)
    placed = [log.append([record(100, tag)])[0] for tag in range(40)]
    kept = [offset for offset, _ in placed if log.read_recent(offset, 10**6) is not None]
    assert kept == [offset for offset, _ in placed[-len(kept) :]] and len(kept) > 0
    assert sum(size for _, size in placed[-len(kept) :]) <= 1000
