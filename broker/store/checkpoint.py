"""The confirm-offset checkpoint: up to where the commit log is committed (visible to consumers).

File format (like the truncation marker, '\\n' the only separator)::

    <confirmOffset>\\n     decimal, 0..2^63-1
    <crc32>\\n             zlib CRC-32 of the first line, newline included, decimal

Writes go to `<file>.tmp`, are fsynced, renamed over `<file>`, and the directory is fsynced, so
a crash leaves the old or the new value, never a mix. A missing or damaged file reads as `None`
(logged when damaged): the store then exposes nothing until replication confirms again, which
only delays visibility. The persisted value may lag the store's (writes are throttled), never
lead it: the store lowers it *before* forgetting bytes it covered.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from pathlib import Path

logger = logging.getLogger(__name__)

_FORMAT = re.compile(rb"([0-9]{1,19}\n)([0-9]{1,10})\n")


def encode_checkpoint(offset: int) -> bytes:
    if not 0 <= offset < 2**63:
        raise ValueError(f"confirm offset={offset} out of range")
    line = b"%d\n" % offset
    return line + b"%d\n" % zlib.crc32(line)


def decode_checkpoint(data: bytes) -> int | None:
    """The offset, or None when `data` is not a valid checkpoint."""
    match = _FORMAT.fullmatch(data)
    if match is None or zlib.crc32(match[1]) != int(match[2]):
        return None
    return int(match[1])


class ConfirmCheckpoint:
    """The checkpoint in a file, or (`path=None`) in memory for stores built on `MemoryLog`."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: int | None = None

    def read(self) -> int | None:
        if self.path is None:
            return self._memory
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        offset = decode_checkpoint(data)
        if offset is None:
            logger.warning("confirm checkpoint %s is damaged; nothing is visible until confirmed again", self.path)
        return offset

    def write(self, offset: int) -> None:
        data = encode_checkpoint(offset)
        if self.path is None:
            self._memory = offset
            return
        temp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        temp.replace(self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
