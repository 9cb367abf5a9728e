"""Crash-safe truncation (#10666): a crash at any step never brings the cut tail back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from brokergroup.broker.errors import CorruptLogError
from brokergroup.broker.store.segments import (
    MARKER_NAME,
    STEP_MARKER_REMOVED,
    STEP_MARKER_WRITTEN,
    STEP_SEGMENT_DELETED,
    STEP_SYNCED,
    STEP_TAIL_CUT,
    CommitLog,
)

SEGMENT = 256
MakeRecord = Callable[[int], bytes]
STEPS = [STEP_MARKER_WRITTEN, STEP_SEGMENT_DELETED, STEP_TAIL_CUT, STEP_SYNCED, STEP_MARKER_REMOVED]


class Crash(Exception):
    """Stands for kill -9: the process stops at this point and its memory is lost."""


def crash_at(step: str) -> Callable[[str], None]:
    def hook(name: str) -> None:
        if name == step:
            raise Crash(step)

    return hook


def filled_log(directory: Path, rec: MakeRecord) -> bytes:
    """Four segments of two records each; returns the whole log."""
    with CommitLog(directory, segment_size=SEGMENT) as log:
        log.append([rec(40), rec(40)] * 4)  # 98 + 98 = 196 bytes, then a 60-byte blank
        log.flush()
        return log.read(0, 10**6) + b"".join(log.read(o, 10**6) for o in (256, 512, 768))


@pytest.mark.parametrize("step", STEPS)
def test_crash_at_any_step_of_truncate_never_resurrects_the_tail(tmp_path: Path, rec: MakeRecord, step: str) -> None:
    whole = filled_log(tmp_path, rec)
    log = CommitLog(tmp_path, segment_size=SEGMENT, step_hook=crash_at(step))
    with pytest.raises(Crash):
        log.truncate(256 + 98)
    log.close()

    with CommitLog(tmp_path, segment_size=SEGMENT, verify_all=True) as reopened:
        assert reopened.max_offset == 354
        assert reopened.read(256, 10**6) == whole[256:354]
        assert not (tmp_path / MARKER_NAME).exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000", "00000000000000000256"]
        assert reopened.append([rec(0)]) == [(354, 58)]


def test_without_the_marker_the_stale_tail_would_come_back(tmp_path: Path, rec: MakeRecord) -> None:
    # The control case: crashed right after the marker was written, the old bytes are all on
    # disk and valid. Only the marker tells recovery to drop them.
    filled_log(tmp_path, rec)
    log = CommitLog(tmp_path, segment_size=SEGMENT, step_hook=crash_at(STEP_MARKER_WRITTEN))
    with pytest.raises(Crash):
        log.truncate(98)
    log.close()
    marker = (tmp_path / MARKER_NAME).read_bytes()
    (tmp_path / MARKER_NAME).unlink()
    with CommitLog(tmp_path, segment_size=SEGMENT) as reopened:
        assert reopened.max_offset == 768 + 196  # the stale tail, back
    (tmp_path / MARKER_NAME).write_bytes(marker)
    with CommitLog(tmp_path, segment_size=SEGMENT) as reopened:
        assert reopened.max_offset == 98


def test_a_truncate_lost_by_the_file_system_is_reapplied(tmp_path: Path, rec: MakeRecord) -> None:
    whole = filled_log(tmp_path, rec)
    log = CommitLog(tmp_path, segment_size=SEGMENT, step_hook=crash_at(STEP_SYNCED))
    with pytest.raises(Crash):
        log.truncate(98)
    log.close()
    (tmp_path / "00000000000000000000").write_bytes(whole[:256])  # the cut did not persist
    (tmp_path / "00000000000000000256").write_bytes(whole[256:512])
    with CommitLog(tmp_path, segment_size=SEGMENT) as reopened:
        assert reopened.max_offset == 98
        assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000"]


def test_data_appended_after_a_truncate_survives_reopen(tmp_path: Path, rec: MakeRecord) -> None:
    filled_log(tmp_path, rec)
    new = rec(70)
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        log.truncate(256)
        assert log.append([new]) == [(256, 128)]
        log.flush()
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        assert log.max_offset == 384
        assert log.read(256, 10**6) == new


def test_truncate_to_a_segment_start_keeps_the_log_offset(tmp_path: Path, rec: MakeRecord) -> None:
    filled_log(tmp_path, rec)
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        log.truncate(512)
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        assert (log.min_offset, log.max_offset) == (0, 512)
        assert (tmp_path / "00000000000000000512").stat().st_size == 0


def test_a_damaged_marker_is_refused(tmp_path: Path, rec: MakeRecord) -> None:
    filled_log(tmp_path, rec)
    (tmp_path / MARKER_NAME).write_bytes(b"98\n12345\n")
    with pytest.raises(CorruptLogError, match="cannot tell where a truncation stopped"):
        CommitLog(tmp_path, segment_size=SEGMENT)


def test_a_marker_left_half_written_is_ignored(tmp_path: Path, rec: MakeRecord) -> None:
    # Crash while writing the marker: only its temp file exists, and no data was touched yet.
    filled_log(tmp_path, rec)
    (tmp_path / (MARKER_NAME + ".tmp")).write_bytes(b"9")
    with CommitLog(tmp_path, segment_size=SEGMENT) as log:
        assert log.max_offset == 768 + 196
    assert not (tmp_path / (MARKER_NAME + ".tmp")).exists()
