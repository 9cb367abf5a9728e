"""Retention: which head segments of the commit log may go (pure; RocketMQ CleanCommitLogService).

RocketMQ deletes commit-log files whose last modification is older than `fileReservedTime` (72 h by
default) at `deleteWhen`, or sooner when the disk fills. Here a broker deletes whole segments from
the log's head when either limit of its `StoreSettings` is passed:

- age (`retention_ms`): the segment's last write (file mtime) is older than this;
- size (`retention_bytes`): the log from this segment on is bigger than this.

Never deleted: the last segment (the one being written), and any segment whose end is beyond the
confirm offset or the flushed offset: only committed, durable data goes, so no replica is asked for
bytes its master no longer has because they were not yet replicated, and consumers lose only
messages that were visible. Deletion is from the oldest segment on and stops at the first one that
must stay, so the log stays contiguous.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    max_age_s: float | None = None
    max_bytes: int | None = None

    @property
    def enabled(self) -> bool:
        return self.max_age_s is not None or self.max_bytes is not None


def new_min_offset(
    starts: Sequence[int],
    mtimes: Sequence[float],
    *,
    segment_size: int,
    max_offset: int,
    safe_offset: int,
    now: float,
    policy: RetentionPolicy,
) -> int | None:
    """The start of the first segment to keep once retention has run, or None if nothing goes.

    `starts`/`mtimes`: each segment's start offset and last write (wall-clock seconds), oldest
    first; `safe_offset`: min(confirm offset, flushed offset), nothing beyond it is deleted.
    """
    if len(starts) != len(mtimes):
        raise ValueError(f"{len(starts)} segment starts but {len(mtimes)} mtimes")
    keep = 0
    for index in range(len(starts) - 1):  # the last segment always stays
        if starts[index] + segment_size > safe_offset:
            break
        expired = policy.max_age_s is not None and now - mtimes[index] > policy.max_age_s
        too_big = policy.max_bytes is not None and max_offset - starts[index] > policy.max_bytes
        if not (expired or too_big):
            break
        keep = index + 1
    return starts[keep] if keep else None
