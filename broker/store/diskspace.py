"""A full disk: refuse writes while the store's file system has less free space than a threshold.

RocketMQ marks its store not writeable when the disk passes `diskSpaceWarningLevelRatio` and puts
answer SERVICE_NOT_AVAILABLE until cleaning frees space. Here the check runs before every write of
a put: below `min_free_disk_bytes` free (for unprivileged users: `f_bavail`), the put is refused
with a reason naming the free and needed space, and nothing is written.

A statvfs per put cost 2-3 % of a master's event loop under single sends, so a put skips it while
the last measurement, less every byte this store wrote since, still leaves more than
`SKIP_HEADROOM_BYTES` above the threshold and the measurement is younger than `SKIP_MAX_AGE_S`.
Near the threshold (within the headroom) every put measures again, so the refusal is as exact there
as before; far from it, only another process filling more than the headroom within the age could
pass unnoticed for that long, and then the threshold itself is the margin (a write failing with
ENOSPC is undone anyway). Reads, replication (a slave's appends are not refused: they copy what the master
already acknowledged, and fail cleanly on ENOSPC instead) and retention go on; once space is free
again (retention deleted segments, an operator removed files) the next put is accepted: nothing
has to be reset.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

SKIP_HEADROOM_BYTES: Final = 64 * 1024 * 1024
"""A put skips statvfs only while the estimated free space exceeds the threshold by this much."""
SKIP_MAX_AGE_S: Final = 0.1
"""... and the last measurement is younger than this."""


def disk_full_reason(free_bytes: int, min_free_bytes: int, path: str) -> str | None:
    """Why writes are refused, or None when `free_bytes` leaves enough room."""
    if free_bytes >= min_free_bytes:
        return None
    return (
        f"disk full: {free_bytes} bytes free on the file system of {path}, below store.min_free_disk_bytes="
        f"{min_free_bytes}; writes resume once space is freed (retention, or removing other files)"
    )


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes an unprivileged writer may still use on the file system holding `path`."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


class DiskSpace:
    """The free-space check of one store directory. `min_free_bytes=0` turns it off."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        min_free_bytes: int,
        *,
        measure: Callable[[str | os.PathLike[str]], int] = free_bytes,
        clock: Callable[[], float] = time.monotonic,
        headroom_bytes: int = SKIP_HEADROOM_BYTES,
        max_age_s: float = SKIP_MAX_AGE_S,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.min_free_bytes = min_free_bytes
        self._measure = measure
        self._clock = clock
        self._headroom = headroom_bytes
        self._max_age_s = max_age_s
        self._spare = -1  # estimated free bytes above threshold + headroom; < 0: measure
        self._measured_at = 0.0
        self.measurements = 0

    def free(self) -> int | None:
        """Free bytes now (None for a store kept in memory)."""
        return self._measure(self.path) if self.path is not None else None

    def full(self) -> str | None:
        """The reason writes are refused now, or None."""
        if self.path is None or self.min_free_bytes <= 0:
            return None
        free = self._measure(self.path)
        self.measurements += 1
        self._spare = free - self.min_free_bytes - self._headroom
        self._measured_at = self._clock()
        return disk_full_reason(free, self.min_free_bytes, str(self.path))

    def refusal(self, nbytes: int) -> str | None:
        """The reason a put of `nbytes` is refused now, or None (then counted as written).

        Measures (as `full`) unless the last measurement is recent and, less the bytes written
        since, still far enough above the threshold (see the module's docstring)."""
        if self.path is None or self.min_free_bytes <= 0:
            return None
        spare = self._spare - nbytes
        if spare >= 0 and self._clock() - self._measured_at < self._max_age_s:
            self._spare = spare
            return None
        reason = self.full()
        if reason is None:
            self._spare -= nbytes
        return reason
