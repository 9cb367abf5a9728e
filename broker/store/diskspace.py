"""A full disk: refuse writes while the store's file system has less free space than a threshold.

RocketMQ marks its store not writeable when the disk passes `diskSpaceWarningLevelRatio` and puts
answer SERVICE_NOT_AVAILABLE until cleaning frees space. Here the check runs before every write of
a put (a statvfs call, a few microseconds): below `min_free_disk_bytes` free (for unprivileged
users: `f_bavail`), the put is refused with a reason naming the free and needed space, and nothing
is written. Reads, replication (a slave's appends are not refused: they copy what the master
already acknowledged, and fail cleanly on ENOSPC instead) and retention go on; once space is free
again (retention deleted segments, an operator removed files) the next put is accepted: nothing
has to be reset.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


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
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.min_free_bytes = min_free_bytes
        self._measure = measure

    def free(self) -> int | None:
        """Free bytes now (None for a store kept in memory)."""
        return self._measure(self.path) if self.path is not None else None

    def full(self) -> str | None:
        """The reason writes are refused now, or None."""
        if self.path is None or self.min_free_bytes <= 0:
            return None
        free = self._measure(self.path)
        return disk_full_reason(free, self.min_free_bytes, str(self.path))
