"""Epoch cache: which master epoch wrote which range of the commit log (RocketMQ `EpochFileCache`).

An entry `(epoch, start_offset, end_offset)` says that the bytes `[start_offset, end_offset)` of
the commit log were written while `epoch` was the master epoch. Entries are ordered by epoch; each
entry's end is the next entry's start; the last one is open (`OPEN`, RocketMQ's Long.MAX_VALUE)
until `set_last_entry_end_offset`. Invariant: epochs and start offsets both strictly increase.

`EpochCache` is pure logic over a list in memory. Given an `EpochFile` it writes every change
through to disk *before* changing memory, so a failed write changes nothing.

Checkpoint file format (RocketMQ `CheckpointFile`, with '\\n' as the only line separator)::

    <size>\\n                  number of entry lines, decimal
    <crc32>\\n                 zlib CRC-32 of the entry lines below, newlines included, decimal
    <epoch>-<startOffset>\\n   `size` times, ascending epoch; both non-negative decimals

Zero entries are written as "0\\n0\\n" (CRC-32 of nothing is 0), so emptying the cache really
empties the file (RocketMQ's `write([])` is a no-op that leaves old entries behind). Unlike
RocketMQ, a CRC of 0 is checked like any other. Writes go to `<file>.tmp`, are fsynced, the valid
previous file becomes `<file>.bak`, the temp file is renamed over `<file>` and the directory is
fsynced. `read()` falls back to `.bak` when `<file>` is missing, empty or corrupt.

Decision on #9942 (DESIGN §4): RocketMQ rejects a new epoch that starts where the last one does
(no message written since), so after back-to-back promotions the master keeps labelling data with
an old epoch. Here the last entry is then *empty* (it covers no bytes) and carries no information
that any replica needs: `append_entry` drops it and appends the new entry. So the last epoch
always equals the newest master epoch, start offsets still strictly increase, and
`find_consistent_point` is unaffected (only epochs that cover data can be a consistent point). A
slave whose log is empty may hold nothing but the epoch the new master replaced; it has nothing
to compare and replicates from scratch (`ha.slave_conn`).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from brokergroup.broker.errors import EpochFileError

logger = logging.getLogger(__name__)

OPEN: Final = 2**63 - 1
"""End offset of the last, still growing entry (RocketMQ's Long.MAX_VALUE)."""
_INT32_MAX: Final = 2**31 - 1
_HEADER = re.compile(rb"([0-9]{1,10})\n([0-9]{1,10})\n")
_LINE = re.compile(rb"([0-9]{1,10})-([0-9]{1,19})")


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = OPEN

    def __post_init__(self) -> None:
        if not 0 <= self.epoch <= _INT32_MAX:
            raise ValueError(f"epoch={self.epoch} must be in [0, {_INT32_MAX}]")
        if not 0 <= self.start_offset <= self.end_offset <= OPEN:
            raise ValueError(f"need 0 <= start_offset={self.start_offset} <= end_offset={self.end_offset} <= {OPEN}")


def _check_order(entries: Sequence[EpochEntry]) -> None:
    for before, after in itertools.pairwise(entries):
        if after.epoch <= before.epoch or after.start_offset <= before.start_offset:
            raise ValueError(f"epoch entries must strictly increase: {before} then {after}")


def _ends(entries: Sequence[EpochEntry], last_end: int) -> list[int]:
    """Each entry's end: the next entry's start, and `last_end` for the last one."""
    return [e.start_offset for e in entries[1:]] + [last_end] if entries else []


def _chain(entries: Sequence[EpochEntry], last_end: int = OPEN) -> list[EpochEntry]:
    """The entries with each end set to the next start and the last end set to `last_end`."""
    ends = _ends(entries, last_end)
    return [dataclasses.replace(e, end_offset=end) for e, end in zip(entries, ends, strict=True)]


# ---- the file format ------------------------------------------------------------------------


def encode_epoch_file(entries: Sequence[EpochEntry]) -> bytes:
    lines = b"".join(b"%d-%d\n" % (e.epoch, e.start_offset) for e in entries)
    return b"%d\n%d\n" % (len(entries), zlib.crc32(lines)) + lines


def decode_epoch_file(data: bytes) -> list[EpochEntry]:
    """Entries of a checkpoint file (ends chained, last open). Raises `EpochFileError`."""
    if not data:
        raise EpochFileError("file is empty")
    header = _HEADER.match(data)
    if header is None:
        raise EpochFileError("missing <size> and <crc32> lines")
    size, crc = int(header[1]), int(header[2])
    rest = data[header.end() :]
    actual = zlib.crc32(rest)
    if crc != actual:
        raise EpochFileError(f"crc32 mismatch: stored {crc}, computed {actual}")
    if rest and not rest.endswith(b"\n"):
        raise EpochFileError("last entry line has no newline")
    body = rest[:-1].split(b"\n") if rest else []
    if size != len(body):
        raise EpochFileError(f"size line says {size} entries, file holds {len(body)}")
    entries = []
    for line in body:
        match = _LINE.fullmatch(line)
        if match is None:
            raise EpochFileError(f"bad entry line {line!r}, expected <epoch>-<startOffset>")
        try:
            entries.append(EpochEntry(int(match[1]), int(match[2])))
        except ValueError as error:
            raise EpochFileError(f"bad entry line {line!r}: {error}") from None
    try:
        _check_order(entries)
    except ValueError as error:
        raise EpochFileError(str(error)) from None
    return _chain(entries)


class EpochFile:
    """The checkpoint file and its `.bak`: atomic, fsynced writes; reads that fall back."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.backup = self.path.with_name(self.path.name + ".bak")
        self._temp = self.path.with_name(self.path.name + ".tmp")

    def _load(self, path: Path) -> list[EpochEntry]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise EpochFileError("file is missing") from None
        return decode_epoch_file(data)

    def read(self) -> list[EpochEntry]:
        """The entries; `[]` when neither file exists. Raises `EpochFileError` if both are bad."""
        try:
            return self._load(self.path)
        except EpochFileError as main_error:
            if not self.path.exists() and not self.backup.exists():
                return []
            try:
                entries = self._load(self.backup)
            except EpochFileError as backup_error:
                raise EpochFileError(
                    f"cannot read {self.path} ({main_error}) nor {self.backup} ({backup_error})"
                ) from None
            logger.warning("epoch file %s unusable (%s); using %s", self.path, main_error, self.backup)
            return entries

    def write(self, entries: Sequence[EpochEntry]) -> None:
        data = encode_epoch_file(entries)
        fd = os.open(self._temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            self._load(self.path)
        except EpochFileError:
            pass  # a missing or corrupt main file must not replace a good backup
        else:
            self.path.replace(self.backup)
        self._temp.replace(self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# ---- the cache --------------------------------------------------------------------------------


class EpochCache:
    """Ordered epoch entries; written through to `file` on every change when one is given.

    Not thread-safe: one owner (the broker's store task) calls it.
    """

    def __init__(self, entries: Sequence[EpochEntry] = (), *, file: EpochFile | None = None) -> None:
        _check_order(entries)
        self._entries = _chain(entries)
        self._file = file

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> EpochCache:
        """Load the cache from its checkpoint file (or `.bak`) and write changes back to it."""
        file = EpochFile(path)
        return cls(file.read(), file=file)

    def _commit(self, entries: list[EpochEntry]) -> None:
        if self._file is not None:
            self._file.write(entries)
        self._entries = entries

    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    def last_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def last_epoch(self) -> int:
        """The newest epoch, or -1 when the cache is empty."""
        return self._entries[-1].epoch if self._entries else -1

    def get_entry(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self._entries if e.epoch == epoch), None)

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """The first entry with an epoch greater than `epoch`."""
        return next((e for e in self._entries if e.epoch > epoch), None)

    def find_epoch_entry_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry with `start_offset <= offset < end_offset`."""
        return next((e for e in self._entries if e.start_offset <= offset < e.end_offset), None)

    def append_entry(self, entry: EpochEntry) -> bool:
        """Record a new epoch starting at `entry.start_offset` (its end offset is ignored).

        Refused (False, logged) when the epoch is not newer than the last one or it starts before
        the last one. When it starts exactly where the last one does, the last one is empty and is
        replaced (#9942, see the module docstring).
        """
        entry = dataclasses.replace(entry, end_offset=OPEN)
        last = self.last_entry()
        if last is None:
            self._commit([entry])
            return True
        if entry.epoch <= last.epoch or entry.start_offset < last.start_offset:
            logger.warning("epoch entry %s refused: not after the last entry %s", entry, last)
            return False
        kept = self._entries[:-1] if entry.start_offset == last.start_offset else self._entries
        if kept is not self._entries:
            logger.info("epoch %d wrote nothing; epoch %d replaces it", last.epoch, entry.epoch)
        self._commit(_chain([*kept, entry]))
        return True

    def set_last_entry_end_offset(self, offset: int) -> bool:
        """Close the last entry at `offset` (in memory only), if it starts at or before it."""
        last = self.last_entry()
        if last is None or offset < last.start_offset:
            return False
        self._entries[-1] = dataclasses.replace(last, end_offset=offset)
        return True

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Remove every entry with an epoch >= `epoch`; the new last entry is open again."""
        self._truncate([e for e in self._entries if e.epoch < epoch])

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Remove every entry starting at or after `offset`; the new last entry is open again."""
        self._truncate([e for e in self._entries if e.start_offset < offset])

    def _truncate(self, kept: list[EpochEntry]) -> None:
        # RocketMQ reopens the last entry on a copy and keeps a stale end; here it really is open.
        if len(kept) != len(self._entries) or (kept and kept[-1].end_offset != OPEN):
            self._commit(_chain(kept))

    def truncate_prefix_by_offset(self, offset: int) -> None:
        """Remove every entry that ends at or before `offset` (its bytes were deleted)."""
        kept = [e for e in self._entries if e.end_offset > offset]
        if len(kept) != len(self._entries):
            last_end = kept[-1].end_offset if kept else OPEN
            self._commit(_chain(kept, last_end))


def find_consistent_point(
    local: Sequence[EpochEntry],
    local_max_offset: int,
    master: Sequence[EpochEntry],
    master_max_offset: int,
) -> int:
    """Offset up to which a slave's log equals its master's, or -1 (RocketMQ `doTruncate`).

    Each side's entries are ordered by epoch; their end offsets are ignored and recomputed: each
    ends where the next starts, the last ends at that side's max offset. Walking the local entries
    from the newest epoch down, the first epoch the master has *with the same start offset* gives
    `min(local end, master end)`. An empty `local` gives -1: a new replica has nothing to keep and
    its caller starts it from scratch.
    """
    _check_order(local)
    _check_order(master)
    master_ends = _ends(master, master_max_offset)
    theirs = {e.epoch: (e.start_offset, end) for e, end in zip(master, master_ends, strict=True)}
    for mine, my_end in reversed(list(zip(local, _ends(local, local_max_offset), strict=True))):
        other = theirs.get(mine.epoch)
        if other is not None and other[0] == mine.start_offset:
            # Clamped by both max offsets: after a crash between truncating the log and the epoch
            # file, an entry may claim bytes the log no longer has.
            return min(my_end, other[1], local_max_offset, master_max_offset)
    return -1
