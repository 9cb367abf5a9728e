"""The commit log: records appended to fixed-size segments; a file-backed and an in-memory twin.

Layout. Offsets are byte positions in one logical log. A segment covers
`[start, start + segment_size)` and is stored in a file named after `start`, zero-padded to 20
digits (RocketMQ style: `00000000000067108864`). Records never span segments: a record goes into
the current segment only if it fills it exactly or leaves room for a blank (>= 12 bytes);
otherwise a blank (record.py) pads the segment to its end and the record starts the next one. So
every segment but the last is exactly `segment_size` bytes of whole items, and master and slaves
(configured with the same segment size) place every byte at the same offset in the same file.

Durability. `append` writes with pwrite and counts `unflushed_bytes`; `flush()` fdatasyncs (the
flush policy belongs to a later layer). `prepare_flush()` / `complete_flush()` split a flush for a worker
thread (group commit): the job fsyncs duplicated file descriptors and touches no state of the log,
so the owner may keep appending (or truncating) while it runs; a ticket from before a truncation
is refused on completion, so bytes written after a cut are never counted as flushed by it. A
segment is fsynced when it is sealed, before the next one gets its first byte, so after a crash
only the last segment can have a torn tail.

Written ahead (RocketMQ warms its mapped files). The file log keeps zeros written ahead of the
last segment's end (`prewrite` bytes, 1 MiB by default, in 4 KiB blocks, never past the segment's
size): once that region is on disk, a record lands in blocks that already exist and the file's size
does not change, so the per-put fdatasync writes the data block and commits no metadata (measured:
a 4 KiB fdatasync into blocks written before costs about half the system time and latency of one
appended at the end of a file: docs/benchmarks.md). The zeros are written on the owner's thread
after an append, once the written-ahead region falls below half of `prewrite`; the next flush
makes them durable with the data. A failed zero write (a full disk) is undone and only logged:
the records are written by then. On open a zero tail after the last whole item of the last
segment is the end of the log and is trimmed without a warning; `close()` trims it too, so a
cleanly closed log's files hold exactly their items. `data_size` measures a file without it.

Recovery on open. Only the last segment is scanned (`verify_all=True` scans every one), and only
from `synced_offset` on when the caller knows the log was fsynced up to there (the message store
passes the index checkpoint's `synced`: bytes validated when appended and fsynced before that
checkpoint was written are not verified again, so opening costs the tail written since the last
checkpoint, not a whole segment; without it, or if it lies outside the last segment, the whole
segment is verified): zeros from
an item boundary to the end of the last segment are the written-ahead tail (above); a torn or
corrupt item is cut away, with a warning, if no valid item follows it; if one does (damage in the
middle) `CorruptLogError` names the file and offset, since cutting would lose valid records.
A torn record whose body itself embeds a valid record also raises: loud, never silent loss.

Crash-safe truncation (#10666, DESIGN §4). RocketMQ's slave only resets in-memory positions, so a
stale tail can come back after a restart. `truncate(offset)`: (1) write `truncate.marker` holding
the offset (temp file, fsync, rename, fsync dir); (2) delete later segments from the last down,
cut the segment holding `offset`, fsync it and the directory; (3) remove the marker. Opening a
log whose marker exists re-applies step 2 before anything else, so a kill -9 (or a lost, unsynced
truncate) at any point never resurrects the cut bytes. `step_hook` is a seam for tests: it is
called with each `STEP_*` name as the step completes; raising from it simulates a crash there.

Retention (`delete_head(offset)`): whole segments before `offset` (a segment start, never past the
last segment) are unlinked from the oldest on, then the directory is fsynced. Deleting from the
oldest keeps the remaining segments contiguous after a crash at any point; the caller (the message
store) records `offset` in its head-state file *first* and calls `delete_head` again on open, so
an interrupted deletion is finished. `reset(offset)` drops every segment and restarts the empty
log at `offset` (a new slave starting where its master's log starts).

A full disk: a write that fails (ENOSPC, EIO) is undone before the error propagates: the segment
is cut back to its previous size and a segment created by the failed write is removed, so the
log's files and its offsets stay as before the call; nothing half-written is left to recovery.
"""

from __future__ import annotations

import abc
import bisect
import contextlib
import itertools
import logging
import os
import re
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Self

from brokergroup.broker.errors import CorruptLogError, InvalidRecordError, StoreError
from brokergroup.broker.store.record import (
    BLANK_MIN_SIZE,
    DEFAULT_MAX_BODY,
    Blank,
    Corrupt,
    RecordInfo,
    Span,
    check_item,
    encode_blank,
    find_valid_item,
    peek_length,
    scan_record,
)
from brokergroup.common.durable import durable_mkdir, fsync_path

logger = logging.getLogger(__name__)

DEFAULT_SEGMENT_SIZE: Final = 64 * 1024 * 1024
DEFAULT_PREWRITE: Final = 1024 * 1024
PREWRITE_BLOCK: Final = 4096
_ZEROS = bytes(DEFAULT_PREWRITE)
MIN_SEGMENT_SIZE: Final = 128
RECENT_BYTES: Final = 256 * 1024
"""How many of the bytes written last the log keeps in memory for `read_recent` (a master's tail
for its slaves)."""
MARKER_NAME: Final = "truncate.marker"
STEP_MARKER_WRITTEN: Final = "truncate:marker-written"
STEP_SEGMENT_DELETED: Final = "truncate:segment-deleted"
STEP_TAIL_CUT: Final = "truncate:tail-cut"
STEP_SYNCED: Final = "truncate:synced"
STEP_MARKER_REMOVED: Final = "truncate:marker-removed"
STEP_HEAD_SEGMENT_DELETED: Final = "retention:segment-deleted"
STEP_HEAD_SYNCED: Final = "retention:synced"
_SEGMENT_NAME = re.compile(r"[0-9]{20}")

Chunk = tuple[int, int, bytes]
"""(segment start, position in the segment, bytes) to write."""


@dataclass(slots=True)
class FlushTicket:
    """A flush in progress (`SegmentedLog.prepare_flush`): it makes bytes before `target` durable.

    The flush job may raise `target` in its thread, right before it fsyncs, to the log's end as the
    owner last wrote it (within the segments the job fsyncs), so that a put written after
    `prepare_flush` but before the fsync started is covered by this flush, not the next one."""

    target: int
    generation: int
    """The log's truncation count when the flush was prepared."""


def _coalesce(chunks: Sequence[Chunk]) -> list[Chunk]:
    """Contiguous chunks of one segment joined, so that a segment gets one write per append (a
    master's batch of 32 records: one pwrite, not 32)."""
    if len(chunks) < 2:
        return list(chunks)
    out: list[Chunk] = []
    parts: list[bytes] = []
    start, position, end = chunks[0][0], chunks[0][1], chunks[0][1]
    for chunk_start, chunk_position, data in chunks:
        if chunk_start != start or chunk_position != end:
            out.append((start, position, parts[0] if len(parts) == 1 else b"".join(parts)))
            parts, start, position, end = [], chunk_start, chunk_position, chunk_position
        parts.append(data)
        end += len(data)
    out.append((start, position, parts[0] if len(parts) == 1 else b"".join(parts)))
    return out


class SegmentedLog(abc.ABC):
    """The interface of both logs. Placement, reads and validation live here; storage below.

    Not thread-safe: one owner calls it. Sizes: `max_body` bounds a record's body (record.py);
    a record must also fit in one segment.
    """

    def __init__(self, *, segment_size: int, max_body: int) -> None:
        if segment_size < MIN_SEGMENT_SIZE:
            raise ValueError(f"segment_size={segment_size} must be at least {MIN_SEGMENT_SIZE}")
        self.segment_size = segment_size
        self.max_body = max_body
        self._starts: list[int] = []
        self._sizes: list[int] = []
        self._base = 0  # the log's offset while it has no segment
        self._flushed = 0
        self._generation = 0  # bumped whenever bytes are cut or dropped: stale flush tickets are refused
        self._end_mark = (0, 0)
        """(generation, max offset) after the owner's last successful write: one tuple, replaced
        whole, so that a flush thread reads a consistent pair (`FlushTicket`)."""
        self._recent: deque[tuple[int, int, bytes]] = deque()
        """(offset, segment start, bytes) of the last writes, contiguous, whole items each, at most
        `RECENT_BYTES` in all; emptied whenever bytes are cut or a write fails."""
        self._recent_bytes = 0

    # -- storage, provided by subclasses
    @abc.abstractmethod
    def _create(self, start: int) -> None: ...

    @abc.abstractmethod
    def _pwrite(self, index: int, position: int, data: bytes) -> None: ...

    @abc.abstractmethod
    def _pread(self, index: int, position: int, size: int) -> bytes: ...

    @abc.abstractmethod
    def _seal(self, index: int) -> None: ...

    @abc.abstractmethod
    def _cut(self, offset: int) -> None:
        """Drop everything at and after `offset` from storage and from `_starts`/`_sizes`."""

    @abc.abstractmethod
    def _drop_all(self) -> None: ...

    @abc.abstractmethod
    def _drop_first(self) -> None:
        """Delete the oldest segment from storage and from `_starts`/`_sizes`."""

    @abc.abstractmethod
    def _after_head_deleted(self) -> None:
        """Make the deletions of `delete_head` durable."""

    @abc.abstractmethod
    def _undo(self, index: int, size: int) -> None:
        """Cut segment `index` back to `size` bytes after a failed write (storage only)."""

    @abc.abstractmethod
    def _discard_created(self) -> None:
        """Remove the newest segment, created by a write that failed, from storage and `_starts`/`_sizes`."""

    @abc.abstractmethod
    def segment_mtimes(self) -> list[float]:
        """Each segment's last write, as wall-clock seconds (time.time), oldest segment first."""

    @abc.abstractmethod
    def flush(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None:
        """Release the log's files."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- public interface
    @property
    def max_offset(self) -> int:
        """Offset just past the last byte (the next append lands here, or at a later segment)."""
        return self._starts[-1] + self._sizes[-1] if self._starts else self._base

    @property
    def min_offset(self) -> int:
        return self._starts[0] if self._starts else self._base

    @property
    def unflushed_bytes(self) -> int:
        return self.max_offset - self._flushed

    def prepare_flush(self) -> tuple[FlushTicket, Callable[[], None]]:
        """A flush split for a worker thread: run `job()` exactly once, in any thread, then call
        `complete_flush(ticket)` in the owner's thread. `job` touches no state of the log."""
        ticket = FlushTicket(self.max_offset, self._generation)
        return ticket, self._flush_job(ticket)

    def _flush_job(self, ticket: FlushTicket) -> Callable[[], None]:
        return lambda: None

    def _raise_target(self, ticket: FlushTicket, limit: int) -> None:
        """In the flush thread, before its fsyncs: cover what the owner wrote since `prepare_flush`
        up to `limit` (the end of the last segment the job fsyncs), if nothing was cut since."""
        generation, end = self._end_mark
        if generation == ticket.generation and end > ticket.target:
            ticket.target = min(end, limit)

    def complete_flush(self, ticket: FlushTicket) -> bool:
        """Count the bytes before `ticket.target` as flushed, unless the log was cut since."""
        if ticket.generation != self._generation:
            return False
        self._flushed = max(self._flushed, min(ticket.target, self.max_offset))
        return True

    def _fits(self, position: int, size: int) -> bool:
        end = position + size
        return end == self.segment_size or end + BLANK_MIN_SIZE <= self.segment_size

    def _tail(self) -> tuple[int, int]:
        """(start, used bytes) of the segment the next byte goes to."""
        if not self._starts:
            return self._base, 0
        if self._sizes[-1] == self.segment_size:
            return self._starts[-1] + self.segment_size, 0
        return self._starts[-1], self._sizes[-1]

    def append(self, records: Sequence[bytes], *, encoded_here: bool = False) -> list[tuple[int, int]]:
        """Append encoded records; returns each one's (offset, size). All or nothing is validated.

        `encoded_here`: the records come straight from `encode_record` in this process (a master's
        put), so their framing and CRC are not scanned again; only their sizes are checked."""
        for record in records:
            if not encoded_here:
                span = scan_record(record, max_body=self.max_body)
                if not isinstance(span, Span) or span.blank or span.size != len(record):
                    raise InvalidRecordError(f"not one whole record: {span}")
            if not self._fits(0, len(record)):
                raise InvalidRecordError(f"record of {len(record)} bytes exceeds segment_size={self.segment_size}")
        start, used = self._tail()
        chunks: list[Chunk] = []
        placed: list[tuple[int, int]] = []
        for record in records:
            if not self._fits(used, len(record)):
                if used < self.segment_size:
                    chunks.append((start, used, encode_blank(self.segment_size - used)))
                start, used = start + self.segment_size, 0
            chunks.append((start, used, record))
            placed.append((start + used, len(record)))
            used += len(record)
        self._write(chunks)
        return placed

    def append_raw(self, offset: int, data: bytes) -> list[RecordInfo]:
        """Append bytes replicated from a master: whole records and blanks, starting at `offset`;
        returns the records' infos (blanks left out), for the indexes.

        `offset` must be `max_offset`; an empty log also accepts any segment-aligned offset (a
        new slave starts where the master's log starts). Nothing is written unless all is valid.
        Each item is validated once (`check_item`: CRC, fields) and the bytes are written as
        received, one write per segment they touch (issue 17: no per-record copy or write).
        """
        if not data:
            return []
        empty = self.max_offset == self.min_offset
        if offset != self.max_offset and not (empty and offset >= 0 and offset % self.segment_size == 0):
            raise StoreError(f"append_raw at offset={offset}, expected max_offset={self.max_offset}")
        rebase = offset != self.max_offset
        start, used = (offset, 0) if rebase else self._tail()
        chunks: list[Chunk] = []
        infos: list[RecordInfo] = []
        position = run = 0  # `run`: where the bytes of the current segment start in `data`
        size, max_body = self.segment_size, self.max_body
        while position < len(data):
            if used == size:
                if position > run:
                    chunks.append((start, used - (position - run), data[run:position]))
                start, used, run = start + size, 0, position
            item = check_item(data, position, base=offset, max_body=max_body)
            if isinstance(item, RecordInfo):
                ok = self._fits(used, item.size)
                infos.append(item)
            elif isinstance(item, Blank):
                ok = used + item.size == size
            else:
                raise InvalidRecordError(f"replicated data at offset {offset + position}: {item}")
            if not ok:
                raise InvalidRecordError(f"replicated item at offset {offset + position} breaks segment layout")
            position += item.size
            used += item.size
        chunks.append((start, used - (position - run), data if run == 0 else data[run:]))
        if rebase:
            self.reset(offset)
        self._write(chunks)
        return infos

    def reset(self, offset: int) -> None:
        """Drop every segment: the log is empty at `offset` (a multiple of the segment size)."""
        if offset < 0 or offset % self.segment_size:
            raise StoreError(f"reset to offset={offset}: not a multiple of segment_size={self.segment_size}")
        self._forget_recent()
        self._drop_all()
        self._base = self._flushed = offset
        self._generation += 1

    @property
    def segment_starts(self) -> tuple[int, ...]:
        return tuple(self._starts)

    def delete_head(self, offset: int) -> int:
        """Delete, oldest first, the segments before `offset`, a segment start (see the module
        docstring); returns how many were deleted."""
        if offset <= self.min_offset:
            return 0
        if offset not in self._starts:
            raise StoreError(f"delete_head to offset={offset}: not the start of a segment after the first")
        deleted = 0
        self._forget_recent()
        while self._starts[0] < offset:
            self._drop_first()
            deleted += 1
        self._after_head_deleted()
        self._flushed = max(self._flushed, self.min_offset)
        return deleted

    def _write(self, chunks: Sequence[Chunk]) -> None:
        """Write all chunks, or (the write failed: a full disk) none: undone, then re-raised."""
        count, size = len(self._starts), self._sizes[-1] if self._starts else 0
        try:
            self._write_chunks(chunks)
        except OSError:
            self._forget_recent()
            while len(self._starts) > count:
                self._discard_created()
            if self._starts:
                self._undo(len(self._starts) - 1, size)
                self._sizes[-1] = size
            self._flushed = min(self._flushed, self.max_offset)
            raise
        self._end_mark = (self._generation, self.max_offset)
        self._written()

    @abc.abstractmethod
    def _written(self) -> None:
        """Called after every successful write (the file log writes ahead here)."""

    def _write_chunks(self, chunks: Sequence[Chunk]) -> None:
        for start, position, data in _coalesce(chunks):
            if not self._starts or start > self._starts[-1]:
                if self._starts:
                    self._seal(len(self._starts) - 1)
                    self._flushed = max(self._flushed, self.max_offset)
                self._create(start)
                self._starts.append(start)
                self._sizes.append(0)
            assert position == self._sizes[-1], "chunks must be contiguous"
            self._pwrite(len(self._starts) - 1, position, data)
            self._sizes[-1] += len(data)
            self._remember(start + position, start, data)

    def _remember(self, offset: int, start: int, data: bytes) -> None:
        recent = self._recent
        recent.append((offset, start, data))
        self._recent_bytes += len(data)
        while self._recent_bytes > RECENT_BYTES:
            self._recent_bytes -= len(recent.popleft()[2])

    def _forget_recent(self) -> None:
        self._recent.clear()
        self._recent_bytes = 0

    def read_recent(self, offset: int, max_bytes: int) -> bytes | None:
        """What `read(offset, max_bytes)` may answer, from the bytes written last, kept in memory:
        whole writes from one that starts at `offset`, within one segment, at most `max_bytes`; None
        when `offset` is not the start of a write still kept or that write is larger (then `read`
        reads the file). Spares a master the `pread` of the tail it
        has just written, for each slave (issue 17)."""
        recent = self._recent
        if not recent or offset < recent[0][0] or offset >= self.max_offset:
            return None
        index = len(recent) - 1
        while recent[index][0] > offset:  # a slave reads near the end: a few steps back
            index -= 1
        first, start, data = recent[index]
        if first != offset or len(data) > max_bytes:  # `read` splits a write by items
            return None
        parts, end = [data], offset + len(data)
        for later, later_start, later_data in itertools.islice(recent, index + 1, None):
            if later_start != start or later != end or end + len(later_data) - offset > max_bytes:
                break
            parts.append(later_data)
            end += len(later_data)
        return data if len(parts) == 1 else b"".join(parts)

    def _locate(self, offset: int) -> int:
        if not self.min_offset <= offset <= self.max_offset:
            raise StoreError(f"offset={offset} outside the log [{self.min_offset}, {self.max_offset}]")
        return bisect.bisect_right(self._starts, offset) - 1

    def _length_at(self, offset: int, buf: bytes, position: int) -> int | None:
        length = peek_length(buf, position)
        if isinstance(length, int):
            return length
        if isinstance(length, Corrupt):
            raise StoreError(f"offset={offset} is not at a record boundary ({length})")
        return None

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole items (records and blanks) from `offset` within one segment, up to `max_bytes`
        bytes, but at least one item however large. Empty at `max_offset`."""
        if max_bytes <= 0:
            raise ValueError(f"max_bytes={max_bytes} must be positive")
        index = self._locate(offset)
        if offset == self.max_offset:
            return b""
        position = offset - self._starts[index]
        chunk = self._pread(index, position, min(max_bytes, self._sizes[index] - position))
        end = 0
        while end < len(chunk):
            length = self._length_at(offset + end, chunk, end)
            if length is None or end + length > len(chunk):
                break
            end += length
        if end == 0:
            header = self._pread(index, position, BLANK_MIN_SIZE)
            length = self._length_at(offset, header, 0)
            assert length is not None, "a whole segment item is always readable"
            return self._pread(index, position, length)
        return chunk[:end]

    def truncate(self, offset: int) -> None:
        """Remove every byte at and after `offset`, which must be an item boundary."""
        index = self._locate(offset)
        if offset == self.max_offset:
            return
        start = self._starts[index]
        prefix = self._pread(index, 0, offset - start)
        position = 0
        while position < len(prefix):
            length = self._length_at(start + position, prefix, position)
            if length is None:
                break
            position += length
        if position != len(prefix):
            raise StoreError(f"offset={offset} is not at a record boundary")
        self._generation += 1
        self._forget_recent()
        self._cut(offset)
        self._flushed = min(self._flushed, offset)


class MemoryLog(SegmentedLog):
    """The commit log in memory, same placement and offsets; for replication tests."""

    def __init__(
        self,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        max_body: int = DEFAULT_MAX_BODY,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(segment_size=segment_size, max_body=max_body)
        self._data: list[bytearray] = []
        self._mtimes: list[float] = []
        self._wall_clock = wall_clock

    def _create(self, start: int) -> None:
        self._data.append(bytearray())
        self._mtimes.append(self._wall_clock())

    def _pwrite(self, index: int, position: int, data: bytes) -> None:
        self._data[index][position:] = data
        self._mtimes[index] = self._wall_clock()

    def _drop_first(self) -> None:
        del self._starts[0], self._sizes[0], self._data[0], self._mtimes[0]

    def _after_head_deleted(self) -> None:
        pass

    def _undo(self, index: int, size: int) -> None:
        del self._data[index][size:]

    def _discard_created(self) -> None:
        del self._starts[-1], self._sizes[-1], self._data[-1], self._mtimes[-1]

    def segment_mtimes(self) -> list[float]:
        return list(self._mtimes)

    def _pread(self, index: int, position: int, size: int) -> bytes:
        return bytes(self._data[index][position : position + size])

    def _seal(self, index: int) -> None:
        pass

    def _written(self) -> None:
        pass

    def _cut(self, offset: int) -> None:
        index = bisect.bisect_right(self._starts, offset) - 1
        del self._starts[index + 1 :], self._sizes[index + 1 :], self._data[index + 1 :], self._mtimes[index + 1 :]
        self._sizes[index] = offset - self._starts[index]
        del self._data[index][self._sizes[index] :]

    def _drop_all(self) -> None:
        self._starts, self._sizes, self._data, self._mtimes = [], [], [], []

    def flush(self) -> None:
        self._flushed = self.max_offset

    def close(self) -> None:
        pass


class CommitLog(SegmentedLog):
    """The commit log in `directory`, recovered on open (see the module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        max_body: int = DEFAULT_MAX_BODY,
        verify_all: bool = False,
        step_hook: Callable[[str], None] | None = None,
        prewrite: int = DEFAULT_PREWRITE,
        synced_offset: int | None = None,
    ) -> None:
        """`prewrite`: bytes of zeros kept written ahead of the last segment's end (0: none; see
        the module docstring). `synced_offset`: an item boundary up to which the log is known to
        have been fsynced (the index checkpoint's), so recovery verifies only what follows it."""
        super().__init__(segment_size=segment_size, max_body=max_body)
        if prewrite < 0:
            raise ValueError(f"prewrite={prewrite} must not be negative")
        self.directory = Path(directory)
        durable_mkdir(self.directory)
        self._marker = self.directory / MARKER_NAME
        self._step = step_hook or (lambda _step: None)
        self._fds: list[int] = []
        self._prewrite = prewrite
        self._zeros = bytes(prewrite + PREWRITE_BLOCK) if prewrite else b""
        self._file_end = 0  # the last segment file's size: its items, then zeros written ahead
        self._prewrite_failing = False
        self._opened = False
        try:
            self._open(verify_all=verify_all, synced_offset=synced_offset)
        except BaseException:
            self.close()
            raise

    def _path(self, start: int) -> Path:
        return self.directory / f"{start:020d}"

    def _open(self, *, verify_all: bool, synced_offset: int | None) -> None:
        self._marker.with_name(MARKER_NAME + ".tmp").unlink(missing_ok=True)  # torn marker write
        for path in sorted(p for p in self.directory.iterdir() if _SEGMENT_NAME.fullmatch(p.name)):
            self._fds.append(os.open(path, os.O_RDWR))
            self._starts.append(int(path.name))
            self._sizes.append(os.fstat(self._fds[-1]).st_size)
        if self._marker.exists():
            offset = self._read_marker()
            logger.warning("re-applying an interrupted truncation of %s to offset=%d", self.directory, offset)
            self._apply_cut(offset)
            self._remove_marker()
        self._check_layout()
        last = len(self._starts) - 1
        for index in range(0 if verify_all else max(last, 0), last + 1):
            start = self._starts[index]
            trusted = index == last and not verify_all and synced_offset is not None
            skip = synced_offset - start if trusted and synced_offset is not None else 0
            if not 0 <= skip <= self._sizes[index]:  # another segment's, or beyond the file: verify it all
                skip = 0
            self._recover(index, tail=index == last, skip=skip)
        if self._fds:  # after a kill -9 the tail may sit in the page cache only: counted as flushed below
            os.fsync(self._fds[-1])
        self._flushed = self.max_offset
        self._refresh_file_end()
        self._opened = True

    def _check_layout(self) -> None:
        size = self.segment_size
        misaligned = [start for start in self._starts if start % size]
        if misaligned:
            raise StoreError(
                f"{self._path(misaligned[0])}: start is not a multiple of segment_size={size} (setting changed?)"
            )
        for index, start in enumerate(self._starts):
            if index and start != self._starts[index - 1] + size:
                raise CorruptLogError(f"{self._path(start)}: the segment before it is missing")
            if self._sizes[index] > size or (index < len(self._starts) - 1 and self._sizes[index] != size):
                raise CorruptLogError(f"{self._path(start)}: holds {self._sizes[index]} bytes, segment_size is {size}")

    def _recover(self, index: int, *, tail: bool, skip: int = 0) -> None:
        """Scan one segment from position `skip` (an item boundary; what is before it was fsynced
        and is trusted); cut a damaged tail of the last one, raise on anything else."""
        start, data = self._starts[index], self._pread(index, skip, self._sizes[index] - skip)
        zeros_from = len(data.rstrip(b"\0")) if tail else len(data)  # the written-ahead tail
        position = 0  # in `data`; `skip + position` in the segment
        while position < len(data):
            item = scan_record(data, position, max_body=self.max_body)
            if isinstance(item, Span):
                end = position + item.size
                if (skip + end == self.segment_size) if item.blank else self._fits(skip + position, item.size):
                    position = end
                    continue
            if position >= zeros_from:
                logger.debug(
                    "%s: zeros written ahead from offset=%d trimmed", self._path(start), start + skip + position
                )
                os.ftruncate(self._fds[index], skip + position)  # fsynced by _open
                self._sizes[index] = skip + position
                return
            problem = item if not isinstance(item, Span) else f"item of {item.size} bytes breaks segment layout"
            later = find_valid_item(data, position + 1, max_body=self.max_body)
            if not tail or later is not None:
                after = f"; a valid item follows at offset {start + skip + later}" if later is not None else ""
                raise CorruptLogError(
                    f"{self._path(start)}: damaged item at offset {start + skip + position} ({problem}){after}"
                )
            logger.warning(
                "cutting %d bytes of damaged tail from %s at offset=%d: %s",
                len(data) - position,
                self._path(start),
                start + skip + position,
                problem,
            )
            os.ftruncate(self._fds[index], skip + position)
            os.fsync(self._fds[index])
            self._sizes[index] = skip + position
            return

    # -- storage
    def _create(self, start: int) -> None:
        fd = os.open(self._path(start), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            self._fsync_dir()
        except OSError:
            os.close(fd)
            self._path(start).unlink()
            raise
        self._fds.append(fd)
        self._file_end = 0

    def _refresh_file_end(self) -> None:
        self._file_end = os.fstat(self._fds[-1]).st_size if self._fds else 0

    def _written(self) -> None:
        """Keep at least half of `prewrite` bytes of zeros written after the last segment's items."""
        if not self._prewrite or not self._fds:
            return
        used = self._sizes[-1]
        self._file_end = max(self._file_end, used)
        if self._file_end >= self.segment_size or self._file_end - used >= self._prewrite // 2:
            return
        blocks = -(-(used + self._prewrite) // PREWRITE_BLOCK)
        self._write_zeros(min(self.segment_size, blocks * PREWRITE_BLOCK))

    def _write_zeros(self, end: int) -> None:
        fd, position = self._fds[-1], self._file_end
        view = memoryview(self._zeros)[: end - position]
        try:
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._file_end)
            self._refresh_file_end()
            if not self._prewrite_failing:
                logger.warning("%s: cannot write zeros ahead of the log's end: %s", self._path(self._starts[-1]), error)
            self._prewrite_failing = True
            return
        self._file_end = end
        self._prewrite_failing = False

    def _trim_zeros(self) -> None:
        """Cut the zeros written ahead of the last segment's items (a clean close)."""
        if not self._opened or not self._fds or self._file_end <= self._sizes[-1]:
            return
        try:
            os.ftruncate(self._fds[-1], self._sizes[-1])
            os.fdatasync(self._fds[-1])
        except OSError as error:  # harmless: opening trims them too
            logger.warning("%s: cannot trim the zeros written ahead: %s", self._path(self._starts[-1]), error)
        self._refresh_file_end()

    def _pwrite(self, index: int, position: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fds[index], view, position)
            view, position = view[written:], position + written

    def _pread(self, index: int, position: int, size: int) -> bytes:
        data = os.pread(self._fds[index], size, position)
        if len(data) != size:
            raise StoreError(f"{self._path(self._starts[index])}: short read at position={position}")
        return data

    def _seal(self, index: int) -> None:
        os.fsync(self._fds[index])

    def flush(self) -> None:
        """fdatasync every segment holding unflushed bytes (their size is data; mtime is not needed)."""
        for index, start in enumerate(self._starts):
            if start + self._sizes[index] > self._flushed:
                os.fdatasync(self._fds[index])
        self._flushed = self.max_offset

    def _flush_job(self, ticket: FlushTicket) -> Callable[[], None]:
        pending = [
            (fd, start)
            for fd, start, size in zip(self._fds, self._starts, self._sizes, strict=True)
            if start + size > self._flushed
        ]
        fds = [os.dup(fd) for fd, _ in pending]
        limit = pending[-1][1] + self.segment_size if pending else ticket.target

        def job() -> None:
            try:
                if fds:  # the last of them is the log's last segment, where new writes land
                    self._raise_target(ticket, limit)
                for fd in fds:
                    os.fdatasync(fd)
            finally:
                for fd in fds:
                    os.close(fd)

        return job

    def _drop_all(self) -> None:
        for fd, start in zip(self._fds, self._starts, strict=True):
            os.close(fd)
            self._path(start).unlink()
        self._fds, self._starts, self._sizes = [], [], []
        self._file_end = 0
        self._fsync_dir()

    def _drop_first(self) -> None:
        os.close(self._fds.pop(0))
        self._path(self._starts.pop(0)).unlink()
        self._sizes.pop(0)
        self._step(STEP_HEAD_SEGMENT_DELETED)

    def _after_head_deleted(self) -> None:
        self._fsync_dir()
        self._step(STEP_HEAD_SYNCED)

    def _undo(self, index: int, size: int) -> None:
        os.ftruncate(self._fds[index], size)
        self._refresh_file_end()

    def _discard_created(self) -> None:
        os.close(self._fds.pop())
        self._path(self._starts.pop()).unlink()
        self._sizes.pop()
        self._refresh_file_end()

    def segment_mtimes(self) -> list[float]:
        return [os.fstat(fd).st_mtime for fd in self._fds]

    def _cut(self, offset: int) -> None:
        self._write_marker(offset)
        self._step(STEP_MARKER_WRITTEN)
        self._apply_cut(offset)
        self._remove_marker()
        self._step(STEP_MARKER_REMOVED)

    def _apply_cut(self, offset: int) -> None:
        """Step 2 of a truncation; idempotent, so that opening the log can repeat it."""
        if self._starts and offset < self._starts[0]:
            raise CorruptLogError(f"{self._marker}: offset={offset} is before the first segment")
        while self._starts and self._starts[-1] > offset:
            os.close(self._fds.pop())
            self._path(self._starts.pop()).unlink()
            self._sizes.pop()
            self._step(STEP_SEGMENT_DELETED)
        if self._starts:
            keep = offset - self._starts[-1]
            if self._sizes[-1] > keep:  # a lost, unsynced write may have left less than `keep`
                os.ftruncate(self._fds[-1], keep)
                self._sizes[-1] = keep
            self._step(STEP_TAIL_CUT)
            os.fsync(self._fds[-1])
        self._refresh_file_end()
        self._fsync_dir()
        self._step(STEP_SYNCED)

    # -- the truncation marker: "<offset>\n<crc32 of the first line>\n"
    def _write_marker(self, offset: int) -> None:
        line = b"%d\n" % offset
        temp = self._marker.with_name(MARKER_NAME + ".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, line + b"%d\n" % zlib.crc32(line))
            os.fsync(fd)
        finally:
            os.close(fd)
        temp.replace(self._marker)
        self._fsync_dir()

    def _read_marker(self) -> int:
        data = self._marker.read_bytes()
        match = re.fullmatch(rb"([0-9]{1,19}\n)([0-9]{1,10})\n", data)
        if match is None or zlib.crc32(match[1]) != int(match[2]):
            raise CorruptLogError(f"{self._marker} is damaged: cannot tell where a truncation stopped")
        return int(match[1])

    def _remove_marker(self) -> None:
        self._marker.unlink()
        self._fsync_dir()

    def _fsync_dir(self) -> None:
        fsync_path(self.directory, directory=True)

    def close(self) -> None:
        self._trim_zeros()
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def data_size(path: str | os.PathLike[str], *, max_body: int = DEFAULT_MAX_BODY) -> int:
    """Bytes of the segment file at `path` before its written-ahead zeros: its whole items, and a
    torn or damaged tail (as on disk, before recovery would cut it)."""
    data = Path(path).read_bytes()
    zeros_from = len(data.rstrip(b"\0"))
    position = 0
    while position < zeros_from:
        item = scan_record(data, position, max_body=max_body)
        if not isinstance(item, Span):
            return zeros_from
        position += item.size
    return position
