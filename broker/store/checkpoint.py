"""The confirm-offset checkpoint: up to where the commit log is committed (visible to consumers).

File format (like the truncation marker, '\\n' the only separator)::

    <confirmOffset>\\n     decimal, 0..2^63-1
    <crc32>\\n             zlib CRC-32 of the first line, newline included, decimal

Writes go to `<file>.tmp`, are fsynced, renamed over `<file>`, and the directory is fsynced, so
a crash leaves the old or the new value, never a mix. A missing or damaged file reads as `None`
(logged when damaged): the store then exposes nothing until replication confirms again, which
only delays visibility. The persisted value may lag the store's (writes are throttled), never
lead it: the store lowers it *before* forgetting bytes it covered.

Background writes (the broker's flusher runs them in its index-checkpoint thread): the store's
periodic write (every 200 ms, two fsyncs and a rename: 2-4 % of a loop) is a `job(offset)` for
another thread. A `write` (a truncation lowering the value, a flush, close) runs in the caller's
thread and voids every job made before it: file writes hold one lock (`use_lock`, given by the
thread's owner; this module starts no thread), and each job carries the generation it was made
in, which `write` bumps under that lock. So a `write` waits for a job writing at that moment, and
a job made before it never writes afterwards: a stale higher value cannot land after a truncation.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
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
        self._lock: AbstractContextManager[object] = nullcontext()  # held by every file write
        self._generation = 0  # bumped by every `write` (under the lock): voids the jobs made before
        self._on_disk: int | None = None  # the last value written (or read), if known
        self.in_flight = False  # a job was made and has not finished
        self.background_writes = 0
        self.background_failures = 0

    def use_lock(self, lock: AbstractContextManager[object]) -> None:
        """The lock every file write holds (a `threading.Lock` once jobs run in another thread)."""
        self._lock = lock

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
        with self._lock:
            self._on_disk = offset
        return offset

    def write(self, offset: int) -> None:
        """Persist `offset` now, in this thread (skipped if it is the value on disk); waits for a
        job writing at this moment and voids every job made before."""
        data = encode_checkpoint(offset)
        if self.path is None:
            self._memory = offset
            return
        with self._lock:
            self._generation += 1
            if self._on_disk != offset:
                self._on_disk = None  # unknown until the write completed
                self._write_file(data)
                self._on_disk = offset

    def job(self, offset: int) -> Callable[[], None]:
        """Persist `offset` when called, in another thread, unless a `write` came after this call
        (in memory: written now, and the job does nothing). Never raises: a failed write (a full
        disk) is logged and counted; the value on disk stays, the next write retries."""
        data = encode_checkpoint(offset)  # a bad value fails here, in the caller
        if self.path is None:
            self._memory = offset
            return _nothing
        generation = self._generation  # `write` runs in the caller's thread too: no race here
        self.in_flight = True

        def run() -> None:
            try:
                with self._lock:
                    if generation != self._generation or self._on_disk == offset:
                        return  # a `write` came after the job was made
                    self._on_disk = None
                    try:
                        self._write_file(data)
                    except OSError as error:
                        self.background_failures += 1
                        logger.warning(
                            "confirm checkpoint %s not written (the previous one stays): %s", self.path, error
                        )
                        return
                    self._on_disk = offset
                    self.background_writes += 1
            finally:
                self.in_flight = False

        return run

    def _write_file(self, data: bytes) -> None:
        assert self.path is not None
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


def _nothing() -> None:
    return None
