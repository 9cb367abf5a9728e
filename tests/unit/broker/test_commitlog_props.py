"""Property tests: the file log and the memory log agree, and replication copies a log exactly."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

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
