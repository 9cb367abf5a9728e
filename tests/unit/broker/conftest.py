"""Fixtures shared by the broker storage tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from brokergroup.broker.store.record import encode_record
from brokergroup.broker.store.segments import CommitLog, MemoryLog

SEGMENT = 256
"""Segment size of the `log` fixture: a few records each (a record here is 58 + body bytes)."""


@pytest.fixture
def rec() -> Callable[[int], bytes]:
    """rec(n): a distinct MESSAGE record of 58 + n bytes."""
    counter = iter(range(10**9))

    def make(body_size: int) -> bytes:
        tag = next(counter)
        body = bytes([65 + tag % 26]) * body_size
        return encode_record(topic="t", queue_id=tag, body=body, born_timestamp_ms=1, store_timestamp_ms=2)

    return make


@pytest.fixture(params=["file", "memory"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> CommitLog | MemoryLog:
    """A fresh empty log with SEGMENT-byte segments, file-backed or in memory."""
    if request.param == "memory":
        return MemoryLog(segment_size=SEGMENT)
    commit_log = CommitLog(tmp_path / "commitlog", segment_size=SEGMENT)
    request.addfinalizer(commit_log.close)
    return commit_log
