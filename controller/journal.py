"""The controller's durable Raft journal: log entries, term, vote and commit index on disk.

pysyncobj 0.3.17's `FileJournal` is an mmap it never flushes, and its metadata is renamed into
place without an fsync; a power loss can lose acknowledged entries or regress a vote. This
journal replaces it (pysyncobj builds its journal with `createJournal`, see `raft_fixes`) and
keeps pysyncobj's `Journal` interface: a list of `(command, index, term)` tuples.

Files, in `<data-dir>/raft/`:

- `log`: a header, then records `<u32 length><u32 crc32><u64 index><u64 term><command>`; the crc
  covers index, term and command. Appends and suffix truncations are written at once but not
  synced: `flush()` syncs them with one `fdatasync` for every entry written since the last flush
  (group commit). The node calls `flush()` before it acknowledges an append and before the leader
  counts its own log for the commit index (`raft_fixes`). Compaction (dropping the head after a
  snapshot) rewrites the file into a new one and renames it, synced with its directory.
- `meta.json`: current term, vote and commit index. Term and vote are written (file synced,
  renamed, directory synced) before `set_current_term` returns, so before any vote or append is
  answered; the commit index rides along and is saved at most once a second (it is a hint: it is
  clamped to the log at start).

At start the log is read up to the first record that is torn or does not follow its predecessor
(length past the end, bad crc, index not the next one, term going down); the rest is cut with
one warning. The file I/O goes through `Disk`, so crash tests can drop unsynced writes.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, overload

from brokergroup.common.durable import write_synced

logger = logging.getLogger(__name__)

LOG = "log"
META = "meta.json"
MAGIC = b"BGRAFT01"
HEADER = MAGIC + b"\0" * 8
RECORD = struct.Struct("<IIQQ")
MAX_COMMAND = 256 * 1024 * 1024

Entry = tuple[bytes, int, int]
"""(command, index, term), as pysyncobj keeps them."""


class Disk(Protocol):
    """The journal's file operations on one directory (names are plain file names)."""

    def read(self, name: str) -> bytes | None: ...

    def write(self, name: str, offset: int, data: bytes) -> None: ...

    def truncate(self, name: str, size: int) -> None: ...

    def sync(self, name: str) -> None:
        """fdatasync: the file's data and size are on disk."""

    def replace(self, name: str, data: bytes) -> None:
        """Atomically and durably replace a file: write a temporary, sync it, rename, sync the directory."""

    def sync_dir(self) -> None: ...


class OsDisk:
    """`Disk` on a real directory; keeps one descriptor per file written in place."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fds: dict[str, int] = {}
        self._dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            fd = self._fds[name] = os.open(self.directory / name, os.O_RDWR | os.O_CREAT, 0o600)
        return fd

    def read(self, name: str) -> bytes | None:
        try:
            return (self.directory / name).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, name: str, offset: int, data: bytes) -> None:
        fd = self._fd(name)
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written

    def truncate(self, name: str, size: int) -> None:
        os.ftruncate(self._fd(name), size)

    def sync(self, name: str) -> None:
        os.fdatasync(self._fd(name))

    def replace(self, name: str, data: bytes) -> None:
        tmp = self.directory / f"{name}.tmp"
        write_synced(tmp, data, 0o600)
        old = self._fds.pop(name, None)
        if old is not None:
            os.close(old)
        tmp.rename(self.directory / name)
        self.sync_dir()

    def sync_dir(self) -> None:
        os.fsync(self._dir_fd)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        os.close(self._dir_fd)


def encode_record(command: bytes, index: int, term: int) -> bytes:
    body = struct.pack("<QQ", index, term) + command
    return RECORD.pack(len(command), zlib.crc32(body), index, term) + command


def decode_log(data: bytes) -> tuple[list[Entry], list[int], int, str]:
    """Entries, their offsets, the end of the last good record, and why reading stopped early ("" if it did not)."""
    if data[: len(MAGIC)] != MAGIC:
        return [], [], 0, "no journal header"
    entries: list[Entry] = []
    offsets: list[int] = []
    offset = len(HEADER)
    while offset < len(data):
        if offset + RECORD.size > len(data):
            return entries, offsets, offset, f"a record header torn at byte {offset}"
        length, crc, index, term = RECORD.unpack_from(data, offset)
        start = offset + RECORD.size
        if length > MAX_COMMAND or start + length > len(data):
            return entries, offsets, offset, f"a record at byte {offset} longer than the file"
        command = data[start : start + length]
        if zlib.crc32(struct.pack("<QQ", index, term) + command) != crc:
            return entries, offsets, offset, f"a record at byte {offset} with a bad checksum"
        if entries and (index != entries[-1][1] + 1 or term < entries[-1][2]):
            last = entries[-1]
            why = f"a record at byte {offset} (index {index}, term {term}) that does not follow index {last[1]}"
            return entries, offsets, offset, why
        entries.append((bytes(command), index, term))
        offsets.append(offset)
        offset = start + length
    return entries, offsets, offset, ""


def decode_legacy_log(data: bytes) -> list[Entry]:
    """Entries of a pysyncobj 0.3.17 `FileJournal` file (the format before this journal), up to a torn record."""
    first, last_offset_at = 40, 36
    if len(data) < first:
        return []
    end = min(struct.unpack_from("<I", data, last_offset_at)[0], len(data))
    entries: list[Entry] = []
    offset = first
    while offset + 4 <= end:
        size = struct.unpack_from("<I", data, offset)[0]
        if size < 16 or offset + 8 + size > end:
            break
        index, term = struct.unpack_from("<QQ", data, offset + 4)
        entries.append((bytes(data[offset + 20 : offset + 4 + size]), index, term))
        offset += size + 8
    return entries


class DurableJournal:
    """pysyncobj's `Journal` interface over `Disk`, with explicit `flush()` (group commit)."""

    def __init__(self, disk: Disk, *, legacy: Callable[[], tuple[bytes | None, dict[str, Any]]] | None = None) -> None:
        self._disk = disk
        self._meta: dict[str, Any] = {}
        self._saved_meta: dict[str, Any] = {}
        self._dirty = False
        self.flushes = 0
        meta_raw = disk.read(META)
        log_raw = disk.read(LOG)
        if log_raw is None and legacy is not None:
            self._migrate(*legacy())
            meta_raw, log_raw = disk.read(META), disk.read(LOG)
        if meta_raw is not None:
            try:
                self._meta = dict(json.loads(meta_raw))
            except ValueError as exc:
                raise ValueError(f"raft metadata {META} is unreadable ({exc}); it is written atomically") from exc
        self._saved_meta = dict(self._meta)
        entries, offsets, end, problem = decode_log(log_raw or b"")
        if log_raw is None or problem == "no journal header":
            if log_raw:
                logger.warning("raft journal %s has no header (%d bytes): starting an empty log", LOG, len(log_raw))
            disk.replace(LOG, HEADER)
            end = len(HEADER)
        elif problem:
            logger.warning(
                "raft journal: cut the torn tail after index %s at byte %d (%d bytes dropped): %s",
                entries[-1][1] if entries else "none",
                end,
                len(log_raw) - end,
                problem,
            )
            disk.truncate(LOG, end)
            disk.sync(LOG)
        self._entries = entries
        self._offsets = offsets
        self._end = end

    def _migrate(self, legacy_log: bytes | None, legacy_meta: dict[str, Any]) -> None:
        entries = decode_legacy_log(legacy_log or b"")
        meta = {k: legacy_meta[k] for k in ("currentTerm", "votedForNodeId", "raftCommitIndex") if k in legacy_meta}
        if entries or meta:
            logger.info("raft journal: migrated %d entries and %s from pysyncobj's journal", len(entries), meta)
        self._disk.replace(META, json.dumps(meta).encode())
        self._disk.replace(LOG, HEADER + b"".join(encode_record(*e) for e in entries))

    # -- the log ----------------------------------------------------------------------------------
    def add(self, command: bytes, idx: int, term: int) -> None:
        command = bytes(command)
        record = encode_record(command, idx, term)
        self._disk.write(LOG, self._end, record)
        self._entries.append((command, idx, term))
        self._offsets.append(self._end)
        self._end += len(record)
        self._dirty = True

    def clear(self) -> None:
        self._entries, self._offsets = [], []
        self._end = len(HEADER)
        self._disk.truncate(LOG, self._end)
        self._dirty = True

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        if entryFrom >= len(self._entries):
            return
        self._end = self._offsets[entryFrom]
        del self._entries[entryFrom:]
        del self._offsets[entryFrom:]
        self._disk.truncate(LOG, self._end)
        self._dirty = True

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Drop the head (compaction after a snapshot): a new file, renamed into place."""
        self.flush()
        self._disk.sync_dir()  # the snapshot's rename (pysyncobj renames it) is on disk first
        kept = self._entries[entryTo:]
        records = [encode_record(*e) for e in kept]
        self._disk.replace(LOG, HEADER + b"".join(records))
        self._entries = kept
        self._offsets = []
        offset = len(HEADER)
        for record in records:
            self._offsets.append(offset)
            offset += len(record)
        self._end = offset

    def align_with_snapshot(self, prev: Entry, last: Entry) -> None:
        """If the log holds the snapshot's last two entries, drop what is before them.

        pysyncobj clears the whole log when its first two entries are not the snapshot's; after a
        crash between the snapshot's rename and the compaction that would drop the acknowledged
        entries after the snapshot."""
        first = self._entries[0][1] if self._entries else None
        if first is None or first >= prev[1]:
            return
        position = prev[1] - first
        held = self._entries[position : position + 2]
        if held == [prev, last]:
            self.deleteEntriesTo(position)

    @overload
    def __getitem__(self, item: int) -> Entry: ...

    @overload
    def __getitem__(self, item: slice) -> list[Entry]: ...

    def __getitem__(self, item: int | slice) -> Entry | list[Entry]:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def dirty(self) -> bool:
        return self._dirty

    def flush(self) -> None:
        """Make every write so far durable: one fdatasync for all of them."""
        if self._dirty:
            self._disk.sync(LOG)
            self._dirty = False
            self.flushes += 1

    def _destroy(self) -> None:
        self.flush()
        self._store_meta()

    # -- metadata ---------------------------------------------------------------------------------
    def _store_meta(self) -> None:
        if self._meta != self._saved_meta:
            self._disk.replace(META, json.dumps(self._meta).encode())
            self._saved_meta = dict(self._meta)

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        self._meta["raftCommitIndex"] = raftCommitIndex

    def getRaftCommitIndex(self) -> int:
        saved = int(self._meta.get("raftCommitIndex", 1))
        return min(saved, self._entries[-1][1] if self._entries else 1)

    def setCurrentTerm(self, term: int, votedForNodeId: str | None) -> None:
        self._meta["currentTerm"] = term
        self._meta["votedForNodeId"] = votedForNodeId
        self._store_meta()

    def getCurrentTerm(self) -> int:
        return int(self._meta.get("currentTerm", 0))

    def getVotedForNodeId(self) -> str | None:
        vote = self._meta.get("votedForNodeId")
        return None if vote is None else str(vote)

    def onOneSecondTimer(self) -> None:
        self._store_meta()
